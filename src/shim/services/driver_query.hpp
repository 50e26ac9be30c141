// driver_query: the few questions the shim asks the driver itself, at marks and around graph instantiation
// only (never in bookkeeping on the allocation path): used and total memory, graph-memory attributes, and
// the current context. They go straight to the real entry points, past our own wrappers.
#pragma once

#include "shim/services/cuda_api.hpp"

#include <cstdint>

namespace cumemaudit::shim {

struct DriverMemory {
    bool known = false;
    std::uint64_t used = 0, total = 0;
    std::uint64_t graph_used = 0, graph_reserved = 0;  // cuDeviceGetGraphMemAttribute, where the driver has it
    std::uint64_t process_used = 0;                    // NVML's figure for this process (0: unknown)
};

// Needs a current context on this thread; `fallback` is made current first when none is (a sampler
// thread of our own borrows the program's context for the question).
// With `nvml`, also this process's own figure from NVML (marks only: the first asks loads NVML).
enum class WithNvml : bool { no, yes };
DriverMemory driver_memory(CUcontext fallback = nullptr, WithNvml nvml = WithNvml::no);

// The calling thread's current context, or null.
CUcontext current_context();

// Whether the driver still knows ptr (cuPointerGetAttribute): false only when it says the pointer is not
// one of its own (CUDA_ERROR_INVALID_VALUE), which is what a pointer freed by a context's end answers.
bool driver_knows_pointer(std::uint64_t ptr);
// Whether a device's primary context is active (cuDevicePrimaryCtxGetState); true when the driver cannot say.
bool primary_context_active(CUdevice dev);

}  // namespace cumemaudit::shim
