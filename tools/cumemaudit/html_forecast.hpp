// html_forecast: where a device's steps lead, as inline SVG: each step's peak (driver-used memory and what
// came and went since the mark before, the figure the forecast fits) against the step number, the device's
// total, and the forecast's projection from the last step to the out-of-memory step with its 90% bounds as a
// band. The x axis is step numbers, not marks, so the distance to the forecast step reads true.
#pragma once

#include "report/report.hpp"

#include <string>

namespace cumemaudit::cli {

// An <svg id="forecast-chart-DEVICE"> for a forecast with an out-of-memory step; empty otherwise, or when the
// report kept no numbered step of that device.
std::string forecast_chart_svg(const report::Report&, const report::Forecast&);

}  // namespace cumemaudit::cli
