// graph_book: the CUDA graphs of one process — what was allocated while a stream captured (or by a graph's
// allocation nodes), what instantiating each cost, and the graph memory its first launch committed. Keyed
// by the driver's handles as opaque pointers; pure: the caller locks, asks the driver, and counts captures
// for its hot path from what begin/end answer.
#pragma once

#include "history/types.hpp"

#include <cstdint>
#include <map>
#include <vector>

namespace cumemaudit::history {

class GraphBook {
public:
    // Into a graph of its own, or into `into` (capture to an existing graph), whose row it then shares. True
    // when the stream was not capturing before.
    bool capture_began(const void* stream, const void* into, std::uint64_t step, std::uint64_t time_ns);
    bool is_capturing(const void* stream) const { return capturing_.count(stream) != 0; }
    bool capture_ended(const void* stream, const void* graph);  // graph null: failed. True: it was capturing
    void captured(ledger::OwnerId, std::uint64_t bytes);      // an allocation during capture
    void allocated(const void* graph, ledger::OwnerId, std::uint64_t bytes, std::uint64_t step, std::uint64_t time_ns);
    void destroyed(const void* graph);  // its row stays; its handle no longer names it
    void instantiated(const void* graph, const void* exec, std::int64_t driver_used_delta);
    bool awaits_commit(const void* exec) const;
    void committed(const void* exec, std::uint64_t bytes);
    void trimmed();  // graph memory trimmed: every executable commits again at its next launch
    void exec_destroyed(const void* exec);

    const std::vector<Graph>& graphs() const { return graphs_; }

private:
    std::size_t row(const void* graph, std::uint64_t step, std::uint64_t time_ns);  // made when new
    std::vector<Graph> graphs_;
    std::map<const void*, std::size_t> capturing_;  // stream → row
    std::map<const void*, std::size_t> by_graph_;   // CUgraph → row
    std::map<const void*, std::pair<std::size_t, std::int64_t>> execs_;  // CUgraphExec → (row, its cost)
    std::map<const void*, bool> exec_committed_;
};

}  // namespace cumemaudit::history
