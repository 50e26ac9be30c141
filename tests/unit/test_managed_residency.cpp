// Managed residency: what the device uses beyond every process's NVML figure, less the device's own rest
// learnt while the process held no managed memory, and never more than the managed memory it holds.
#include "shim/record/managed_residency.hpp"

#include <catch2/catch.hpp>

using cumemaudit::shim::ManagedResidency;

namespace {
constexpr std::uint64_t MiB = 1 << 20;
}

TEST_CASE("the device's uncharged rest is learnt while no managed memory is held, and left out after") {
    ManagedResidency m;
    CHECK(m.resident(0, 14 * MiB, 0) == 0);                     // the H200's rest, no managed memory: learnt
    CHECK(m.resident(0, 14 * MiB, 1024 * MiB) == 0);            // allocated, not touched: nothing moved
    CHECK(m.resident(0, 1038 * MiB, 1024 * MiB) == 1024 * MiB);  // touched: all of it, not the rest
    CHECK(m.resident(0, 1038 * MiB, 0) == 0);                   // freed, another process's managed memory left
}

TEST_CASE("what is named is bounded by the managed memory held, and devices keep their own rest") {
    ManagedResidency m;
    CHECK(m.resident(0, 10 * MiB, 0) == 0);
    CHECK(m.resident(1, 30 * MiB, 0) == 0);
    CHECK(m.resident(0, 4096 * MiB, 512 * MiB) == 512 * MiB);  // another process's managed memory is not ours
    CHECK(m.resident(1, 286 * MiB, 1024 * MiB) == 256 * MiB);
    CHECK(m.resident(2, 8 * MiB, 64 * MiB) == 8 * MiB);  // no rest learnt there yet: all that is uncharged counts
}

namespace {
cumemaudit::ledger::Site site_at(cumemaudit::ledger::TraceId trace) { return {"cuMemPrefetchAsync", trace, 1}; }
}

TEST_CASE("the prefetch site that moved the most live managed memory onto a device names it") {
    ManagedResidency m;
    CHECK(m.largest_mover(-1).bytes == 0);
    m.prefetched(0x1000, 256 * MiB, 0, site_at(7));  // one line, two allocations: one mover of 512 MiB
    m.prefetched(0x9000, 256 * MiB, 0, site_at(7));
    m.prefetched(0x5000, 384 * MiB, 0, site_at(9));
    m.prefetched(0x7000, 1024 * MiB, 1, site_at(11));  // another device
    CHECK(m.largest_mover(0).bytes == 512 * MiB);
    CHECK(m.largest_mover(0).site.trace == 7);
    CHECK(m.largest_mover(1).site.trace == 11);
    CHECK(m.largest_mover(-1).site.trace == 11);  // one device in all: every prefetch counts
    // Prefetched again, smaller: the larger extent stays; larger: it and its site replace it.
    m.prefetched(0x5000, 64 * MiB, 0, site_at(3));
    CHECK(m.largest_mover(0).site.trace == 7);
    m.prefetched(0x5000, 768 * MiB, 0, site_at(9));
    CHECK(m.largest_mover(0).bytes == 768 * MiB);
    CHECK(m.largest_mover(0).site.trace == 9);
    // Freed: its prefetches go, on every device.
    m.freed(0x5000);
    m.freed(0x7000);
    CHECK(m.largest_mover(0).site.trace == 7);
    CHECK(m.largest_mover(1).bytes == 0);
    m.freed(0x1000);
    m.freed(0x9000);
    CHECK(m.largest_mover(-1).bytes == 0);
}

TEST_CASE("prefetches kept are bounded: new allocations past the bound are not named, the kept ones still are") {
    ManagedResidency m;
    for (std::uint64_t i = 0; i < ManagedResidency::kPrefetchesKept + 100; ++i) m.prefetched(0x1000 * (i + 1), MiB, 0, site_at(1));
    CHECK(m.largest_mover(0).bytes == ManagedResidency::kPrefetchesKept * MiB);
    m.freed(0x1000);
    m.prefetched(0x1000 * (ManagedResidency::kPrefetchesKept + 200), MiB, 0, site_at(1));  // room again
    CHECK(m.largest_mover(0).bytes == ManagedResidency::kPrefetchesKept * MiB);
}

TEST_CASE("a context's end forgets the prefetches of what the driver freed with it, and only those") {
    ManagedResidency m;
    m.forget_freed_by_driver([](std::uint64_t) -> bool { FAIL("asked with nothing kept"); return true; });
    m.prefetched(0x1000, 256 * MiB, 0, site_at(7));
    m.prefetched(0x1000, 256 * MiB, 1, site_at(7));
    m.prefetched(0x5000, 64 * MiB, 0, site_at(9));
    int asked = 0;
    m.forget_freed_by_driver([&](std::uint64_t base) { ++asked; return base == 0x5000; });
    CHECK(asked == 2);  // each allocation once, whatever devices it was prefetched to
    CHECK(m.largest_mover(0).site.trace == 9);
    CHECK(m.largest_mover(1).bytes == 0);
}
