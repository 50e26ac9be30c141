// The forecast against replays whose out-of-memory step is known: a regular leak, stepwise growth with an
// irregular rhythm (a larger buffer at each new high), a cache that converges, and a flat job whose
// temporaries vary widely. Each replay is a series of step peaks on an 80 GiB device, seeded.
#include "history/forecast.hpp"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

using cumemaudit::history::Forecast;
using cumemaudit::history::Forecaster;
using cumemaudit::history::ForecastPoint;

namespace {

constexpr double GiB = 1024.0 * 1024 * 1024, MiB = 1024.0 * 1024;
constexpr std::uint64_t kTotal = 80ull << 30;

struct Replay {
    std::vector<double> peak, leaked;  // per step, from step 1
    std::uint64_t oom_step = 0;        // the first whose peak reaches the device's total (0: none)
};

Replay finish(Replay r) {
    for (std::size_t k = 0; k < r.peak.size(); ++k)
        if (r.peak[k] >= static_cast<double>(kTotal)) return r.oom_step = k + 1, r;
    return r;
}

// 20 GiB held, 10 MiB leaked a step, temporaries of up to 2 GiB.
Replay regular_leak(unsigned seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> temp(0, 2 * GiB);
    Replay r;
    for (int k = 1; k <= 20000; ++k) {
        r.leaked.push_back(10 * MiB * k);
        r.peak.push_back(20 * GiB + 10 * MiB * k + temp(rng));
    }
    return finish(r);
}

// 20 GiB held; at irregular steps (every 40 on average) a larger buffer replaces the old, 0.2 to 1 GiB more,
// the old one never freed (leaked); temporaries of up to 256 MiB.
Replay stepwise(unsigned seed) {
    std::mt19937_64 rng(seed);
    std::geometric_distribution<int> gap(1.0 / 40);
    std::uniform_real_distribution<double> grow(0.2 * GiB, 1.0 * GiB), temp(0, 256 * MiB);
    Replay r;
    double held = 20 * GiB, leaked = 0;
    int next = 1 + gap(rng);
    for (int k = 1; k <= 20000; ++k) {
        if (k == next) {
            const double more = grow(rng);
            leaked += more;
            held += more;
            next = k + 1 + gap(rng);
        }
        r.leaked.push_back(leaked);
        r.peak.push_back(held + temp(rng));
    }
    return finish(r);
}

// A cache that fills towards 30 GiB (time constant 200 steps) over 20 GiB held.
Replay converging(unsigned seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> temp(0, 512 * MiB);
    Replay r;
    for (int k = 1; k <= 3000; ++k) {
        r.leaked.push_back(0);
        r.peak.push_back(20 * GiB + 30 * GiB * (1 - std::exp(-k / 200.0)) + temp(rng));
    }
    return finish(r);
}

// 30 GiB held, temporaries anywhere from 0 to 30 GiB.
Replay flat(unsigned seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> temp(15 * GiB, 5 * GiB);
    Replay r;
    for (int k = 1; k <= 3000; ++k) {
        r.leaked.push_back(0);
        r.peak.push_back(30 * GiB + std::clamp(temp(rng), 0.0, 30 * GiB));
    }
    return finish(r);
}

// The forecast after `upto` steps of `r`, each a second apart.
Forecast after(const Replay& r, std::size_t upto) {
    Forecaster f;
    Forecast last;
    for (std::size_t k = 0; k < upto; ++k)
        last = f.add(ForecastPoint{k + 1, (k + 1) * 1'000'000'000ull, static_cast<std::uint64_t>(r.peak[k]), kTotal,
                                   static_cast<std::uint64_t>(r.leaked[k])});
    return last;
}

}  // namespace

TEST_CASE("a regular leak: at a quarter of the way, the forecast is within 10% of the real step") {
    for (unsigned seed = 1; seed <= 10; ++seed) {
        const Replay r = regular_leak(seed);
        REQUIRE(r.oom_step > 0);
        const Forecast f = after(r, r.oom_step / 4);
        INFO("seed " << seed << ", real " << r.oom_step << ", forecast " << f.oom_step.value_or(0) << " " << f.trend);
        CHECK(f.trend == "leak");
        REQUIRE(f.oom_step);
        CHECK(std::abs(static_cast<double>(*f.oom_step) - r.oom_step) <= 0.10 * r.oom_step);
        CHECK((*f.oom_step_low <= *f.oom_step && *f.oom_step <= *f.oom_step_high));
        // A step a second: the wall time to it is the steps to it.
        CHECK(std::abs(*f.oom_in_s - static_cast<double>(*f.oom_step - r.oom_step / 4)) < 1.0);
    }
}

// The bounds are a 90% interval, and ten seeds are few to judge one by: twenty must see the real step inside
// at least three times in four.
TEST_CASE("stepwise growth: at half way, the real step lies within the bounds for most seeds, the point within 35%") {
    int inside = 0;
    for (unsigned seed = 1; seed <= 20; ++seed) {
        const Replay r = stepwise(seed);
        REQUIRE(r.oom_step > 0);
        const Forecast f = after(r, r.oom_step / 2);
        INFO("seed " << seed << ", real " << r.oom_step << ", forecast " << f.oom_step.value_or(0) << " ["
                     << f.oom_step_low.value_or(0) << ", " << f.oom_step_high.value_or(0) << "] " << f.trend);
        CHECK(f.trend == "leak");
        REQUIRE(f.oom_step);
        CHECK(std::abs(static_cast<double>(*f.oom_step) - r.oom_step) <= 0.35 * r.oom_step);
        inside += *f.oom_step_low <= r.oom_step && r.oom_step <= *f.oom_step_high;
    }
    CHECK(inside >= 15);
}

TEST_CASE("a cache that converges: no OOM forecast in the last half of the run, and never a leak") {
    for (unsigned seed = 1; seed <= 5; ++seed) {
        const Replay r = converging(seed);
        REQUIRE(r.oom_step == 0);
        Forecaster f;
        for (std::size_t k = 0; k < r.peak.size(); ++k) {
            const Forecast& now = f.add(ForecastPoint{k + 1, (k + 1) * 1'000'000'000ull, static_cast<std::uint64_t>(r.peak[k]),
                                                      kTotal, 0});
            INFO("seed " << seed << ", step " << k + 1 << ": " << now.trend);
            CHECK(now.trend != "leak");
            if (k + 1 > r.peak.size() / 2) CHECK_FALSE(now.oom_step);
        }
    }
}

TEST_CASE("a flat job whose temporaries vary widely: no OOM forecast after the first 100 steps") {
    for (unsigned seed = 1; seed <= 5; ++seed) {
        const Replay r = flat(seed);
        Forecaster f;
        for (std::size_t k = 0; k < r.peak.size(); ++k) {
            const Forecast& now = f.add(ForecastPoint{k + 1, (k + 1) * 1'000'000'000ull, static_cast<std::uint64_t>(r.peak[k]),
                                                      kTotal, 0});
            INFO("seed " << seed << ", step " << k + 1 << ": " << now.trend);
            if (k + 1 > 100) CHECK_FALSE(now.oom_step);
        }
    }
}

TEST_CASE("fewer than eight steps say nothing yet") {
    Forecaster f;
    for (std::uint64_t k = 1; k < Forecaster::kMinPoints; ++k) CHECK(f.add(ForecastPoint{k, k, k << 30, kTotal, 0}).trend == "unknown");
    CHECK(f.add(ForecastPoint{8, 8, 8ull << 30, kTotal, 0}).trend != "unknown");
}
