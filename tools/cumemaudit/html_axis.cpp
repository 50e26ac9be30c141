#include "html_axis.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace cumemaudit::cli {
namespace {

// Tableau 10: distinguishable, and readable on white.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

}  // namespace

std::string owner_colour(std::size_t index) { return kPalette[index % std::size(kPalette)]; }

namespace chart {

Axis y_axis(std::uint64_t max_bytes) {
    const double max = std::max<double>(static_cast<double>(max_bytes), 1.0);
    Axis a{0, 0, 1, "B"};
    if (max >= 1024.0 * 1024 * 1024) a = {0, 0, 1024.0 * 1024 * 1024, "GiB"};
    else if (max >= 1024.0 * 1024) a = {0, 0, 1024.0 * 1024, "MiB"};
    else if (max >= 1024.0) a = {0, 0, 1024.0, "KiB"};
    const double raw = max / a.unit_bytes / 5;
    const double p = std::pow(10, std::floor(std::log10(raw)));
    const double step = raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
    a.tick_bytes = step * a.unit_bytes;
    a.top_bytes = std::ceil(max / a.tick_bytes) * a.tick_bytes;
    return a;
}

std::string tick_label(double bytes, const Axis& a) {
    const double v = bytes / a.unit_bytes;
    return v == std::floor(v) ? fmt::format("{:.0f} {}", v, a.unit) : fmt::format("{:.1f} {}", v, a.unit);
}

}  // namespace chart
}  // namespace cumemaudit::cli
