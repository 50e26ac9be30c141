// The table of kernel handles launched: each handle's first launch is claimed once, among threads too; a
// refused first launch is forgotten so the next is measured; the table is bounded.
#include "shim/record/first_launches.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

using cumemaudit::shim::FirstLaunches;

namespace {
const void* handle(std::uintptr_t n) { return reinterpret_cast<const void*>(n * 64); }  // aligned, as the driver's
}  // namespace

TEST_CASE("a handle's first launch is claimed once; a forgotten one is claimed again; null never") {
    auto table = std::make_unique<FirstLaunches>();
    CHECK(table->claim(handle(1)));
    CHECK_FALSE(table->claim(handle(1)));
    CHECK(table->claim(handle(2)));
    table->forget(handle(1));
    CHECK_FALSE(table->claim(handle(2)));  // a handle placed past the forgotten one is still found
    CHECK(table->claim(handle(1)));
    CHECK_FALSE(table->claim(handle(1)));
    CHECK_FALSE(table->claim(nullptr));
}

TEST_CASE("threads launching the same new handles: each handle is claimed by exactly one") {
    auto table = std::make_unique<FirstLaunches>();
    constexpr int kThreads = 8, kHandles = 4096;
    std::atomic<int> claims{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&] {
            for (int h = 1; h <= kHandles; ++h) claims += table->claim(handle(h)) ? 1 : 0;
        });
    for (std::thread& t : threads) t.join();
    CHECK(claims == kHandles);
}

TEST_CASE("bounded: past the table's room a handle counts as launched before (not measured)") {
    auto table = std::make_unique<FirstLaunches>();
    std::size_t claimed = 0;
    for (std::uintptr_t h = 1; h <= FirstLaunches::kSlots * 2; ++h) claimed += table->claim(handle(h)) ? 1 : 0;
    CHECK(claimed <= FirstLaunches::kSlots);
    CHECK(claimed > FirstLaunches::kSlots / 2);
}
