#include "leak_rows.hpp"

#include <algorithm>

namespace cumemaudit::ledger::detail {

void LeakRows::add(LeakClass cls, const Site& site, HandleType ht, Kind kind, std::uint64_t alloc_id,
                   std::uint64_t bytes, std::uint32_t references, Location where, bool oldest) {
    auto [it, inserted] = rows_.try_emplace(Key{cls, site.api, site.trace, site.owner, ht, kind, where});
    Entry& e = it->second;
    if (inserted) {
        e.row.cls = cls;
        e.row.site = site;
        e.row.handle_type = ht;
        e.row.kind = kind;
        e.row.location = where;
        e.seq = rows_.size();
    }
    e.row.references += references;
    if (oldest && kind != Kind::multicast) e.row.own_bytes += bytes;  // a multicast object holds no memory
    if (e.has_alloc && e.last_alloc == alloc_id) return;
    e.has_alloc = true;
    e.last_alloc = alloc_id;
    e.row.bytes += bytes;
    ++e.row.allocations;
    if (cls == LeakClass::unreachable || cls == LeakClass::open_export) e.row.members.push_back({alloc_id, bytes});
}

std::vector<LeakRow> LeakRows::take() {
    std::vector<Entry> entries;
    entries.reserve(rows_.size());
    for (auto& kv : rows_) entries.push_back(std::move(kv.second));
    rows_.clear();
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
        if (a.row.bytes != b.row.bytes) return a.row.bytes > b.row.bytes;
        if (a.row.cls != b.row.cls) return a.row.cls < b.row.cls;
        return a.seq < b.seq;
    });
    std::vector<LeakRow> out;
    out.reserve(entries.size());
    for (auto& e : entries) out.push_back(std::move(e.row));
    return out;
}

}  // namespace cumemaudit::ledger::detail
