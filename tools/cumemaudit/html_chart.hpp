// html_chart: the stacked area chart of memory per owner over steps, as inline SVG written by the tool
// itself, so the page needs no library and no network to draw it, and a page without script still shows it
// whole. Tooltips are SVG <title>s; a few lines of script zoom and pan it.
#pragma once

#include "report/report.hpp"
#include "report/timeline.hpp"

#include <string>
#include <vector>

namespace cumemaudit::cli {

// Zoom and pan along the steps of memory_chart_svg's charts: the wheel zooms about the pointer, a drag pans,
// a double click shows every step again. Once per page, with its style.
extern const char* const kChartScript;
extern const char* const kChartStyle;

// An <svg> with one <path class="area" data-owner=…> per owner (stacked, largest peak at the bottom), the
// driver-used line on top, alarm markers, axes in MiB/GiB and a hover column per step. Empty without steps.
std::string memory_chart_svg(const report::Report&, const report::Timeline&);

}  // namespace cumemaudit::cli
