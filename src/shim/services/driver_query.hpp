// driver_query: the few questions the shim asks the driver itself, at marks and around graph instantiation
// only (never in bookkeeping on the allocation path): used and total memory, graph-memory attributes, and
// the current context. They go straight to the real entry points, past our own wrappers.
#pragma once

#include "history/types.hpp"
#include "shim/services/cuda_api.hpp"

#include <cstdint>
#include <utility>
#include <vector>

namespace cumemaudit::shim {

struct DriverMemory {
    bool known = false;
    std::uint64_t used = 0, total = 0;
    std::uint64_t graph_used = 0, graph_reserved = 0;  // cuDeviceGetGraphMemAttribute, where the driver has it
    std::uint64_t process_used = 0;                    // NVML's figure for this process (0: unknown)
    int device = -1;                                   // the current context's device (-1: unknown)
    bool processes_listed = false;                     // NVML listed the device's processes
    std::uint64_t other_processes_bytes = 0;           // every other process's, as NVML charges them
    std::vector<history::OtherProcess> other_processes;  // with WithNvml::processes only
};

// Needs a current context on this thread; `fallback` is made current first when none is (a sampler
// thread of our own borrows the program's context for the question).
// With `nvml`, also NVML's figures (marks and out-of-memory moments only: the first question loads NVML):
// `sums` this process's and the others' bytes, `processes` each other process by pid and command name.
enum class WithNvml : std::uint8_t { no, sums, processes };
DriverMemory driver_memory(CUcontext fallback = nullptr, WithNvml nvml = WithNvml::no);

// A stream-ordered pool's reserved, used and peak reserved bytes (cuMemPoolGetAttribute); not known when the
// driver will not say (a destroyed pool).
struct PoolFigures {
    bool known = false;
    std::uint64_t reserved = 0, used = 0, peak_reserved = 0;
};
PoolFigures ask_pool(CUmemoryPool pool);
// The graph memory a device holds (cuDeviceGetGraphMemAttribute, reserved); -1: the current context's.
std::uint64_t graph_memory_reserved(int device = -1);

// Each device's default pool (cuDeviceGetDefaultMemPool), by device ordinal.
std::vector<std::pair<int, CUmemoryPool>> default_pools();

// The calling thread's current context's device (cuCtxGetDevice), or -1.
int current_device();

// The current context's device and its used memory (cuMemGetInfo), for a measure around one call: not known
// without a current context. Never makes a context current.
struct DeviceUsed {
    bool known = false;
    int device = -1;
    std::uint64_t used = 0;
};
DeviceUsed device_used_now();

// Whether the driver loads module code at a kernel's first use (cuModuleGetLoadingMode: lazy, the default
// since CUDA 12.2) rather than at the load; asked once.
bool lazy_module_loading();

// The library a kernel handle belongs to (cuKernelGetLibrary), or null (a function's handle, too).
CUlibrary library_of_kernel(CUkernel kernel);

// Has the driver load a library kernel's code in the current context, as its launch there would
// (cuKernelGetFunction); false when it could not.
bool load_kernel_here(CUkernel kernel);

// The allocation holding ptr (cuMemGetAddressRange): its base and size; {0, 0} when the driver cannot say.
struct AddressRange {
    std::uint64_t base = 0, size = 0;
};
AddressRange allocation_holding(std::uint64_t ptr);

// The calling thread's current context, or null.
CUcontext current_context();

// Whether the driver still knows ptr (cuPointerGetAttribute): false only when it says the pointer is not
// one of its own (CUDA_ERROR_INVALID_VALUE), which is what a pointer freed by a context's end answers.
bool driver_knows_pointer(std::uint64_t ptr);
// Whether a device's primary context is active (cuDevicePrimaryCtxGetState); true when the driver cannot say.
bool primary_context_active(CUdevice dev);

}  // namespace cumemaudit::shim
