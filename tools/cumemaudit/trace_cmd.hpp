// trace_cmd: `cumemaudit trace`, a report as Chrome trace / Perfetto JSON, so memory per owner can be
// read on the same timeline tools people already open for kernels (ui.perfetto.dev, chrome://tracing).
#pragma once

#include "report/report.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace cumemaudit::cli {

// The trace of several reports: one trace process per report (a rank), counter tracks per owner and for
// driver-used and unattributed bytes, instant events for steps, marks, alarms and (at the end) leaks.
// Timestamps are µs from the earliest first step of all reports. Same reports, same bytes.
nlohmann::json trace_json(const std::vector<report::Report>&);

// Writes the trace of `files` to `out`. 0, or 2 when a report cannot be read or `out` cannot be written.
int trace_command(const std::vector<std::string>& files, const std::string& out);

}  // namespace cumemaudit::cli
