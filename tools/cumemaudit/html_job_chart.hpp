// html_job_chart: a job's charts, as inline SVG like the process chart (html_chart.hpp): the leaking ranks'
// lines over the steps, and every rank by step as a heatmap.
#pragma once

#include "report/job.hpp"

#include <string>
#include <vector>

namespace cumemaudit::cli {

// A job: one line per rank in `drawn` (indices into job.ranks) of its leaked bytes over the steps the merge
// kept, with a legend. Empty without steps.
std::string job_leak_chart_svg(const report::JobReport&, const std::vector<std::size_t>& drawn);

// A job: every rank a row, every step (or bin of steps) a column, each cell red by the leaked bytes (white
// where nothing leaked), or blue by the live bytes over the job's median at that step (white below the outlier floor);
// for the many ranks one chart of lines cannot tell apart. Empty without steps, and for excess without any.
enum class HeatOf { leaked, excess };
std::string job_heatmap_svg(const report::JobReport&, HeatOf = HeatOf::leaked);

}  // namespace cumemaudit::cli
