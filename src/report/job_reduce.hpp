// job_reduce: N rank reports into the job model (job.hpp), the arithmetic of `cumemaudit merge`: leaks per
// rank, the worst ranks, leak sites across ranks (job_sites.hpp), leaked imports counted once and who pins
// whom (job_sharing.hpp), steps per rank and summed by step number (job_steps.hpp), the ranks that stand out
// (job_outliers.hpp), and the problems found on the way (duplicate or mismatched ranks, ranks that left only
// a checkpoint, ranks with no report).
// Reports are added one at a time and reduced at once, so memory grows with distinct sites and shared
// handles, not with the number of reports.
#pragma once

#include "job.hpp"
#include "job_sharing.hpp"
#include "job_sites.hpp"
#include "job_outliers.hpp"
#include "job_steps.hpp"

#include <map>
#include <string>
#include <vector>

namespace cumemaudit::report {

inline constexpr std::size_t kJobWorstRanks = 5;

class JobReduce {
public:
    explicit JobReduce(const OutlierRule& rule = {}) : rule_(rule) {}
    // The report read from `file`; a rank already added is a problem, not merged.
    void add(const std::string& file, Report&&);
    // A problem of the job: a file that could not be read, a directory with no reports. rank -1: unknown.
    void problem(const std::string& file, std::int64_t rank, const std::string& what);
    bool empty() const { return ranks_.empty(); }
    const std::vector<JobProblem>& problems() const { return problems_; }
    // The job; once, after the last add.
    JobReport finish();

private:
    void check_world_size(const std::string& file, const ProcessInfo&);
    void add_forecasts(std::int64_t rank, const std::vector<Forecast>&);
    std::vector<std::int64_t> worst_ranks() const;
    std::vector<JobRank> by_rank() const;

    std::vector<JobRank> ranks_;                // in the order added
    std::map<std::int64_t, std::size_t> index_of_rank_;
    std::vector<std::string> top_site_;         // parallel to ranks_: the key of each rank's largest leak row
    std::int64_t world_size_ = -1;
    Summary summary_;
    JobSharing sharing_;
    JobSiteTable sites_;
    JobStepTable steps_;
    JobOutlierTable outliers_;
    OutlierRule rule_;
    std::vector<JobProblem> problems_;
    std::optional<JobForecast> earliest_;
};

}  // namespace cumemaudit::report
