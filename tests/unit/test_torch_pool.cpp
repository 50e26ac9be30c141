// The pluggable-allocator entry points (include/cumemaudit/torch_pool.h) on the simulated driver, called
// the way PyTorch's CUDAPluggableAllocator calls them: through function pointers of its std::function types
// (void*(size_t, int, cudaStream_t) and void(void*, size_t, int, cudaStream_t)), the free given back the
// size, device and stream of the alloc; and the grow/shrink/size_of extras. Device 0's pool is
// process-wide, so each case works from the figures it found on entry.
#include "cumemaudit/torch_pool.h"

#include <catch2/catch.hpp>
#include <cuda.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>
#include <string>

#include "pool_test_support.hpp"

namespace {

using namespace pool_test;

// What PyTorch holds after dlsym: pointers of exactly its types (CUstream is cudaStream_t).
using AllocFn = void* (*)(size_t, int, CUstream);
using FreeFn = void (*)(void*, size_t, int, CUstream);
const AllocFn torch_alloc = reinterpret_cast<AllocFn>(&cumemaudit_pool_alloc);
const FreeFn torch_free = reinterpret_cast<FreeFn>(&cumemaudit_pool_free);

cumemaudit_pool_stats stats(int device = 0) {
    cumemaudit_pool_stats s{};
    REQUIRE(cumemaudit_pool_stats_get(device, &s) == 0);
    return s;
}

std::uint64_t calls(const cumemaudit_pool_stats& s, const char* api) {
    for (int i = 0; i < cumemaudit_pool_api_count(); ++i)
        if (std::strcmp(cumemaudit_pool_api_name(i), api) == 0) return s.driver_calls[i];
    FAIL("no API named " << api);
    return 0;
}

}  // namespace

TEST_CASE("alloc and free through PyTorch's pointer types: aligned segments, exact figures, one reservation",
          "[torch_pool]") {
    setup();
    const std::size_t start = free_bytes();
    REQUIRE(cumemaudit_pool_configure(0, 64 * MiB, 0) == 0);
    void* a = torch_alloc(3 * MiB + 5, 0, nullptr);
    REQUIRE(a != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(a) % (2 * MiB) == 0);
    void* b = torch_alloc(20 * MiB, 0, nullptr);  // a caching-allocator large segment
    REQUIRE(b != nullptr);
    CHECK(static_cast<char*>(b) == static_cast<char*>(a) + 4 * MiB);
    CHECK(taken_since(start) == static_cast<long long>(24 * MiB));
    cumemaudit_pool_stats s = stats();
    CHECK(s.live_bytes == 24 * MiB);
    CHECK(s.reserved_bytes == 24 * MiB);
    CHECK(s.segments == 2);
    CHECK(calls(s, "cuMemAddressReserve") == 1);
    CUdevice dev = 0;
    std::size_t total = 0;
    REQUIRE(cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
    REQUIRE(cuDeviceTotalMem(&total, dev) == CUDA_SUCCESS);
    CHECK(s.address_space_bytes == 2 * total);

    torch_free(b, 20 * MiB, 0, nullptr);
    torch_free(a, 3 * MiB + 5, 0, nullptr);
    s = stats();
    CHECK(s.live_bytes == 0);
    CHECK(s.cached_bytes == 24 * MiB);  // 16 + 4 + 4 MiB chunks, under the 64 MiB bound
    CHECK(taken_since(start) == static_cast<long long>(24 * MiB));
    void* c = torch_alloc(20 * MiB, 0, nullptr);  // reuses the 16 + 4 MiB chunks, at the lowest free address
    CHECK(c == a);
    CHECK(stats().cache_hits >= 2);
    torch_free(c, 20 * MiB, 0, nullptr);
    CHECK(cumemaudit_pool_trim(0) == 24 * MiB);
    CHECK(taken_since(start) == 0);
    s = stats();
    CHECK(calls(s, "cuMemRelease") == calls(s, "cuMemCreate"));
    CHECK(calls(s, "cuMemUnmap") == calls(s, "cuMemMap"));
    CHECK(std::string(cumemaudit_pool_last_error()).empty());
}

TEST_CASE("failures return NULL or do nothing, and say why", "[torch_pool]") {
    setup();
    torch_free(torch_alloc(2 * MiB, 0, nullptr), 2 * MiB, 0, nullptr);  // device 0's pool exists from here
    cumemaudit_pool_trim(0);
    const std::size_t start = free_bytes();
    const auto before = stats();
    CHECK(cumemaudit_pool_alloc(0, 0, nullptr) == nullptr);
    CHECK(std::string(cumemaudit_pool_last_error()) == "cumemaudit_pool_alloc: size 0 (must be positive)");
    CHECK(cumemaudit_pool_alloc(-4096, 0, nullptr) == nullptr);
    CHECK(std::string(cumemaudit_pool_last_error()) == "cumemaudit_pool_alloc: size -4096 (must be positive)");
    CHECK(cumemaudit_pool_alloc(2 * MiB, 64, nullptr) == nullptr);
    CHECK(std::string(cumemaudit_pool_last_error()) == "device 64 out of range [0, 64)");
    CHECK(cumemaudit_pool_alloc(std::size_t{1} << 50, 0, nullptr) == nullptr);  // 1 PiB: beyond the address space
    CHECK(std::string(cumemaudit_pool_last_error()).find("address space exhausted") != std::string::npos);

    int on_stack = 0;
    cumemaudit_pool_free(&on_stack, 4, 0, nullptr);  // never allocated here
    CHECK(std::string(cumemaudit_pool_last_error()) ==
          "cumemaudit_pool_free: DevicePool::free (not a segment of this pool) failed: CUDA_ERROR_INVALID_VALUE (1)");
    CHECK(stats().bad_frees == before.bad_frees + 1);
    CHECK(stats().failed_allocations == before.failed_allocations + 1);
    cumemaudit_pool_free(&on_stack, 4, 5, nullptr);  // a device whose pool was never used
    CHECK(std::string(cumemaudit_pool_last_error()) == "cumemaudit_pool_free: device 5 has no pool");
    cumemaudit_pool_stats none{};
    CHECK(cumemaudit_pool_stats_get(5, &none) == 1);
    CHECK(none.reserved_bytes == 0);
    CHECK(cumemaudit_pool_stats_get(-1, &none) == -1);
    CHECK(cumemaudit_pool_configure(64, 0, 0) == -1);
    CHECK(cumemaudit_pool_configure(0, 0, 4 * MiB) == -2);  // device 0's pool is in use: its size is fixed
    CHECK(cumemaudit_pool_api_name(cumemaudit_pool_api_count()) == nullptr);
    CHECK(taken_since(start) == 0);
}

TEST_CASE("a free while its stream captures is deferred, then released by the next free or trim outside it",
          "[torch_pool][capture]") {
    setup();
    REQUIRE(cumemaudit_pool_configure(0, 0, 0) == 0);  // no cache: releases show at once
    const std::size_t start = free_bytes();
    CUstream stream = nullptr;
    REQUIRE(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    const auto before = stats();
    void* keep = torch_alloc(2 * MiB, 0, stream);
    void* temp = torch_alloc(8 * MiB, 0, stream);
    REQUIRE(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS);
    void* during = torch_alloc(4 * MiB, 0, stream);  // allocating while capturing is fine
    REQUIRE(during != nullptr);
    torch_free(temp, 8 * MiB, 0, stream);
    CHECK(stats().deferred_frees == before.deferred_frees + 1);
    CHECK(taken_since(start) == static_cast<long long>(14 * MiB));  // still mapped: the graph may use it
    CUgraph graph = nullptr;
    REQUIRE(cuStreamEndCapture(stream, &graph) == CUDA_SUCCESS);
    torch_free(during, 4 * MiB, 0, stream);  // outside the capture: this one, then the deferred one
    CHECK(taken_since(start) == static_cast<long long>(2 * MiB));
    CHECK(stats().live_bytes == 2 * MiB);

    REQUIRE(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS);
    torch_free(keep, 2 * MiB, 0, stream);
    CHECK(cumemaudit_pool_trim(0) == 0);  // still capturing: the deferred free waits
    CHECK(taken_since(start) == static_cast<long long>(2 * MiB));
    CUgraph graph2 = nullptr;
    REQUIRE(cuStreamEndCapture(stream, &graph2) == CUDA_SUCCESS);
    cumemaudit_pool_trim(0);
    CHECK(taken_since(start) == 0);
    CHECK(stats().deferred_frees == before.deferred_frees + 2);
    CHECK(cuGraphDestroy(graph) == CUDA_SUCCESS);
    CHECK(cuGraphDestroy(graph2) == CUDA_SUCCESS);
    CHECK(cuStreamDestroy(stream) == CUDA_SUCCESS);
    REQUIRE(cumemaudit_pool_configure(0, std::size_t{1} << 30, 0) == 0);
}

TEST_CASE("four threads on two devices at once: every segment back, nothing left held", "[torch_pool][threads]") {
    setup();
    int devices = 0;
    REQUIRE(cuDeviceGetCount(&devices) == CUDA_SUCCESS);
    REQUIRE(devices >= 2);
    CUcontext ctx[2] = {};
    for (int d = 0; d < 2; ++d) REQUIRE(cuDevicePrimaryCtxRetain(&ctx[d], d) == CUDA_SUCCESS);
    std::vector<std::thread> threads;
    std::atomic<int> failures{0};
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            const int dev = t % 2;
            if (cuCtxSetCurrent(ctx[dev]) != CUDA_SUCCESS) {
                ++failures;
                return;
            }
            std::vector<std::pair<void*, std::size_t>> held;
            for (int i = 0; i < 200; ++i) {
                const std::size_t n = static_cast<std::size_t>((i * 7 + t) % 10 + 1) * 2 * MiB;
                void* p = torch_alloc(n, dev, nullptr);
                if (p == nullptr) ++failures;
                else held.emplace_back(p, n);
                if (held.size() > 6) {
                    torch_free(held.front().first, held.front().second, dev, nullptr);
                    held.erase(held.begin());
                }
            }
            for (auto [p, n] : held) torch_free(p, n, dev, nullptr);
        });
    }
    for (auto& th : threads) th.join();
    CHECK(failures == 0);
    for (int d = 0; d < 2; ++d) {
        const auto s = stats(d);
        CHECK(s.live_bytes == 0);
        CHECK(s.segments == 0);
        cumemaudit_pool_trim(d);
        const auto t = stats(d);
        CHECK(t.reserved_bytes == 0);
        CHECK(calls(t, "cuMemRelease") == calls(t, "cuMemCreate"));
    }
    REQUIRE(cuCtxSetCurrent(ctx[0]) == CUDA_SUCCESS);
}

TEST_CASE("grow and shrink in place through the C entry points: the address stays", "[torch_pool]") {
    setup();
    REQUIRE(cumemaudit_pool_configure(0, 0, 0) == 0);  // no cache: each figure is the driver's at once
    const std::size_t start = free_bytes();
    void* a = torch_alloc(2 * MiB, 0, nullptr);
    REQUIRE(a != nullptr);
    CHECK(cumemaudit_pool_grow(a, 10 * MiB, 0) == 1);
    CHECK(cumemaudit_pool_size_of(a, 0) == 10 * MiB);
    CHECK(taken_since(start) == static_cast<long long>(10 * MiB));
    void* b = torch_alloc(2 * MiB, 0, nullptr);
    CHECK(static_cast<char*>(b) == static_cast<char*>(a) + 10 * MiB);
    CHECK(cumemaudit_pool_grow(a, 12 * MiB, 0) == 0);  // b is right after it
    CHECK(cumemaudit_pool_size_of(a, 0) == 10 * MiB);
    CHECK(cumemaudit_pool_shrink(a, 3 * MiB, 0) == 0);  // chunks of 2 and 8 MiB: the 8 is still needed for 3
    CHECK(cumemaudit_pool_size_of(a, 0) == 10 * MiB);
    CHECK(cumemaudit_pool_shrink(a, 2 * MiB, 0) == 0);  // now the 8 MiB chunk goes
    CHECK(cumemaudit_pool_size_of(a, 0) == 2 * MiB);
    CHECK(taken_since(start) == static_cast<long long>(4 * MiB));
    int on_stack = 0;
    CHECK(cumemaudit_pool_grow(&on_stack, 4 * MiB, 0) == -1);
    CHECK(std::string(cumemaudit_pool_last_error()).find("not a segment of this pool") != std::string::npos);
    CHECK(cumemaudit_pool_shrink(&on_stack, 0, 0) == -1);
    CHECK(cumemaudit_pool_size_of(&on_stack, 0) == 0);
    torch_free(a, 2 * MiB, 0, nullptr);
    torch_free(b, 2 * MiB, 0, nullptr);
    CHECK(taken_since(start) == 0);
    REQUIRE(cumemaudit_pool_configure(0, std::size_t{1} << 30, 0) == 0);
}
