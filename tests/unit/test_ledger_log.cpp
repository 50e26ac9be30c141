// The allocating thread's log (change_log.hpp): the thread the ledger's lock is biased to appends its classic
// allocations and frees, and whoever takes the lock next applies them. Every figure a reader sees must be
// exactly what recording each call directly gives: bytes, peaks between marks, epochs, sites, and the order
// between one thread's free and another's allocation of the pointer the driver handed out again.
#include "ledger/ledger.hpp"
#include "reusing_driver.hpp"
#include "ledger/spin_lock.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

using namespace cumemaudit::ledger;

namespace {

constexpr std::uint64_t MiB = 1ull << 20;
constexpr Ledger::FreeTicket kSince = 1u << 31;  // a ticket since a count: the log's thread's (classic_table.hpp)
const ExportProbe kAllOpen = [](int, const ExportKey&) { return true; };

Site site(const char* api, TraceId trace = 0, OwnerId owner = 0) { return Site{api, trace, owner}; }

// Makes this thread the one the ledger's lock is biased to, so that its classic changes go to the log: one
// byte allocated and freed as often as the lock's claim takes, by an owner of its own.
void become_the_log_thread(Ledger& l) {
    const OwnerId warm = l.owner_id("warm-up");
    for (int i = 0; i < detail::SpinLock::kClaimStreak; ++i) {
        l.allocated(0xF000000000, 1, Kind::classic, site("cuMemAlloc_v2", 99, warm));
        l.freed(0xF000000000, true, "CUDA_SUCCESS", site("cuMemFree_v2"), l.freeing(0xF000000000));
    }
    REQUIRE((l.freeing(0xF000000000) & kSince) != 0);  // on a kernel without membarrier there is no bias
    l.take_peak_since_mark();
}

std::uint64_t live_of(const Ledger& l, OwnerId o) {
    for (const auto& [owner, bytes] : l.live_by_owner())
        if (owner == o) return bytes;
    return 0;
}

}  // namespace

TEST_CASE("the log's changes are applied before every read: live bytes, peaks, sites and epochs exact") {
    Ledger l;
    become_the_log_thread(l);
    const OwnerId torch = l.owner_id("pytorch");
    l.allocated(0x1000, 1 * MiB, Kind::classic, site("cuMemAlloc_v2", 1, torch));
    l.allocated(0x2000, 100 * MiB, Kind::async_pool, site("cuMemAllocAsync", 2, torch));  // a temporary
    l.freed(0x2000, true, "CUDA_SUCCESS", site("cuMemFreeAsync"), l.freeing(0x2000));
    l.allocated(0x3000, 2 * MiB, Kind::classic, site("cuMemAlloc_v2", 3, torch));
    CHECK(live_of(l, torch) == 3 * MiB);
    CHECK(l.take_peak_since_mark() == 101 * MiB);  // the temporary, between marks, as it came and went
    CHECK(l.take_peak_since_mark() == 3 * MiB);

    // A mark applies the log first: what was allocated before it belongs to the epoch that ends.
    l.allocated(0x4000, 4 * MiB, Kind::classic, site("cuMemAlloc_v2", 4, torch));
    const std::uint32_t step = l.begin_epoch();
    l.allocated(0x5000, 5 * MiB, Kind::classic, site("cuMemAlloc_v2", 5, torch));
    const auto grown = l.growth_sites(torch, step);
    REQUIRE(grown.size() == 1);
    CHECK(grown[0].first.trace == 5);
    CHECK(grown[0].second == 5 * MiB);

    const std::vector<OwnerRow> owners = l.owners_now();
    const auto row = std::find_if(owners.begin(), owners.end(), [&](const OwnerRow& r) { return r.owner == torch; });
    REQUIRE(row != owners.end());
    CHECK(row->live_bytes == 12 * MiB);
    CHECK(row->peak_bytes == 101 * MiB);
    CHECK(row->live_by_kind[static_cast<int>(Kind::classic)] == 12 * MiB);
    CHECK(row->live_by_kind[static_cast<int>(Kind::async_pool)] == 0);

    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    CHECK(s.summary.unfreed_allocations == 4);
    CHECK(s.summary.unfreed_bytes == 12 * MiB);
    CHECK(s.summary.live_bytes == 12 * MiB);
    CHECK(s.summary.peak_tracked_bytes == 101 * MiB);
    CHECK(s.misuse.empty());
}

TEST_CASE("more changes than the log holds, with no reader between: the thread applies them itself, all exact") {
    Ledger l;
    become_the_log_thread(l);
    const OwnerId o = l.owner_id("o");
    constexpr std::uint64_t kLive = 10000;
    for (std::uint64_t i = 1; i <= kLive; ++i) {
        l.allocated(0x100000 + i * 512, 256, Kind::classic, site("cuMemAlloc_v2", 1, o));
        l.allocated(0x900000000 + i * 512, 4096, Kind::async_pool, site("cuMemAllocAsync", 2, o));
        l.freed(0x900000000 + i * 512, true, "CUDA_SUCCESS", site("cuMemFreeAsync"), l.freeing(0x900000000 + i * 512));
    }
    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    CHECK(s.summary.unfreed_allocations == kLive);
    CHECK(s.summary.unfreed_bytes == kLive * 256);
    CHECK(s.summary.peak_tracked_bytes == kLive * 256 + 4096);
}

TEST_CASE("a free the log's thread began leaves alone the record another thread made for its pointer meanwhile") {
    Ledger l;
    become_the_log_thread(l);
    const OwnerId a = l.owner_id("a"), b = l.owner_id("b");
    l.allocated(0x1000, 4096, Kind::classic, site("cuMemAlloc_v2", 1, a));
    // This thread takes its ticket; the driver frees 0x1000 and hands it at once to another thread, which
    // records it (applying the log first) before this free is recorded.
    const Ledger::FreeTicket t = l.freeing(0x1000);
    REQUIRE((t & kSince) != 0);
    std::thread([&] { l.allocated(0x1000, 512, Kind::async_pool, site("cuMemAllocAsync", 2, b)); }).join();
    l.freed(0x1000, true, "CUDA_SUCCESS", site("cuMemFree_v2"), t);
    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    REQUIRE(s.leaks.size() == 1);
    CHECK(s.leaks[0].site.trace == 2);
    CHECK(s.leaks[0].bytes == 512);
    CHECK(s.summary.live_bytes == 512);
    CHECK(s.summary.peak_tracked_bytes == 4096);  // never live together
    CHECK(s.misuse.empty());
}

TEST_CASE("the log's thread frees another thread's record, then the same pointer again once it has its own") {
    Ledger l;
    become_the_log_thread(l);
    const OwnerId a = l.owner_id("a"), b = l.owner_id("b");
    std::thread([&] { l.allocated(0x1000, 4096, Kind::classic, site("cuMemAlloc_v2", 1, b)); }).join();
    // Freed, handed out again to this thread, and freed again, none of it applied yet: each free takes out
    // the record it began on.
    l.freed(0x1000, true, "CUDA_SUCCESS", site("cuMemFree_v2"), l.freeing(0x1000));
    l.allocated(0x1000, 256, Kind::classic, site("cuMemAlloc_v2", 2, a));
    l.freed(0x1000, true, "CUDA_SUCCESS", site("cuMemFree_v2"), l.freeing(0x1000));
    l.allocated(0x1000, 128, Kind::classic, site("cuMemAlloc_v2", 3, a));
    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    REQUIRE(s.leaks.size() == 1);
    CHECK(s.leaks[0].site.trace == 3);
    CHECK(s.leaks[0].bytes == 128);
    CHECK(s.summary.live_bytes == 128);
    CHECK(s.summary.peak_tracked_bytes == 4096);
    CHECK(live_of(l, b) == 0);
    CHECK(s.misuse.empty());
}

TEST_CASE("another thread's free of a record still in the log names that record, not the next one") {
    Ledger l;
    become_the_log_thread(l);
    const OwnerId a = l.owner_id("a");
    l.allocated(0x1000, 4096, Kind::classic, site("cuMemAlloc_v2", 1, a));  // in the log
    Ledger::FreeTicket t = 0;
    std::thread([&] { t = l.freeing(0x1000); }).join();
    REQUIRE(t != 0);
    REQUIRE((t & kSince) == 0);  // an exact ticket: the record, applied, found
    // The driver frees 0x1000 and hands it to this thread, which records it before the free is recorded.
    l.allocated(0x1000, 512, Kind::classic, site("cuMemAlloc_v2", 2, a));
    std::thread([&] { l.freed(0x1000, true, "CUDA_SUCCESS", site("cuMemFree_v2"), t); }).join();
    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    REQUIRE(s.leaks.size() == 1);
    CHECK(s.leaks[0].site.trace == 2);
    CHECK(s.leaks[0].bytes == 512);
    CHECK(s.summary.live_bytes == 512);
    CHECK(s.summary.peak_tracked_bytes == 4096);
}

TEST_CASE("an object named by its record keeps its name while its pointer's record stays, whoever made it") {
    Ledger l;
    become_the_log_thread(l);
    const OwnerId a = l.owner_id("a");
    l.allocated(0x1000, 4096, Kind::external, site("cuImportExternalMemory", 1, a));
    const Ledger::FreeTicket named = l.stamp_of(0x1000);
    REQUIRE(named != 0);
    l.allocated(0x2000, 4096, Kind::classic, site("cuMemAlloc_v2", 2, a));
    CHECK(l.stamp_of(0x1000) == named);
    l.freed(0x1000, true, "CUDA_SUCCESS", Site{}, named);
    CHECK(l.stamp_of(0x1000) == 0);
    CHECK(live_of(l, a) == 4096);
}

TEST_CASE("the log's thread churning with a reusing driver while another allocates now and then: exact figures") {
    // A stand-in driver hands freed pointers out again at once (LIFO), so the log's thread's frees race the
    // other thread's allocations of the same values; a third thread reads the figures meanwhile.
    Ledger l;
    become_the_log_thread(l);
    ledger_test::ReusingDriver driver;
    auto churn = [&](OwnerId o, TraceId trace, std::uint64_t size, int iters, int plant_every, auto pause) {
        const Site at{"cuMemAllocAsync", trace, o};
        for (int i = 0; i < iters; ++i) {
            const std::uint64_t p = driver.alloc();
            l.allocated(p, size, Kind::async_pool, at);
            pause();
            if (i % plant_every == 0) continue;  // planted
            const Ledger::FreeTicket ticket = l.freeing(p);
            driver.free(p);
            l.freed(p, true, "CUDA_SUCCESS", Site{"cuMemFreeAsync", 0, o}, ticket);
        }
    };
    const OwnerId mine = l.owner_id("mine"), theirs = l.owner_id("theirs");
    std::atomic<bool> done{false};
    std::thread other([&] {
        churn(theirs, 2, 768, 20, 10, [] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); });
    });
    std::thread reader([&] {
        for (int i = 0; i < 10 && !done.load(); ++i) {
            CHECK(live_of(l, mine) % 256 == 0);
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
    });
    churn(mine, 1, 256, 200000, 1000, [] {});
    done.store(true);
    other.join();
    reader.join();
    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    CHECK(s.summary.unfreed_allocations == 200 + 2);
    CHECK(s.summary.unfreed_bytes == 200 * 256 + 2 * 768);
    CHECK(live_of(l, mine) == 200 * 256);
    CHECK(live_of(l, theirs) == 2 * 768);
    CHECK(s.misuse.empty());
}
