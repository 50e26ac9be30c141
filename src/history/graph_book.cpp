#include "history/graph_book.hpp"

#include <algorithm>

namespace cumemaudit::history {

std::size_t GraphBook::row(const void* graph, std::uint64_t step, std::uint64_t time_ns) {
    if (graph != nullptr)
        if (auto it = by_graph_.find(graph); it != by_graph_.end()) return it->second;
    Graph g;
    g.id = graphs_.size() + 1;
    g.step = step;
    g.time_ns = time_ns;
    graphs_.push_back(std::move(g));
    if (graph != nullptr) by_graph_[graph] = graphs_.size() - 1;
    return graphs_.size() - 1;
}

bool GraphBook::capture_began(const void* stream, const void* into, std::uint64_t step, std::uint64_t time_ns) {
    return capturing_.insert_or_assign(stream, row(into, step, time_ns)).second;
}

bool GraphBook::capture_ended(const void* stream, const void* graph) {
    auto it = capturing_.find(stream);
    if (it == capturing_.end()) return false;
    if (graph != nullptr) by_graph_[graph] = it->second;
    capturing_.erase(it);
    return true;
}

void GraphBook::captured(ledger::OwnerId owner, std::uint64_t bytes) {
    if (capturing_.empty()) return;
    // Allocations carry no stream: with several captures at once, the latest one begun is charged.
    std::size_t latest = 0;
    for (const auto& [stream, index] : capturing_) latest = std::max(latest, index);
    Graph& g = graphs_[latest];
    ++g.allocations;
    g.bytes += bytes;
    g.bytes_by_owner[owner] += bytes;
}

void GraphBook::allocated(const void* graph, ledger::OwnerId owner, std::uint64_t bytes, std::uint64_t step, std::uint64_t time_ns) {
    Graph& g = graphs_[row(graph, step, time_ns)];
    ++g.allocations;
    g.bytes += bytes;
    g.bytes_by_owner[owner] += bytes;
}

void GraphBook::destroyed(const void* graph) { by_graph_.erase(graph); }

void GraphBook::instantiated(const void* graph, const void* exec, std::int64_t delta) {
    auto it = by_graph_.find(graph);
    if (it == by_graph_.end()) return;  // a graph built by hand, not captured: not one of ours
    Graph& g = graphs_[it->second];
    ++g.instantiations;
    g.instantiate_cost_bytes += delta;
    g.held_instantiate_bytes += delta;
    execs_[exec] = {it->second, delta};
    exec_committed_[exec] = false;
}

bool GraphBook::awaits_commit(const void* exec) const {
    auto it = exec_committed_.find(exec);
    return it != exec_committed_.end() && !it->second;
}

void GraphBook::committed(const void* exec, std::uint64_t bytes) {
    auto it = execs_.find(exec);
    if (it == execs_.end()) return;
    exec_committed_[exec] = true;
    Graph& g = graphs_[it->second.first];
    g.graph_memory_bytes = std::max(g.graph_memory_bytes, bytes);
}

void GraphBook::trimmed() {
    for (auto& [exec, done] : exec_committed_) done = false;
}

void GraphBook::exec_destroyed(const void* exec) {
    auto it = execs_.find(exec);
    if (it == execs_.end()) return;
    graphs_[it->second.first].held_instantiate_bytes -= it->second.second;
    execs_.erase(it);
    exec_committed_.erase(exec);
}

}  // namespace cumemaudit::history
