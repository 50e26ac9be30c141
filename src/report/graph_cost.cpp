#include "graph_cost.hpp"

#include "report/human_bytes.hpp"

#include <fmt/format.h>

namespace cumemaudit::report {
std::vector<GraphCost> graph_costs(const Report& r) {
    std::vector<GraphCost> out;
    std::uint64_t before = 0;
    std::int64_t total = 0;
    for (const Graph& g : r.graphs) {
        total += static_cast<std::int64_t>(g.bytes) + g.instantiate_cost_bytes;
        out.push_back({&g, g.bytes, before, g.instantiate_cost_bytes, total});
        before += g.bytes;
    }
    return out;
}

std::string graph_table(const Report& r) {
    if (r.graphs.empty()) return {};
    std::string out = "\nCUDA graphs (capture order): reserved during capture, reusable from earlier graphs, "
                      "instantiate cost, cumulative\n";
    auto it = std::back_inserter(out);
    fmt::format_to(it, "  {:>5} {:>6} {:>12} {:>12} {:>12} {:>12}\n", "graph", "step", "new", "earlier", "instantiate",
                   "cumulative");
    for (const GraphCost& c : graph_costs(r))
        fmt::format_to(it, "  {:>5} {:>6} {:>12} {:>12} {:>12} {:>12}\n", c.graph->id, c.graph->step,
                       human_bytes(c.new_bytes), human_bytes(c.shareable_bytes), human_signed_bytes(c.instantiate_bytes),
                       human_signed_bytes(c.cumulative_bytes));
    return out;
}

}  // namespace cumemaudit::report
