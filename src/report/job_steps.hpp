// job_steps: the steps of a job — each rank's own series as the job views draw it, and the ranks' numbered
// steps summed by step number with the growth from one step to the next.
#pragma once

#include "job.hpp"

#include <map>

namespace cumemaudit::report {

// The rank's step records, oldest first (the folded windows, then the recent steps): its first step whose
// leaked_bytes > 0 into row.first_leak_step, and its numbered steps into row.steps, evenly sampled down to
// kJobRankSteps with that first leak kept.
void rank_steps(const Report&, JobRank& row);

// A job of many ranks keeps fewer steps a rank: at most kJobStepPoints in all (each rank at least
// kJobRankStepsLeast), sampled as rank_steps does, its first leak kept. The job file of 16,384 ranks stays tens
// of MB, and writing it stays within the merge's memory.
inline constexpr std::size_t kJobStepPoints = 262144, kJobRankStepsLeast = 8;
void thin_rank_steps(std::vector<JobRank>& ranks);

// The recent numbered steps of every rank, by step number; phases and samples have no number shared across
// ranks, and the folded windows keep no driver figure.
class JobStepTable {
public:
    void add(const std::vector<Step>& steps);
    std::vector<JobStep> finish() const;  // by step number; growth against the step before (0 for the first)

private:
    struct Sum {
        std::uint64_t live_bytes = 0, driver_used_bytes = 0, ranks = 0, leaked_bytes = 0;
    };
    std::map<std::uint64_t, Sum> steps_;
};

}  // namespace cumemaudit::report
