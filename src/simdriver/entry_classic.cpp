// Classic allocation entry points (cuMemAlloc family, host and managed memory, stream-ordered
// allocation, IPC). Device allocations are charged against capacity rounded up to 512 bytes; host and
// managed allocations are real host memory and are not charged.
#include "entry_guard.hpp"
#include "state.hpp"

using cumemaudit::sim::guarded;
using cumemaudit::sim::SimState;

namespace {

CUresult alloc_on_stream(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
    if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
    SimState& s = SimState::get();
    if (CUresult r = s.stream_check(stream); r != CUDA_SUCCESS) return r;
    // Captured, it is an allocation of the graph, charged at the graph's launch (measured).
    if (s.capturing(stream)) return s.captured_alloc(stream, bytes, dptr);
    return s.pool_alloc(dptr, bytes, nullptr);  // nothing executes, so stream order is immediate order
}

CUresult alloc_from_pool(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream stream) {
    if (dptr == nullptr || pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
    SimState& s = SimState::get();
    if (CUresult r = s.stream_check(stream); r != CUDA_SUCCESS) return r;
    return s.pool_alloc(dptr, bytes, pool);
}

CUresult free_on_stream(CUdeviceptr dptr, CUstream stream) {
    SimState& s = SimState::get();
    if (CUresult r = s.stream_check(stream); r != CUDA_SUCCESS) return r;
    if (s.capturing(stream) && s.captured_free(stream, dptr)) return CUDA_SUCCESS;
    return s.device_free(dptr);
}

}  // namespace

extern "C" {

CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
    return guarded([&] {
        if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().mem_get_info(free, total);
    });
}

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
    return guarded([&] {
        if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
        // The out-parameter is written after the state's lock is released, as an API layer writes its
        // result: a bad pointer faults there, and a program that jumps out of the fault finds the driver
        // usable (a real driver does not validate out-pointers beyond null either).
        CUdeviceptr va = 0;
        const CUresult r = SimState::get().device_alloc(&va, bytesize);
        if (r == CUDA_SUCCESS) *dptr = va;
        return r;
    });
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
    return guarded([&] {
        if (CUresult r = SimState::get().check_unsafe_during_capture(); r != CUDA_SUCCESS) return r;
        return SimState::get().device_free(dptr);
    });
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t width, size_t height, unsigned int elementSize) {
    return guarded([&] {
        if (dptr == nullptr || pPitch == nullptr || width == 0 || height == 0) return CUDA_ERROR_INVALID_VALUE;
        if (elementSize != 4 && elementSize != 8 && elementSize != 16) return CUDA_ERROR_INVALID_VALUE;
        const size_t pitch = (width + 511) / 512 * 512;  // rows start on 512-byte boundaries
        if (CUresult r = SimState::get().device_alloc(dptr, pitch * height); r != CUDA_SUCCESS) return r;
        *pPitch = pitch;
        return CUDA_SUCCESS;
    });
}

CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
    return guarded([&] {
        if (dptr == nullptr || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().managed_alloc(dptr, bytesize);
    });
}

CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
    return guarded([&] {
        constexpr unsigned known = CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
        if (pp == nullptr || (Flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().host_alloc(pp, bytesize);
    });
}

CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
    return guarded([&] { return pp == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().host_alloc(pp, bytesize); });
}

CUresult cuMemFreeHost(void* p) {
    return guarded([&] { return SimState::get().host_free(p); });
}

CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int Flags) {
    return guarded([&] { return SimState::get().host_register(p, bytesize, Flags); });
}

CUresult cuMemHostUnregister(void* p) {
    return guarded([&] { return SimState::get().host_unregister(p); });
}

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
    return guarded([&] { return alloc_on_stream(dptr, bytesize, hStream); });
}
CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
    return guarded([&] { return alloc_on_stream(dptr, bytesize, hStream); });
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
    return guarded([&] { return free_on_stream(dptr, hStream); });
}
CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
    return guarded([&] { return free_on_stream(dptr, hStream); });
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
    return guarded([&] { return alloc_from_pool(dptr, bytesize, pool, hStream); });
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
    return guarded([&] { return alloc_from_pool(dptr, bytesize, pool, hStream); });
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
    return guarded([&] { return SimState::get().address_range(dptr, pbase, psize); });
}

CUresult cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr) {
    return guarded([&] { return pHandle == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().ipc_get(pHandle, dptr); });
}

// Flags: CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS is the only one, and peer access is not modelled.
CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int Flags) {
    return guarded([&] {
        if (pdptr == nullptr || (Flags & ~CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) != 0) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().ipc_open(pdptr, handle);
    });
}
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
    return cuIpcOpenMemHandle(pdptr, handle, flags);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
    return guarded([&] { return SimState::get().ipc_close(dptr); });
}

CUresult cuMemGetHandleForAddressRange(void* handle, CUdeviceptr dptr, size_t size, CUmemRangeHandleType handleType,
                                       unsigned long long flags) {
    return guarded([&] {
        if (handle == nullptr || handleType != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD) return CUDA_ERROR_INVALID_VALUE;
        if (flags != 0 && flags != CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().dma_buf(static_cast<int*>(handle), dptr, size);
    });
}

}  // extern "C"
