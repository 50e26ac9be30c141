// job_outliers: the ranks that hold more than their peers. At each step the ranks share, per owner, a rank
// whose live bytes exceed the job's median by more than `mads` median absolute deviations, and by at least
// `floor_bytes`, stands out; the site that explains it is the one of that owner where the rank holds most
// above the job's median for that site (from the owners' live sites in each report). A job whose ranks hold
// the same flags nothing, however large; a job whose ranks differ by design (pipeline stages) names them.
//
// Bounded: steps are kept on a grid of multiples of a power-of-two stride, at most kOutlierSteps of them
// (the stride doubles as step numbers come in), each a dense column of live bytes per rank and owner. The
// stride depends only on the set of step numbers, never on the order reports arrive in.
#pragma once

#include "job.hpp"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cumemaudit::report {

inline constexpr std::size_t kOutlierSteps = 64;

class JobOutlierTable {
public:
    // The report of the rank at `rank_index` (its place in the order reports were added).
    void add(std::size_t rank_index, const Report&);
    // The flagged (rank, owner) pairs, largest excess first, at most kMaxOutlierRows; `ranks` by rank index.
    // Sets job.outliers, job.outlier_pairs and the rule.
    void finish(const OutlierRule&, const std::vector<JobRank>& ranks, JobReport& job) const;

private:
    struct Column {
        std::vector<std::uint8_t> present;                 // by rank index: 1 where the rank was at the step
        std::vector<std::uint64_t> total;                  // live bytes, every owner, by rank index
        std::map<std::uint16_t, std::vector<std::uint64_t>> by_owner;  // owner id -> live bytes by rank index
    };
    struct SiteCells {
        Site site;
        std::uint16_t owner = 0;
        std::vector<std::uint64_t> bytes;  // by rank index
    };
    std::uint16_t owner_id(const std::string& name);
    void coarsen();

    std::map<std::uint64_t, Column> columns_;  // by step number, multiples of stride_
    std::uint64_t stride_ = 1;
    std::map<std::string, std::uint16_t> owner_ids_;
    std::vector<std::string> owner_names_;
    std::map<std::string, SiteCells> sites_;  // owner id + site key -> the ranks' live bytes there
    std::size_t ranks_ = 0;                   // rank indexes added (an exec's earlier image is not)
};

}  // namespace cumemaudit::report
