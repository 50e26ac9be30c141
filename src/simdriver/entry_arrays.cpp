// CUDA array entry points (arrays.cpp holds the rules).
#include "entry_guard.hpp"
#include "state.hpp"

#include "common/array_bytes.hpp"

using cumemaudit::sim::guarded;
using cumemaudit::sim::SimState;

extern "C" {

CUresult cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* pAllocateArray) {
    return guarded([&] {
        if (pHandle == nullptr || pAllocateArray == nullptr) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().array_create(pHandle, cumemaudit::as_3d(*pAllocateArray));
    });
}

CUresult cuArray3DCreate_v2(CUarray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pAllocateArray) {
    return guarded([&] {
        if (pHandle == nullptr || pAllocateArray == nullptr) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().array_create(pHandle, *pAllocateArray);
    });
}

CUresult cuArrayDestroy(CUarray hArray) {
    return guarded([&] { return SimState::get().array_destroy(hArray); });
}

CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR* pArrayDescriptor, CUarray hArray) {
    return guarded([&] {
        if (pArrayDescriptor == nullptr) return CUDA_ERROR_INVALID_VALUE;
        CUDA_ARRAY3D_DESCRIPTOR d{};
        if (CUresult r = SimState::get().array_descriptor(&d, hArray); r != CUDA_SUCCESS) return r;
        if (d.Depth != 0) return CUDA_ERROR_INVALID_VALUE;  // a 3D array has no 2D descriptor
        *pArrayDescriptor = CUDA_ARRAY_DESCRIPTOR{d.Width, d.Height, d.Format, d.NumChannels};
        return CUDA_SUCCESS;
    });
}

CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR* pArrayDescriptor, CUarray hArray) {
    return guarded([&] {
        return pArrayDescriptor == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().array_descriptor(pArrayDescriptor, hArray);
    });
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray* pHandle, const CUDA_ARRAY3D_DESCRIPTOR* pMipmappedArrayDesc,
                                unsigned int numMipmapLevels) {
    return guarded([&] {
        if (pHandle == nullptr || pMipmappedArrayDesc == nullptr) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().mipmapped_create(pHandle, *pMipmappedArrayDesc, numMipmapLevels);
    });
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
    return guarded([&] { return SimState::get().mipmapped_destroy(hMipmappedArray); });
}

CUresult cuMipmappedArrayGetLevel(CUarray* pLevelArray, CUmipmappedArray hMipmappedArray, unsigned int level) {
    return guarded([&] {
        return pLevelArray == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().mipmapped_level(pLevelArray, hMipmappedArray, level);
    });
}

}  // extern "C"
