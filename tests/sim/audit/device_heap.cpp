// A context's device heap: what the first launch of a kernel that calls malloc reserves there (its heap
// limit and 2 MiB; docs/DRIVER.md, "Device heap, printf FIFO and green contexts"), named in every step
// apart from the kernel's code. Run as `audit_scenarios device-heap`; checked by device_heap_test.py. The PTX
// is JIT-compiled by a real driver, so the scenario runs on the GPU too.
#include "scenarios.hpp"

#include "support/heap_fifo_ptx.hpp"

#include <dlfcn.h>

namespace {

using StepFn = void (*)(uint64_t);

// A driver-API user (a module, its function, launches) with a 64 MiB heap in the primary context; then what
// CUDA's runtime does in a context of its own at the default heap: a library's kernel launched as it is,
// without a get, so the driver loads its code and reserves the heap inside one launch.
int device_heap(int, char**) {
    init_primary_context();
    const auto step = reinterpret_cast<StepFn>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    CUdeviceptr out = 0;
    OK(cuMemAlloc(&out, 4096));
    OK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 64 * kMiB));
    step(0);
    CUmodule module = nullptr;
    OK(cuModuleLoadData(&module, cumemaudit::program::kHeapUserPtx));
    CUfunction heap_user = nullptr;
    OK(cuModuleGetFunction(&heap_user, module, "heap_user"));
    step(1);
    int n = 1024;
    void* args[] = {&out, &n};
    for (int launch = 0; launch < 2; ++launch) {
        OK(cuLaunchKernel(heap_user, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));  // site:heap_launch
        OK(cuCtxSynchronize());
        step(2 + launch);
    }
    CUcontext own = nullptr;
    OK(cuCtxCreate(&own, nullptr, 0, 0));
    CUdeviceptr own_out = 0;
    OK(cuMemAlloc(&own_out, 4096));
    CUlibrary library = nullptr;
    OK(cuLibraryLoadData(&library, cumemaudit::program::kHeapUserPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
    CUkernel kernel = nullptr;
    OK(cuLibraryGetKernel(&kernel, library, "heap_user"));
    step(4);
    void* own_args[] = {&own_out, &n};
    OK(cuLaunchKernel(reinterpret_cast<CUfunction>(kernel), 1, 1, 1, 32, 1, 1, 0, nullptr, own_args, nullptr));
    OK(cuCtxSynchronize());
    step(5);
    OK(cuMemFree(own_out));
    OK(cuLibraryUnload(library));
    OK(cuCtxDestroy(own));
    OK(cuModuleUnload(module));
    OK(cuMemFree(out));
    step(6);
    return 0;
}

}  // namespace

AUDIT_SCENARIO("device-heap", device_heap);
