// PoolFabricAllocator (include/cumemaudit/deepep_adapter.hpp) on the simulated driver: DeepEP's growth
// sequence through its five methods — free and close_handle the old buffer set, allocate, get_handle,
// open_handle the new one (the peer is this same process) — holds exactly the current buffer after every
// growth and nothing at the end, for either handle kind; the three references of DeepEP issue 799 cannot
// outlive the adapter; POSIX fds are closed exactly once; misuse is refused and changes nothing.
#include "cumemaudit/deepep_adapter.hpp"

#include <catch2/catch.hpp>
#include <cuda.h>
#include <dirent.h>

#include <vector>

#include "pool_test_support.hpp"

using namespace cumemaudit::pool;

namespace {

using namespace pool_test;

int open_fds() {
    int n = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
        while (readdir(d) != nullptr) ++n;
        closedir(d);
    }
    return n;
}

PoolOptions no_cache(HandleKind kind) {
    PoolOptions o;
    o.kind = kind;
    o.va_capacity = 1024 * MiB;
    o.max_chunk = 64 * MiB;
    o.cache_limit = 0;  // every free goes back to the driver, so the figures show each reference
    return o;
}

// Every creation and every import was released exactly once, and the pool never retained a handle.
void check_every_reference_released(const CallCounts& c) {
    CHECK(c[Api::release] == c[Api::create] + c[Api::import_handle]);
    CHECK(c[Api::unmap] == c[Api::map]);
    CHECK(c[Api::address_free] == c[Api::address_reserve]);
}

}  // namespace

TEST_CASE("DeepEP's growth sequence through the adapter holds exactly the current buffer", "[deepep_adapter]") {
    setup();
    for (HandleKind kind : {HandleKind::fabric, HandleKind::posix_fd}) {
        const std::size_t start = free_bytes();
        const int fds = open_fds();
        FabricPool pool(no_cache(kind));
        PoolFabricAllocator alloc(pool);
        void* local = nullptr;
        void* peer = nullptr;
        for (std::size_t step = 1; step <= 3; ++step) {  // 24, 48, 72 MiB: new tokens-per-rank highs
            if (local != nullptr) {  // update_buffer: release the old set, then allocate
                alloc.free(local);
                alloc.close_handle(peer);
            }
            local = alloc.allocate(step * 24 * MiB);
            {
                std::vector<ExportedHandle> handles = alloc.get_handle(local);
                CHECK(handles.size() == 2);  // 16+8, 32+16, 64+8 MiB chunks
                peer = alloc.open_handle(handles);
            }  // what a peer does once it imported: closes the handles
            CHECK(peer != local);
            CHECK(taken_since(start) == static_cast<long long>(step * 24 * MiB));  // the peer maps the same memory
            CHECK(open_fds() == fds);  // no fd outlives its ExportedHandle
            CHECK(alloc.allocated() == 1);
            CHECK(alloc.opened() == 1);
        }
        alloc.free(local);
        alloc.close_handle(peer);
        CHECK(taken_since(start) == 0);
        const CallCounts c = pool.stats().calls;
        check_every_reference_released(c);
        CHECK(c[Api::export_handle] == 6);
        CHECK(c[Api::import_handle] == 6);
    }
}

TEST_CASE("what is left allocated or open when the adapter goes is released, peers first", "[deepep_adapter]") {
    setup();
    const std::size_t start = free_bytes();
    const std::uint64_t refused = release_error_count();
    FabricPool pool(no_cache(HandleKind::posix_fd));
    {
        PoolFabricAllocator alloc(pool);
        void* local = alloc.allocate(40 * MiB);
        (void)alloc.open_handle(alloc.get_handle(local));
        (void)alloc.allocate(6 * MiB);
        CHECK(taken_since(start) == static_cast<long long>(46 * MiB));
    }  // neither free nor close_handle was called
    CHECK(taken_since(start) == 0);
    CHECK(release_error_count() == refused);  // the import was unmapped and released before its exporter
    check_every_reference_released(pool.stats().calls);
}

TEST_CASE("the adapter refuses pointers it did not hand out, and changes nothing", "[deepep_adapter]") {
    setup();
    const std::size_t start = free_bytes();
    FabricPool pool(no_cache(HandleKind::fabric));
    PoolFabricAllocator alloc(pool);
    void* local = alloc.allocate(2 * MiB);
    void* peer = alloc.open_handle(alloc.get_handle(local));
    auto invalid = Catch::Predicate<PoolError>([](const PoolError& e) { return e.result() == CUDA_ERROR_INVALID_VALUE; });
    CHECK_THROWS_MATCHES(alloc.free(peer), PoolError, invalid);          // a peer buffer is closed, not freed
    CHECK_THROWS_MATCHES(alloc.close_handle(local), PoolError, invalid);  // and a local one freed, not closed
    CHECK_THROWS_MATCHES(alloc.get_handle(peer), PoolError, invalid);
    CHECK_THROWS_MATCHES(alloc.open_handle({}), PoolError, invalid);
    CHECK(taken_since(start) == static_cast<long long>(2 * MiB));
    alloc.close_handle(peer);
    alloc.free(local);
    CHECK_THROWS_MATCHES(alloc.free(local), PoolError, invalid);  // a second free
    CHECK(taken_since(start) == 0);
}
