// job_sites: the leak sites of a job. One row per leak class, handle type and owner at the same site
// (site_key.hpp) across ranks, each allocation in it once: the rows' own allocations (one process's, distinct
// from any other rank's) summed, and imported allocations by export key, as several ranks may leak the same
// one. Rows held at exit stay in their rank's report: they are never a leak site of the job.
#pragma once

#include "job.hpp"
#include "job_sharing.hpp"

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace cumemaudit::report {

class JobSiteTable {
public:
    // Takes the rank's leak rows (moved from); returns the key of its largest, empty when it has none.
    std::string add(std::int64_t rank, std::vector<Leak>& leaks, const ImportsBySite& leaked_imports);

    // The sites, largest first, their bytes completed by what exporters say of imports of unknown size.
    std::vector<JobSite> finish(const JobSharing&);
    // After finish: the position of the site `add` named, -1 for an empty key.
    std::int64_t position(const std::string& key) const;

private:
    struct Row {
        Leak leak;  // first seen; references summed, bytes and allocations from the two below
        std::uint64_t own_bytes = 0, own_allocations = 0;
        std::map<std::string, std::uint64_t> imported;  // export key -> bytes (0: the importer did not learn them)
        std::set<std::int64_t> ranks;
    };
    static void add_allocations(Row&, const Leak&, const ImportsBySite&);

    std::unordered_map<std::string, Row> rows_;
    std::vector<std::string> order_;  // first seen first: the order sites of equal bytes keep
    std::unordered_map<std::string, std::int64_t> position_;
};

}  // namespace cumemaudit::report
