// html_chart: the stacked area chart of memory per owner over steps, as inline SVG written by the tool
// itself, so the page needs no script, no library and no network to draw it. Tooltips are SVG <title>s.
#pragma once

#include "report/report.hpp"
#include "report/timeline.hpp"

#include <string>
#include <vector>

namespace cumemaudit::cli {

// One colour per owner in timeline order, shared by the chart's areas and the legend.
std::string owner_colour(std::size_t index);

// An <svg> with one <path class="area" data-owner=…> per owner (stacked, largest peak at the bottom), the
// driver-used line on top, alarm markers, axes in MiB/GiB and a hover column per step. Empty without steps.
std::string memory_chart_svg(const report::Report&, const report::Timeline&);

}  // namespace cumemaudit::cli
