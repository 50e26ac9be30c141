#include "misuse_log.hpp"

#include <algorithm>

namespace cumemaudit::ledger::detail {

void MisuseLog::record(const Site& site, const char* result, std::string_view what) {
    if (result == nullptr) result = "";
    std::lock_guard lock(mu_);
    Key key{site.api, result, std::string(what), site.trace, site.owner};
    auto [it, inserted] = rows_.try_emplace(std::move(key));
    if (inserted) it->second = Entry{MisuseRow{site, result, std::string(what), 0}, rows_.size()};
    ++it->second.row.count;
}

std::vector<MisuseRow> MisuseLog::rows() const {
    std::lock_guard lock(mu_);
    std::vector<const Entry*> entries;
    entries.reserve(rows_.size());
    for (const auto& kv : rows_) entries.push_back(&kv.second);
    std::sort(entries.begin(), entries.end(), [](const Entry* a, const Entry* b) { return a->seq < b->seq; });
    std::vector<MisuseRow> out;
    out.reserve(entries.size());
    for (const Entry* e : entries) out.push_back(e->row);
    return out;
}

void MisuseLog::clear() {
    std::lock_guard lock(mu_);
    rows_.clear();
}

}  // namespace cumemaudit::ledger::detail
