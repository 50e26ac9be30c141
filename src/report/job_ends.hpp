// job_ends: how each rank of a job ended, read once from its report, so merge's text, job.json and the job
// page say the same thing of a rank whose chart line stops: a clean exit, a non-zero exit code, a signal,
// an allocation the driver refused, no exit report at all, or an exec.
#pragma once

#include "job.hpp"

#include <string>
#include <vector>

namespace cumemaudit::report {

// The end of the process that wrote `r`.
JobRankEnd rank_end(const Report& r);

// The ranks whose end is not clean, in the order of `ranks` (the job's rank_ends).
std::vector<JobEndRow> unclean_ends(const std::vector<JobRank>& ranks);

// Not clean: a person should hear of it (an exec is how a launcher goes on, and says nothing bad).
bool ended_badly(const JobRankEnd&);

}  // namespace cumemaudit::report
