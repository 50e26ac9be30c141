// null_driver: a libcuda.so.1 that does nothing but hand out fresh values, with no lock at all, for one
// measurement only: whether the shim itself lets two threads run side by side. The simulated driver
// serializes every call on one mutex, so with it two threads mostly measure that mutex. Addresses and
// handles come from per-thread counters and are never reused. Exactly the entry points bench_calls uses.
#include <cuda.h>

#include <cstdint>
#include <cstring>

namespace {

std::uint64_t next(std::uint64_t step) {
    static std::uint64_t threads = 0;
    thread_local std::uint64_t base = 0, n = 0;
    if (base == 0) base = (__atomic_add_fetch(&threads, 1, __ATOMIC_RELAXED)) << 44;
    return base + step * ++n;
}

int g_ctx_storage;

}  // namespace

#define API extern "C" __attribute__((visibility("default"))) CUresult
API cuInit(unsigned int) { return CUDA_SUCCESS; }
API cuDriverGetVersion(int* v) { *v = 13000; return CUDA_SUCCESS; }
API cuDeviceGet(CUdevice* d, int) { *d = 0; return CUDA_SUCCESS; }
API cuDevicePrimaryCtxRetain(CUcontext* c, CUdevice) { *c = reinterpret_cast<CUcontext>(&g_ctx_storage); return CUDA_SUCCESS; }
API cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
API cuMemAlloc_v2(CUdeviceptr* p, size_t) { *p = next(1 << 12); return CUDA_SUCCESS; }
API cuMemFree_v2(CUdeviceptr) { return CUDA_SUCCESS; }
API cuMemAllocAsync(CUdeviceptr* p, size_t, CUstream) { *p = next(1 << 12); return CUDA_SUCCESS; }
API cuMemFreeAsync(CUdeviceptr, CUstream) { return CUDA_SUCCESS; }
API cuMemCreate(CUmemGenericAllocationHandle* h, size_t, const CUmemAllocationProp*, unsigned long long) {
    *h = next(1);
    return CUDA_SUCCESS;
}
API cuMemRelease(CUmemGenericAllocationHandle) { return CUDA_SUCCESS; }
API cuMemAddressReserve(CUdeviceptr* p, size_t, size_t, CUdeviceptr, unsigned long long) {
    *p = next(1ull << 30);
    return CUDA_SUCCESS;
}
API cuMemAddressFree(CUdeviceptr, size_t) { return CUDA_SUCCESS; }
API cuMemMap(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) { return CUDA_SUCCESS; }
API cuMemUnmap(CUdeviceptr, size_t) { return CUDA_SUCCESS; }
API cuMemSetAccess(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) { return CUDA_SUCCESS; }
API cuModuleLoadData(CUmodule* m, const void*) { *m = reinterpret_cast<CUmodule>(&g_ctx_storage); return CUDA_SUCCESS; }
API cuModuleGetFunction(CUfunction* f, CUmodule, const char*) { *f = reinterpret_cast<CUfunction>(&g_ctx_storage); return CUDA_SUCCESS; }
API cuLaunchKernel(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream, void**, void**) {
    return CUDA_SUCCESS;
}

// The table door: the few names bench_calls asks for, at any version.
API cuGetProcAddress_v2(const char* s, void** pfn, int, cuuint64_t, CUdriverProcAddressQueryResult* st) {
    void* p = nullptr;
    if (std::strcmp(s, "cuGetProcAddress") == 0) p = reinterpret_cast<void*>(&cuGetProcAddress_v2);
    else if (std::strcmp(s, "cuMemAlloc") == 0) p = reinterpret_cast<void*>(&cuMemAlloc_v2);
    else if (std::strcmp(s, "cuMemFree") == 0) p = reinterpret_cast<void*>(&cuMemFree_v2);
    else if (std::strcmp(s, "cuDriverGetVersion") == 0) p = reinterpret_cast<void*>(&cuDriverGetVersion);
    if (st != nullptr) *st = p != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    *pfn = p;
    return p != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
#undef cuGetProcAddress  // cuda.h maps the name to _v2; the v1 export is a symbol of its own
API cuGetProcAddress(const char* s, void** pfn, int v, cuuint64_t f) { return cuGetProcAddress_v2(s, pfn, v, f, nullptr); }
