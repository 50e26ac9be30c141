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

}  // extern "C"
