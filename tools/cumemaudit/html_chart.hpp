// html_chart: the stacked area chart of memory per owner over steps, as inline SVG written by the tool
// itself, so the page needs no library and no network to draw it, and a page without script still shows it
// whole. Tooltips are SVG <title>s; a few lines of script zoom and pan it.
#pragma once

#include "report/job.hpp"
#include "report/report.hpp"
#include "report/timeline.hpp"

#include <string>
#include <vector>

namespace cumemaudit::cli {

// Zoom and pan along the steps of memory_chart_svg's charts: the wheel zooms about the pointer, a drag pans,
// a double click shows every step again. Once per page, with its style.
extern const char* const kChartScript;
extern const char* const kChartStyle;

// One colour per owner in timeline order, shared by the chart's areas and the legend.
std::string owner_colour(std::size_t index);

// An <svg> with one <path class="area" data-owner=…> per owner (stacked, largest peak at the bottom), the
// driver-used line on top, alarm markers, axes in MiB/GiB and a hover column per step. Empty without steps.
std::string memory_chart_svg(const report::Report&, const report::Timeline&);

// A job: one line per rank in `drawn` (indices into job.ranks) of its leaked bytes over the steps the merge
// kept, with a legend. Empty without steps.
std::string job_leak_chart_svg(const report::JobReport&, const std::vector<std::size_t>& drawn);

// A job: every rank a row, every step (or bin of steps) a column, each cell red by the leaked bytes, white
// where nothing leaked; for the many ranks one chart of lines cannot tell apart. Empty without steps.
std::string job_heatmap_svg(const report::JobReport&);

}  // namespace cumemaudit::cli
