#include "job_sites.hpp"

#include "gate.hpp"
#include "site_key.hpp"

#include <algorithm>

namespace cumemaudit::report {
namespace {

std::string row_key(const Leak& l) { return l.cls + '\n' + l.handle_type + '\n' + l.owner + '\n' + site_key(l.site, SiteKeyLines::match); }

}  // namespace

// An imported row whose allocations the rank's leaked imports at the same site name exactly (their bytes add
// up to the row's) goes by export key, so an allocation several ranks leaked is counted once; any other
// row's allocations are this process's own.
void JobSiteTable::add_allocations(Row& row, const Leak& l, const ImportsBySite& leaked_imports) {
    const auto found = leaked_imports.find(import_site_key(l.handle_type, l.site));
    if (found != leaked_imports.end() && found->second.size() == l.allocations) {
        std::uint64_t sum = 0;  // the importer's row counts what it knows: an import of unknown size as 0
        for (const Import* i : found->second) sum += i->bytes;
        if (sum == l.bytes) {
            for (const Import* i : found->second) row.imported.emplace(i->key, i->bytes);
            return;
        }
    }
    row.own_bytes += l.bytes;
    row.own_allocations += l.allocations;
}

std::string JobSiteTable::add(std::int64_t rank, std::vector<Leak>& leaks, const ImportsBySite& leaked_imports) {
    std::string top_key;
    std::uint64_t top_bytes = 0;
    for (Leak& l : leaks) {
        if (!is_leak(l)) continue;
        std::string key = row_key(l);
        if (l.bytes > top_bytes || top_key.empty()) {
            top_bytes = l.bytes;
            top_key = key;
        }
        auto [it, fresh] = rows_.try_emplace(key);
        Row& row = it->second;
        add_allocations(row, l, leaked_imports);
        if (fresh) {
            row.leak = std::move(l);
            order_.push_back(std::move(key));
        } else {
            row.leak.references += l.references;
        }
        row.ranks.insert(rank);
    }
    return top_key;
}

std::vector<JobSite> JobSiteTable::finish(const JobSharing& sharing) {
    std::vector<std::pair<const std::string*, Row*>> rows;
    for (const std::string& k : order_) {
        Row& r = rows_.at(k);
        r.leak.bytes = r.own_bytes;
        r.leak.allocations = r.own_allocations + r.imported.size();
        for (const auto& [key, bytes] : r.imported) r.leak.bytes += sharing.known_bytes(key, bytes);
        rows.emplace_back(&k, &r);
    }
    std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second->leak.bytes > b.second->leak.bytes; });
    std::vector<JobSite> out;
    for (const auto& [key, r] : rows) {
        position_.emplace(*key, static_cast<std::int64_t>(out.size()));
        out.push_back({r->leak, r->ranks.size(), std::vector<std::int64_t>(r->ranks.begin(), r->ranks.end())});
    }
    return out;
}

std::int64_t JobSiteTable::position(const std::string& key) const { return key.empty() ? -1 : position_.at(key); }

}  // namespace cumemaudit::report
