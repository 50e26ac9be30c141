// Streams, capture and graphs as plain objects: enough for allocators and frameworks that capture
// graphs to run (nothing executes on a simulated device, so synchronisation returns at once).
#include "entry_guard.hpp"
#include "state.hpp"

using cumemaudit::sim::guarded;
using cumemaudit::sim::SimState;

namespace {

CUresult begin_capture(CUstream s, CUstreamCaptureMode mode) {
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    return SimState::get().stream_begin_capture(s, mode);
}

CUresult end_capture(CUstream s, CUgraph* g) {
    return g == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().stream_end_capture(s, g);
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

CUresult cuStreamDestroy_v2(CUstream hStream) {
    return guarded([&] { return SimState::get().stream_destroy(hStream); });
}

CUresult cuStreamSynchronize(CUstream hStream) {
    return guarded([&] { return SimState::get().stream_check(hStream); });
}
CUresult cuStreamSynchronize_ptsz(CUstream hStream) {
    return guarded([&] { return SimState::get().stream_check(hStream); });
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

CUresult cuGraphInstantiateWithFlags(CUgraphExec* phGraphExec, CUgraph hGraph, unsigned long long) {
    return guarded([&] {
        return phGraphExec == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().graph_instantiate(phGraphExec, hGraph);
    });
}

CUresult cuGraphDestroy(CUgraph hGraph) {
    return guarded([&] { return SimState::get().graph_destroy(hGraph); });
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
    return guarded([&] { return SimState::get().graph_exec_destroy(hGraphExec); });
}

}  // extern "C"
