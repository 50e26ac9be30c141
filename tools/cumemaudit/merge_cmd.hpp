// merge_cmd: `cumemaudit merge`, one job report (schema cumemaudit/job/v1) from the per-rank reports of a
// job: the files read, a few ahead on worker threads, and reduced in order by report/job_reduce.hpp; the
// job written and its text printed.
#pragma once

#include "report/job.hpp"

#include <optional>
#include <string>
#include <vector>

namespace cumemaudit::cli {

// The job of `paths` (rank reports, or directories of them), problems listed in it; nullopt after printing
// them when no report could be read. `merge` and the views that take a directory (html, report, trace,
// diff) all merge through it; `rule` says when a rank stands out from the others.
std::optional<report::JobReport> merge_job(const std::vector<std::string>& paths, const report::OutlierRule& rule = {});

// Writes the job report to `out` (when not empty) and the text summary (`detail`: what it shows in full) to
// stdout. 0 when merged (problems are reported, not fatal), 2 when nothing could be merged or `out` cannot
// be written.
int merge_command(const std::vector<std::string>& paths, const std::string& out, const report::JobTextDetail& detail,
                  const report::OutlierRule& rule = {});

}  // namespace cumemaudit::cli
