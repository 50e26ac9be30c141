// job: the merged report of a job's ranks (`cumemaudit merge`), schema "cumemaudit/job/v1". Its `summary`
// has the fields of a process report's summary (each leaked allocation counted once across the job), so
// `cumemaudit check` gates a job with the same policy as a process: load_for_gate reads either kind.
#pragma once

#include "report.hpp"

namespace cumemaudit::report {

inline constexpr const char* kJobSchema = "cumemaudit/job/v1";

// A process report as load() reads it, or a job report seen as one process whose summary is the job's
// (process.argv = {"job"}, process.rank = -1). Throws ReportError "<path>: <problem>".
Report load_for_gate(const std::string& path);

}  // namespace cumemaudit::report
