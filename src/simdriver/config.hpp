// config: the simulated node's shape, read from CUMEMAUDIT_SIM_MEMORY and CUMEMAUDIT_SIM_DEVICES, and what a
// process's driver reserves on its own (CUMEMAUDIT_SIM_GRAPH_EXEC, CUMEMAUDIT_SIM_CONTEXT, CUMEMAUDIT_SIM_SMS,
// CUMEMAUDIT_SIM_HEAP_CODE, CUMEMAUDIT_SIM_GREEN_CONTEXT).
// Parsing is pure (no I/O) so it can be tested alone; cuInit prints the one error line it produces.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cumemaudit::sim {

inline constexpr int kSimFirstPciBus = 0x18;  // device d sits on PCI bus 0x18 + d (simulated NVML agrees)

struct Config {
    std::uint64_t memory_per_device = 80ull << 30;  // an H100/H200-class 80 GiB by default
    int devices = 8;                                // one HGX node
    // Device memory each instantiated graph holds until its executable is destroyed (kernel parameters,
    // launch descriptors in the real driver). 0 by default, so figures of other tests stay exact; set it to
    // make cuGraphInstantiate cost memory and fail with CUDA_ERROR_OUT_OF_MEMORY when the device is full.
    std::uint64_t graph_exec_bytes = 0;
    // What a context reserves on its device while it lives (docs/DRIVER.md, "Contexts, kernel stacks and
    // launches"): a fixed part, and the kernel stack of every thread the device can hold (CU_LIMIT_STACK_SIZE
    // x sms x kThreadsPerSm). Both 0 by default, so a context costs nothing and other tests' figures stay
    // exact; docs/SIMULATED_DRIVER.md gives an H200's settings.
    std::uint64_t context_bytes = 0;
    int sms = 0;
    // What the first module in a context with a kernel that calls malloc takes besides its code (docs/DRIVER.md,
    // "Device heap, printf FIFO and green contexts"). 0 by default, as the context's parts are.
    std::uint64_t heap_code_bytes = 0;
    // What a green context takes at its creation and keeps past its destroy, here until its device's primary
    // context ends. 0 by default, as the context's parts are.
    std::uint64_t green_context_bytes = 0;
    // How long a module or library load compiles its PTX before it takes any memory, in milliseconds: the real
    // driver JIT-compiles PTX at the load, which can take a second, and another process may allocate
    // meanwhile. 0 by default (no wait).
    int jit_ms = 0;
    // What a context takes for each kStreamsPerChunk streams beyond the one its beginning holds room for
    // (docs/DRIVER.md, "Streams"; an H100 took 2 MiB). 0 by default, as the context's parts are.
    std::uint64_t stream_chunk_bytes = 0;
};
inline constexpr unsigned kStreamsPerChunk = 4;

inline constexpr int kThreadsPerSm = 2048;  // CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR of an H200

// A byte count: plain digits ("1073741824"), or a number (fraction allowed) followed by a unit:
// binary KiB/MiB/GiB/TiB (also K/M/G/T), decimal KB/MB/GB/TB, B. Units are case-insensitive.
// The result is truncated to whole bytes; nullopt when malformed, zero or above 1 PiB.
std::optional<std::uint64_t> parse_size(std::string_view text);

struct ConfigResult {
    Config config;
    std::string error;  // empty when valid; otherwise the one line to print, naming variable and value
};

// Reads the environment (null means unset, i.e. the default): CUMEMAUDIT_SIM_MEMORY, CUMEMAUDIT_SIM_DEVICES,
// CUMEMAUDIT_SIM_GRAPH_EXEC, CUMEMAUDIT_SIM_CONTEXT, CUMEMAUDIT_SIM_HEAP_CODE, CUMEMAUDIT_SIM_GREEN_CONTEXT and
// CUMEMAUDIT_SIM_STREAM_CHUNK (sizes, as for the memory; "0" allowed),
// CUMEMAUDIT_SIM_SMS (an integer from 0 to kMaxSms), CUMEMAUDIT_SIM_JIT_MS (an integer from 0 to kMaxJitMs).
inline constexpr int kMaxSms = 1024;
inline constexpr int kMaxJitMs = 60000;
ConfigResult read_config(const char* memory, const char* devices, const char* graph_exec = nullptr,
                         const char* context = nullptr, const char* sms = nullptr, const char* heap_code = nullptr,
                         const char* green_context = nullptr, const char* jit_ms = nullptr,
                         const char* stream_chunk = nullptr);

}  // namespace cumemaudit::sim
