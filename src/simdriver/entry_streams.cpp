// Streams, capture and graphs as plain objects: enough for allocators and frameworks that capture
// graphs to run (nothing executes on a simulated device, so synchronisation returns at once).
#include "entry_guard.hpp"
#include "state.hpp"

using cumemaudit::sim::guarded;
using cumemaudit::sim::SimState;

namespace {

CUresult begin_capture(CUstream s, CUstreamCaptureMode mode, CUgraph into = nullptr) {
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    return SimState::get().stream_begin_capture(s, mode, into);
}

// Dependencies are not modelled: nothing executes, so order within a graph changes no figure.
CUresult begin_capture_to_graph(CUstream s, CUgraph g, CUstreamCaptureMode mode) {
    return g == nullptr ? CUDA_ERROR_INVALID_VALUE : begin_capture(s, mode, g);
}

CUresult instantiate_with_params(CUgraphExec* e, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS* p) {
    if (e == nullptr || p == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const CUresult r = SimState::get().graph_instantiate(e, g, p->flags);
    p->hErrNode_out = nullptr;
    p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return r;
}

CUresult end_capture(CUstream s, CUgraph* g) {
    return g == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().stream_end_capture(s, g);
}

// Nothing runs, so nothing to wait for; pools give idle memory back past their release threshold.
CUresult synchronize(CUstream s) {
    if (CUresult r = SimState::get().stream_check(s); r != CUDA_SUCCESS) return r;
    SimState::get().synchronized();
    return CUDA_SUCCESS;
}

CUresult is_capturing(CUstream s, CUstreamCaptureStatus* st) {
    return st == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().stream_is_capturing(s, st);
}

}  // namespace

extern "C" {

CUresult cuStreamCreate(CUstream* phStream, unsigned int Flags) {
    return guarded([&] {
        if (phStream == nullptr || (Flags & ~unsigned{CU_STREAM_NON_BLOCKING}) != 0) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().stream_create(phStream);
    });
}

// Priorities are not modelled: any is accepted, as the driver clamps one out of range (documented: cuda.h).
CUresult cuStreamCreateWithPriority(CUstream* phStream, unsigned int flags, int) {
    return cuStreamCreate(phStream, flags);
}

CUresult cuStreamDestroy_v2(CUstream hStream) {
    return guarded([&] { return SimState::get().stream_destroy(hStream); });
}

CUresult cuStreamSynchronize(CUstream hStream) {
    return guarded([&] { return synchronize(hStream); });
}
CUresult cuStreamSynchronize_ptsz(CUstream hStream) {
    return guarded([&] { return synchronize(hStream); });
}

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
    return guarded([&] { return begin_capture(hStream, mode); });
}
CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) {
    return guarded([&] { return begin_capture(hStream, mode); });
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph* phGraph) {
    return guarded([&] { return end_capture(hStream, phGraph); });
}
CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph* phGraph) {
    return guarded([&] { return end_capture(hStream, phGraph); });
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
    return guarded([&] { return is_capturing(hStream, captureStatus); });
}
CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus* captureStatus) {
    return guarded([&] { return is_capturing(hStream, captureStatus); });
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long flags) {
    return guarded([&] {
        return phGraphExec == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().graph_instantiate(phGraphExec, hGraph, flags);
    });
}

CUresult cuGraphInstantiateWithParams(CUgraphExec* phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
    return guarded([&] { return instantiate_with_params(phGraphExec, hGraph, params); });
}
CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec* phGraphExec, CUgraph hGraph, CUDA_GRAPH_INSTANTIATE_PARAMS* params) {
    return guarded([&] { return instantiate_with_params(phGraphExec, hGraph, params); });
}

CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph, const CUgraphNode*, const CUgraphEdgeData*, size_t,
                                     CUstreamCaptureMode mode) {
    return guarded([&] { return begin_capture_to_graph(hStream, hGraph, mode); });
}
CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph, const CUgraphNode*, const CUgraphEdgeData*,
                                          size_t, CUstreamCaptureMode mode) {
    return guarded([&] { return begin_capture_to_graph(hStream, hGraph, mode); });
}

CUresult cuGraphCreate(CUgraph* phGraph, unsigned int flags) {
    return guarded([&] { return phGraph == nullptr || flags != 0 ? CUDA_ERROR_INVALID_VALUE : SimState::get().graph_create(phGraph); });
}

CUresult cuGraphAddMemAllocNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode*, size_t,
                                CUDA_MEM_ALLOC_NODE_PARAMS* nodeParams) {
    return guarded([&] {
        if (phGraphNode == nullptr || nodeParams == nullptr) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().graph_add_alloc(phGraphNode, hGraph, *nodeParams);
    });
}

CUresult cuGraphAddMemFreeNode(CUgraphNode* phGraphNode, CUgraph hGraph, const CUgraphNode*, size_t, CUdeviceptr dptr) {
    return guarded([&] {
        return phGraphNode == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().graph_add_free(phGraphNode, hGraph, dptr);
    });
}

CUresult cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) {
    return guarded([&] { return SimState::get().graph_launch(hGraphExec, hStream); });
}
CUresult cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
    return guarded([&] { return SimState::get().graph_launch(hGraphExec, hStream); });
}
CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
    return guarded([&] { return SimState::get().graph_launch(hGraphExec, hStream); });
}
CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
    return guarded([&] { return SimState::get().graph_launch(hGraphExec, hStream); });
}

CUresult cuDeviceGraphMemTrim(CUdevice device) {
    return guarded([&] { return SimState::get().graph_mem_trim(device); });
}

CUresult cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr, void* value) {
    return guarded([&] {
        if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().graph_mem_attribute(device, attr, static_cast<cuuint64_t*>(value));
    });
}

CUresult cuGraphDestroy(CUgraph hGraph) {
    return guarded([&] { return SimState::get().graph_destroy(hGraph); });
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
    return guarded([&] { return SimState::get().graph_exec_destroy(hGraphExec); });
}

}  // extern "C"
