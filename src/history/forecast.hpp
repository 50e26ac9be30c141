// forecast: when a device runs out of memory at the rate its steps show. Fed one point per numbered step (the
// step's peak driver-used memory, the device's total, the leaked bytes, the wall time), it keeps at most
// kPoints points over the whole run — when full, every other one goes and the stride doubles — so a mark
// costs the same at step 10 and at step 10 million.
//
// What it fits is the running peak (the highest peak so far: the step's own temporaries are what runs out),
// by Theil–Sen: the slopes between kept points at least a quarter of the span apart, whose median is the
// rate. Its bounds are a 90% interval: the slopes' own 20th and 80th percentiles at the least, widened by how
// much the rate varies from one sixteenth of the kept points to the next, as a random walk's spread grows with
// the steps still to come — stepwise growth (a larger buffer at each new high) is growth with an irregular
// rhythm, and its bounds cover the rhythm. The trend:
//   unknown     fewer than kMinPoints points;
//   flat        no rise: the low slope is 0, or the running peak rose over the last half by no more than
//               twice how far peaks typically sit below it (temporaries that vary set new highs now and
//               then; that is not growth);
//   converging  the last quarter rises at less than a quarter of the whole run's rate (a cache filling with
//               a bounded set of shapes);
//   leak        growth, and the leaked bytes grow at half its rate or more;
//   growing     growth otherwise (live memory held).
// Only leak and growing forecast an out-of-memory step: now plus the room left over the rate (its bounds
// over the high and low rates), and the wall time to it at the steps' pace. Pure: no I/O, no clock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cumemaudit::history {

struct ForecastPoint {
    std::uint64_t step = 0, time_ns = 0;
    std::uint64_t peak_bytes = 0;   // the step's peak driver-used memory
    std::uint64_t total_bytes = 0;  // the device's
    std::uint64_t leaked_bytes = 0;
};

struct Forecast {
    std::string trend = "unknown";  // unknown | flat | converging | growing | leak
    std::optional<std::uint64_t> oom_step, oom_step_low, oom_step_high;
    std::optional<double> oom_in_s;
    double rate_bytes_per_step = 0;  // the running peak's (0 below kMinPoints)
};

class Forecaster {
public:
    static constexpr std::size_t kPoints = 64, kMinPoints = 8;
    const Forecast& add(const ForecastPoint&);
    const Forecast& last() const { return forecast_; }

private:
    struct Kept {
        std::uint64_t step, time_ns, envelope, peak, leaked;
    };
    Forecast fit(const ForecastPoint& now) const;
    std::vector<Kept> kept_;
    std::uint64_t stride_ = 1, seen_ = 0, envelope_ = 0;
    Forecast forecast_;
};

}  // namespace cumemaudit::history
