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
