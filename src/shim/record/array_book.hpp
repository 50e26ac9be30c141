// array_book: the context each live CUDA array ends with. The driver frees a context's arrays when the
// context ends (docs/DRIVER.md, "Arrays"), and an array handle cannot be put to the driver afterwards (it
// reads the freed object: the H200 crashed on a second destroy). So the shim keeps the answer itself: each
// array's context, and each device's primary context, which a reset or the last release ends.
#pragma once

#include "shim/services/cuda_api.hpp"

#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace cumemaudit::shim {

class ArrayBook {
public:
    void primary_context(int device, CUcontext ctx);
    CUcontext primary_of(int device) const;  // null: none retained through us
    void created(std::uint64_t handle, CUcontext ctx);
    void destroyed(std::uint64_t handle);
    // Whether `handle` is an array that the end of `ctx` freed; such an array is forgotten here.
    bool ended_with(std::uint64_t handle, CUcontext ctx);

private:
    mutable std::mutex mu_;
    std::unordered_map<std::uint64_t, CUcontext> arrays_;  // bounded by the program's live arrays
    std::unordered_map<int, CUcontext> primaries_;
};

}  // namespace cumemaudit::shim
