#include "history/forecast.hpp"

#include <algorithm>
#include <cmath>

namespace cumemaudit::history {
namespace {

struct Rates {
    double low = 0, median = 0, high = 0;
    bool known = false;
};

double percentile(std::vector<double>& v, double q) {
    const auto at = v.begin() + static_cast<std::ptrdiff_t>(q * static_cast<double>(v.size() - 1));
    std::nth_element(v.begin(), at, v.end());
    return *at;
}

// Theil–Sen over points [first, last) of `y`, pairs at least a quarter of the span apart.
template <class Points, class Y> Rates slopes(const Points& p, std::size_t first, std::size_t last, Y y) {
    Rates r;
    if (last - first < 2) return r;
    const double span = static_cast<double>(p[last - 1].step - p[first].step);
    std::vector<double> s;
    for (std::size_t i = first; i < last; ++i)
        for (std::size_t j = i + 1; j < last; ++j) {
            const double dx = static_cast<double>(p[j].step - p[i].step);
            if (dx <= 0 || dx < span / 4) continue;
            s.push_back((static_cast<double>(y(p[j])) - static_cast<double>(y(p[i]))) / dx);
        }
    if (s.empty()) return r;
    r.known = true;
    r.low = percentile(s, 0.2);
    r.median = percentile(s, 0.5);
    r.high = percentile(s, 0.8);
    return r;
}

std::uint64_t step_at(double step) { return static_cast<std::uint64_t>(std::ceil(step)); }

// How much the rate varies at the scale of the data: the running peak's rate over each of kBlocks equal runs
// of kept points, as a standard deviation per step of its rise, σ·√L (growth by jumps at random steps
// varies as a random walk does: its variance grows with the steps it spans).
template <class Points> double rhythm(const Points& p) {
    constexpr std::size_t kBlocks = 16;
    const std::size_t per = p.size() / kBlocks;
    if (per < 1) return 0;
    std::vector<double> rates;
    double steps = 0;
    for (std::size_t b = 0; b < kBlocks; ++b) {
        const auto& first = p[b * per];
        const auto& last = p[b + 1 == kBlocks ? p.size() - 1 : (b + 1) * per];
        const double dx = static_cast<double>(last.step - first.step);
        if (dx <= 0) continue;
        rates.push_back(static_cast<double>(last.envelope - first.envelope) / dx);
        steps += dx;
    }
    if (rates.size() < 2) return 0;
    double mean = 0, var = 0;
    for (double r : rates) mean += r / static_cast<double>(rates.size());
    for (double r : rates) var += (r - mean) * (r - mean) / static_cast<double>(rates.size() - 1);
    return std::sqrt(var * steps / static_cast<double>(rates.size()));
}

// The two-sided 90% interval of a normal variable, in standard deviations.
constexpr double kZ = 1.645;

}  // namespace

const Forecast& Forecaster::add(const ForecastPoint& p) {
    envelope_ = std::max(envelope_, p.peak_bytes);
    if (seen_++ % stride_ == 0) {
        kept_.push_back(Kept{p.step, p.time_ns, envelope_, p.peak_bytes, p.leaked_bytes});
        if (kept_.size() == kPoints) {
            std::vector<Kept> half;
            for (std::size_t i = 0; i < kept_.size(); i += 2) half.push_back(kept_[i]);
            kept_.swap(half);
            stride_ *= 2;
        }
    }
    forecast_ = fit(p);
    return forecast_;
}

Forecast Forecaster::fit(const ForecastPoint& now) const {
    Forecast f;
    // The latest point counts even between kept ones: the fit ends now.
    std::vector<Kept> p = kept_;
    if (p.empty() || p.back().step != now.step) p.push_back(Kept{now.step, now.time_ns, envelope_, now.peak_bytes, now.leaked_bytes});
    if (p.size() < kMinPoints) return f;
    const Rates all = slopes(p, 0, p.size(), [](const Kept& k) { return k.envelope; });
    if (!all.known) return f;
    f.rate_bytes_per_step = all.median;
    // How far peaks sit below the running peak, typically: what new highs of varying temporaries are made of.
    std::vector<double> below;
    for (const Kept& k : p) below.push_back(static_cast<double>(k.envelope - k.peak));
    const double noise = percentile(below, 0.5);
    const Kept& middle = p[p.size() / 2];
    const double rise = static_cast<double>(envelope_ - middle.envelope);
    if (all.low <= 0 || rise <= 2 * noise) {
        f.trend = "flat";
        return f;
    }
    const Rates recent = slopes(p, p.size() - p.size() / 4, p.size(), [](const Kept& k) { return k.envelope; });
    if (!recent.known || recent.median < all.median / 4) {
        f.trend = "converging";
        return f;
    }
    const Rates leaked = slopes(p, 0, p.size(), [](const Kept& k) { return k.leaked; });
    f.trend = leaked.known && leaked.median >= all.median / 2 ? "leak" : "growing";
    const double room = now.total_bytes > envelope_ ? static_cast<double>(now.total_bytes - envelope_) : 0.0;
    const double here = static_cast<double>(now.step);
    const double to_oom = room / all.median;
    f.oom_step = step_at(here + to_oom);
    // The bounds: the rate as fitted (its own spread over the fitted span), and what the growth's rhythm may
    // do over the steps still to come, both as the rate's relative error; never tighter than the slopes'.
    const double span = static_cast<double>(p.back().step - p.front().step);
    const double rel = rhythm(p) / all.median * std::sqrt(1 / std::max(to_oom, 1.0) + 1 / std::max(span, 1.0));
    const double fast = std::max(all.high, all.median * (1 + kZ * rel));
    const double slow = std::min(all.low, all.median * (1 - kZ * rel));
    f.oom_step_low = step_at(here + room / fast);
    // A rate that may be 0 bounds nothing: the high end is as far as the point is from now, ten times over.
    f.oom_step_high = step_at(here + (slow > 0 ? room / slow : 10 * to_oom));
    const double steps = static_cast<double>(now.step - p.front().step);
    if (steps > 0 && now.time_ns > p.front().time_ns)
        f.oom_in_s = (static_cast<double>(*f.oom_step) - here) * (static_cast<double>(now.time_ns - p.front().time_ns) / 1e9 / steps);
    return f;
}

}  // namespace cumemaudit::history
