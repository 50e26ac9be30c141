// Virtual memory management entry points: argument checks, then SimState's rules (state_vmm.cpp).
#include "entry_guard.hpp"
#include "state.hpp"

using cumemaudit::sim::guarded;
using cumemaudit::sim::SimState;

extern "C" {

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags option) {
    return guarded([&] {
        if (granularity == nullptr || prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
        if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
            return CUDA_ERROR_INVALID_VALUE;
        SimState& s = SimState::get();
        if (!s.initialized()) return CUDA_ERROR_NOT_INITIALIZED;
        const bool host = prop->location.type == CU_MEM_LOCATION_TYPE_HOST ||
                          prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT ||
                          (prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA && prop->location.id == 0);
        if (!host && (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
                      prop->location.id >= s.device_count()))
            return CUDA_ERROR_INVALID_DEVICE;
        // Measured on H200: 2 MiB for both minimum and recommended on a device; host memory's is not yet
        // measured and taken to be the same.
        *granularity = 2u << 20;
        return CUDA_SUCCESS;
    });
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size, const CUmemAllocationProp* prop,
                     unsigned long long flags) {
    return guarded([&] {
        if (handle == nullptr || prop == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().mem_create(handle, size, *prop);
    });
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    return guarded([&] { return SimState::get().mem_release(handle); });
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr, unsigned long long flags) {
    return guarded([&] {
        // The address hint is only a hint: the simulated arena places reservations itself.
        if (ptr == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().address_reserve(ptr, size, alignment);
    });
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    return guarded([&] { return SimState::get().address_free(ptr, size); });
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
    return guarded([&] { return flags != 0 ? CUDA_ERROR_INVALID_VALUE : SimState::get().map(ptr, size, offset, handle); });
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    return guarded([&] { return SimState::get().unmap(ptr, size); });
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
    return guarded([&] {
        return desc == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().set_access(ptr, size, desc, count);
    });
}

CUresult cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr) {
    return guarded([&] {
        if (flags == nullptr || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().get_access(flags, *location, ptr);
    });
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
    return guarded([&] {
        if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().retain_handle(handle, reinterpret_cast<CUdeviceptr>(addr));
    });
}

CUresult cuMemExportToShareableHandle(void* shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType, unsigned long long flags) {
    return guarded([&] {
        if (shareableHandle == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().export_handle(shareableHandle, handle, handleType);
    });
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                        CUmemAllocationHandleType shHandleType) {
    return guarded([&] {
        if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().import_handle(handle, osHandle, shHandleType);
    });
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) {
    return guarded([&] {
        return prop == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().properties(prop, handle);
    });
}

// Sparse arrays are not simulated (there is no cuArrayCreate here): the list and its handles are checked as
// the real driver checks them, so a stale or made-up handle gets CUDA_ERROR_INVALID_VALUE, and a list that
// passes is answered CUDA_ERROR_NOT_SUPPORTED with nothing mapped.
static CUresult map_array(CUarrayMapInfo* list, unsigned int count, CUstream stream) {
    if (list == nullptr || count == 0) return CUDA_ERROR_INVALID_VALUE;
    SimState& s = SimState::get();
    if (CUresult r = s.stream_check(stream); r != CUDA_SUCCESS) return r;
    for (unsigned int i = 0; i < count; ++i) {
        const CUarrayMapInfo& m = list[i];
        if (m.memOperationType != CU_MEM_OPERATION_TYPE_MAP || m.memHandleType != CU_MEM_HANDLE_TYPE_GENERIC) continue;
        CUmemAllocationProp prop{};
        if (s.properties(&prop, m.memHandle.memHandle) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuMemMapArrayAsync(CUarrayMapInfo* mapInfoList, unsigned int count, CUstream hStream) {
    return guarded([&] { return map_array(mapInfoList, count, hStream); });
}
CUresult cuMemMapArrayAsync_ptsz(CUarrayMapInfo* mapInfoList, unsigned int count, CUstream hStream) {
    return guarded([&] { return map_array(mapInfoList, count, hStream); });
}

}  // extern "C"

// External memory (external_memory.cpp holds the rules).
extern "C" {

CUresult cuImportExternalMemory(CUexternalMemory* extMem_out, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC* memHandleDesc) {
    return guarded([&] {
        if (extMem_out == nullptr || memHandleDesc == nullptr) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().external_import(extMem_out, *memHandleDesc);
    });
}

CUresult cuExternalMemoryGetMappedBuffer(CUdeviceptr* devPtr, CUexternalMemory extMem,
                                         const CUDA_EXTERNAL_MEMORY_BUFFER_DESC* bufferDesc) {
    return guarded([&] {
        if (devPtr == nullptr || bufferDesc == nullptr) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().external_buffer(devPtr, extMem, *bufferDesc);
    });
}

CUresult cuDestroyExternalMemory(CUexternalMemory extMem) {
    return guarded([&] { return SimState::get().external_destroy(extMem); });
}

}  // extern "C"
