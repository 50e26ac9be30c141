// A stand-in for libcudart: cudaMalloc, cudaFree and cudaLibraryLoadData reaching the driver the way cudart 13 does (dlopen
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
using AllocPitch = CUresult(CUDAAPI*)(CUdeviceptr*, size_t*, size_t, size_t, unsigned int);
using AllocFromPool = CUresult(CUDAAPI*)(CUdeviceptr*, size_t, CUmemoryPool, CUstream);
using LibraryLoad = CUresult(CUDAAPI*)(CUlibrary*, const void*, CUjit_option*, void**, unsigned int, CUlibraryOption*,
                                       void**, unsigned int);
using LibraryUnload = CUresult(CUDAAPI*)(CUlibrary);

struct Table {
    Alloc alloc = nullptr;
    Free free = nullptr;
    AllocPitch alloc_pitch = nullptr;
    AllocFromPool alloc_from_pool = nullptr;
    LibraryLoad library_load = nullptr;
    LibraryUnload library_unload = nullptr;
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
        get("cuMemAllocPitch", reinterpret_cast<void**>(&t.alloc_pitch), 3020, 0, &st);
        get("cuMemAllocFromPoolAsync", reinterpret_cast<void**>(&t.alloc_from_pool), 11020, 0, &st);
        get("cuLibraryLoadData", reinterpret_cast<void**>(&t.library_load), 12000, 0, &st);
        get("cuLibraryUnload", reinterpret_cast<void**>(&t.library_unload), 12000, 0, &st);
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

// cudart's cudaMalloc3D is a pitched allocation of height × depth rows.
extern "C" cudaError_t cudaMalloc3D(cudaPitchedPtr* p, cudaExtent e) {
    if (table().alloc_pitch == nullptr) return cudaErrorInitializationError;
    CUdeviceptr d = 0;
    size_t pitch = 0;
    if (table().alloc_pitch(&d, &pitch, e.width, e.height * e.depth, 4) != CUDA_SUCCESS) return cudaErrorMemoryAllocation;
    *p = cudaPitchedPtr{reinterpret_cast<void*>(d), pitch, e.width, e.height};
    return cudaSuccess;
}

extern "C" cudaError_t cudaMallocFromPoolAsync(void** ptr, size_t size, cudaMemPool_t pool, cudaStream_t stream) {
    if (table().alloc_from_pool == nullptr) return cudaErrorInitializationError;
    CUdeviceptr d = 0;
    const CUresult r = table().alloc_from_pool(&d, size, reinterpret_cast<CUmemoryPool>(pool), reinterpret_cast<CUstream>(stream));
    *ptr = reinterpret_cast<void*>(d);
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorMemoryAllocation;
}

// cudart 13's cudaLibraryLoadData passes its options on to the driver's cuLibraryLoadData (the types are the
// driver's under other names).
extern "C" cudaError_t cudaLibraryLoadData(cudaLibrary_t* library, const void* code, cudaJitOption* jit_options,
                                           void** jit_values, unsigned int jit_count, cudaLibraryOption* library_options,
                                           void** library_values, unsigned int library_count) {
    if (table().library_load == nullptr) return cudaErrorInitializationError;
    CUlibrary lib = nullptr;
    const CUresult r = table().library_load(&lib, code, reinterpret_cast<CUjit_option*>(jit_options), jit_values, jit_count,
                                            reinterpret_cast<CUlibraryOption*>(library_options), library_values, library_count);
    *library = reinterpret_cast<cudaLibrary_t>(lib);
    return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

extern "C" cudaError_t cudaLibraryUnload(cudaLibrary_t library) {
    if (table().library_unload == nullptr) return cudaErrorInitializationError;
    return table().library_unload(reinterpret_cast<CUlibrary>(library)) == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}
