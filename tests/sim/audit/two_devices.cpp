// One process on two devices, the second running out of memory.
// Run as `audit_scenarios two-devices`; checked by two_devices_test.py, which finds
// each site by its `// site:NAME` marker.
#include "scenarios.hpp"

// One process driving two devices (JAX's layout, single-process NCCL): a context on each, memory on both,
// and device 1 runs out. Its out-of-memory record names only device 1's memory, whose parts add up to
// device 1's used memory; the 6 GiB on device 0 are in no part.
int two_devices() {
    OK(cuInit(0));
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    CUcontext ctx[2] = {};
    for (int d = 0; d < 2; ++d) OK(cuDevicePrimaryCtxRetain(&ctx[d], d));
    OK(cuCtxSetCurrent(ctx[0]));
    CUdeviceptr big = 0;
    OK(cuMemAlloc(&big, 6144 * kMiB));  // site:dev0_alloc
    OK(cuCtxSetCurrent(ctx[1]));
    CUdeviceptr work = 0;
    OK(cuMemAlloc(&work, 1024 * kMiB));  // site:dev1_alloc
    CUmemAllocationProp p = cumemaudit::program::device_prop(1, CU_MEM_HANDLE_TYPE_NONE);
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, 512 * kMiB, &p, 0));  // site:dev1_vmm
    CUdeviceptr va = 0;
    OK(cuMemAddressReserve(&va, 512 * kMiB, 0, 0, 0));
    OK(cuMemMap(va, 512 * kMiB, 0, h, 0));
    if (step != nullptr) step(1);
    CUdeviceptr refused = 0;
    CHECK(cuMemAlloc(&refused, free_bytes() + 1024 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);  // site:dev1_refused
    OK(cuMemUnmap(va, 512 * kMiB));
    OK(cuMemRelease(h));
    OK(cuMemAddressFree(va, 512 * kMiB));
    std::printf("two_devices: done\n");
    return 0;
}

AUDIT_SCENARIO("two-devices", [](int, char**) { return two_devices(); });
