// pool_test_support: what both pool test files need from the simulated driver — a current context and
// the driver's own free-memory figure, against which every reference effect is checked.
#pragma once

#include <catch2/catch.hpp>
#include <cuda.h>

#include <cstddef>

namespace pool_test {

constexpr std::size_t MiB = std::size_t{1} << 20;

inline void setup() {
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    CUcontext ctx = nullptr;
    REQUIRE(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    REQUIRE(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
}

inline std::size_t free_bytes() {
    std::size_t f = 0, t = 0;
    REQUIRE(cuMemGetInfo(&f, &t) == CUDA_SUCCESS);
    return f;
}

// Bytes taken from the device since `start` (a free_bytes() figure); negative when memory came back.
inline long long taken_since(std::size_t start) {
    return static_cast<long long>(start) - static_cast<long long>(free_bytes());
}

}  // namespace pool_test
