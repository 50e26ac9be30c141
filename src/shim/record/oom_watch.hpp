// oom_watch: the out-of-memory moment. When an entry point whose row watches refusals (events.inc) answers
// CUDA_ERROR_OUT_OF_MEMORY, the program's own thread, still inside the wrapper, records the request and who
// held the device at that instant, and asks for the report at once (Recorder::report_due), then at most
// once per oom_interval_s. A later success of the same request marks the record recovered.
//
// The wrapper holds no lock of the shim when it gets here (allocation calls take no order stripe before the
// driver call), so the work below — a cuMemGetInfo, O(owners + VMM allocations + graphs), one report write
// under the report mutex — cannot wait on the checkpoint thread in a cycle. The return code is untouched.
#pragma once

#include "shim/record/call.hpp"
#include "shim/services/context_query.hpp"
#include "shim/services/cuda_api.hpp"

#include <cstdint>
#include <string>

namespace cumemaudit::shim {

class Recorder;

// Called by the wrapper after the record of a call that answered CUDA_ERROR_OUT_OF_MEMORY (true: the report
// is due now), or of a successful allocation while records wait
// for their retry.
bool out_of_memory(Call&, CUresult, std::uint64_t requested_bytes);
// A launch refused for lack of memory (its kernel's stack could not grow, or its context's device heap did not
// fit): the record names the kernel, its local memory per thread and the heap limit it needed (-1: the
// stack's refusal). True: the report is due now.
bool launch_out_of_memory(Call&, CUresult, std::uint64_t requested_bytes, KernelFacts kernel, std::int64_t heap_bytes = -1);
void allocation_succeeded(Call&, std::uint64_t requested_bytes);
// cumemaudit_torch_oom(): PyTorch's out-of-memory observer fired (the Python helper registers it). True:
// the report is due now.
bool torch_out_of_memory(Recorder&, std::uint64_t requested_bytes);

}  // namespace cumemaudit::shim
