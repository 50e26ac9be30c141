// A program using the runtime (the stand-in libcudart): one cudaMalloc left unfreed, one balanced pair.
// The leak must be reported once, at this file's line, with the API cudaMalloc.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdio>

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
    std::printf("runtime_user: leaked %d bytes\n", 6 << 20);
    return 0;
}
