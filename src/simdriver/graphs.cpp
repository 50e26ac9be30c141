// Streams, capture and graphs as plain objects (nothing executes), and graph memory: the allocations of a
// graph (allocation nodes, cuMemAllocAsync captured) commit their memory to the device's graph memory at the
// executable's first upload or launch, and it stays there after the executable's end until
// cuDeviceGraphMemTrim (docs/DRIVER.md, "Graph memory").
#include "state.hpp"
#include "state_impl.hpp"

namespace cumemaudit::sim {

namespace {
bool special_stream(CUstream st) { return st == nullptr || st == CU_STREAM_LEGACY || st == CU_STREAM_PER_THREAD; }
}  // namespace

// A stream takes room in its context: the context's beginning holds room for one, and each
// Config::stream_chunk_bytes more for kStreamsPerChunk (measured on an H100: the second stream took 2 MiB, and
// every fourth after it; past 33 live streams the H100 took 2 MiB every second one, not modelled). A destroy
// gives nothing back; the next stream reuses the room.
CUresult SimState::stream_create(CUstream* out) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    int dev = 0;
    if (CUresult r = s.current_device(&dev); r != CUDA_SUCCESS) return r;
    CUcontext ctx = s.home(tls_current);
    const std::uint64_t chunk = s.config.stream_chunk_bytes;
    if (chunk != 0 && ctx->streams_live == ctx->stream_room) {
        SimNode::Lock node(*s.node);
        if (!s.room_for(ctx->device, chunk) || !s.node->charge_classic(ctx->device, chunk)) return CUDA_ERROR_OUT_OF_MEMORY;
        ctx->reserved += chunk;
        ctx->stream_room += kStreamsPerChunk;
    }
    ++ctx->streams_live;
    auto* st = new CUstream_st{tls_current, false, {}, {}, nullptr};
    s.streams.insert(st);
    *out = st;
    return CUDA_SUCCESS;
}

namespace {
// Streams, graphs and executable graphs are plain objects the driver hands out: destroying one it does not
// know is the driver's `unknown` answer. Called with the state's mutex held.
template <typename Set, typename T>
CUresult destroy_object(bool initialized, Set& set, T* object, CUresult unknown) {
    if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (set.erase(object) == 0) return unknown;
    delete object;
    return CUDA_SUCCESS;
}
}  // namespace

CUresult SimState::stream_destroy(CUstream st) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    CUcontext ctx = s.initialized && s.streams.count(st) != 0 ? s.home(st->ctx) : nullptr;
    const CUresult r = destroy_object(s.initialized, s.streams, st, CUDA_ERROR_INVALID_HANDLE);
    if (r == CUDA_SUCCESS && ctx != nullptr && ctx->streams_live != 0) --ctx->streams_live;
    return r;
}

CUresult SimState::stream_check(CUstream st) const {
    std::lock_guard lock(impl_->mu);
    const Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (special_stream(st)) return tls_current == nullptr ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
    return s.streams.count(st) != 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult SimState::stream_begin_capture(CUstream st, CUstreamCaptureMode mode, CUgraph into) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (into != nullptr && s.graphs.count(into) == 0) return CUDA_ERROR_INVALID_VALUE;
    if (special_stream(st)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the default streams cannot capture
    if (s.streams.count(st) == 0) return CUDA_ERROR_INVALID_HANDLE;
    if (st->capturing) return CUDA_ERROR_ILLEGAL_STATE;
    st->capturing = true;
    st->mode = mode;
    st->captor = std::this_thread::get_id();
    st->graph = into != nullptr ? into : new CUgraph_st{};
    if (into == nullptr) s.graphs.insert(st->graph);
    return CUDA_SUCCESS;
}

// The CUDA programming guide's rule for "potentially unsafe" calls (a synchronous cuMemFree among them):
// refused while any capture in global mode is under way, or one in thread-local mode begun by this thread.
CUresult SimState::check_unsafe_during_capture() const {
    std::lock_guard lock(impl_->mu);
    for (CUstream st : impl_->streams)
        if (st->capturing && (st->mode == CU_STREAM_CAPTURE_MODE_GLOBAL ||
                              (st->mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL && st->captor == std::this_thread::get_id())))
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return CUDA_SUCCESS;
}

CUresult SimState::stream_end_capture(CUstream st, CUgraph* out) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (special_stream(st) || s.streams.count(st) == 0) return CUDA_ERROR_INVALID_HANDLE;
    if (!st->capturing) return CUDA_ERROR_ILLEGAL_STATE;
    st->capturing = false;
    *out = st->graph;
    st->graph = nullptr;
    return CUDA_SUCCESS;
}

CUresult SimState::stream_is_capturing(CUstream st, CUstreamCaptureStatus* out) const {
    std::lock_guard lock(impl_->mu);
    const Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (special_stream(st)) {
        *out = CU_STREAM_CAPTURE_STATUS_NONE;
        return CUDA_SUCCESS;
    }
    if (s.streams.count(st) == 0) return CUDA_ERROR_INVALID_HANDLE;
    *out = st->capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

CUresult SimState::graph_instantiate(CUgraphExec* out, CUgraph g, unsigned long long flags) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (s.graphs.count(g) == 0) return CUDA_ERROR_INVALID_VALUE;
    int dev = 0;
    if (CUresult r = s.current_device(&dev); r != CUDA_SUCCESS) return r;
    const std::uint64_t charged = s.config.graph_exec_bytes;
    if (charged != 0) {
        SimNode::Lock node(*s.node);
        s.reap_all();
        if (!s.node->charge_classic(dev, charged)) return CUDA_ERROR_OUT_OF_MEMORY;
    }
    auto* e = new CUgraphExec_st{dev, charged, g->allocs};
    e->auto_free = (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH) != 0;
    s.execs.insert(e);
    if (flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) {
        SimNode::Lock node(*s.node);
        if (CUresult r = s.commit(e); r != CUDA_SUCCESS) {
            s.execs.erase(e);
            if (charged != 0) s.node->uncharge_classic(dev, charged);
            delete e;
            return r;
        }
    }
    *out = e;
    return CUDA_SUCCESS;
}

CUresult SimState::graph_destroy(CUgraph g) {
    std::lock_guard lock(impl_->mu);
    for (CUstream st : impl_->streams)
        if (st->graph == g) return CUDA_ERROR_ILLEGAL_STATE;  // a capture is building it
    return destroy_object(impl_->initialized, impl_->graphs, g, CUDA_ERROR_INVALID_VALUE);
}

CUresult SimState::graph_exec_destroy(CUgraphExec e) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (s.initialized && s.execs.count(e) != 0 && e->charged != 0) {
        SimNode::Lock node(*s.node);
        s.node->uncharge_classic(e->device, e->charged);
    }
    return destroy_object(s.initialized, s.execs, e, CUDA_ERROR_INVALID_VALUE);
}

bool SimState::capturing(CUstream st) const {
    std::lock_guard lock(impl_->mu);
    return !special_stream(st) && impl_->streams.count(st) != 0 && st->capturing;
}

CUresult SimState::graph_create(CUgraph* out) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto* g = new CUgraph_st{};
    s.graphs.insert(g);
    *out = g;
    return CUDA_SUCCESS;
}

// Both locks held: an address for the allocation, nothing charged (measured: nothing moves until the upload).
CUresult SimState::Impl::add_graph_alloc(CUgraph g, std::uint64_t bytes, int dev, CUdeviceptr* va) {
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    const std::uint64_t at = arena.take(round_up(bytes, kClassicRound), kClassicRound);
    if (at == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    g->allocs.push_back(GraphAlloc{at, bytes, dev, false});
    g->nodes.push_back(std::make_unique<CUgraphNode_st>());
    *va = at;
    return CUDA_SUCCESS;
}

CUresult SimState::graph_add_alloc(CUgraphNode* node, CUgraph g, CUDA_MEM_ALLOC_NODE_PARAMS& params) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (s.graphs.count(g) == 0) return CUDA_ERROR_INVALID_VALUE;
    const CUmemPoolProps& p = params.poolProps;
    if (p.allocType != CU_MEM_ALLOCATION_TYPE_PINNED || p.location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        p.handleTypes != CU_MEM_HANDLE_TYPE_NONE)
        return CUDA_ERROR_INVALID_VALUE;
    if (CUresult r = s.check_device(p.location.id); r != CUDA_SUCCESS) return r;
    SimNode::Lock lock_node(*s.node);
    if (CUresult r = s.add_graph_alloc(g, params.bytesize, p.location.id, &params.dptr); r != CUDA_SUCCESS) return r;
    *node = g->nodes.back().get();
    return CUDA_SUCCESS;
}

CUresult SimState::graph_add_free(CUgraphNode* node, CUgraph g, CUdeviceptr ptr) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (s.graphs.count(g) == 0) return CUDA_ERROR_INVALID_VALUE;
    for (GraphAlloc& a : g->allocs)
        if (a.va == ptr && !a.freed_in_graph) {
            a.freed_in_graph = true;
            g->nodes.push_back(std::make_unique<CUgraphNode_st>());
            *node = g->nodes.back().get();
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult SimState::captured_alloc(CUstream st, std::size_t bytes, CUdeviceptr* out) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    int dev = 0;
    if (CUresult r = s.current_device(&dev); r != CUDA_SUCCESS) return r;
    SimNode::Lock node(*s.node);
    return s.add_graph_alloc(st->graph, bytes, dev, out);
}

bool SimState::captured_free(CUstream st, CUdeviceptr ptr) {
    std::lock_guard lock(impl_->mu);
    if (st == nullptr || st->graph == nullptr) return false;
    for (GraphAlloc& a : st->graph->allocs)
        if (a.va == ptr && !a.freed_in_graph) return a.freed_in_graph = true;
    return false;
}

// Both locks held. The first upload or launch commits the graph's allocations; one that outlived the last
// launch must be freed first (measured: the launch answers CUDA_ERROR_INVALID_VALUE), unless the executable
// frees it itself (auto-free on launch).
CUresult SimState::Impl::commit(CUgraphExec e) {
    for (const GraphAlloc& a : e->allocs) {
        if (a.freed_in_graph) continue;
        auto it = classic.find(a.va);
        if (it == classic.end() || !it->second.graph_kept) continue;
        if (!e->auto_free) return CUDA_ERROR_INVALID_VALUE;
        classic.erase(it);
    }
    if (!e->committed) {
        std::uint64_t bytes = 0;
        for (const GraphAlloc& a : e->allocs) bytes += a.bytes;
        if (bytes != 0) {
            if (!room_for(e->device, bytes) || !node->charge_classic(e->device, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
            const auto d = static_cast<std::size_t>(e->device);
            graph_memory[d] += bytes;
            graph_memory_high[d] = std::max(graph_memory_high[d], graph_memory[d]);
        }
        e->committed = true;
    }
    for (const GraphAlloc& a : e->allocs) {
        if (a.freed_in_graph) continue;
        Classic c{a.bytes, 0, 0, a.device, ClassicKind::device, nullptr};
        c.graph_kept = true;
        classic.emplace(a.va, c);
    }
    return CUDA_SUCCESS;
}

CUresult SimState::graph_launch(CUgraphExec e, CUstream st) {
    if (CUresult r = stream_check(st); r != CUDA_SUCCESS) return r;
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (s.execs.count(e) == 0) return CUDA_ERROR_INVALID_VALUE;
    SimNode::Lock node(*s.node);
    return s.commit(e);
}

CUresult SimState::graph_mem_trim(CUdevice dev) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (CUresult r = s.check_device(dev); r != CUDA_SUCCESS) return r;
    SimNode::Lock node(*s.node);
    s.trim_graph_memory(dev);
    return CUDA_SUCCESS;
}

CUresult SimState::graph_mem_attribute(CUdevice dev, CUgraphMem_attribute attr, cuuint64_t* value) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (CUresult r = s.check_device(dev); r != CUDA_SUCCESS) return r;
    const auto d = static_cast<std::size_t>(dev);
    switch (attr) {
        case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT:
        case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: *value = s.graph_memory[d]; return CUDA_SUCCESS;
        case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH:
        case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: *value = s.graph_memory_high[d]; return CUDA_SUCCESS;
        default: return CUDA_ERROR_INVALID_VALUE;
    }
}

}  // namespace cumemaudit::sim
