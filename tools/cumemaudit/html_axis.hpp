// html_axis: what the charts of a page share: their size and margins, a y axis in B/KiB/MiB/GiB with round
// ticks, and one colour per series, so the process chart and the job's charts read alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace cumemaudit::cli::chart {

inline constexpr double kWidth = 960, kHeight = 380;
inline constexpr double kLeft = 80, kRight = 170, kTop = 16, kBottom = 80;
inline constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;
inline constexpr std::size_t kMaxXLabels = 12;

// A tick spacing of 1, 2 or 5 times a power of ten in the unit the axis reads in, about five ticks.
struct Axis {
    double top_bytes, tick_bytes, unit_bytes;
    const char* unit;
};

Axis y_axis(std::uint64_t max_bytes);
std::string tick_label(double bytes, const Axis&);

}  // namespace cumemaudit::cli::chart

namespace cumemaudit::cli {

// One colour per owner in timeline order, shared by the chart's areas and the legend (and a job's ranks).
std::string owner_colour(std::size_t index);

}  // namespace cumemaudit::cli
