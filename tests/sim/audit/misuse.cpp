// Misuse the driver answers with an error, and a handle value the driver hands out again.
// Run as `audit_scenarios misuse | reuse`; checked by misuse_test.py, which finds
// each site by its `// site:NAME` marker.
#include "scenarios.hpp"

namespace {

__attribute__((noinline)) CUmemGenericAllocationHandle create_first(size_t size) {
    CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, size, &p, 0));  // site:reuse_first
    return h;
}

__attribute__((noinline)) CUmemGenericAllocationHandle create_second(size_t size) {
    CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, size, &p, 0));  // site:reuse_second
    return h;
}

// Double release, address free while mapped, a map onto a mapped range: the driver's codes reach us.
int misuse() {
    init_primary_context();
    CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, kGran, &p, 0));
    CUdeviceptr va = 0;
    OK(cuMemAddressReserve(&va, kGran, 0, 0, 0));
    OK(cuMemMap(va, kGran, 0, h, 0));
    CHECK(cuMemMap(va, kGran, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  // site:map_onto_mapped
    CHECK(cuMemAddressFree(va, kGran), CUDA_ERROR_INVALID_VALUE);  // site:free_mapped
    OK(cuMemUnmap(va, kGran));
    OK(cuMemAddressFree(va, kGran));
    OK(cuMemRelease(h));
    CHECK(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);  // site:double_release
    std::printf("misuse: done\n");
    return 0;
}

// A handle value released and created again: the leak is the second creation's, not the first's.
int reuse() {
    init_primary_context();
    const size_t before = free_bytes();
    CUmemGenericAllocationHandle a = create_first(kGran);
    OK(cuMemRelease(a));
    CUmemGenericAllocationHandle b = create_second(kGran);
    std::printf("reuse: same_value=%d drop=%zu\n", a == b ? 1 : 0, before - free_bytes());
    return 0;
}

}  // namespace

AUDIT_SCENARIO("misuse", [](int, char**) { return misuse(); });
AUDIT_SCENARIO("reuse", [](int, char**) { return reuse(); });
