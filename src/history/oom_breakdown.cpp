#include "history/oom_breakdown.hpp"

#include <algorithm>
#include <map>
#include <numeric>

namespace cumemaudit::history {

namespace {

// The largest other processes one by one, the rest as one part (pid 0).
void add_other_processes(std::vector<OomPart>& parts, std::vector<OtherProcess> others) {
    std::stable_sort(others.begin(), others.end(), [](const OtherProcess& a, const OtherProcess& b) { return a.bytes > b.bytes; });
    std::uint64_t rest = 0;
    for (std::size_t i = 0; i < others.size(); ++i) {
        if (others[i].bytes == 0) continue;
        if (i < kOtherProcessesKept) {
            parts.push_back({PartKind::other_process, 0, {}, 0, others[i].bytes, {}, std::move(others[i])});
        } else {
            rest += others[i].bytes;
        }
    }
    if (rest != 0) parts.push_back({PartKind::other_process, 0, {}, 0, rest, {}, {}});
}

}  // namespace

Oom oom_breakdown(const ledger::Ledger& book, const std::vector<Graph>& graphs, const OomFigures& in) {
    std::vector<OomPart> parts;
    using Key = std::pair<ledger::OwnerId, ledger::Kind>;
    std::map<Key, std::uint64_t> set_apart, leaked_rest;  // set_apart: out of the owners' live parts
    std::uint64_t leaked = 0;
    std::size_t with_site = 0;
    for (const ledger::Ledger::OriginBytes& row : book.unreachable_by_origin(in.device)) {
        if (!ledger::counts_on_device(row.kind)) continue;
        set_apart[{row.site.owner, row.kind}] += row.bytes;
        leaked += row.bytes;
        if (with_site++ < kLeakSitesKept)
            parts.push_back({PartKind::leaked, row.site.owner, row.kind, 0, row.bytes, row.site, {}});
        else
            leaked_rest[{row.site.owner, row.kind}] += row.bytes;
    }
    for (const auto& [key, bytes] : leaked_rest) parts.push_back({PartKind::leaked, key.first, key.second, 0, bytes, {}, {}});
    // Held and never mapped: not leaked (the program may map it yet), not in use either; by the site that made it.
    std::map<Key, std::uint64_t> unmapped_rest;
    std::size_t unmapped_rows = 0;
    for (const ledger::Ledger::OriginBytes& row : book.unreachable_by_origin(in.device, ledger::Ledger::Unmapped::never_mapped)) {
        if (!ledger::counts_on_device(row.kind)) continue;
        set_apart[{row.site.owner, row.kind}] += row.bytes;
        if (unmapped_rows++ < kLeakSitesKept)
            parts.push_back({PartKind::held_unmapped, row.site.owner, row.kind, 0, row.bytes, row.site, {}});
        else
            unmapped_rest[{row.site.owner, row.kind}] += row.bytes;
    }
    for (const auto& [key, bytes] : unmapped_rest) parts.push_back({PartKind::held_unmapped, key.first, key.second, 0, bytes, {}, {}});
    for (const ledger::OwnerRow& o : in.device >= 0 ? book.owners_on_device(in.device) : book.owners_now()) {
        for (int k = 0; k < static_cast<int>(ledger::Kind::count); ++k) {
            const auto kind = static_cast<ledger::Kind>(k);
            if (!ledger::counts_on_device(kind)) continue;
            const auto it = set_apart.find({o.owner, kind});
            const std::uint64_t held = o.live_by_kind[k] - std::min(o.live_by_kind[k], it == set_apart.end() ? 0 : it->second);
            if (held != 0) parts.push_back({PartKind::live, o.owner, kind, 0, held, {}, {}});
        }
    }
    std::uint64_t pinned_rest = 0;  // past the sites kept: one part without a site
    std::size_t pinned_rows = 0;
    for (const ledger::Ledger::OriginBytes& row : book.dma_buf_pinned(in.device)) {
        if (!ledger::counts_on_device(row.kind)) continue;
        if (pinned_rows++ < kLeakSitesKept)
            parts.push_back({PartKind::dma_buf_pinned, row.site.owner, row.kind, 0, row.bytes, row.site, {}});
        else
            pinned_rest += row.bytes;
    }
    if (pinned_rest != 0) parts.push_back({PartKind::dma_buf_pinned, 0, ledger::Kind::classic, 0, pinned_rest, {}, {}});
    for (const Graph& g : graphs)
        if (g.held_instantiate_bytes > 0)
            parts.push_back({PartKind::graph, 0, {}, g.id, static_cast<std::uint64_t>(g.held_instantiate_bytes), {}, {}});
    if (in.pool_reserved > in.pool_used)
        parts.push_back({PartKind::async_pool_idle, 0, {}, 0, in.pool_reserved - in.pool_used, {}, {}});
    if (in.graph_memory != 0) parts.push_back({PartKind::graph_memory, 0, {}, 0, in.graph_memory, {}, {}});
    if (in.context != 0) parts.push_back({PartKind::context, 0, {}, 0, in.context, {}, {}});
    if (in.local_memory != 0) parts.push_back({PartKind::local_memory, 0, {}, 0, in.local_memory, {}, {}});
    if (in.managed_resident != 0)
        parts.push_back({PartKind::managed_resident, 0, {}, 0, in.managed_resident, in.managed_prefetch_site, {},
                         std::min(in.managed_prefetched, in.managed_resident)});
    if (in.module_code != 0) parts.push_back({PartKind::module_code, 0, {}, 0, in.module_code, {}, {}});
    if (in.malloc_heap != 0) parts.push_back({PartKind::malloc_heap, 0, {}, 0, in.malloc_heap, {}, {}});
    add_other_processes(parts, in.other_processes);
    const std::uint64_t named = std::accumulate(parts.begin(), parts.end(), std::uint64_t{0},
                                                [](std::uint64_t s, const OomPart& p) { return s + p.bytes; });
    // Module code no measured call took, a context's fixed part that was not measured (and other processes' memory when NVML could
    // not list them): what no wrapped call named. Zero when the named parts exceed driver-used memory (memory freed between the
    // failing call and the question).
    const std::uint64_t rest = in.driver_used > named ? in.driver_used - named : 0;
    if (rest != 0) parts.push_back({PartKind::unattributed, 0, {}, 0, rest, {}, {}});
    std::stable_sort(parts.begin(), parts.end(), [](const OomPart& a, const OomPart& b) { return a.bytes > b.bytes; });

    Oom oom;
    oom.parts = std::move(parts);
    oom.leaked_bytes = leaked;
    oom.unattributed_bytes = rest;
    oom.driver_used_bytes = in.driver_used;
    oom.processes_listed = in.processes_listed;
    return oom;
}

}  // namespace cumemaudit::history
