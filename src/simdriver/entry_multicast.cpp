// Multicast object entry points: argument checks, then SimState's rules (state_multicast.cpp).
#include "entry_guard.hpp"
#include "state.hpp"

using cumemaudit::sim::guarded;
using cumemaudit::sim::SimState;

extern "C" {

CUresult cuMulticastGetGranularity(size_t* granularity, const CUmulticastObjectProp* prop,
                                   CUmulticastGranularity_flags option) {
    return guarded([&] {
        if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
        if (option != CU_MULTICAST_GRANULARITY_MINIMUM && option != CU_MULTICAST_GRANULARITY_RECOMMENDED)
            return CUDA_ERROR_INVALID_VALUE;
        if (!SimState::get().initialized()) return CUDA_ERROR_NOT_INITIALIZED;
        *granularity = option == CU_MULTICAST_GRANULARITY_MINIMUM ? (2u << 20) : (512u << 20);
        return CUDA_SUCCESS;
    });
}

CUresult cuMulticastCreate(CUmemGenericAllocationHandle* mcHandle, const CUmulticastObjectProp* prop) {
    return guarded([&] {
        if (mcHandle == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().multicast_create(mcHandle, *prop);
    });
}

CUresult cuMulticastAddDevice(CUmemGenericAllocationHandle mcHandle, CUdevice dev) {
    return guarded([&] { return SimState::get().multicast_add_device(mcHandle, dev); });
}

CUresult cuMulticastBindMem(CUmemGenericAllocationHandle mcHandle, size_t mcOffset, CUmemGenericAllocationHandle memHandle,
                            size_t memOffset, size_t size, unsigned long long flags) {
    return guarded([&] {
        if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().multicast_bind_mem(mcHandle, mcOffset, memHandle, memOffset, size);
    });
}

CUresult cuMulticastBindAddr(CUmemGenericAllocationHandle mcHandle, size_t mcOffset, CUdeviceptr memptr, size_t size,
                             unsigned long long flags) {
    return guarded([&] {
        if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().multicast_bind_addr(mcHandle, mcOffset, memptr, size);
    });
}

CUresult cuMulticastUnbind(CUmemGenericAllocationHandle mcHandle, CUdevice dev, size_t mcOffset, size_t size) {
    return guarded([&] { return SimState::get().multicast_unbind(mcHandle, dev, mcOffset, size); });
}

}  // extern "C"
