// The pool book: pools learnt from their creation and from marks, the driver's figures kept per pool and
// summed per device, host pools told apart on the allocation path, and the cap on pools kept.
#include "shim/record/pool_book.hpp"

#include <catch2/catch.hpp>

#include <map>

using namespace cumemaudit;

namespace {

CUmemoryPool handle(std::uintptr_t n) { return reinterpret_cast<CUmemoryPool>(n); }

std::map<CUmemoryPool, shim::PoolFigures> g_answers;
shim::PoolFigures ask(CUmemoryPool p) {
    auto it = g_answers.find(p);
    return it == g_answers.end() ? shim::PoolFigures{} : it->second;
}

CUmemPoolProps located(CUmemLocationType type, int id) {
    CUmemPoolProps p{};
    p.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = type;
    p.location.id = id;
    return p;
}

}  // namespace

// The pools as a report would get them.
std::vector<history::Pool> pools(const shim::PoolBook& book) {
    history::History h;
    book.copy_to(h);
    return h.pools;
}

TEST_CASE("a pool's idle bytes are its reserved bytes no allocation uses, summed over a device's pools") {
    shim::PoolBook book;
    book.seen_default(handle(0x10), 0, 0);
    book.created(handle(0x20), located(CU_MEM_LOCATION_TYPE_DEVICE, 0), ledger::Site{"cuMemPoolCreate", 0, 0}, 3);
    book.created(handle(0x30), located(CU_MEM_LOCATION_TYPE_DEVICE, 1), ledger::Site{"cuMemPoolCreate", 0, 0}, 3);
    g_answers = {{handle(0x10), {true, 64u << 20, 0, 64u << 20}},
                 {handle(0x20), {true, 4096ull << 20, 256u << 20, 4096ull << 20}},
                 {handle(0x30), {true, 32u << 20, 32u << 20, 32u << 20}}};
    const shim::PoolBook::Sums s = book.look(ask, 0);
    CHECK(s.reserved == (4160ull << 20));
    CHECK(s.used == (256u << 20));
    CHECK(s.idle() == (3904ull << 20));
    CHECK(book.look(ask, 1).idle() == 0);

    const auto rows = pools(book);
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].origin == "default");
    CHECK(rows[0].location == "device 0");
    CHECK(rows[1].id == 2);
    CHECK(rows[1].idle_bytes == (3840ull << 20));
    CHECK(rows[1].step == 3);
    CHECK(rows[2].location == "device 1");
    CHECK(book.id_of(handle(0x20)) == 2);
    CHECK(book.device_of(handle(0x30)) == 1);

    // A destroyed pool is no longer asked about and no longer in the device's sums; its row stays.
    book.destroyed(handle(0x20));
    CHECK(book.look(ask, 0).reserved == (64u << 20));
    CHECK(pools(book)[1].destroyed);
    CHECK(book.id_of(handle(0x20)) == 0);
}

TEST_CASE("a pool the driver will not describe keeps its last figures, and a default pool is learnt once") {
    shim::PoolBook book;
    book.seen_default(handle(0x10), 0, 0);
    book.seen_default(handle(0x10), 0, 5);
    g_answers = {{handle(0x10), {true, 32u << 20, 0, 32u << 20}}};
    book.look(ask, 0);
    g_answers.clear();
    CHECK(book.look(ask, 0).reserved == (32u << 20));
    CHECK(pools(book).size() == 1);
    CHECK(book.last(0).idle() == (32u << 20));
}

TEST_CASE("pools off the device are told apart without a lock, and stop being so once destroyed") {
    shim::PoolBook book;
    book.created(handle(0x40), located(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0), ledger::Site{"cuMemPoolCreate", 0, 0}, 0);
    book.created(handle(0x50), located(CU_MEM_LOCATION_TYPE_DEVICE, 0), ledger::Site{"cuMemPoolCreate", 0, 0}, 0);
    CUmemPoolProps managed = located(CU_MEM_LOCATION_TYPE_NONE, 0);
    managed.allocType = CU_MEM_ALLOCATION_TYPE_MANAGED;
    book.created(handle(0x60), managed, ledger::Site{"cuMemPoolCreate", 0, 0}, 0);
    managed.location = located(CU_MEM_LOCATION_TYPE_DEVICE, 0).location;  // on the device: device memory (measured)
    book.created(handle(0x70), managed, ledger::Site{"cuMemPoolCreate", 0, 0}, 0);
    CHECK(book.allocation_kind(handle(0x40)) == ledger::Kind::async_pool_host);
    CHECK(book.allocation_kind(handle(0x50)) == ledger::Kind::async_pool);
    CHECK(book.allocation_kind(handle(0x60)) == ledger::Kind::managed);
    CHECK(book.allocation_kind(handle(0x70)) == ledger::Kind::async_pool);
    CHECK(pools(book)[0].location == "host NUMA 0");
    CHECK(pools(book)[0].device == -1);
    CHECK(pools(book)[2].location == "managed");
    CHECK(pools(book)[3].location == "managed, device 0");
    CHECK(pools(book)[3].device == 0);
    book.destroyed(handle(0x40));
    CHECK(book.allocation_kind(handle(0x40)) == ledger::Kind::async_pool);
}

TEST_CASE("a pool a getter names is a location's default pool, once; one created keeps its row") {
    shim::PoolBook book;
    CUmemLocation host{};
    host.type = CU_MEM_LOCATION_TYPE_HOST;
    book.named(handle(0x80), host, CU_MEM_ALLOCATION_TYPE_PINNED, ledger::Site{"cuMemGetDefaultMemPool", 0, 0}, 2);
    book.named(handle(0x80), host, CU_MEM_ALLOCATION_TYPE_PINNED, ledger::Site{"cuMemGetMemPool", 0, 0}, 3);
    book.created(handle(0x90), located(CU_MEM_LOCATION_TYPE_HOST, 0), ledger::Site{"cuMemPoolCreate", 0, 0}, 4);
    book.named(handle(0x90), host, CU_MEM_ALLOCATION_TYPE_PINNED, ledger::Site{"cuMemSetMemPool", 0, 0}, 5);
    REQUIRE(pools(book).size() == 2);
    CHECK(pools(book)[0].origin == "default");
    CHECK(pools(book)[0].location == "host");
    CHECK(pools(book)[0].step == 2);
    CHECK(pools(book)[1].origin == "created");
    CHECK(book.allocation_kind(handle(0x80)) == ledger::Kind::async_pool_host);
    CHECK(book.allocation_kind(handle(0x90)) == ledger::Kind::async_pool_host);
}

TEST_CASE("pools past the cap are counted, not kept") {
    shim::PoolBook book;
    for (std::uintptr_t i = 1; i <= history::kPoolsKept + 3; ++i)
        book.created(handle(i * 16), located(CU_MEM_LOCATION_TYPE_DEVICE, 0), ledger::Site{"cuMemPoolCreate", 0, 0}, 0);
    CHECK(pools(book).size() == history::kPoolsKept);
    history::History h;
    book.copy_to(h);
    CHECK(h.untracked_pools == 3);
}
