// cuda_decls: the declarations every entry point needs (common/cuda_decls.hpp) and the exception barrier
// every entry uses.
#pragma once

#include "common/cuda_decls.hpp"

#include <new>

namespace cumemaudit::sim {

// No exception may cross a C entry point: the caller is C, Python or a driver loader.
template <typename F>
CUresult guarded(F&& f) noexcept {
    try {
        return f();
    } catch (const std::bad_alloc&) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    } catch (...) {
        return CUDA_ERROR_UNKNOWN;
    }
}

}  // namespace cumemaudit::sim
