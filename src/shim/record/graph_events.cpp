// The graph rows' events: captures and what they allocate, instantiation's cost, and graph memory — a graph's
// allocations are committed to the device's graph memory at its first upload or launch (priced there, once
// per executable and trim), kept after the executable's end, and given back by cuDeviceGraphMemTrim.
#include "shim/record/events.hpp"

#include "shim/record/recorder.hpp"
#include "shim/services/driver_query.hpp"
#include "shim/services/wall_clock.hpp"

namespace cumemaudit::shim {
namespace {

// Driver-used and graph memory just before an instantiation, an executable's first launch or a trim.
thread_local DriverMemory t_before;
thread_local bool t_priced = false;

void instantiated(Call& call, CUresult r, CUgraphExec* exec, CUgraph graph) {
    const DriverMemory before = t_before;
    t_before = {};
    if (r != CUDA_SUCCESS || !before.known || exec == nullptr) return;
    const DriverMemory m = driver_memory();
    if (!m.known) return;
    Timeline& t = call.recorder().timeline();
    // An instantiation that uploads commits graph memory too: that part is the graph memory's, not its cost.
    const std::int64_t graph_grew = static_cast<std::int64_t>(m.graph_reserved) - static_cast<std::int64_t>(before.graph_reserved);
    t.instantiated(graph, *exec, static_cast<std::int64_t>(m.used) - static_cast<std::int64_t>(before.used) - std::max<std::int64_t>(graph_grew, 0));
    if (graph_grew > 0) t.committed(*exec, static_cast<std::uint64_t>(graph_grew));
}

}  // namespace

void record(ev::CaptureBegin, Call& call, CUresult r, CUstream stream, CUstreamCaptureMode) {
    if (r == CUDA_SUCCESS) call.recorder().timeline().capture_began(stream);
}

void record(ev::CaptureBegin, Call& call, CUresult r, CUstream stream, CUgraph graph, const CUgraphNode*,
            const CUgraphEdgeData*, size_t, CUstreamCaptureMode) {
    if (r == CUDA_SUCCESS) call.recorder().timeline().capture_began(stream, graph);
}

void record(ev::CaptureEnd, Call& call, CUresult r, CUstream stream, CUgraph* graph) {
    // A failed end (an invalidated capture) still ends the capture.
    call.recorder().timeline().capture_ended(stream, r == CUDA_SUCCESS && graph != nullptr ? *graph : nullptr);
}

// Instantiation is rare and slow (milliseconds): two cuMemGetInfo around it price the graph.
void prepare(ev::Instantiate, Call&, CUgraphExec*, CUgraph, unsigned long long) { t_before = driver_memory(); }
void prepare(ev::Instantiate, Call&, CUgraphExec*, CUgraph, CUDA_GRAPH_INSTANTIATE_PARAMS*) { t_before = driver_memory(); }

void record(ev::Instantiate, Call& call, CUresult r, CUgraphExec* exec, CUgraph graph, unsigned long long) {
    instantiated(call, r, exec, graph);
}
void record(ev::Instantiate, Call& call, CUresult r, CUgraphExec* exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS*) {
    instantiated(call, r, exec, graph);
}

void record(ev::ExecDestroy, Call& call, CUresult r, CUgraphExec exec) {
    if (r == CUDA_SUCCESS) call.recorder().timeline().exec_destroyed(exec);
}

// Its handle may come back for another graph, which is a graph of its own.
void record(ev::GraphDestroy, Call& call, CUresult r, CUgraph graph) {
    if (r == CUDA_SUCCESS) call.recorder().timeline().graph_destroyed(graph);
}

void record(ev::GraphAllocNode, Call& call, CUresult r, CUgraphNode*, CUgraph graph, const CUgraphNode*, size_t,
            CUDA_MEM_ALLOC_NODE_PARAMS* params) {
    if (r != CUDA_SUCCESS || params == nullptr || params->dptr == 0) return;
    const ledger::Site& site = call.site();
    call.recorder().ledger().allocated(params->dptr, params->bytesize, ledger::Kind::graph, site);
    call.recorder().timeline().graph_allocated(graph, site.owner, params->bytesize);
}

// Only an executable's first launch (and its first after a trim) is priced: the rest pay one lookup.
void prepare(ev::GraphLaunch, Call& call, CUgraphExec exec, CUstream) {
    t_priced = call.recorder().timeline().awaits_commit(exec);
    if (t_priced) t_before.graph_reserved = graph_memory_reserved();
}

void record(ev::GraphLaunch, Call& call, CUresult r, CUgraphExec exec, CUstream) {
    if (!t_priced) return;
    t_priced = false;
    if (r != CUDA_SUCCESS) return;
    const std::uint64_t after = graph_memory_reserved();
    call.recorder().timeline().committed(exec, after > t_before.graph_reserved ? after - t_before.graph_reserved : 0);
}

void prepare(ev::GraphMemTrim, Call&, CUdevice device) { t_before.graph_reserved = graph_memory_reserved(device); }

void record(ev::GraphMemTrim, Call& call, CUresult r, CUdevice device) {
    if (r != CUDA_SUCCESS) return;
    Timeline& t = call.recorder().timeline();
    t.graph_memory_trimmed();
    const std::uint64_t after = graph_memory_reserved(device);
    if (t_before.graph_reserved <= after) return;
    history::Return m;
    m.what = "graph_memory";
    m.why = "trim";
    m.api = call.api();
    m.device = device;
    m.time_ns = wall_clock_ns();
    m.bytes = t_before.graph_reserved - after;
    t.memory_returned(std::move(m), call.site());
}

}  // namespace cumemaudit::shim
