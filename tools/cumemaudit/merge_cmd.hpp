// merge_cmd: `cumemaudit merge`, one job report (schema cumemaudit/job/v1) from the per-rank reports of a
// job: leaks per rank, the worst ranks, leak sites aggregated across ranks, cross-rank pinning joined by
// export key, per-step growth summed by step number, and the problems found on the way (missing,
// truncated, duplicate or mismatched reports, ranks that left only a checkpoint). Reports are read one at a
// time and reduced at once, so memory grows with distinct sites and shared handles, not with the input.
#pragma once

#include <string>
#include <vector>

namespace cumemaudit::cli {

// Writes the job report to `out` (when not empty) and the text summary to stdout. 0 when merged (problems
// are reported, not fatal), 2 when nothing could be merged or `out` cannot be written.
int merge_command(const std::vector<std::string>& paths, const std::string& out);

}  // namespace cumemaudit::cli
