// cuda_errors: the name and description of every CUresult of CUDA 13, from one table (cuda_errors.inc).
// The simulated driver answers cuGetErrorName/cuGetErrorString with it; the shim names the results it
// records with it, so a report says what the driver said, whatever the code.
#pragma once

#include <cuda.h>

namespace cumemaudit::cuda_errors {

struct Row {
    CUresult code;
    const char* name;  // "CUDA_ERROR_INVALID_VALUE"
    const char* text;  // "invalid argument"
};

inline constexpr Row kRows[] = {
#define CU_ERROR(name, text) {name, #name, text},
#include "cuda_errors.inc"
#undef CU_ERROR
};

// nullptr for a value cuda.h does not name.
constexpr const Row* find(CUresult code) {
    for (const Row& row : kRows)
        if (row.code == code) return &row;
    return nullptr;
}

}  // namespace cumemaudit::cuda_errors
