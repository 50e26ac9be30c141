// graph_cost: "how big is one CUDA graph" — each captured graph's own cost and the running total, in
// capture order, as `cumemaudit report`, `html` and `trace` show it. Graphs captured one after another into
// one pool (vLLM's loop over batch sizes, largest first) reuse what earlier graphs reserved: the first pays
// for the pool, the later ones only for what they add, so a linear extrapolation from one graph is wrong.
#pragma once

#include "report.hpp"

#include <string>
#include <vector>

namespace cumemaudit::report {

struct GraphCost {
    const Graph* graph = nullptr;
    std::uint64_t new_bytes = 0;         // reserved during its capture (allocations the driver saw)
    std::uint64_t shareable_bytes = 0;   // reserved by graphs captured before it: what it may reuse in a shared pool
    std::int64_t instantiate_bytes = 0;  // driver-used delta across its instantiation(s)
    std::int64_t cumulative_bytes = 0;   // new + instantiate of this graph and all before it
};

std::vector<GraphCost> graph_costs(const Report&);

// The table, one line a graph and a total line; empty when the report has no graphs.
std::string graph_table(const Report&);

}  // namespace cumemaudit::report
