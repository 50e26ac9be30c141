// cuGetErrorName / cuGetErrorString with the real names of every CUresult of CUDA 13 (common/cuda_errors.inc).
#include "entry_guard.hpp"

#include "common/cuda_errors.hpp"

using cumemaudit::cuda_errors::find;
using Row = cumemaudit::cuda_errors::Row;

extern "C" {

CUresult cuGetErrorName(CUresult error, const char** pStr) {
    if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const Row* row = find(error);
    *pStr = row ? row->name : nullptr;  // unknown codes: NULL and INVALID_VALUE, as the real driver does
    return row ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char** pStr) {
    if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const Row* row = find(error);
    *pStr = row ? row->text : nullptr;
    return row ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

}  // extern "C"
