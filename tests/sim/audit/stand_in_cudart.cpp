// A stand-in for libcudart: cudaMalloc and cudaFree reaching the driver the way cudart 13 does (dlopen
// libcuda.so.1, dlsym cuGetProcAddress_v2, ask it for "cuGetProcAddress" at 12000, then look entry points
// up by base name and version). Built as libcudart.so.13 so the shim treats it as the runtime.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <mutex>

namespace {

using GetProc = CUresult(CUDAAPI*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
using Alloc = CUresult(CUDAAPI*)(CUdeviceptr*, size_t);
using Free = CUresult(CUDAAPI*)(CUdeviceptr);

struct Table {
    Alloc alloc = nullptr;
    Free free = nullptr;
};

const Table& table() {
    static Table t;
    static std::once_flag once;
    std::call_once(once, [] {
        void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (lib == nullptr) return;
        auto first = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
        GetProc get = nullptr;
        CUdriverProcAddressQueryResult st;
        if (first == nullptr || first("cuGetProcAddress", reinterpret_cast<void**>(&get), 12000, 0, &st) != CUDA_SUCCESS)
            return;
        get("cuMemAlloc", reinterpret_cast<void**>(&t.alloc), 3020, 0, &st);
        get("cuMemFree", reinterpret_cast<void**>(&t.free), 3020, 0, &st);
    });
    return t;
}

}  // namespace

extern "C" cudaError_t cudaMalloc(void** ptr, size_t size) {
    if (table().alloc == nullptr) return cudaErrorInitializationError;
    CUdeviceptr d = 0;
    const CUresult r = table().alloc(&d, size);
    *ptr = reinterpret_cast<void*>(d);
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorMemoryAllocation;
}

extern "C" cudaError_t cudaFree(void* ptr) {
    if (table().free == nullptr) return cudaErrorInitializationError;
    return table().free(reinterpret_cast<CUdeviceptr>(ptr)) == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}
