// cuGetErrorName / cuGetErrorString with the real names of every CUresult of CUDA 13 (error_table.inc).
#include "cuda_decls.hpp"

namespace {

struct ErrorRow {
    CUresult code;
    const char* name;
    const char* text;
};

constexpr ErrorRow kErrors[] = {
#define CU_ERROR(name, text) {name, #name, text},
#include "error_table.inc"
#undef CU_ERROR
};

const ErrorRow* find(CUresult e) {
    for (const auto& row : kErrors)
        if (row.code == e) return &row;
    return nullptr;
}

}  // namespace

extern "C" {

CUresult cuGetErrorName(CUresult error, const char** pStr) {
    if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const ErrorRow* row = find(error);
    *pStr = row ? row->name : nullptr;  // unknown codes: NULL and INVALID_VALUE, as the real driver does
    return row ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char** pStr) {
    if (pStr == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const ErrorRow* row = find(error);
    *pStr = row ? row->text : nullptr;
    return row ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

}  // extern "C"
