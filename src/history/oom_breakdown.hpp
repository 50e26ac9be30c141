// oom_breakdown: who held the device at an out-of-memory moment — driver-used memory split into parts,
// largest first, that add up to it exactly: live memory per owner and kind (less what is leaked), leaked
// VMM memory per site that created it (the largest kLeakSitesKept with their site, the rest per owner and
// kind), each graph's instantiate cost, idle pool memory, graph memory, and what nothing named. Pure over
// its inputs.
#pragma once

#include "history/types.hpp"
#include "ledger/ledger.hpp"

#include <cstdint>
#include <vector>

namespace cumemaudit::history {

inline constexpr std::size_t kLeakSitesKept = 8;

// `device` >= 0: only what is on that device (a process that drives several, whose driver-used figure is
// the failing device's). Fills parts, leaked_bytes, unattributed_bytes and driver_used_bytes.
Oom oom_breakdown(const ledger::Ledger&, const std::vector<Graph>& graphs, std::uint64_t driver_used,
                  std::uint64_t pool_reserved, std::uint64_t pool_used, std::uint64_t graph_memory = 0, int device = -1);

}  // namespace cumemaudit::history
