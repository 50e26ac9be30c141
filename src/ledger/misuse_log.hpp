// misuse_log: calls the driver rejected, aggregated by (api, result, what, site) with a count. Misuse is
// rare by nature, so one mutex is enough and the hot paths never touch it.
#pragma once

#include "ledger/types.hpp"

#include <map>
#include <mutex>
#include <tuple>

namespace cumemaudit::ledger::detail {

class MisuseLog {
public:
    void record(const Site&, const char* result, std::string_view what);
    std::vector<MisuseRow> rows() const;  // in first-seen order
    void clear();

private:
    // Compared by content, not pointer: api and result names may come from different string tables.
    using Key = std::tuple<std::string_view, std::string_view, std::string, TraceId, OwnerId>;
    struct Entry {
        MisuseRow row;
        std::uint64_t seq;
    };
    mutable std::mutex mu_;
    std::map<Key, Entry> rows_;
};

}  // namespace cumemaudit::ledger::detail
