// A context's end: a device reset and a context destroyed with memory still in them.
// Run as `audit_scenarios context-reset`; checked by context_reset_test.py, which finds
// each site by its `// site:NAME` marker.
#include "scenarios.hpp"

namespace {

// A context's end frees what it owns: a test harness resets the device between cases (cudaDeviceReset is
// cuDevicePrimaryCtxReset), and a library tears down a context of its own. Device and pinned host memory the
// program never freed goes with the reset; stream-ordered and cuMemCreate memory survives it (measured on
// the H200), and a free of a pointer the reset took is refused.
int context_reset() {
    init_primary_context();
    CUdeviceptr device = 0, async = 0;
    void* pinned = nullptr;
    OK(cuMemAlloc(&device, 256 * kMiB));       // site:reset_alloc
    OK(cuMemAllocHost(&pinned, 64 * kMiB));    // site:reset_host
    OK(cuMemAllocAsync(&async, 128 * kMiB, nullptr));
    CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, kGran, &p, 0));
    OK(cuDevicePrimaryCtxReset(0));            // site:reset_call
    init_primary_context();
    CHECK(cuMemFree(device), CUDA_ERROR_INVALID_VALUE);  // site:free_stale
    OK(cuMemFreeAsync(async, nullptr));
    OK(cuMemRelease(h));
    CUcontext own = nullptr;
    OK(cuCtxCreate(&own, nullptr, 0, 0));
    CUdeviceptr in_own = 0;
    OK(cuMemAlloc(&in_own, 16 * kMiB));        // site:own_ctx_alloc
    OK(cuCtxDestroy(own));                     // site:ctx_destroy
    CUdeviceptr kept = 0;
    OK(cuMemAlloc(&kept, 32 * kMiB));          // site:after_reset_alloc
    std::printf("context_reset: done\n");
    return 0;
}

}  // namespace

AUDIT_SCENARIO("context-reset", [](int, char**) { return context_reset(); });
