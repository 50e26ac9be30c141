// job_sharing: memory that crosses ranks. An allocation one rank exports and others import is in several
// reports under one export key; the job counts it once, and says whose imports pin whose memory.
#pragma once

#include "job.hpp"

#include <string>
#include <unordered_map>
#include <vector>

namespace cumemaudit::report {

// A rank's leaked imports (unreleased, unmapped) by the site that took them (import_site_key): the
// allocations its imported leak row at that site holds, known by export key. Points into the rank's report.
using ImportsBySite = std::unordered_map<std::string, std::vector<const Import*>>;
std::string import_site_key(const std::string& handle_type, const Site&);

class JobSharing {
public:
    // Records the exports and unreleased imports of the rank at `index` (into the job's ranks, in the order
    // added); sets row.imported_leaked_bytes. Returns the rank's leaked imports.
    ImportsBySite add(std::size_t index, const Report&, JobRank& row);

    // An import's bytes, or its exporter's where the importer could not learn them (a legacy IPC open: 0).
    std::uint64_t known_bytes(const std::string& key, std::uint64_t import_bytes) const;

    // Leaked imports each counted once by key, unless their exporter still holds them (its report counts
    // them then): the bytes to add to the ranks' own, and the allocations to add to the ranks' summed
    // leaked_allocations (which count every leaked import, so this may wrap below zero).
    struct Once {
        std::uint64_t bytes = 0, allocations = 0;
    };
    Once leaked_once() const;

    // Who pins whom: the ranks' pins_peers_bytes and pinned_by_peers_bytes, and the job's pinning rows,
    // pinning_pairs and pinned_by_peers_bytes. `ranks` in the order added.
    void pinning(std::vector<JobRank>& ranks, JobReport& out) const;

private:
    struct Exported {
        std::size_t rank;  // index into the job's ranks
        std::uint64_t bytes;
        bool released;     // the exporter holds no reference: its own report does not count the memory
    };
    struct Imported {  // an unreleased import, joined to its exporter once every report is read
        std::size_t importer;
        std::string key;
        std::uint64_t bytes;
        bool leaked;  // unreleased and unmapped: also counted in the importer's own leaked bytes
    };
    const Exported* exporter(const std::string& key) const;

    std::unordered_map<std::string, Exported> exports_;
    std::vector<Imported> imports_;
};

}  // namespace cumemaudit::report
