// marking: a mark taken now — the driver's figures for the device (through `fallback`'s context when the
// calling thread has none: the checkpoint thread borrows the program's), the stream-ordered pools looked at,
// then the timeline's mark. One way for the program's marks (the C API) and the checkpoint thread's samples.
#pragma once

#include "history/types.hpp"
#include "shim/services/cuda_api.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace cumemaudit::shim {

class Recorder;
struct DriverMemory;

struct MarkRequest {
    std::uint64_t step = 0;
    std::string label;  // "" for a numbered step
    std::uint64_t torch_allocated = 0, torch_reserved = 0;
    std::vector<history::TorchPool> torch_pools;
    CUcontext fallback = nullptr;
};

void mark_now(Recorder&, MarkRequest);

// The managed memory resident on the device of `m` (figures asked with NVML's sums) for `rec`'s process, as
// managed_residency.hpp reads it off: 0 where NVML did not list the processes. A mark and an OOM moment ask.
std::uint64_t managed_resident(Recorder& rec, const DriverMemory& m);

}  // namespace cumemaudit::shim
