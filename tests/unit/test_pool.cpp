// The pool's RAII types on the simulated driver (linked directly): each type's exact effect on the
// driver's reference counting, judged by the driver's own accounting — cuMemGetInfo's free figure, and
// CUDA_ERROR_INVALID_VALUE from a second release of a value the type says it released (so it held exactly
// one reference and let go of it exactly once). Also moves, errors and the misuse the compiler refuses.
// The pool itself (growth, cache, trim, threads, the symmetric exchange) is test_pool_growth.cpp.
#include "cumemaudit/fabric_pool.hpp"

#include <catch2/catch.hpp>
#include <cuda.h>
#include <fcntl.h>
#include <unistd.h>

#include <utility>

#include "pool_test_support.hpp"

using namespace cumemaudit::pool;

namespace {

using namespace pool_test;

// ---- misuse the type system refuses (checked at compile time; the test cases only run the rest)
template <class... A>
concept can_map = requires(A&&... a) { Mapping::create(std::forward<A>(a)...); };
static_assert(can_map<const Reservation&, std::size_t, const PhysicalChunk&>);
static_assert(can_map<const Reservation&, std::size_t, const ImportedHandle&>);
static_assert(!can_map<const Reservation&, std::size_t, CUmemGenericAllocationHandle>, "a raw handle cannot be mapped");
static_assert(!can_map<const Reservation&, std::size_t, PhysicalChunk&&>, "a temporary chunk cannot be mapped");
static_assert(!can_map<Reservation&&, std::size_t, const PhysicalChunk&>, "nor into a temporary reservation");
static_assert(!std::is_copy_constructible_v<PhysicalChunk> && !std::is_copy_assignable_v<PhysicalChunk>);
static_assert(!std::is_copy_constructible_v<ImportedHandle> && !std::is_copy_constructible_v<ExportedHandle>);
static_assert(!std::is_copy_constructible_v<Reservation> && !std::is_copy_constructible_v<Mapping>);
static_assert(!std::is_copy_constructible_v<Buffer> && !std::is_copy_constructible_v<PeerView>);
static_assert(std::is_nothrow_move_constructible_v<PhysicalChunk> && std::is_nothrow_move_assignable_v<Mapping>);
static_assert(std::is_nothrow_destructible_v<PhysicalChunk> && std::is_nothrow_destructible_v<Mapping>);
static_assert(!std::is_convertible_v<CUmemGenericAllocationHandle, PhysicalChunk>, "no implicit adoption of raw values");
static_assert(!std::is_constructible_v<PhysicalChunk, CUmemGenericAllocationHandle>);
static_assert(!std::is_constructible_v<ImportedHandle, CUmemGenericAllocationHandle>);
static_assert(!std::is_convertible_v<PhysicalChunk, CUmemGenericAllocationHandle>, "no implicit escape either");
static_assert(!std::is_convertible_v<int, ExportedHandle>, "an fd is adopted only by name (adopt_fd)");
static_assert(!std::is_assignable_v<PhysicalChunk&, ImportedHandle&&>, "references of different kinds do not mix");

}  // namespace

TEST_CASE("PhysicalChunk holds exactly one reference and releases it once", "[pool][raii]") {
    setup();
    const std::size_t start = free_bytes();
    CUmemGenericAllocationHandle raw = 0;
    {
        PhysicalChunk c = PhysicalChunk::create(0, 4 * MiB, HandleKind::fabric);
        REQUIRE(c);
        CHECK(c.size() == 4 * MiB);
        CHECK(c.device() == 0);
        CHECK(c.kind() == HandleKind::fabric);
        raw = c.raw();
        CHECK(taken_since(start) == static_cast<long long>(4 * MiB));
    }
    CHECK(taken_since(start) == 0);  // more than one reference would keep it
    CHECK(cuMemRelease(raw) == CUDA_ERROR_INVALID_VALUE);  // and it was released, once

    SECTION("reset releases early, and only once") {
        PhysicalChunk c = PhysicalChunk::create(0, 2 * MiB, HandleKind::posix_fd);
        const auto h = c.raw();
        c.reset();
        CHECK(!c);
        CHECK(taken_since(start) == 0);
        CHECK(cuMemRelease(h) == CUDA_ERROR_INVALID_VALUE);
        c.reset();  // nothing left: no call, no error
    }
}

TEST_CASE("moving a chunk hands the reference over", "[pool][raii]") {
    setup();
    const std::size_t start = free_bytes();
    const auto before = global_call_counts();
    PhysicalChunk a = PhysicalChunk::create(0, 2 * MiB, HandleKind::fabric);
    const auto h = a.raw();
    PhysicalChunk b = std::move(a);
    CHECK(!a);
    CHECK(a.raw() == 0);
    CHECK(b.raw() == h);
    a = PhysicalChunk{};  // destroying the moved-from husk calls nothing
    CHECK(taken_since(start) == static_cast<long long>(2 * MiB));

    SECTION("move assignment releases the reference it replaces") {
        PhysicalChunk c = PhysicalChunk::create(0, 4 * MiB, HandleKind::fabric);
        CHECK(taken_since(start) == static_cast<long long>(6 * MiB));
        c = std::move(b);
        CHECK(taken_since(start) == static_cast<long long>(2 * MiB));
        CHECK(c.raw() == h);
        c.reset();
    }
    SECTION("self-move keeps it") {
        PhysicalChunk& self = b;
        b = std::move(self);
        CHECK(b.raw() == h);
        b.reset();
    }
    CHECK(taken_since(start) == 0);
    const auto calls = global_call_counts() - before;
    CHECK(calls[Api::release] == calls[Api::create]);
}

TEST_CASE("a POSIX export pins the memory until its fd is closed, once", "[pool][raii]") {
    setup();
    const std::size_t start = free_bytes();
    PhysicalChunk c = PhysicalChunk::create(0, 4 * MiB, HandleKind::posix_fd);
    ExportedHandle e = c.export_handle();
    REQUIRE(e);
    CHECK(e.kind() == HandleKind::posix_fd);
    CHECK(e.size() == 4 * MiB);
    const int fd = e.fd();
    REQUIRE(fd >= 0);
    c.reset();
    CHECK(taken_since(start) == static_cast<long long>(4 * MiB));  // the open fd holds it
    ExportedHandle moved = std::move(e);
    CHECK(e.fd() == -1);
    CHECK(!e);
    e.reset();  // the husk closes nothing
    CHECK(::fcntl(fd, F_GETFD) != -1);
    moved.reset();
    CHECK(::fcntl(fd, F_GETFD) == -1);  // closed
    CHECK(taken_since(start) == 0);
}

TEST_CASE("release_fd gives the fd away; adopt_fd takes one back", "[pool][raii]") {
    setup();
    const std::size_t start = free_bytes();
    PhysicalChunk c = PhysicalChunk::create(0, 2 * MiB, HandleKind::posix_fd);
    int fd = -1;
    {
        ExportedHandle e = c.export_handle();
        fd = e.release_fd();
    }
    CHECK(::fcntl(fd, F_GETFD) != -1);  // not closed by the handle that gave it away
    c.reset();
    CHECK(taken_since(start) == static_cast<long long>(2 * MiB));
    {
        ExportedHandle adopted = ExportedHandle::adopt_fd(fd, 2 * MiB, 0);
        ImportedHandle imp = ImportedHandle::open(adopted);  // the receiving side's view
        CHECK(imp.size() == 2 * MiB);
    }
    CHECK(::fcntl(fd, F_GETFD) == -1);
    CHECK(taken_since(start) == 0);
}

TEST_CASE("a fabric export is a name: it pins nothing and closes nothing", "[pool][raii]") {
    setup();
    const std::size_t start = free_bytes();
    PhysicalChunk c = PhysicalChunk::create(0, 2 * MiB, HandleKind::fabric);
    ExportedHandle e = c.export_handle();
    CHECK(e.kind() == HandleKind::fabric);
    CHECK(e.fd() == -1);
    c.reset();
    CHECK(taken_since(start) == 0);
    CHECK_THROWS_AS(ImportedHandle::open(e), PoolError);  // the allocation is gone: the name names nothing
}

TEST_CASE("ImportedHandle holds one import reference of its own", "[pool][raii]") {
    setup();
    const std::size_t start = free_bytes();
    for (HandleKind kind : {HandleKind::fabric, HandleKind::posix_fd}) {
        PhysicalChunk c = PhysicalChunk::create(0, 6 * MiB, kind);
        ImportedHandle imp;
        {
            ExportedHandle e = c.export_handle();
            imp = ImportedHandle::open(e);
        }  // the fd is closed: only the two references remain
        REQUIRE(imp);
        CHECK(imp.raw() != c.raw());  // a new value, even in the exporting process
        CHECK(imp.size() == 6 * MiB);
        CHECK(imp.kind() == kind);
        c.reset();
        CHECK(taken_since(start) == static_cast<long long>(6 * MiB));  // the import keeps it
        const auto h = imp.raw();
        ImportedHandle moved = std::move(imp);
        CHECK(!imp);
        moved.reset();
        CHECK(taken_since(start) == 0);
        CHECK(cuMemRelease(h) == CUDA_ERROR_INVALID_VALUE);
    }
}

TEST_CASE("Reservation frees its range once", "[pool][raii]") {
    setup();
    CUdeviceptr va = 0;
    std::size_t size = 0;
    {
        Reservation r = Reservation::create(64 * MiB);
        REQUIRE(r);
        va = r.base();
        size = r.size();
        CHECK(size == 64 * MiB);
        Reservation moved = std::move(r);
        CHECK(!r);
        CHECK(moved.base() == va);
    }
    CHECK(cuMemAddressFree(va, size) == CUDA_ERROR_INVALID_VALUE);  // already freed, by exactly one owner
}

TEST_CASE("Mapping maps with access, unmaps once, and borrows its chunk", "[pool][raii]") {
    setup();
    const std::size_t start = free_bytes();
    Reservation r = Reservation::create(16 * MiB);
    PhysicalChunk c = PhysicalChunk::create(0, 4 * MiB, HandleKind::fabric);
    const auto h = c.raw();
    CUdeviceptr at = 0;
    {
        Mapping m = Mapping::create(r, 8 * MiB, c);
        REQUIRE(m);
        at = m.ptr();
        CHECK(at == r.base() + 8 * MiB);
        CHECK(m.size() == 4 * MiB);
        CUmemLocation loc{};
        loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
        loc.id = 0;
        unsigned long long flags = 0;
        CHECK(cuMemGetAccess(&flags, &loc, at) == CUDA_SUCCESS);
        CHECK(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        c.reset();  // the driver keeps mapped memory until the unmap
        CHECK(taken_since(start) == static_cast<long long>(4 * MiB));
        CHECK(cuMemRelease(h) == CUDA_ERROR_INVALID_VALUE);  // the chunk's one reference is gone...
    }
    CHECK(taken_since(start) == 0);                               // ...and the unmap freed the memory
    // Unmapped: nothing maps the range any more (a second unmap would not tell, the real driver accepts it).
    CHECK(cuMemGetAddressRange(nullptr, nullptr, at) == CUDA_ERROR_NOT_FOUND);
    r.reset();
    CHECK(!r);
}

TEST_CASE("Mapping refuses ranges outside its reservation", "[pool][raii]") {
    setup();
    Reservation r = Reservation::create(4 * MiB);
    PhysicalChunk c = PhysicalChunk::create(0, 4 * MiB, HandleKind::fabric);
    try {
        (void)Mapping::create(r, 2 * MiB, c);
        FAIL("mapped past the end");
    } catch (const PoolError& e) {
        CHECK(e.result() == CUDA_ERROR_INVALID_VALUE);
        CHECK(std::string(e.api()) == "cuMemMap");
    }
    const PhysicalChunk empty;
    CHECK_THROWS_AS(Mapping::create(r, 0, empty), PoolError);
}

TEST_CASE("factories throw PoolError with the result and the API", "[pool][raii]") {
    setup();
    try {
        (void)PhysicalChunk::create(0, 3 * MiB, HandleKind::fabric);  // not a granularity multiple
        FAIL("created");
    } catch (const PoolError& e) {
        CHECK(e.result() == CUDA_ERROR_INVALID_VALUE);
        CHECK(std::string(e.api()) == "cuMemCreate");
        CHECK(std::string(e.what()).find("CUDA_ERROR_INVALID_VALUE") != std::string::npos);
    }
    CHECK_THROWS_AS(PhysicalChunk::create(0, std::size_t{1} << 50, HandleKind::fabric), PoolError);
    CHECK(granularity(0, HandleKind::fabric) == 2 * MiB);
}

namespace {
CUresult g_seen_result = CUDA_SUCCESS;
const char* g_seen_api = nullptr;
void record(CUresult r, const char* api) noexcept {
    g_seen_result = r;
    g_seen_api = api;
}
}  // namespace

TEST_CASE("a failed release in a destructor goes to the handler, never throws", "[pool][raii]") {
    setup();
    set_release_error_handler(&record);
    const auto errors = release_error_count();
    {
        Reservation r = Reservation::create(4 * MiB);
        REQUIRE(cuMemAddressFree(r.base(), r.size()) == CUDA_SUCCESS);  // behind its back
    }
    CHECK(release_error_count() == errors + 1);
    CHECK(g_seen_result == CUDA_ERROR_INVALID_VALUE);
    CHECK(std::string(g_seen_api) == "cuMemAddressFree");
    set_release_error_handler(nullptr);
}
