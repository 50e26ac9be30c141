// trace_cmd: `cumemaudit trace`, a report as Chrome trace / Perfetto JSON, so memory per owner can be
// read on the same timeline tools people already open for kernels (ui.perfetto.dev, chrome://tracing).
#pragma once

#include "report/job.hpp"
#include "report/report.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace cumemaudit::cli {

// The trace of several reports: one trace process per report (a rank), counter tracks per owner and for
// driver-used and unattributed bytes, instant events for steps, marks, alarms and (at the end) leaks.
// Timestamps are µs from the earliest first step of all reports. Same reports, same bytes.
nlohmann::json trace_json(const std::vector<report::Report>&);

// The trace of a job (a merged job report, or rank reports merged in memory): one trace process per rank
// with counters of its live and leaked bytes at the steps the merge kept, an instant where its leak began
// (with the line of its largest leak site) and one with what it leaked at the end.
nlohmann::json trace_job_json(const report::JobReport&);

// Writes the trace of `files` (reports, a merged job, or directories of rank reports) to `out`, or, when
// empty, to default_output(files, ".trace.json"), named on stdout. 0, or 2 when a report cannot be read or
// the trace cannot be written.
int trace_command(const std::vector<std::string>& files, const std::string& out);

}  // namespace cumemaudit::cli
