// Stream-ordered pool entry points (pools.cpp holds the rules).
#include "entry_guard.hpp"
#include "state.hpp"

using cumemaudit::sim::guarded;
using cumemaudit::sim::SimState;

extern "C" {

CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
    return guarded([&] {
        if (pool == nullptr || poolProps == nullptr) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().pool_create(pool, *poolProps);
    });
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    return guarded([&] { return SimState::get().pool_destroy(pool); });
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
    return guarded([&] { return SimState::get().pool_trim(pool, minBytesToKeep); });
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
    return guarded([&] { return SimState::get().pool_set_attribute(pool, attr, value); });
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
    return guarded([&] { return SimState::get().pool_get_attribute(pool, attr, value); });
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
    return guarded([&] { return pool_out == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().default_pool(pool_out, dev); });
}

CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
    return guarded([&] { return pool == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().current_pool(pool, dev); });
}

CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
    return guarded([&] { return SimState::get().set_current_pool(dev, pool); });
}

CUresult cuMemGetDefaultMemPool(CUmemoryPool* pool_out, CUmemLocation* location, CUmemAllocationType type) {
    return guarded([&] {
        if (pool_out == nullptr || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().location_pool(pool_out, *location, type, false);
    });
}

CUresult cuMemGetMemPool(CUmemoryPool* pool, CUmemLocation* location, CUmemAllocationType type) {
    return guarded([&] {
        if (pool == nullptr || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().location_pool(pool, *location, type, true);
    });
}

CUresult cuMemSetMemPool(CUmemLocation* location, CUmemAllocationType type, CUmemoryPool pool) {
    return guarded([&] {
        return location == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().set_location_pool(*location, type, pool);
    });
}

CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char, size_t N) {
    return guarded([&] { return SimState::get().memset(dstDevice, N); });
}

CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags, CUstream) {
    return guarded([&] { return flags != 0 ? CUDA_ERROR_INVALID_VALUE : SimState::get().prefetch(devPtr, count, location); });
}
CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location, unsigned int flags, CUstream s) {
    return cuMemPrefetchAsync_v2(devPtr, count, location, flags, s);
}
// CUDA 12's form (what cudart 12 asks cuGetProcAddress for): a device, or CU_DEVICE_CPU for the host.
CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream s) {
    const CUmemLocation to = dstDevice == CU_DEVICE_CPU ? CUmemLocation{CU_MEM_LOCATION_TYPE_HOST, 0}
                                                        : CUmemLocation{CU_MEM_LOCATION_TYPE_DEVICE, dstDevice};
    return cuMemPrefetchAsync_v2(devPtr, count, to, 0, s);
}
CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream s) {
    return cuMemPrefetchAsync(devPtr, count, dstDevice, s);
}

CUresult cuMemPoolExportToShareableHandle(void* handle_out, CUmemoryPool pool, CUmemAllocationHandleType handleType,
                                          unsigned long long flags) {
    return guarded([&] {
        return flags != 0 ? CUDA_ERROR_INVALID_VALUE : SimState::get().pool_export(handle_out, pool, handleType);
    });
}

// A POSIX fd travels in the pointer argument itself, as cuMemImportFromShareableHandle's does.
CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool* pool_out, void* handle, CUmemAllocationHandleType handleType,
                                            unsigned long long flags) {
    return guarded([&] {
        if (pool_out == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().pool_import(pool_out, static_cast<int>(reinterpret_cast<std::intptr_t>(handle)), handleType);
    });
}

CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData* shareData_out, CUdeviceptr ptr) {
    return guarded([&] {
        return shareData_out == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().pool_export_pointer(shareData_out, ptr);
    });
}

CUresult cuMemPoolImportPointer(CUdeviceptr* ptr_out, CUmemoryPool pool, CUmemPoolPtrExportData* shareData) {
    return guarded([&] {
        if (ptr_out == nullptr || shareData == nullptr) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().pool_import_pointer(ptr_out, pool, *shareData);
    });
}

}  // extern "C"
