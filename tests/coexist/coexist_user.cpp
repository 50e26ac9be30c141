// A program that allocates through each of the driver's three doors, for a test that stacks another
// interposer with the shim: a direct call, dlsym on libcuda.so.1, and cuGetProcAddress, each leaving its
// allocation behind (1, 2 and 3 MiB), and one balanced pair.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>

int main() {
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return 97;
    using Alloc = CUresult(CUDAAPI*)(CUdeviceptr*, size_t);
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    auto by_dlsym = reinterpret_cast<Alloc>(lib != nullptr ? dlsym(lib, "cuMemAlloc_v2") : nullptr);
    void* fn = nullptr;
    CUdriverProcAddressQueryResult st;
    if (by_dlsym == nullptr || cuGetProcAddress("cuMemAlloc", &fn, 12000, 0, &st) != CUDA_SUCCESS) return 98;
    auto by_proc = reinterpret_cast<Alloc>(fn);
    CUdeviceptr a, b, c, d;
    if (cuMemAlloc(&a, 1 << 20) != CUDA_SUCCESS) return 99;  // site:direct
    if (by_dlsym(&b, 2 << 20) != CUDA_SUCCESS) return 99;    // site:dlsym
    if (by_proc(&c, 3 << 20) != CUDA_SUCCESS) return 99;     // site:procaddress
    if (cuMemAlloc(&d, 4 << 20) != CUDA_SUCCESS || cuMemFree(d) != CUDA_SUCCESS) return 99;
    std::printf("coexist_user: done\n");
    return 0;
}
