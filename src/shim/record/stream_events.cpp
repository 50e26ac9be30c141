// The events of streams made: what a creation takes of its context's device memory, measured around it and
// booked to the context with the creation's site (docs/DRIVER.md, "Streams"). The driver gives nothing back at
// a destroy (it reuses the room for the next stream), so destroys need nothing here. Not measured while a
// stream capture is open, as a first launch is not: the audit makes no driver question of its own then.
#include "shim/record/events.hpp"

#include "shim/record/measure_around.hpp"
#include "shim/record/recorder.hpp"
#include "shim/services/context_query.hpp"

namespace cumemaudit::shim {
namespace {

void stream_made(Call& call, CUresult r, CUstream* stream) {
    const std::int64_t moved = moved_since_before(call);
    if (r != CUDA_SUCCESS || stream == nullptr) return;
    const std::uint64_t took = moved > 0 ? static_cast<std::uint64_t>(moved) : 0;
    call.recorder().contexts().stream_made(current_context(), took, took != 0 ? call.site() : ledger::Site{});
}

}  // namespace

void prepare_stream_measure(Call& call) { look_before(call, !call.recorder().capturing()); }

void record(ev::StreamCreate, Call& call, CUresult r, CUstream* stream, unsigned int) { stream_made(call, r, stream); }
void record(ev::StreamCreate, Call& call, CUresult r, CUstream* stream, unsigned int, int) { stream_made(call, r, stream); }

}  // namespace cumemaudit::shim
