// oom_breakdown: who held the device at an out-of-memory moment — driver-used memory split into parts,
// largest first, that add up to it exactly: live memory per owner and kind (less what is leaked or held
// unmapped), leaked VMM memory per site that created it (the largest kLeakSitesKept with their site, the rest
// per owner and kind), VMM memory held and never mapped yet, the same way, each graph's instantiate cost, idle pool memory, graph memory, the contexts' fixed parts and
// kernel stacks, other processes, and what nothing named. Pure over its inputs.
#pragma once

#include "history/types.hpp"
#include "ledger/ledger.hpp"

#include <cstdint>
#include <vector>

namespace cumemaudit::history {

inline constexpr std::size_t kLeakSitesKept = 8;

// What the driver and the pools said at the moment.
struct OomFigures {
    std::uint64_t driver_used = 0;
    std::uint64_t pool_reserved = 0, pool_used = 0;  // the device's stream-ordered pools
    std::uint64_t graph_memory = 0;
    std::uint64_t context = 0, local_memory = 0;  // what the device's contexts reserve (DeviceFigures)
    std::uint64_t managed_resident = 0;           // this process's managed memory the device holds
    std::uint64_t managed_prefetched = 0;         // of live managed memory, what the prefetches below moved there
    ledger::Site managed_prefetch_site;           // the prefetch call that moved the most
    std::uint64_t module_code = 0;                // the device's measured module code and globals
    std::uint64_t malloc_heap = 0;                // the device heaps its contexts reserved (DeviceFigures)
    int device = -1;  // >= 0: only what is on that device (a process that drives several)
    bool processes_listed = false;  // NVML listed the device's processes (none but this one is a list too)
    std::vector<OtherProcess> other_processes;  // every process but this one, any order
};

// Fills parts, leaked_bytes, unattributed_bytes, driver_used_bytes and processes_listed.
Oom oom_breakdown(const ledger::Ledger&, const std::vector<Graph>& graphs, const OomFigures&);

}  // namespace cumemaudit::history
