// DevicePool on the simulated driver (linked directly): segments of one reservation per device — sizes
// rounded to the granularity, aligned addresses placed first fit, growth in place that keeps the address,
// shrinking that gives address space back, the cache and its bound, the out-of-memory retry, misuse, and
// eight threads at once. Figures come from the driver's cuMemGetInfo and from the pool's count of the
// driver calls it made: every creation released once means releases == creates once everything is back.
#include "cumemaudit/device_pool.hpp"

#include <catch2/catch.hpp>
#include <cuda.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "pool_test_support.hpp"

using namespace cumemaudit::pool;

namespace {

using namespace pool_test;
constexpr std::size_t GiB = std::size_t{1} << 30;
long long mib(std::size_t n) { return static_cast<long long>(n * MiB); }

DevicePoolOptions small(std::size_t cache_limit = 256 * MiB) {
    DevicePoolOptions o;
    o.va_capacity = 1024 * MiB;
    o.max_chunk = 64 * MiB;
    o.cache_limit = cache_limit;
    return o;
}

// Every reference the pool took was released exactly once: creations and releases balance, mappings and
// unmaps balance, the one reservation was freed, and no release was refused.
void check_balanced(const CallCounts& c) {
    CHECK(c[Api::release] == c[Api::create]);
    CHECK(c[Api::unmap] == c[Api::map]);
    CHECK(c[Api::set_access] == c[Api::map]);
    CHECK(c[Api::address_reserve] == 1);
}

}  // namespace

TEST_CASE("segments are rounded up to the granularity, aligned, and packed first fit into one reservation",
          "[device_pool]") {
    setup();
    const std::size_t start = free_bytes();
    const std::uint64_t refused = release_error_count();
    CallCounts calls;
    {
        DevicePool pool(small());
        REQUIRE(pool.granularity() == 2 * MiB);
        const CUdeviceptr a = pool.allocate(1);
        const CUdeviceptr b = pool.allocate(3 * MiB);
        const CUdeviceptr c = pool.allocate(20 * MiB);  // PyTorch's segment for a 10 MiB..20 MiB request
        CHECK(a % (2 * MiB) == 0);
        CHECK(b == a + 2 * MiB);
        CHECK(c == b + 4 * MiB);
        CHECK(pool.size_of(a) == 2 * MiB);
        CHECK(pool.size_of(b) == 4 * MiB);
        CHECK(pool.size_of(c) == 20 * MiB);
        CHECK(pool.size_of(a + 2) == 0);  // only a segment's start is a segment
        CHECK(taken_since(start) == mib(26));
        const DevicePoolStats s = pool.stats();
        CHECK(s.address_space_bytes == 1024 * MiB);
        CHECK(s.segments == 3);
        CHECK(s.live_bytes == 26 * MiB);
        CHECK(s.reserved_bytes == 26 * MiB);
        CHECK(s.cached_bytes == 0);
        CHECK(s.allocations == 3);
        CHECK(s.calls[Api::address_reserve] == 1);           // one reservation for every segment
        CHECK(s.calls[Api::create] == 1 + 1 + 2);             // 2; 4; 16 + 4 (power-of-two chunks)
        CHECK(s.calls[Api::granularity] == 1);
        pool.free(b);
        const CUdeviceptr d = pool.allocate(4 * MiB);  // the lowest gap that fits: b's place
        CHECK(d == b);
        CHECK(pool.stats().cache_hits == 1);
        calls = pool.stats().calls;
        CHECK(calls[Api::create] == 4);  // b's chunk came back from the cache
    }  // the destructor unmaps the live segments, releases every chunk and frees the range
    CHECK(taken_since(start) == 0);
    CHECK(release_error_count() == refused);
}

TEST_CASE("the default address space is twice the device's memory", "[device_pool]") {
    setup();
    CUdevice dev = 0;
    std::size_t total = 0;
    REQUIRE(cuDeviceGet(&dev, 0) == CUDA_SUCCESS);
    REQUIRE(cuDeviceTotalMem(&total, dev) == CUDA_SUCCESS);
    DevicePool pool;
    CHECK(pool.stats().address_space_bytes == 2 * total);
    CHECK(pool.options().va_capacity == 2 * total);
    CHECK(pool.options().kind == HandleKind::posix_fd);
}

TEST_CASE("a segment grows in place keeping its address, until its neighbour is taken", "[device_pool]") {
    setup();
    const std::size_t start = free_bytes();
    DevicePool pool(small());
    const CUdeviceptr a = pool.allocate(2 * MiB);
    const auto before = pool.stats().calls;
    REQUIRE(pool.grow(a, 8 * MiB));
    CHECK(pool.size_of(a) == 8 * MiB);
    const auto grew = pool.stats().calls - before;
    CHECK(grew[Api::create] == 2);  // only the new 6 MiB: 4 + 2
    CHECK(grew[Api::map] == 2);
    CHECK(grew[Api::unmap] == 0);   // nothing already mapped moved
    CHECK(grew[Api::address_reserve] == 0);
    CHECK(taken_since(start) == mib(8));
    CHECK(pool.grow(a, 5 * MiB));   // already that large: nothing to do
    CHECK(pool.size_of(a) == 8 * MiB);

    const CUdeviceptr b = pool.allocate(2 * MiB);
    CHECK(b == a + 8 * MiB);  // right after a
    CHECK_FALSE(pool.grow(a, 16 * MiB));  // b is in the way: a stays as it was
    CHECK(pool.size_of(a) == 8 * MiB);
    CHECK(taken_since(start) == mib(10));

    pool.shrink(a, 2 * MiB);  // unmaps the last 2 and 4 MiB chunks; the address space after a comes free
    CHECK(pool.size_of(a) == 2 * MiB);
    const CUdeviceptr c = pool.allocate(6 * MiB);
    CHECK(c == a + 2 * MiB);  // into the space a gave back
    CHECK(pool.stats().cache_hits == 2);  // c is the 4 + 2 MiB chunks a gave back
    pool.shrink(a, 0);  // a segment keeps its first chunk: its address stays a segment's
    CHECK(pool.size_of(a) == 2 * MiB);

    pool.free(a);
    pool.free(b);
    pool.free(c);
    const DevicePoolStats s = pool.stats();
    CHECK(s.segments == 0);
    CHECK(s.live_bytes == 0);
    CHECK(s.cached_bytes == 10 * MiB);
    CHECK(taken_since(start) == mib(10));
    CHECK(pool.trim() == 10 * MiB);
    CHECK(taken_since(start) == 0);
    check_balanced(pool.stats().calls);
    const CUdeviceptr again = pool.allocate(10 * MiB);  // all address space free again: from the start
    CHECK(again == a);
    pool.free(again);
}

TEST_CASE("freed chunks are kept up to the cache's bound, and the rest released at once", "[device_pool]") {
    setup();
    const std::size_t start = free_bytes();
    SECTION("no cache: a free gives everything back") {
        DevicePool pool(small(0));
        pool.free(pool.allocate(48 * MiB));
        CHECK(taken_since(start) == 0);
        const DevicePoolStats s = pool.stats();
        CHECK(s.reserved_bytes == 0);
        CHECK(s.peak_reserved_bytes == 48 * MiB);
        CHECK(s.calls[Api::create] == 2);  // 32 + 16
        CHECK(s.calls[Api::release] == 2);
    }
    SECTION("a 40 MiB bound keeps the 16 MiB chunk (unmapped first, from the end) and releases the 32 MiB one") {
        DevicePool pool(small(40 * MiB));
        pool.free(pool.allocate(48 * MiB));
        CHECK(taken_since(start) == mib(16));
        CHECK(pool.stats().cached_bytes == 16 * MiB);
        pool.set_cache_limit(8 * MiB);  // a lower bound than what is kept: released
        CHECK(taken_since(start) == 0);
        CHECK(pool.stats().cached_bytes == 0);
        check_balanced(pool.stats().calls);
    }
}

TEST_CASE("out of memory: the cache goes back to the driver and the segment is tried once more",
          "[device_pool]") {
    setup();
    const std::size_t start = free_bytes();
    DevicePoolOptions o;
    o.va_capacity = 256 * GiB;
    o.max_chunk = 64 * GiB;
    o.cache_limit = 256 * GiB;
    DevicePool pool(o);
    // 40 GiB freed into the cache as 32 + 8 GiB chunks; then 70 GiB (64 + 4 + 2) matches none of them and
    // does not fit beside them.
    pool.free(pool.allocate(40 * GiB));
    CHECK(pool.stats().cached_bytes == 40 * GiB);
    REQUIRE(start >= 70 * GiB);  // the simulated device's 80 GiB, minus what other tests still hold
    const CUdeviceptr big = pool.allocate(70 * GiB);
    CHECK(pool.size_of(big) == 70 * GiB);
    DevicePoolStats s = pool.stats();
    CHECK(s.cached_bytes == 0);
    CHECK(s.failed_allocations == 0);
    CHECK(taken_since(start) == static_cast<long long>(70 * GiB));
    // Beyond the device even with the cache empty: refused, and nothing is left behind.
    CHECK_THROWS_MATCHES(pool.allocate(20 * GiB), PoolError,
                         Catch::Predicate<PoolError>([](const PoolError& e) { return e.result() == CUDA_ERROR_OUT_OF_MEMORY; }));
    s = pool.stats();
    CHECK(s.failed_allocations == 1);
    CHECK(s.segments == 1);
    CHECK(taken_since(start) == static_cast<long long>(70 * GiB));
    pool.free(big);
    pool.trim();
    CHECK(taken_since(start) == 0);
    const CUdeviceptr first = pool.allocate(2 * MiB);  // every range is free again: first fit is the start
    CHECK(first == big);
    pool.free(first);
}

TEST_CASE("misuse is refused with CUDA_ERROR_INVALID_VALUE and changes nothing", "[device_pool]") {
    setup();
    const std::size_t start = free_bytes();
    DevicePool pool(small());
    const CUdeviceptr a = pool.allocate(4 * MiB);
    auto invalid = Catch::Predicate<PoolError>([](const PoolError& e) { return e.result() == CUDA_ERROR_INVALID_VALUE; });
    CHECK_THROWS_MATCHES(pool.free(a + 2 * MiB), PoolError, invalid);  // inside a segment
    CHECK_THROWS_MATCHES(pool.free(0), PoolError, invalid);
    CHECK_THROWS_MATCHES(pool.allocate(0), PoolError, invalid);
    CHECK_THROWS_MATCHES(pool.grow(a + 1, 8 * MiB), PoolError, invalid);
    CHECK_THROWS_MATCHES(pool.shrink(a + 1, 0), PoolError, invalid);
    pool.free(a);
    CHECK_THROWS_MATCHES(pool.free(a), PoolError, invalid);  // a second free of the same segment
    const DevicePoolStats s = pool.stats();
    CHECK(s.bad_frees == 3);
    CHECK(s.frees == 1);
    CHECK(pool.trim() == 4 * MiB);
    CHECK(taken_since(start) == 0);
    CHECK_THROWS_MATCHES(pool.grow(a, 8 * MiB), PoolError, invalid);  // freed: no longer a segment
}

TEST_CASE("eight threads allocate, grow and free at once: no two live segments overlap", "[device_pool][threads]") {
    setup();
    const std::size_t start = free_bytes();
    CUcontext ctx = nullptr;
    REQUIRE(cuCtxGetCurrent(&ctx) == CUDA_SUCCESS);
    DevicePoolOptions o = small(64 * MiB);
    o.va_capacity = 8 * GiB;
    DevicePool pool(o);
    std::mutex mu;
    std::map<CUdeviceptr, std::size_t> live;  // what the threads hold, to check for overlaps
    int overlaps = 0, failures = 0;
    auto claim = [&](CUdeviceptr p, std::size_t n) {
        std::lock_guard lock(mu);
        auto next = live.lower_bound(p);
        if (next != live.end() && next->first < p + n) ++overlaps;
        if (next != live.begin() && std::prev(next)->first + std::prev(next)->second > p) ++overlaps;
        live[p] = n;
    };
    auto unclaim = [&](CUdeviceptr p) {
        std::lock_guard lock(mu);
        live.erase(p);
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&, t] {
            if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
                std::lock_guard lock(mu);
                ++failures;
                return;
            }
            std::mt19937 rng(static_cast<unsigned>(t) + 7);
            std::vector<CUdeviceptr> mine;
            try {
                for (int i = 0; i < 300; ++i) {
                    const unsigned op = rng() % 3;
                    if ((op == 0 && mine.size() < 16) || mine.size() < 2) {
                        const std::size_t n = (rng() % 12 + 1) * 2 * MiB;
                        const CUdeviceptr p = pool.allocate(n);
                        claim(p, pool.size_of(p));
                        mine.push_back(p);
                    } else if (op == 1) {
                        const CUdeviceptr p = mine[rng() % mine.size()];
                        unclaim(p);  // re-claimed at its new size, at the same address
                        (void)pool.grow(p, pool.size_of(p) + 2 * MiB);
                        claim(p, pool.size_of(p));
                    } else {
                        const std::size_t k = rng() % mine.size();
                        unclaim(mine[k]);
                        pool.free(mine[k]);
                        mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(k));
                    }
                }
                for (CUdeviceptr p : mine) {
                    unclaim(p);
                    pool.free(p);
                }
            } catch (const PoolError&) {
                std::lock_guard lock(mu);
                ++failures;
            }
        });
    }
    for (auto& th : threads) th.join();
    CHECK(failures == 0);
    CHECK(overlaps == 0);
    const DevicePoolStats s = pool.stats();
    CHECK(s.segments == 0);
    CHECK(s.live_bytes == 0);
    CHECK(s.allocations == s.frees);
    CHECK(s.cached_bytes <= 64 * MiB);
    CHECK(taken_since(start) == static_cast<long long>(s.cached_bytes));
    pool.trim();
    CHECK(taken_since(start) == 0);
    check_balanced(pool.stats().calls);
}
