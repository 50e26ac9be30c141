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
