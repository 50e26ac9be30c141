// leak_rows: aggregation of leaked references and allocations into LSan-style rows, one per
// (class, site, handle type, kind). Shared by the VMM and classic halves of a snapshot so both sort and
// count the same way.
#pragma once

#include "ledger/types.hpp"

#include <map>
#include <tuple>

namespace cumemaudit::ledger::detail {

class LeakRows {
public:
    // One call per outstanding reference (or per unfreed allocation). Calls for the same allocation must
    // come one after another: an allocation is counted once per row, when its id first reaches the row.
    // `oldest`: this is the allocation's first call, whose row owns its bytes (LeakRow::own_bytes).
    void add(LeakClass, const Site&, HandleType, Kind, std::uint64_t alloc_id, std::uint64_t bytes,
             std::uint32_t references, Location = {}, bool oldest = true);
    // Largest first; equal sizes keep class order, then the order the rows were first seen.
    std::vector<LeakRow> take();

private:
    using Key = std::tuple<LeakClass, std::string_view, TraceId, OwnerId, HandleType, Kind, Location>;
    struct Entry {
        LeakRow row;
        std::uint64_t seq = 0;
        std::uint64_t last_alloc = 0;
        bool has_alloc = false;
    };
    std::map<Key, Entry> rows_;
};

}  // namespace cumemaudit::ledger::detail
