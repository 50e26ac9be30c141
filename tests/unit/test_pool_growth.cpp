// FabricPool on the simulated driver (linked directly): growth in place (the address stays, only the new
// bytes are created and mapped), reuse from the cache, trim returning memory exactly, the cache's bound,
// four threads sharing one cache, and the symmetric exchange releasing every reference. Figures come from
// the driver's cuMemGetInfo and from the pool's own count of the driver calls it made.
#include "cumemaudit/fabric_pool.hpp"

#include <catch2/catch.hpp>
#include <cuda.h>

#include <random>
#include <thread>
#include <vector>

#include "pool_test_support.hpp"

using namespace cumemaudit::pool;

namespace {

using namespace pool_test;
long long mib(std::size_t n) { return static_cast<long long>(n * MiB); }

// Fails the test case unless no destructor saw the driver refuse a release (an unmap, an address free, a
// release) while it ran: counts of calls balance even when one of them failed.
struct ReleaseErrorsUnchanged {
    std::uint64_t at = release_error_count();
    ~ReleaseErrorsUnchanged() { CHECK(release_error_count() == at); }
};

PoolOptions small(HandleKind kind = HandleKind::fabric) {
    PoolOptions o;
    o.kind = kind;
    o.va_capacity = 1024 * MiB;
    o.max_chunk = 256 * MiB;
    o.cache_limit = 1024 * MiB;
    return o;
}

}  // namespace

TEST_CASE("a buffer grows in place: same address, only the new bytes created and mapped", "[pool][growth]") {
    setup();
    const ReleaseErrorsUnchanged no_refused_release;
    const std::size_t start = free_bytes();
    for (HandleKind kind : {HandleKind::fabric, HandleKind::posix_fd}) {
        {
            FabricPool pool(small(kind));
            Buffer b = pool.create_buffer(64 * MiB);
            const CUdeviceptr base = b.ptr();
            CHECK(b.size() == 64 * MiB);
            CHECK(b.capacity() == 1024 * MiB);
            CHECK(taken_since(start) == mib(64));
            auto calls = pool.stats().calls;
            CHECK(calls[Api::address_reserve] == 1);
            CHECK(calls[Api::create] == 1);

            for (std::size_t high : {128, 192, 200}) {  // DeepEP's new tokens-per-rank highs, then a small one
                const auto before = pool.stats().calls;
                const std::size_t old = b.size();
                b.grow_to(high * MiB);
                const auto d = pool.stats().calls - before;
                CHECK(b.ptr() == base);
                CHECK(b.size() == high * MiB);
                CHECK(taken_since(start) == mib(high));  // exactly the new bytes, nothing released, nothing doubled
                CHECK(d[Api::create] == 1);  // 64, 64 and 8 MiB: one power-of-two chunk each
                CHECK(d[Api::map] == 1);
                CHECK(d[Api::set_access] == 1);
                CHECK(d[Api::release] == 0);
                CHECK(d[Api::unmap] == 0);
                CHECK(d[Api::address_reserve] == 0);
                CHECK(b.chunk(b.chunk_count() - 1).size() == high * MiB - old);
            }
            const auto before = pool.stats().calls;
            b.grow_to(100 * MiB);  // not a new high: nothing
            CHECK((pool.stats().calls - before).total() == 0);
            CHECK(pool.stats().live_bytes == 200 * MiB);
            CHECK(pool.stats().peak_bytes == 200 * MiB);

            b.grow_to(201 * MiB);  // rounded up to the granularity
            CHECK(b.size() == 202 * MiB);
            CHECK_THROWS_AS(b.grow_to(1025 * MiB), PoolError);  // past the reservation
            CHECK(b.ptr() == base);
        }
        CHECK(taken_since(start) == 0);  // the pool's destructor trimmed what the buffer returned
    }
}

TEST_CASE("a growth is cut into power-of-two chunks capped at max_chunk", "[pool][growth]") {
    setup();
    const ReleaseErrorsUnchanged no_refused_release;
    PoolOptions o = small();
    o.max_chunk = 32 * MiB;
    FabricPool pool(o);
    Buffer b = pool.create_buffer(102 * MiB);  // 32+32+32+4+2
    REQUIRE(b.chunk_count() == 5);
    const std::size_t want[] = {32, 32, 32, 4, 2};
    for (std::size_t i = 0; i < 5; ++i) CHECK(b.chunk(i).size() == want[i] * MiB);
}

TEST_CASE("freed chunks are reused, and trim returns them exactly", "[pool][cache]") {
    setup();
    const ReleaseErrorsUnchanged no_refused_release;
    const std::size_t start = free_bytes();
    FabricPool pool(small());
    {
        Buffer a = pool.create_buffer(96 * MiB);  // 64 + 32
        CHECK(taken_since(start) == mib(96));
    }
    auto s = pool.stats();
    CHECK(s.live_bytes == 0);
    CHECK(s.cached_bytes == 96 * MiB);
    CHECK(taken_since(start) == mib(96));  // kept by the pool, not given back to the driver

    const auto before = pool.stats().calls;
    {
        Buffer b = pool.create_buffer(96 * MiB);
        const auto d = pool.stats().calls - before;
        CHECK(d[Api::create] == 0);  // both chunks came from the cache
        CHECK(pool.stats().cache_hits == 2);
        CHECK(taken_since(start) == mib(96));
        Buffer c = pool.create_buffer(32 * MiB, BufferOptions{{}, HandleKind::posix_fd});  // another handle kind: not shared
        CHECK((pool.stats().calls - before)[Api::create] == 1);
        CHECK(taken_since(start) == mib(128));
        b.shrink_to(40 * MiB);  // the 32 MiB tail goes back; 64 still covers 40
        CHECK(b.size() == 64 * MiB);
        CHECK(pool.stats().cached_bytes == 32 * MiB);
    }
    CHECK(pool.stats().cached_bytes == 128 * MiB);
    const auto released_before = pool.stats().calls[Api::release];
    CHECK(pool.trim() == 128 * MiB);
    CHECK(pool.stats().calls[Api::release] - released_before == 3);
    CHECK(pool.stats().cached_bytes == 0);
    CHECK(taken_since(start) == 0);
    CHECK(pool.trim() == 0);
}

TEST_CASE("the cache keeps no more than its bound", "[pool][cache]") {
    setup();
    const ReleaseErrorsUnchanged no_refused_release;
    const std::size_t start = free_bytes();
    PoolOptions o = small();
    o.cache_limit = 48 * MiB;
    FabricPool pool(o);
    {
        Buffer b = pool.create_buffer(96 * MiB);  // 64 + 32: the 32 fits the bound, the 64 then does not
    }
    CHECK(pool.stats().cached_bytes == 32 * MiB);
    CHECK(taken_since(start) == mib(32));
    {
        Buffer b = pool.create_buffer(16 * MiB);
        Buffer c = pool.create_buffer(16 * MiB);
    }
    CHECK(pool.stats().cached_bytes == 48 * MiB);  // 32 + 16; the second 16 would pass the bound
    CHECK(pool.stats().peak_bytes == 96 * MiB);
    pool.trim();
    CHECK(taken_since(start) == 0);
}

TEST_CASE("a buffer outliving its pool still returns everything", "[pool][cache]") {
    setup();
    const ReleaseErrorsUnchanged no_refused_release;
    const std::size_t start = free_bytes();
    Buffer b;
    {
        FabricPool pool(small());
        b = pool.create_buffer(10 * MiB);
    }
    CHECK(taken_since(start) == mib(10));
    b = Buffer{};  // back to the (now orphaned) cache, released with it
    CHECK(taken_since(start) == 0);
}

TEST_CASE("four threads grow and shrink their own buffers over one shared cache", "[pool][threads]") {
    setup();
    const ReleaseErrorsUnchanged no_refused_release;
    const std::size_t start = free_bytes();
    CUcontext ctx = nullptr;
    REQUIRE(cuCtxGetCurrent(&ctx) == CUDA_SUCCESS);
    PoolOptions o = small();
    o.max_chunk = 16 * MiB;
    o.cache_limit = 96 * MiB;
    FabricPool pool(o);
    std::vector<std::thread> threads;
    std::vector<int> failures(4, 0);
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
                ++failures[t];
                return;
            }
            std::mt19937 rng(static_cast<unsigned>(t) + 1);
            try {
                Buffer b = pool.create_buffer(2 * MiB);
                const CUdeviceptr base = b.ptr();
                for (int i = 0; i < 200; ++i) {
                    const std::size_t want = (rng() % 40 + 1) * 2 * MiB;
                    if (rng() % 2) b.grow_to(want);
                    else b.shrink_to(want);
                    if (b.ptr() != base) ++failures[t];
                }
            } catch (const PoolError&) {
                ++failures[t];
            }
        });
    }
    for (auto& th : threads) th.join();
    CHECK(failures == std::vector<int>(4, 0));
    const auto s = pool.stats();
    CHECK(s.live_bytes == 0);
    CHECK(s.cached_bytes <= 96 * MiB);
    CHECK(s.cache_hits > 0);
    CHECK(taken_since(start) == static_cast<long long>(s.cached_bytes));
    pool.trim();
    CHECK(taken_since(start) == 0);  // exactly the start figure
    CHECK(s.calls[Api::address_reserve] == 4);
}

TEST_CASE("the symmetric exchange maps every peer and releases every reference", "[pool][symmetric]") {
    setup();
    const ReleaseErrorsUnchanged no_refused_release;
    const std::size_t start = free_bytes();
    for (HandleKind kind : {HandleKind::fabric, HandleKind::posix_fd}) {
        const auto global_before = global_call_counts();
        FabricPool pool(small(kind));
        {
            SymmetricBuffer sym(pool, 64 * MiB, 2);
            for (std::size_t high : {64, 128, 192}) {
                sym.grow_to(high * MiB);
                std::vector<ExportedHandle> mine = sym.export_new();
                CHECK(mine.size() == 1);  // only the chunk added since the last exchange
                // One process stands in for both peers: each opens the handles "it received".
                sym.open_peer(0, mine);
                sym.open_peer(1, mine);
                CHECK(sym.peer(0).size() == high * MiB);
                CHECK(sym.peer(1).size() == high * MiB);
                CHECK(sym.local().size() == high * MiB);
                CHECK(taken_since(start) == mib(high));  // imports of one's own memory cost nothing more
            }  // the exported fds are closed here, as a peer does once it has imported
            const CUdeviceptr p0 = sym.peer(0).ptr();
            CUdeviceptr base = 0;
            std::size_t size = 0;
            REQUIRE(cuMemGetAddressRange(&base, &size, p0 + 100 * MiB) == CUDA_SUCCESS);
            CHECK(base == p0 + 64 * MiB);  // the second chunk, mapped contiguously after the first
            sym.close();
            CHECK(pool.stats().live_bytes == 0);
            CHECK(sym.export_new().empty());
        }
        CHECK(pool.trim() == 192 * MiB);
        CHECK(taken_since(start) == 0);
        const auto d = global_call_counts() - global_before;
        CHECK(d[Api::release] == d[Api::create] + d[Api::import_handle]);  // every reference, once
        CHECK(d[Api::import_handle] == 6);
        CHECK(d[Api::unmap] == d[Api::map]);
        CHECK(d[Api::address_free] == d[Api::address_reserve]);
    }
}
