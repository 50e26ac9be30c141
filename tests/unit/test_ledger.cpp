// The ledger against the sequences real programs run (docs/DRIVER.md): exact bytes, counts and sites.
#include "ledger/ledger.hpp"
#include "reusing_driver.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cstring>
#include <fstream>
#include <unistd.h>
#include <set>
#include <string>
#include <mutex>
#include <thread>
#include <vector>

using namespace cumemaudit::ledger;

namespace {

constexpr std::uint64_t MiB = 1ull << 20;
constexpr std::uint64_t GiB = 1ull << 30;

// Fixed sites: a distinct api and trace per call site, like the shim would record.
Site site(const char* api, TraceId trace = 0, OwnerId owner = 0) { return Site{api, trace, owner}; }

const ExportProbe kAllOpen = [](int, const ExportKey&) { return true; };

std::string api_of(const LeakRow& r) { return r.site.api; }

// Resident pages: the heap and the classic table's mapped slot arrays alike (a growth gives the pages of
// the array it replaced back, and they must not count).
std::size_t resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    std::size_t size = 0, pages = 0;
    statm >> size >> pages;
    return pages * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace

TEST_CASE("DeepEP sequence without releases leaves one unreachable allocation with three references") {
    Ledger l;
    const OwnerId deepep = l.owner_id("deepep");
    const std::uint64_t h = 0x100, h_import = 0x200, va = 0x7f0000000000, size = GiB;
    const ExportKey key{1, 2};
    l.created(h, size, HandleType::fabric, site("cuMemCreate", 1, deepep));
    l.reserved(va, size, site("cuMemAddressReserve", 2, deepep));
    l.mapped(va, size, h, true, "CUDA_SUCCESS", site("cuMemMap", 3, deepep));
    l.exported(h, HandleType::fabric, key, -1, site("cuMemExportToShareableHandle", 4, deepep));
    l.retained(h, va, site("cuMemRetainAllocationHandle", 5, deepep));
    l.imported(h_import, HandleType::fabric, key, site("cuMemImportFromShareableHandle", 6, deepep));

    SECTION("no releases: leaked") {
        l.unmapped(va, size, true, "CUDA_SUCCESS", site("cuMemUnmap", 7, deepep));
        l.address_freed(va, size, true, "CUDA_SUCCESS", site("cuMemAddressFree", 8, deepep));
        const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
        CHECK(s.summary.leaked_bytes == GiB);
        CHECK(s.summary.leaked_allocations == 1);
        CHECK(s.summary.leaked_references == 3);
        CHECK(s.summary.misuse_events == 0);
        CHECK(s.summary.live_bytes == GiB);
        REQUIRE(s.leaks.size() == 3);
        CHECK(api_of(s.leaks[0]) == "cuMemCreate");
        CHECK(s.leaks[0].site.trace == 1);
        CHECK(api_of(s.leaks[1]) == "cuMemRetainAllocationHandle");
        CHECK(s.leaks[1].site.trace == 5);
        CHECK(api_of(s.leaks[2]) == "cuMemImportFromShareableHandle");
        CHECK(s.leaks[2].site.trace == 6);
        // Each row holds the gigabyte; only the creation's, the oldest reference, owns it: added up, once.
        CHECK(s.leaks[0].own_bytes == GiB);
        CHECK(s.leaks[1].own_bytes == 0);
        CHECK(s.leaks[2].own_bytes == 0);
        for (const LeakRow& r : s.leaks) {
            CHECK(r.cls == LeakClass::unreachable);
            CHECK(r.bytes == GiB);
            CHECK(r.allocations == 1);
            CHECK(r.references == 1);
            CHECK(r.handle_type == HandleType::fabric);
            CHECK(r.site.owner == deepep);
            REQUIRE(r.members.size() == 1);
            CHECK(r.members[0].bytes == GiB);
        }
        REQUIRE(s.owners.size() == 1);
        CHECK(s.owners[0].name == "deepep");
        CHECK(s.owners[0].leaked_bytes == GiB);
        CHECK(s.owners[0].live_bytes == GiB);
        CHECK(s.owners[0].live_by_kind[static_cast<int>(Kind::vmm_physical)] == GiB);
    }
    SECTION("with the three releases of the fix: clean") {
        l.released(h, true, "CUDA_SUCCESS", site("cuMemRelease", 9));
        l.released(h, true, "CUDA_SUCCESS", site("cuMemRelease", 9));
        l.released(h_import, true, "CUDA_SUCCESS", site("cuMemRelease", 9));
        CHECK(l.snapshot(Moment::checkpoint, kAllOpen).leaks.empty());  // still mapped: in use
        l.unmapped(va, size, true, "CUDA_SUCCESS", site("cuMemUnmap", 7));
        l.address_freed(va, size, true, "CUDA_SUCCESS", site("cuMemAddressFree", 8));
        const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
        CHECK(s.leaks.empty());
        CHECK(s.misuse.empty());
        CHECK(s.summary.leaked_bytes == 0);
        CHECK(s.summary.live_bytes == 0);
        CHECK(s.summary.peak_tracked_bytes == GiB);
        REQUIRE(s.owners.size() == 1);
        CHECK(s.owners[0].peak_bytes == GiB);
    }
}

TEST_CASE("NCCL's balanced free pattern leaves nothing") {
    Ledger l;
    const std::uint64_t h = 0x10, va = 0x1000000, size = 20 * MiB;
    l.created(h, size, HandleType::posix_fd, site("cuMemCreate", 1));
    l.reserved(va, size, site("cuMemAddressReserve"));
    l.mapped(va, size, h, true, "CUDA_SUCCESS", site("cuMemMap"));
    // free: retain -> release -> unmap -> release -> address free
    l.retained(h, va, site("cuMemRetainAllocationHandle", 2));
    l.released(h, true, "CUDA_SUCCESS", site("cuMemRelease", 3));
    CHECK(l.snapshot(Moment::checkpoint, kAllOpen).summary.live_bytes == size);
    l.unmapped(va, size, true, "CUDA_SUCCESS", site("cuMemUnmap"));
    l.released(h, true, "CUDA_SUCCESS", site("cuMemRelease", 4));
    l.address_freed(va, size, true, "CUDA_SUCCESS", site("cuMemAddressFree"));
    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    CHECK(s.leaks.empty());
    CHECK(s.misuse.empty());
    CHECK(s.summary.live_bytes == 0);
}

TEST_CASE("release while mapped, then unmap, frees at the unmap") {
    Ledger l;
    const std::uint64_t h = 7, va = 0x2000000, size = 2 * MiB;
    l.created(h, size, HandleType::none, site("cuMemCreate", 1));
    l.mapped(va, size, h, true, "CUDA_SUCCESS", site("cuMemMap"));
    l.released(h, true, "CUDA_SUCCESS", site("cuMemRelease"));
    CHECK(l.snapshot(Moment::checkpoint, kAllOpen).summary.live_bytes == size);
    SECTION("a retain through the mapping finds the allocation again") {
        l.retained(h, va + 4096, site("cuMemRetainAllocationHandle", 2));
        l.unmapped(va, size, true, "CUDA_SUCCESS", site("cuMemUnmap"));
        const Snapshot s = l.snapshot(Moment::checkpoint, kAllOpen);
        REQUIRE(s.leaks.size() == 1);
        CHECK(api_of(s.leaks[0]) == "cuMemRetainAllocationHandle");
        CHECK(s.leaks[0].bytes == size);
        l.released(h, true, "CUDA_SUCCESS", site("cuMemRelease"));
        CHECK(l.snapshot(Moment::exit, kAllOpen).summary.live_bytes == 0);
    }
    SECTION("unmap frees it") {
        l.unmapped(va, size, true, "CUDA_SUCCESS", site("cuMemUnmap"));
        const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
        CHECK(s.leaks.empty());
        CHECK(s.summary.live_bytes == 0);
    }
}

TEST_CASE("a range free leaves candidates; still_unreachable keeps only those still held and unmapped") {
    // DeepEP's free(): retain, unmap, address free, then release the retain. Right after the range free the
    // allocation looks orphaned with two references; once the retain is released only the creation's is.
    Ledger l;
    const std::uint64_t h = 7, va = 0x2000000, size = 2 * MiB;
    l.created(h, size, HandleType::fabric, site("cuMemCreate", 1));
    l.reserved(va, size, site("cuMemAddressReserve"));
    l.mapped(va, size, h, true, "CUDA_SUCCESS", site("cuMemMap"));
    l.retained(h, va, site("cuMemRetainAllocationHandle", 2));
    l.unmapped(va, size, true, "CUDA_SUCCESS", site("cuMemUnmap"));
    l.address_freed(va, size, true, "CUDA_SUCCESS", site("cuMemAddressFree"));
    const auto at_free = l.unreachable_in(va, size);
    REQUIRE(at_free.size() == 1);
    CHECK(at_free[0].handles.size() == 2);
    CHECK(l.references_through(h) == 2);
    l.released(h, true, "CUDA_SUCCESS", site("cuMemRelease"));
    CHECK(l.references_through(h) == 1);
    const auto later = l.still_unreachable({at_free[0].id});
    REQUIRE(later.size() == 1);
    CHECK(later[0].handles == std::vector<std::uint64_t>{h});
    REQUIRE(later[0].sites.size() == 1);
    CHECK(std::string(later[0].sites[0].api) == "cuMemCreate");
    CHECK(later[0].bytes == size);
    l.released(h, true, "CUDA_SUCCESS", site("cuMemRelease"));
    CHECK(l.still_unreachable({at_free[0].id}).empty());  // freed: nothing to reclaim
    CHECK(l.references_through(h) == 0);
}

TEST_CASE("a held reference with an open exported fd is unreachable; the fd alone is open-export") {
    Ledger l;
    l.created(1, 2 * MiB, HandleType::posix_fd, site("cuMemCreate", 1));
    l.exported(1, HandleType::posix_fd, ExportKey{1, 1}, 40, site("cuMemExportToShareableHandle", 2));
    l.created(2, 4 * MiB, HandleType::posix_fd, site("cuMemCreate", 3));
    l.exported(2, HandleType::posix_fd, ExportKey{2, 2}, 41, site("cuMemExportToShareableHandle", 4));
    l.released(2, true, "CUDA_SUCCESS", site("cuMemRelease"));
    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    REQUIRE(s.leaks.size() == 2);
    for (const LeakRow& row : s.leaks) {
        if (row.bytes == 2 * MiB) {
            CHECK(row.cls == LeakClass::unreachable);
            CHECK(api_of(row) == "cuMemCreate");
        } else {
            CHECK(row.cls == LeakClass::open_export);
            CHECK(api_of(row) == "cuMemExportToShareableHandle");
        }
    }
    CHECK(s.summary.leaked_bytes == 6 * MiB);
}

TEST_CASE("handle value reuse is attributed to the new site") {
    Ledger l;
    const std::uint64_t h = 0x42;
    l.created(h, 2 * MiB, HandleType::none, site("cuMemCreate", 1));
    l.released(h, true, "CUDA_SUCCESS", site("cuMemRelease"));
    l.created(h, 4 * MiB, HandleType::none, site("cuMemCreate", 2));  // the driver hands out the same value
    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    REQUIRE(s.leaks.size() == 1);
    CHECK(s.leaks[0].site.trace == 2);
    CHECK(s.leaks[0].bytes == 4 * MiB);
    CHECK(s.summary.leaked_bytes == 4 * MiB);
}

TEST_CASE("double release is misuse with the driver's result") {
    Ledger l;
    l.created(5, 2 * MiB, HandleType::none, site("cuMemCreate", 1));
    l.released(5, true, "CUDA_SUCCESS", site("cuMemRelease", 2));
    l.released(5, false, "CUDA_ERROR_INVALID_VALUE", site("cuMemRelease", 3));
    l.released(5, false, "CUDA_ERROR_INVALID_VALUE", site("cuMemRelease", 3));
    l.released(99, false, "CUDA_ERROR_INVALID_VALUE", site("cuMemRelease", 4));
    l.released(98, true, "CUDA_SUCCESS", site("cuMemRelease", 4));  // accepted: never misuse
    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    CHECK(s.leaks.empty());
    REQUIRE(s.misuse.size() == 2);
    CHECK(std::string(s.misuse[0].site.api) == "cuMemRelease");
    CHECK(std::string(s.misuse[0].result) == "CUDA_ERROR_INVALID_VALUE");
    CHECK(s.misuse[0].what == "release of a handle already released");
    CHECK(s.misuse[0].count == 2);
    CHECK(s.misuse[0].site.trace == 3);
    CHECK(s.misuse[1].what == "release of a handle never created");
    CHECK(s.misuse[1].count == 1);
    CHECK(s.summary.misuse_events == 3);
}

TEST_CASE("a refused release of one of the last 4096 handles released says already released, of an older one never created") {
    Ledger l;
    const Site s = site("cuMemCreate", 1);
    for (std::uint64_t h = 1; h <= 4097; ++h) {  // values the driver never hands out again
        l.created(h << 21, 2 * MiB, HandleType::none, s);
        l.released(h << 21, true, "CUDA_SUCCESS", site("cuMemRelease", 1));
    }
    l.released(2ull << 21, false, "CUDA_ERROR_INVALID_VALUE", site("cuMemRelease", 2));  // 4096 releases ago
    l.released(1ull << 21, false, "CUDA_ERROR_INVALID_VALUE", site("cuMemRelease", 3));  // 4097: forgotten
    const Snapshot snap = l.snapshot(Moment::exit, kAllOpen);
    REQUIRE(snap.misuse.size() == 2);
    for (const MisuseRow& m : snap.misuse)
        CHECK(m.what == (m.site.trace == 2 ? "release of a handle already released" : "release of a handle never created"));
    CHECK(snap.leaks.empty());
}

TEST_CASE("address free with live mappings, unmap of unmapped range, map onto mapped range") {
    Ledger l;
    const std::uint64_t va = 0x4000000, size = 2 * MiB;
    l.created(1, size, HandleType::none, site("cuMemCreate", 1));
    l.created(2, size, HandleType::none, site("cuMemCreate", 1));
    l.reserved(va, 2 * size, site("cuMemAddressReserve"));
    l.mapped(va, size, 1, true, "CUDA_SUCCESS", site("cuMemMap"));
    l.address_freed(va, 2 * size, false, "CUDA_ERROR_INVALID_VALUE", site("cuMemAddressFree", 5));
    l.unmapped(va + size, size, false, "CUDA_ERROR_INVALID_VALUE", site("cuMemUnmap", 6));
    l.mapped(va, size, 2, false, "CUDA_ERROR_INVALID_VALUE", site("cuMemMap", 7));
    l.address_freed(0x9000000, size, false, "CUDA_ERROR_INVALID_VALUE", site("cuMemAddressFree", 8));
    l.unmapped(va, size, false, "CUDA_ERROR_UNKNOWN", site("cuMemUnmap", 9));
    const Snapshot s = l.snapshot(Moment::checkpoint, kAllOpen);
    REQUIRE(s.misuse.size() == 5);
    CHECK(s.misuse[0].what == "address free with live mappings");
    CHECK(std::string(s.misuse[0].site.api) == "cuMemAddressFree");
    CHECK(s.misuse[1].what == "unmap of an unmapped range");
    CHECK(s.misuse[2].what == "map onto a mapped range");
    CHECK(s.misuse[3].what == "address free of a range never reserved");
    CHECK(s.misuse[4].what == "driver rejected the call");
    CHECK(std::string(s.misuse[4].result) == "CUDA_ERROR_UNKNOWN");
    // The rejected calls changed nothing: handle 1 is still mapped, handle 2 is an unmapped reference.
    CHECK(s.summary.live_bytes == 2 * size);
    REQUIRE(s.leaks.size() == 1);
    CHECK(s.leaks[0].cls == LeakClass::unreachable);
}

TEST_CASE("an exported fd pins memory until the probe says it is closed") {
    Ledger l;
    const std::uint64_t h = 3, va = 0x8000000, size = 2 * MiB;
    const ExportKey key{10, 20};
    l.created(h, size, HandleType::posix_fd, site("cuMemCreate", 1));
    l.mapped(va, size, h, true, "CUDA_SUCCESS", site("cuMemMap"));
    l.exported(h, HandleType::posix_fd, key, 17, site("cuMemExportToShareableHandle", 2));
    l.unmapped(va, size, true, "CUDA_SUCCESS", site("cuMemUnmap"));
    l.released(h, true, "CUDA_SUCCESS", site("cuMemRelease"));

    bool open = true;
    int asked_fd = -1;
    const ExportProbe probe = [&](int fd, const ExportKey& k) {
        asked_fd = fd;
        CHECK(k == key);
        return open;
    };
    Snapshot s = l.snapshot(Moment::exit, probe);
    CHECK(asked_fd == 17);
    REQUIRE(s.leaks.size() == 1);
    CHECK(s.leaks[0].cls == LeakClass::open_export);
    CHECK(api_of(s.leaks[0]) == "cuMemExportToShareableHandle");
    CHECK(s.leaks[0].references == 0);
    CHECK(s.leaks[0].handle_type == HandleType::posix_fd);
    CHECK(s.summary.leaked_bytes == size);
    CHECK(s.summary.leaked_references == 0);

    open = false;
    s = l.snapshot(Moment::exit, probe);
    CHECK(s.leaks.empty());
    CHECK(s.summary.leaked_bytes == 0);
    CHECK(s.summary.live_bytes == 0);
}

TEST_CASE("import of a key not exported here learns its size from the first mapping") {
    Ledger l;
    const OwnerId nccl = l.owner_id("nccl");
    l.imported(0x77, HandleType::posix_fd, ExportKey{5, 6}, site("cuMemImportFromShareableHandle", 1, nccl));
    l.mapped(0x10000000, 8 * MiB, 0x77, true, "CUDA_SUCCESS", site("cuMemMap"));
    l.unmapped(0x10000000, 8 * MiB, true, "CUDA_SUCCESS", site("cuMemUnmap"));
    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    REQUIRE(s.leaks.size() == 1);
    CHECK(s.leaks[0].kind == Kind::imported);
    CHECK(s.leaks[0].bytes == 8 * MiB);
    REQUIRE(s.owners.size() == 1);
    CHECK(s.owners[0].live_by_kind[static_cast<int>(Kind::imported)] == 8 * MiB);
}

TEST_CASE("mapped memory is in use at a checkpoint and mapped-at-exit only at exit") {
    Ledger l;
    l.created(1, 2 * MiB, HandleType::none, site("cuMemCreate", 1));
    l.mapped(0x1000000, 2 * MiB, 1, true, "CUDA_SUCCESS", site("cuMemMap"));
    CHECK(l.snapshot(Moment::checkpoint, kAllOpen).leaks.empty());
    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    REQUIRE(s.leaks.size() == 1);
    CHECK(s.leaks[0].cls == LeakClass::mapped_at_exit);
    CHECK(s.leaks[0].references == 1);
    CHECK(s.summary.mapped_at_exit_bytes == 2 * MiB);
    CHECK(s.summary.leaked_bytes == 0);
}

TEST_CASE("classic allocations live at exit are unfreed; free of an unknown pointer is misuse") {
    Ledger l;
    const OwnerId torch = l.owner_id("pytorch");
    l.allocated(0x1000, 4096, Kind::classic, site("cuMemAlloc_v2", 1, torch));
    l.allocated(0x2000, 8192, Kind::classic, site("cuMemAlloc_v2", 1, torch));
    l.allocated(0x3000, 512, Kind::host_pinned, site("cuMemHostAlloc", 2, torch));
    l.freed(0x3000, true, "CUDA_SUCCESS", site("cuMemFreeHost"));
    l.freed(0x5000, false, "CUDA_ERROR_INVALID_VALUE", site("cuMemFree_v2", 3));
    l.freed(0x6000, true, "CUDA_SUCCESS", site("cuMemFree_v2", 3));
    CHECK(l.snapshot(Moment::checkpoint, kAllOpen).leaks.empty());
    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    REQUIRE(s.leaks.size() == 1);
    CHECK(s.leaks[0].cls == LeakClass::unfreed);
    CHECK(s.leaks[0].bytes == 12288);
    CHECK(s.leaks[0].allocations == 2);
    CHECK(s.leaks[0].kind == Kind::classic);
    CHECK(s.summary.unfreed_bytes == 12288);
    CHECK(s.summary.unfreed_allocations == 2);
    CHECK(s.summary.leaked_bytes == 0);
    CHECK(s.summary.peak_tracked_bytes == 4096 + 8192 + 512);
    REQUIRE(s.misuse.size() == 1);
    CHECK(s.misuse[0].what == "free of an unknown pointer");
    const auto live = l.live_by_owner();
    REQUIRE(live.size() == 1);
    CHECK(live[0] == std::pair<OwnerId, std::uint64_t>{torch, 12288});
}

TEST_CASE("a free the driver refused for its own reason names that reason and leaves the allocation live") {
    Ledger l;
    l.allocated(0x1000, 4096, Kind::classic, site("cuMemAlloc_v2", 1));
    l.freed(0x1000, false, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", site("cuMemFree_v2", 2));
    l.freed(0x9000, false, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", site("cuMemFree_v2", 3));
    Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    REQUIRE(s.misuse.size() == 2);
    std::sort(s.misuse.begin(), s.misuse.end(), [](const MisuseRow& a, const MisuseRow& b) { return a.what < b.what; });
    CHECK(s.misuse[0].what == "free refused by the driver");
    CHECK(s.misuse[1].what == "free refused by the driver; the allocation stays live");
    CHECK(std::string(s.misuse[1].result) == "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED");
    REQUIRE(s.leaks.size() == 1);
    CHECK((s.leaks[0].cls == LeakClass::unfreed && s.leaks[0].bytes == 4096));
    l.freed(0x1000, true, "CUDA_SUCCESS", site("cuMemFree_v2", 4));  // after the capture: the free the program owed
    const Snapshot after = l.snapshot(Moment::exit, kAllOpen);
    CHECK(after.leaks.empty());
    CHECK(after.misuse.size() == 2);
}

TEST_CASE("8 threads churning classic allocations: exactly the planted leaks") {
    Ledger l;
    constexpr int kThreads = 8, kIters = 20000;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            const OwnerId o = l.owner_id("owner" + std::to_string(t % 2));
            const Site alloc_site{"cuMemAlloc_v2", static_cast<TraceId>(t + 1), o};
            for (int i = 0; i < kIters; ++i) {
                const std::uint64_t ptr = (std::uint64_t(t + 1) << 40) + std::uint64_t(i) * 512;
                l.allocated(ptr, 512, Kind::classic, alloc_site);
                if (i % 5000 != 0) l.freed(ptr, true, "CUDA_SUCCESS", Site{"cuMemFree_v2", 0, o});
            }
        });
    for (auto& th : threads) th.join();
    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    CHECK(s.summary.unfreed_allocations == kThreads * 4);
    CHECK(s.summary.unfreed_bytes == kThreads * 4 * 512);
    REQUIRE(s.leaks.size() == kThreads);
    std::set<TraceId> traces;
    for (const LeakRow& r : s.leaks) {
        CHECK(r.allocations == 4);
        traces.insert(r.site.trace);
    }
    CHECK(traces.size() == kThreads);
    std::uint64_t live = 0;
    for (const auto& [o, b] : l.live_by_owner()) live += b;
    CHECK(live == kThreads * 4 * 512);
}

TEST_CASE("8 threads changing one owner's VMM and classic memory at once: exact live bytes by kind") {
    // NCCL's buffers are both (cuMemCreate with NCCL_CUMEM_ENABLE, cuMemAlloc otherwise): every change
    // moves the owner's figures and the totals with plain stores under one lock, so no change is lost.
    Ledger l;
    const OwnerId o = l.owner_id("libnccl.so.2");
    constexpr int kThreads = 8, kIters = 4000, kKept = 4;  // a thread keeps 4 of each
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < kIters; ++i) {
                const std::uint64_t n = std::uint64_t(t) * kIters + i + 1;
                const bool keep = i % (kIters / kKept) == 0;
                l.created(n, 2 * MiB, HandleType::none, site("cuMemCreate", 1, o));
                l.mapped(n << 21, 2 * MiB, n, true, "CUDA_SUCCESS", site("cuMemMap", 2, o));
                l.allocated(n << 12, 4096, Kind::classic, site("cuMemAlloc_v2", 3, o));
                l.unmapped(n << 21, 2 * MiB, true, "CUDA_SUCCESS", site("cuMemUnmap", 4, o));
                if (keep) continue;
                l.released(n, true, "CUDA_SUCCESS", site("cuMemRelease", 5, o));
                l.freed(n << 12, true, "CUDA_SUCCESS", site("cuMemFree_v2", 6, o));
            }
        });
    for (auto& th : threads) th.join();
    const Snapshot s = l.snapshot(Moment::checkpoint, kAllOpen);
    REQUIRE(s.owners.size() == 1);
    const std::uint64_t vmm = kThreads * kKept * 2 * MiB, classic = kThreads * kKept * 4096;
    CHECK(s.owners[0].live_by_kind[static_cast<int>(Kind::vmm_physical)] == vmm);
    CHECK(s.owners[0].live_by_kind[static_cast<int>(Kind::classic)] == classic);
    CHECK(s.owners[0].live_bytes == vmm + classic);
    CHECK(s.summary.live_bytes == vmm + classic);
    CHECK(s.owners[0].peak_bytes >= vmm + classic);
}

TEST_CASE("a live classic allocation costs at most 160 bytes of ledger memory") {
    Ledger l;
    constexpr std::uint64_t kLive = 200000;
    const Site s{"cuMemAlloc_v2", 1, 0};
    l.allocated(0x10, 1, Kind::classic, s);  // first touch of the tables outside the measurement
    l.freed(0x10, true, "CUDA_SUCCESS", s);
    const std::size_t before = resident_bytes();
    for (std::uint64_t i = 0; i < kLive; ++i) l.allocated(0x7f0000000000 + i * 512, 512, Kind::classic, s);
    const std::size_t per = (resident_bytes() - before) / kLive;
    INFO("resident bytes per live classic allocation: " << per);
    CHECK(per <= 160);
}

TEST_CASE("a live VMM allocation costs at most 600 bytes of ledger memory, whatever its handle values") {
    // Handle values 1 MiB apart, each mapped at its own 2 MiB granule: aligned keys, as drivers hand out.
    Ledger l;
    constexpr std::uint64_t kLive = 20000;
    const Site s{"cuMemCreate", 1, 0};
    l.created(1, 2 * MiB, HandleType::none, s);  // first touch of the tables outside the measurement
    l.released(1, true, "CUDA_SUCCESS", s);
    const std::size_t before = resident_bytes();
    for (std::uint64_t i = 1; i <= kLive; ++i) {
        l.created(i << 20, 2 * MiB, HandleType::none, s);
        l.mapped(0x7f0000000000 + i * 2 * MiB, 2 * MiB, i << 20, true, "CUDA_SUCCESS", site("cuMemMap"));
    }
    const std::size_t per = (resident_bytes() - before) / kLive;
    INFO("resident bytes per live VMM allocation: " << per);
    CHECK(per <= 600);
    CHECK(l.snapshot(Moment::checkpoint, kAllOpen).summary.leaked_bytes == 0);  // all mapped: in use
    for (std::uint64_t i = 1; i <= kLive; ++i) {
        l.unmapped(0x7f0000000000 + i * 2 * MiB, 2 * MiB, true, "CUDA_SUCCESS", site("cuMemUnmap"));
        l.released(i << 20, true, "CUDA_SUCCESS", s);
    }
    CHECK(l.references_through(1ull << 20) == 0);
}

TEST_CASE("held_since counts only what allocations made since the mark still hold") {
    Ledger l;
    // Before the mark: one leak and one live classic allocation, which a later test must not be blamed for.
    l.created(1, 4 * MiB, HandleType::none, site("cuMemCreate", 1));
    l.allocated(0x1000, 4096, Kind::classic, site("cuMemAlloc_v2", 2));
    const std::uint32_t mark = l.begin_epoch();
    // Since the mark: a create+retain never released (leaked, two references), a mapped allocation (in use),
    // a balanced create/release, and a classic allocation still live.
    const std::uint64_t va = 0x7f0000000000;
    l.created(2, 2 * MiB, HandleType::posix_fd, site("cuMemCreate", 3));
    l.reserved(va, 2 * MiB, site("cuMemAddressReserve", 4));
    l.mapped(va, 2 * MiB, 2, true, "CUDA_SUCCESS", site("cuMemMap", 5));
    l.retained(2, va, site("cuMemRetainAllocationHandle", 6));
    l.unmapped(va, 2 * MiB, true, "CUDA_SUCCESS", site("cuMemUnmap", 7));
    l.created(3, 8 * MiB, HandleType::none, site("cuMemCreate", 8));
    l.mapped(va, 8 * MiB, 3, true, "CUDA_SUCCESS", site("cuMemMap", 5));
    l.created(4, 2 * MiB, HandleType::none, site("cuMemCreate", 9));
    l.released(4, true, "CUDA_SUCCESS", site("cuMemRelease", 10));
    l.allocated(0x2000, 512, Kind::classic, site("cuMemAlloc_v2", 11));
    const std::uint64_t misuse_before = l.misuse_events();
    l.released(4, false, "CUDA_ERROR_INVALID_VALUE", site("cuMemRelease", 12));

    const Ledger::Held held = l.held_since(mark);
    CHECK(held.leaked_bytes == 2 * MiB);
    CHECK(held.leaked_allocations == 1);
    CHECK(held.leaked_references == 2);
    CHECK(held.unfreed_bytes == 512);
    CHECK(held.unfreed_allocations == 1);
    CHECK(l.misuse_events() - misuse_before == 1);
    REQUIRE(held.sites.size() == 2);  // one row a reference site, each charged the allocation's bytes
    CHECK(std::string(held.sites[0].first.api) == "cuMemCreate");
    CHECK(held.sites[0].first.trace == 3);
    CHECK(held.sites[0].second == 2 * MiB);
    CHECK(std::string(held.sites[1].first.api) == "cuMemRetainAllocationHandle");
    // From the start everything counts: the old leak too.
    CHECK(l.held_since(0).leaked_bytes == 6 * MiB);
    CHECK(l.held_since(0).unfreed_bytes == 4096 + 512);
}

TEST_CASE("a free's ticket, taken before the driver ran, leaves alone the allocation that reused its pointer") {
    Ledger l;
    const OwnerId a = l.owner_id("a"), b = l.owner_id("b");
    l.allocated(0x1000, 4096, Kind::classic, site("cuMemAlloc_v2", 1, a));
    // Thread A takes its ticket; the driver frees 0x1000 and hands it at once to thread B, which records first.
    const Ledger::FreeTicket first = l.freeing(0x1000);
    REQUIRE(first != 0);
    l.allocated(0x1000, 512, Kind::async_pool, site("cuMemAllocAsync", 2, b));
    l.freed(0x1000, true, "CUDA_SUCCESS", site("cuMemFree_v2"), first);
    Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    REQUIRE(s.leaks.size() == 1);
    CHECK(s.leaks[0].site.trace == 2);
    CHECK(s.leaks[0].bytes == 512);
    CHECK(s.summary.unfreed_bytes == 512);
    CHECK(s.summary.live_bytes == 512);
    // The driver freed it before handing it out again: the two were never live together.
    CHECK(s.summary.peak_tracked_bytes == 4096);
    // B frees it normally; a refused free keeps the record and is misuse with the driver's answer.
    const Ledger::FreeTicket second = l.freeing(0x1000);
    REQUIRE(second != 0);
    CHECK(second != first);  // B's record is another record
    l.freed(0x1000, false, "CUDA_ERROR_INVALID_VALUE", site("cuMemFree_v2", 3), second);
    CHECK(l.snapshot(Moment::exit, kAllOpen).summary.unfreed_bytes == 512);
    REQUIRE(l.freeing(0x1000) == second);  // the refused free changed nothing: the next free gets the same ticket
    l.freed(0x1000, true, "CUDA_SUCCESS", site("cuMemFree_v2"), second);
    s = l.snapshot(Moment::exit, kAllOpen);
    CHECK(s.leaks.empty());
    CHECK(s.summary.live_bytes == 0);
    REQUIRE(s.misuse.size() == 1);
    CHECK(s.misuse[0].what == "free refused by the driver; the allocation stays live");
    CHECK(l.freeing(0x1000) == 0);  // no record left
}

TEST_CASE("a free's ticket still names its record after the shard grew and its neighbours moved") {
    // The ticket is read without the shard's lock; what it names must be found again after inserts that
    // double the shard several times and removals that shift the slots around it.
    Ledger l;
    const OwnerId o = l.owner_id("o");
    l.allocated(0x100000, 4096, Kind::classic, site("cuMemAlloc_v2", 1, o));
    const Ledger::FreeTicket t = l.freeing(0x100000);
    REQUIRE(t != 0);
    for (std::uint64_t i = 1; i <= 20000; ++i) l.allocated(0x100000 + i * 512, 256, Kind::classic, site("cuMemAlloc_v2", 2, o));
    for (std::uint64_t i = 1; i <= 20000; i += 2) l.freed(0x100000 + i * 512, true, "CUDA_SUCCESS", site("cuMemFree_v2"));
    l.freed(0x100000, true, "CUDA_SUCCESS", site("cuMemFree_v2"), t);
    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    CHECK(s.summary.unfreed_allocations == 10000);
    CHECK(s.summary.unfreed_bytes == 10000 * 256);
    CHECK(s.summary.peak_tracked_bytes == 4096 + 20000 * 256);
}

TEST_CASE("32 threads sharing a reusing driver: exact live bytes and planted leaks") {
    // A stand-in driver hands freed pointers out again at once (LIFO), as the real one does, so one
    // thread's free races another's allocation of the same value; each call records as the shim does:
    // ticket, driver, record.
    Ledger l;
    ledger_test::ReusingDriver driver;
    constexpr int kThreads = 32, kIters = 4000;
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] {
            const OwnerId o = l.owner_id("owner" + std::to_string(t % 3));
            const Site alloc_site{"cuMemAlloc_v2", static_cast<TraceId>(t + 1), o};
            for (int i = 0; i < kIters; ++i) {
                const std::uint64_t p = driver.alloc();
                l.allocated(p, 256 + 8 * static_cast<std::uint64_t>(t), Kind::classic, alloc_site);
                if (i % 1000 == 0) continue;  // planted: 4 per thread
                const Ledger::FreeTicket ticket = l.freeing(p);
                driver.free(p);
                l.freed(p, true, "CUDA_SUCCESS", Site{"cuMemFree_v2", 0, o}, ticket);
            }
        });
    for (auto& th : threads) th.join();
    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    std::uint64_t planted = 0;
    for (int t = 0; t < kThreads; ++t) planted += 4 * (256 + 8 * static_cast<std::uint64_t>(t));
    CHECK(s.summary.unfreed_allocations == kThreads * 4);
    CHECK(s.summary.unfreed_bytes == planted);
    CHECK(s.summary.live_bytes == planted);
    CHECK(s.misuse.empty());
    REQUIRE(s.leaks.size() == kThreads);
    for (const LeakRow& r : s.leaks) {
        CHECK(r.allocations == 4);
        CHECK(r.bytes == 4 * (256 + 8 * std::uint64_t(r.site.trace - 1)));
    }
}

TEST_CASE("an unmap or address free asks for its site only when it is misuse, and keeps that exact site") {
    // The shim's site of a VMM call may be a deep stack (microseconds): the ledger asks for it only to keep it.
    Ledger l;
    const std::uint64_t h = 0x100, va = 0x7f0000000000, size = 2 * MiB;
    int asked = 0;
    auto unmap_site = [&] {
        ++asked;
        return site("cuMemUnmap", 7);
    };
    l.created(h, size, HandleType::none, site("cuMemCreate", 1));
    l.reserved(va, 2 * size, site("cuMemAddressReserve", 2));
    l.mapped(va, size, h, true, "CUDA_SUCCESS", site("cuMemMap", 3));
    l.unmapped(va, size, true, "CUDA_SUCCESS", unmap_site);  // the mapping it names: clean
    CHECK(asked == 0);
    // vLLM's free while asleep: the driver answers success for a reserved range nothing maps; still misuse.
    l.unmapped(va, size, true, "CUDA_SUCCESS", unmap_site);
    CHECK(asked == 1);
    l.released(h, true, "CUDA_SUCCESS", site("cuMemRelease", 4));
    auto free_site = [&] {
        ++asked;
        return site("cuMemAddressFree", 8);
    };
    l.address_freed(va, 2 * size, true, "CUDA_SUCCESS", free_site);  // clean
    CHECK(asked == 1);
    l.address_freed(va, 2 * size, false, "CUDA_ERROR_INVALID_VALUE", free_site);  // never reserved now
    CHECK(asked == 2);

    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    REQUIRE(s.misuse.size() == 2);
    CHECK(std::string(s.misuse[0].site.api) == "cuMemUnmap");
    CHECK(s.misuse[0].site.trace == 7);
    CHECK(s.misuse[0].what == "unmap of an unmapped range");
    CHECK(std::string(s.misuse[0].result) == "CUDA_SUCCESS");
    CHECK(std::string(s.misuse[1].site.api) == "cuMemAddressFree");
    CHECK(s.misuse[1].site.trace == 8);
    CHECK(s.misuse[1].what == "address free of a range never reserved");
    CHECK(s.summary.leaked_bytes == 0);
}

TEST_CASE("an owner that allocates three ways splits its live bytes by kind exactly, whichever kind came first") {
    // NCCL's pattern: cuMemAlloc for its buffers, cuMemAllocAsync for scratch, cuMemHostAlloc for proxies.
    Ledger l;
    const OwnerId o = l.owner_id("libnccl.so.2");
    auto split = [&] {
        const Snapshot s = l.snapshot(Moment::checkpoint, kAllOpen);
        REQUIRE(s.owners.size() == 1);
        const OwnerRow& r = s.owners[0];
        return std::array<std::uint64_t, 5>{r.live_bytes, r.peak_bytes, r.live_by_kind[static_cast<int>(Kind::classic)],
                                            r.live_by_kind[static_cast<int>(Kind::async_pool)],
                                            r.live_by_kind[static_cast<int>(Kind::host_pinned)]};
    };
    l.allocated(0x10000, 4 * MiB, Kind::async_pool, site("cuMemAllocAsync", 1, o));  // async comes first
    l.allocated(0x20000, 16 * MiB, Kind::classic, site("cuMemAlloc_v2", 2, o));
    l.allocated(0x30000, 2 * MiB, Kind::host_pinned, site("cuMemHostAlloc", 3, o));
    CHECK(split() == std::array<std::uint64_t, 5>{22 * MiB, 22 * MiB, 16 * MiB, 4 * MiB, 2 * MiB});
    l.freed(0x10000, true, "CUDA_SUCCESS", site("cuMemFreeAsync", 4, o));
    CHECK(split() == std::array<std::uint64_t, 5>{18 * MiB, 22 * MiB, 16 * MiB, 0, 2 * MiB});
    l.freed(0x20000, true, "CUDA_SUCCESS", site("cuMemFree_v2", 5, o));
    l.allocated(0x40000, 1 * MiB, Kind::async_pool, site("cuMemAllocAsync", 1, o));
    CHECK(split() == std::array<std::uint64_t, 5>{3 * MiB, 22 * MiB, 0, 1 * MiB, 2 * MiB});
}

// Multicast objects (NCCL's NVLS buffers, src/transport/nvls.cc): the object is a handle with its own
// references that holds no memory; memory bound to it is pinned by the bind as by a mapping.
namespace {
struct Nvls {
    Ledger l;
    const std::uint64_t mc = 0x900, uc = 0x901, ucva = 0x7f0000000000, mcva = 0x7f8000000000;
    const std::uint64_t ucsize = 6 * MiB, mcsize = 512 * MiB;
    void set_up() {
        l.multicast_created(mc, mcsize, HandleType::posix_fd, site("cuMulticastCreate", 1));
        l.multicast_device_added(mc, true, "CUDA_SUCCESS", site("cuMulticastAddDevice", 2));
        l.reserved(ucva, ucsize, site("cuMemAddressReserve", 3));
        l.created(uc, ucsize, HandleType::posix_fd, site("cuMemCreate", 4), {Location::Type::device, 0});
        l.mapped(ucva, ucsize, uc, true, "CUDA_SUCCESS", site("cuMemMap", 5));
        l.multicast_bound(mc, 0, uc, false, ucsize, true, "CUDA_SUCCESS", site("cuMulticastBindMem", 6));
        l.reserved(mcva, mcsize, site("cuMemAddressReserve", 7));
        l.mapped(mcva, mcsize, mc, true, "CUDA_SUCCESS", site("cuMemMap", 8));
    }
    void free_memory() {
        l.unmapped(ucva, ucsize, true, "CUDA_SUCCESS", site("cuMemUnmap", 10));
        l.address_freed(ucva, ucsize, true, "CUDA_SUCCESS", site("cuMemAddressFree", 11));
        l.released(uc, true, "CUDA_SUCCESS", site("cuMemRelease", 12));
    }
    void free_object(bool release = true) {
        l.unmapped(mcva, mcsize, true, "CUDA_SUCCESS", site("cuMemUnmap", 13));
        l.address_freed(mcva, mcsize, true, "CUDA_SUCCESS", site("cuMemAddressFree", 14));
        if (release) l.released(mc, true, "CUDA_SUCCESS", site("cuMemRelease", 15));
    }
    std::uint64_t live(Kind k) {
        for (const OwnerRow& o : l.owners_now())
            if (o.owner == 0) return o.live_by_kind[static_cast<int>(k)];
        return 0;
    }
    std::uint64_t objects() {
        for (const OwnerRow& o : l.owners_now())
            if (o.owner == 0) return o.multicast_object_bytes;
        return 0;
    }
};
}  // namespace

TEST_CASE("NCCL's NVLS teardown (unbind, memory, object) leaves nothing and no misuse") {
    Nvls n;
    n.set_up();
    CHECK(n.objects() == 512 * MiB);
    CHECK(n.live(Kind::multicast) == 0);  // an object is not memory: only what is bound to it is
    CHECK(n.live(Kind::vmm_physical) == 6 * MiB);
    for (const OwnerRow& o : n.l.owners_on_device(0)) CHECK(o.live_bytes == 6 * MiB);
    CHECK(n.l.snapshot(Moment::checkpoint, kAllOpen).summary.live_bytes == 6 * MiB);  // memory only
    n.l.multicast_unbound(n.mc, 0, 0, n.ucsize, true, "CUDA_SUCCESS", site("cuMulticastUnbind", 9));
    n.free_memory();
    n.free_object();
    const Snapshot s = n.l.snapshot(Moment::exit, kAllOpen);
    CHECK(s.misuse.empty());
    CHECK(s.leaks.empty());
    CHECK(s.summary.live_bytes == 0);
    CHECK(n.objects() == 0);
    CHECK(n.live(Kind::vmm_physical) == 0);
}

TEST_CASE("memory released while bound stays allocated until its unbind") {
    Nvls n;
    n.set_up();
    n.free_memory();  // unmapped and released, but still bound
    CHECK(n.live(Kind::vmm_physical) == 6 * MiB);
    CHECK(n.l.snapshot(Moment::checkpoint, kAllOpen).leaks.empty());  // in use through the object
    n.l.multicast_unbound(n.mc, 0, 0, n.ucsize, true, "CUDA_SUCCESS", site("cuMulticastUnbind", 9));
    CHECK(n.live(Kind::vmm_physical) == 0);
    n.free_object();
    CHECK(n.l.snapshot(Moment::exit, kAllOpen).leaks.empty());
}

TEST_CASE("an object released with memory still bound takes its binds with it") {
    Nvls n;
    n.set_up();
    n.free_memory();
    n.free_object();  // never unbound: the object's end ends the bind, and the memory goes
    const Snapshot s = n.l.snapshot(Moment::exit, kAllOpen);
    CHECK(s.leaks.empty());
    CHECK(s.misuse.empty());
    CHECK(n.live(Kind::vmm_physical) == 0);
    CHECK(n.objects() == 0);
}

TEST_CASE("an object never released is a multicast leak row at its create, with no leaked bytes") {
    Nvls n;
    n.set_up();
    n.l.multicast_unbound(n.mc, 0, 0, n.ucsize, true, "CUDA_SUCCESS", site("cuMulticastUnbind", 9));
    n.free_memory();
    n.free_object(false);
    const Snapshot s = n.l.snapshot(Moment::exit, kAllOpen);
    REQUIRE(s.leaks.size() == 1);
    CHECK(s.leaks[0].cls == LeakClass::unreachable);
    CHECK(s.leaks[0].kind == Kind::multicast);
    CHECK(api_of(s.leaks[0]) == "cuMulticastCreate");
    CHECK(s.leaks[0].bytes == 512 * MiB);
    CHECK(s.summary.leaked_bytes == 0);
    CHECK(s.summary.leaked_allocations == 0);
    CHECK(s.summary.leaked_references == 1);
    CHECK(n.l.held_since(0).leaked_bytes == 0);
    CHECK(n.l.held_since(0).leaked_references == 1);
}

TEST_CASE("an imported object becomes a multicast object when its device is added") {
    Ledger l;
    const ExportKey key{7, 9};
    l.imported(0x500, HandleType::posix_fd, key, site("cuMemImportFromShareableHandle", 1));
    l.multicast_device_added(0x500, true, "CUDA_SUCCESS", site("cuMulticastAddDevice", 2));
    l.mapped(0x7f0000000000, 512 * MiB, 0x500, true, "CUDA_SUCCESS", site("cuMemMap", 3));
    l.unmapped(0x7f0000000000, 512 * MiB, true, "CUDA_SUCCESS", site("cuMemUnmap", 4));
    const Snapshot s = l.snapshot(Moment::exit, kAllOpen);
    REQUIRE(s.leaks.size() == 1);
    CHECK(s.leaks[0].kind == Kind::multicast);
    CHECK(api_of(s.leaks[0]) == "cuMemImportFromShareableHandle");
    CHECK(s.summary.leaked_bytes == 0);
    CHECK(s.imports.empty());  // the job merge joins memory, and an object pins none
}

TEST_CASE("multicast misuse: dead handles, an unbind of nothing; a refused bind of live handles is not misuse") {
    Nvls n;
    n.set_up();
    // No multicast resources left (or none on the system): NCCL goes on without NVLS.
    n.l.multicast_bound(n.mc, 8 * MiB, n.uc, false, n.ucsize, false, "CUDA_ERROR_OUT_OF_MEMORY", site("cuMulticastBindMem", 20));
    CHECK(n.l.misuse_events() == 0);
    n.l.multicast_unbound(n.mc, 0, 0, n.ucsize, true, "CUDA_SUCCESS", site("cuMulticastUnbind", 21));
    n.l.multicast_unbound(n.mc, 0, 0, n.ucsize, true, "CUDA_SUCCESS", site("cuMulticastUnbind", 22));
    n.free_memory();
    n.free_object();
    n.l.multicast_bound(n.mc, 0, n.uc, false, n.ucsize, false, "CUDA_ERROR_INVALID_VALUE", site("cuMulticastBindMem", 23));
    n.l.multicast_device_added(n.mc, false, "CUDA_ERROR_INVALID_VALUE", site("cuMulticastAddDevice", 24));
    const Snapshot s = n.l.snapshot(Moment::exit, kAllOpen);
    std::set<std::string> what;
    for (const MisuseRow& m : s.misuse) what.insert(std::string(m.site.api) + ": " + m.what);
    CHECK(what == std::set<std::string>{"cuMulticastUnbind: unbind of a range with nothing bound",
                                        "cuMulticastBindMem: bind to a handle already released",
                                        "cuMulticastAddDevice: a handle already released"});
}

TEST_CASE("a context's end forgets what the driver no longer knows, as unfreed rows by site") {
    Ledger l;
    const OwnerId app = l.owner_id("app");
    l.allocated(0x1000, 4096, Kind::classic, site("cuMemAlloc", 1, app));
    l.allocated(0x2000, 8192, Kind::classic, site("cuMemAlloc", 1, app));
    l.allocated(0x3000, 512, Kind::host_pinned, site("cuMemAllocHost", 2, app));
    l.allocated(0x4000, 1024, Kind::async_pool, site("cuMemAllocAsync", 3, app));  // survives, as on the H200
    l.allocated(0x5000, 2048, Kind::array, site("cuArrayCreate", 5, app));
    std::vector<std::pair<std::uint64_t, Kind>> asked;
    const auto rows = l.forget_freed_by_driver([&](std::uint64_t p, Kind k) {
        asked.emplace_back(p, k);
        return p == 0x4000;
    });
    std::sort(asked.begin(), asked.end());
    // Each live allocation once, with its kind: an array's handle is no pointer the driver could be asked about.
    CHECK(asked == std::vector<std::pair<std::uint64_t, Kind>>{{0x1000, Kind::classic}, {0x2000, Kind::classic},
                                                               {0x3000, Kind::host_pinned}, {0x4000, Kind::async_pool},
                                                               {0x5000, Kind::array}});
    REQUIRE(rows.size() == 3);
    CHECK((rows[0].cls == LeakClass::unfreed && rows[0].kind == Kind::classic && rows[0].bytes == 12288 &&
           rows[0].allocations == 2 && rows[0].site.trace == 1));
    CHECK((rows[1].kind == Kind::array && rows[1].bytes == 2048 && rows[1].allocations == 1));
    CHECK((rows[2].kind == Kind::host_pinned && rows[2].bytes == 512 && rows[2].allocations == 1));
    const Snapshot s = l.snapshot(Moment::exit);
    CHECK(s.summary.live_bytes == 1024);
    CHECK(s.summary.unfreed_bytes == 1024);  // only the survivor is held at exit
    // A free of a pointer the driver took is the program's misuse, with the driver's answer.
    l.freed(0x1000, false, "CUDA_ERROR_INVALID_VALUE", site("cuMemFree", 4, app));
    CHECK(l.snapshot(Moment::exit).misuse.at(0).what == "free of an unknown pointer");
}

TEST_CASE("a mark's peak is the highest tracked total since the previous mark, even when it came and went") {
    Ledger l;
    const OwnerId torch = l.owner_id("pytorch");
    l.allocated(0x1000, 10 * MiB, Kind::classic, site("cuMemAlloc_v2", 1, torch));
    CHECK(l.take_peak_since_mark() == 10 * MiB);
    l.allocated(0x2000, 100 * MiB, Kind::classic, site("cuMemAlloc_v2", 1, torch));  // a temporary between marks
    l.freed(0x2000, true, "CUDA_SUCCESS", site("cuMemFree_v2", 2));
    l.allocated(0x3000, 1 * MiB, Kind::classic, site("cuMemAlloc_v2", 1, torch));
    CHECK(l.take_peak_since_mark() == 110 * MiB);
    CHECK(l.take_peak_since_mark() == 11 * MiB);  // the next interval starts at the total of the mark
    l.freed(0x1000, true, "CUDA_SUCCESS", site("cuMemFree_v2", 2));
    CHECK(l.take_peak_since_mark() == 11 * MiB);  // what was live at the last mark counts in this interval
    CHECK(l.take_peak_since_mark() == 1 * MiB);
}

TEST_CASE("at a mark, memory held and never mapped is held, not leaked; it leaks once it lost its last mapping") {
    Ledger l;
    const std::uint64_t va = 0x7f0000000000;
    // Made ahead of its map, as a buffer mapped at its first growth is.
    l.created(1, 4 * MiB, HandleType::none, site("cuMemCreate", 1));
    // Mapped and unmapped, its release forgotten: lost.
    l.created(2, 2 * MiB, HandleType::none, site("cuMemCreate", 2));
    l.reserved(va, 8 * MiB, site("cuMemAddressReserve", 3));
    l.mapped(va, 2 * MiB, 2, true, "CUDA_SUCCESS", site("cuMemMap", 4));
    l.unmapped(va, 2 * MiB, true, "CUDA_SUCCESS", site("cuMemUnmap", 5));
    Ledger::MarkLeaks m = l.leaks_at_mark();
    CHECK(m.leaked_bytes == 2 * MiB);
    CHECK(m.held_unmapped_bytes == 4 * MiB);
    REQUIRE(m.sites.size() == 1);
    CHECK(m.sites[0].first.trace == 2);
    CHECK(m.sites[0].second == 2 * MiB);

    // Mapped now: in use, neither held unmapped nor leaked.
    l.mapped(va + 2 * MiB, 4 * MiB, 1, true, "CUDA_SUCCESS", site("cuMemMap", 4));
    m = l.leaks_at_mark();
    CHECK(m.leaked_bytes == 2 * MiB);
    CHECK(m.held_unmapped_bytes == 0);
    // Its last mapping gone with its reference still held: a leak.
    l.unmapped(va + 2 * MiB, 4 * MiB, true, "CUDA_SUCCESS", site("cuMemUnmap", 5));
    m = l.leaks_at_mark();
    CHECK(m.leaked_bytes == 6 * MiB);
    CHECK(m.held_unmapped_bytes == 0);

    // A handle released before exit, never mapped, was only ever held; at exit one still held is a leak.
    l.created(3, 8 * MiB, HandleType::none, site("cuMemCreate", 6));
    CHECK(l.leaks_at_mark().held_unmapped_bytes == 8 * MiB);
    l.released(3, true, "CUDA_SUCCESS", site("cuMemRelease", 7));
    CHECK(l.leaks_at_mark().held_unmapped_bytes == 0);
    l.created(4, 2 * MiB, HandleType::none, site("cuMemCreate", 8));
    CHECK(l.leaks_at_mark().leaked_bytes == 6 * MiB);
    CHECK(l.snapshot(Moment::exit, kAllOpen).summary.leaked_bytes == 8 * MiB);
}

TEST_CASE("a handle value reused after its release starts never mapped again") {
    Ledger l;
    const std::uint64_t va = 0x7f0000000000;
    l.created(1, 2 * MiB, HandleType::none, site("cuMemCreate", 1));
    l.mapped(va, 2 * MiB, 1, true, "CUDA_SUCCESS", site("cuMemMap", 2));
    l.unmapped(va, 2 * MiB, true, "CUDA_SUCCESS", site("cuMemUnmap", 3));
    l.released(1, true, "CUDA_SUCCESS", site("cuMemRelease", 4));
    l.created(1, 2 * MiB, HandleType::none, site("cuMemCreate", 1));  // the same value, a new allocation
    const Ledger::MarkLeaks m = l.leaks_at_mark();
    CHECK(m.leaked_bytes == 0);
    CHECK(m.held_unmapped_bytes == 2 * MiB);
}

TEST_CASE("a snapshot names each owner's largest live sites, at most four, largest first") {
    Ledger l;
    const OwnerId nccl = l.owner_id("nccl"), torch = l.owner_id("pytorch");
    std::uint64_t ptr = 0x100000;
    for (TraceId t = 1; t <= 6; ++t)  // six nccl sites of 1 … 6 MiB, the fourth twice
        for (int n = 0; n < (t == 4 ? 2 : 1); ++n) l.allocated(ptr += 0x10000000, t * MiB, Kind::classic, site("cuMemAlloc_v2", t, nccl));
    l.allocated(ptr += 0x10000000, 64 * MiB, Kind::classic, site("cuMemAlloc_v2", 9, torch));
    const Snapshot s = l.snapshot(Moment::checkpoint);
    for (const OwnerRow& o : s.owners) {
        std::vector<std::pair<TraceId, std::uint64_t>> got;
        for (const auto& [at, bytes] : o.live_sites) got.emplace_back(at.trace, bytes);
        if (o.name == "nccl")
            CHECK(got == std::vector<std::pair<TraceId, std::uint64_t>>{{4, 8 * MiB}, {6, 6 * MiB}, {5, 5 * MiB}, {3, 3 * MiB}});
        else
            CHECK(got == std::vector<std::pair<TraceId, std::uint64_t>>{{9, 64 * MiB}});
    }
}
