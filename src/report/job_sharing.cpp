#include "job_sharing.hpp"
#include "saturating.hpp"

#include "site_key.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace cumemaudit::report {

std::string import_site_key(const std::string& handle_type, const Site& s) { return handle_type + '\n' + site_key(s, SiteKeyLines::match); }

ImportsBySite JobSharing::add(std::size_t index, const Report& r, JobRank& row) {
    for (const Export& e : r.exports) {
        auto [it, fresh] = exports_.try_emplace(e.key, Exported{index, e.bytes, e.released});
        if (!fresh) it->second.released = it->second.released && e.released;
    }
    ImportsBySite leaked_imports;
    for (const Import& i : r.imports) {
        const bool leaked = !i.released && !i.mapped;
        if (leaked) {
            add_saturating(row.imported_leaked_bytes, i.bytes);
            leaked_imports[import_site_key(i.handle_type, i.site)].push_back(&i);
        }
        if (!i.released) imports_.push_back(Imported{index, i.key, i.bytes, leaked});
    }
    return leaked_imports;
}

const JobSharing::Exported* JobSharing::exporter(const std::string& key) const {
    const auto e = exports_.find(key);
    return e == exports_.end() ? nullptr : &e->second;
}

std::uint64_t JobSharing::known_bytes(const std::string& key, std::uint64_t import_bytes) const {
    const Exported* e = exporter(key);
    return import_bytes != 0 || !e ? import_bytes : e->bytes;
}

JobSharing::Once JobSharing::leaked_once() const {
    Once once;
    std::set<std::string> counted;
    for (const Imported& i : imports_) {
        if (!i.leaked) continue;
        --once.allocations;  // the importer's summary counted it: the job counts it by key below
        const Exported* e = exporter(i.key);
        if (e && !e->released) continue;
        if (counted.insert(i.key).second) {
            add_saturating(once.bytes, known_bytes(i.key, i.bytes));
            ++once.allocations;
        }
    }
    return once;
}

void JobSharing::pinning(std::vector<JobRank>& ranks, JobReport& out) const {
    std::map<std::pair<std::size_t, std::size_t>, JobPinning> pairs;  // (importer, exporter) -> bytes, imports
    std::set<std::string> pinned;
    for (const Imported& i : imports_) {
        const Exported* e = exporter(i.key);
        if (!e || e->rank == i.importer) continue;
        const std::uint64_t bytes = known_bytes(i.key, i.bytes);
        JobPinning& p = pairs[{i.importer, e->rank}];
        p.bytes += bytes;
        ++p.imports;
        ranks[i.importer].pins_peers_bytes += bytes;
        // A legacy IPC open that is held (mapped, never closed): the importer's driver told it no size, so
        // its held row counted 0 B; the exporter's row says what it keeps alive.
        if (i.bytes == 0 && !i.leaked) {
            add_saturating(ranks[i.importer].held_at_exit_bytes, bytes);
            add_saturating(out.summary.process.unfreed_bytes, bytes);
        }
        if (pinned.insert(i.key).second) {  // many importers pin one allocation once
            ranks[e->rank].pinned_by_peers_bytes += e->bytes;
            out.summary.pinned_by_peers_bytes += e->bytes;
        }
    }
    std::vector<std::pair<std::pair<std::size_t, std::size_t>, JobPinning>> sorted(pairs.begin(), pairs.end());
    std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
    for (std::size_t n = 0; n < sorted.size() && n < kMaxPinningRows; ++n) {
        const auto& [who, p] = sorted[n];
        out.pinning.push_back({ranks[who.first].rank, ranks[who.second].rank, p.bytes, p.imports});
    }
    out.pinning_pairs = pairs.size();
}

}  // namespace cumemaudit::report
