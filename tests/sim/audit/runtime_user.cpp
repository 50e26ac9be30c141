// A program using the runtime (the stand-in libcudart): one cudaMalloc left unfreed, one balanced pair, and
// a cudaMalloc3D and a cudaMallocFromPoolAsync left unfreed. Each must be reported once, at this file's
// line, with the runtime's API. Two libraries loaded through cudaLibraryLoadData, one unloaded: a module row at
// this file's line.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "support/kernels_ptx.hpp"

#include <cstdio>
#include <cstring>
#include <initializer_list>

int main() {
    cuInit(0);
    CUdevice dev;
    CUcontext ctx;
    cuDeviceGet(&dev, 0);
    cuDevicePrimaryCtxRetain(&ctx, dev);
    cuCtxSetCurrent(ctx);
    void* kept = nullptr;
    void* temp = nullptr;
    if (cudaMalloc(&kept, 6 << 20) != cudaSuccess) return 99;  // site:runtime_leak
    if (cudaMalloc(&temp, 1 << 20) != cudaSuccess) return 99;
    if (cudaFree(temp) != cudaSuccess) return 99;
    cudaPitchedPtr volume{};
    if (cudaMalloc3D(&volume, cudaExtent{1000, 64, 8}) != cudaSuccess) return 99;  // site:runtime_3d
    CUmemoryPool pool = nullptr;  // the device's default pool, as cudaMallocAsync would use
    if (cuDeviceGetDefaultMemPool(&pool, 0) != CUDA_SUCCESS) return 99;
    void* pooled = nullptr;
    if (cudaMallocFromPoolAsync(&pooled, 3 << 20, reinterpret_cast<cudaMemPool_t>(pool), nullptr) != cudaSuccess)  // site:runtime_pool
        return 99;
    cudaLibrary_t kept_library = nullptr, unloaded = nullptr;
    const char* ptx = cumemaudit::program::kLocalMemoryPtx;
    for (cudaLibrary_t* lib : {&kept_library, &unloaded})
        if (cudaLibraryLoadData(lib, ptx, nullptr, nullptr, 0, nullptr, nullptr, 0) != cudaSuccess)  // site:runtime_library
            return 99;
    if (cudaLibraryUnload(unloaded) != cudaSuccess) return 99;
    std::printf("runtime_user: leaked %d bytes; library image %zu bytes\n", 6 << 20, std::strlen(ptx) + 1);
    return 0;
}
