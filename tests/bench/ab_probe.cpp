// ab_probe: what bench_calls --ab relies on from a preloaded library's measurement entry points. Under
// the shim: an allocation made while passing through is not recorded, one made after is; the "real" entry
// point is the driver's own function, not the wrapper. Both allocations are kept on purpose: the exit
// report must list exactly the second one as unfreed (tests/bench/test_ab.py reads it). Prints the driver object's path.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

int main() {
    auto real = reinterpret_cast<void* (*)(const char*)>(dlsym(RTLD_DEFAULT, "cumemaudit_bench_real"));
    auto pass_through = reinterpret_cast<int (*)(int)>(dlsym(RTLD_DEFAULT, "cumemaudit_bench_pass_through"));
    if (real == nullptr || pass_through == nullptr) {
        std::fprintf(stderr, "ab_probe: no measurement entry points (is the shim preloaded?)\n");
        return 2;
    }
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return 3;
    CUdeviceptr unrecorded = 0, recorded = 0;
    if (pass_through(1) != 0 || cuMemAlloc_v2(&unrecorded, 1 << 20) != CUDA_SUCCESS) return 4;
    if (pass_through(0) != 0 || cuMemAlloc_v2(&recorded, 2 << 20) != CUDA_SUCCESS) return 5;
    void* driver = real("cuMemAlloc_v2");
    Dl_info info{};
    if (driver == nullptr || driver == reinterpret_cast<void*>(&cuMemAlloc_v2) || dladdr(driver, &info) == 0) return 6;
    std::printf("real cuMemAlloc_v2 in %s\n", info.dli_fname);
    std::printf("not wrapped: %s\n", real("cuCtxSynchronize") == nullptr ? "null" : "an address");
    return 0;
}
