// oom: the out-of-memory moment. When a wrapped allocation entry point answers CUDA_ERROR_OUT_OF_MEMORY, the
// program's own thread, still inside the wrapper, records the request and who held the device at that
// instant (report::Oom, whose parts add up to the driver's used memory), and the report is written at once,
// then at most once per oom_interval_s. A later success of the same request marks the record recovered.
//
// The wrapper holds no lock of the shim when it gets here (allocation calls take no order stripe before the
// driver call), so the work below — a cuMemGetInfo, O(owners + VMM allocations + graphs), one report write
// under the report mutex — cannot wait on the checkpoint thread in a cycle. The return code is untouched.
#pragma once

#include "shim/record/call.hpp"
#include "shim/services/cuda_api.hpp"
#include "shim/record/events.hpp"
#include "report/build.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <type_traits>
#include <vector>

namespace cumemaudit::shim {

class Recorder;

// The bytes an allocation call asked for (0 where the call names no size); nullopt for calls that are not
// allocations, whose failures make no OOM record.
template <typename Event, typename... A>
std::nullopt_t requested(Event, A...) { return std::nullopt; }
inline std::optional<std::uint64_t> requested(ev::Create, CUmemGenericAllocationHandle*, size_t size,
                                              const CUmemAllocationProp*, unsigned long long) { return size; }
inline std::optional<std::uint64_t> requested(ev::Reserve, CUdeviceptr*, size_t size, size_t, CUdeviceptr,
                                              unsigned long long) { return size; }
inline std::optional<std::uint64_t> requested(ev::AllocDevice, CUdeviceptr*, size_t size) { return size; }
inline std::optional<std::uint64_t> requested(ev::AllocPitch, CUdeviceptr*, size_t*, size_t width, size_t height,
                                              unsigned int) { return std::uint64_t{width} * height; }
inline std::optional<std::uint64_t> requested(ev::AllocManaged, CUdeviceptr*, size_t size, unsigned int) { return size; }
inline std::optional<std::uint64_t> requested(ev::AllocAsync, CUdeviceptr*, size_t size, CUstream) { return size; }
inline std::optional<std::uint64_t> requested(ev::AllocFromPool, CUdeviceptr*, size_t size, CUmemoryPool, CUstream) {
    return size;
}
inline std::optional<std::uint64_t> requested(ev::HostAlloc, void**, size_t size, unsigned int) { return size; }
inline std::optional<std::uint64_t> requested(ev::AllocHost, void**, size_t size) { return size; }
inline std::optional<std::uint64_t> requested(ev::IpcOpen, CUdeviceptr*, CUipcMemHandle, unsigned int) { return 0; }
inline std::optional<std::uint64_t> requested(ev::Instantiate, CUgraphExec*, CUgraph, unsigned long long) { return 0; }

// The breakdown at an OOM: parts of driver-used memory, largest first (see report::OomPart). Pure over its
// inputs, so it is unit-tested without a driver.
report::OomInput oom_breakdown(const ledger::Ledger&, const std::vector<report::Graph>& graphs,
                               std::uint64_t driver_used, std::uint64_t pool_reserved, std::uint64_t pool_used);

// The OOM records of this process and the rate limit on the reports they trigger. Thread-safe; a leaf lock.
class OomLog {
public:
    static constexpr std::size_t kKept = 64;  // records kept; later OOMs are only counted

    // `waiting` counts the records waiting for their retry, for the hot path (Recorder::Hot).
    explicit OomLog(std::atomic<int>& waiting) : pending_(waiting) {}

    // One relaxed load: is any record waiting for its retry? The success path of every allocation asks.
    bool pending() const { return pending_.load(std::memory_order_relaxed) > 0; }

    // Keeps the record; true when the report should be written now: the first OOM, then one per interval.
    bool refused(report::OomInput, int interval_s);
    // A call of `api` for `bytes` succeeded: records waiting for that retry are recovered.
    void succeeded(const char* api, std::uint64_t bytes, std::uint64_t time_ns);

    // PyTorch's pools, staged by cumemaudit_torch_pool() for the next torch_step or torch_oom.
    void stage_pool(report::TorchPool);
    std::vector<report::TorchPool> take_pools();
    // PyTorch raised OutOfMemoryError for `bytes`: its pools join the latest record that has none, or,
    // when the driver refused nothing first, `fallback` (a record of its own) is kept. True: write now (the
    // first PyTorch view of an OOM is always written).
    bool torch_oom(std::uint64_t bytes, report::OomInput fallback);

    std::vector<report::OomInput> records() const;
    std::uint64_t events() const;

private:
    bool due(std::chrono::steady_clock::time_point now, int interval_s);  // mu_ held
    mutable std::mutex mu_;
    std::vector<report::OomInput> records_;
    std::uint64_t events_ = 0;
    std::vector<report::TorchPool> staged_;
    bool written_ = false, torch_written_ = false;
    std::chrono::steady_clock::time_point last_write_{};
    std::atomic<int>& pending_;
};

// Called by the wrapper after the record of a call that answered CUDA_ERROR_OUT_OF_MEMORY (true: the report
// is due now, and the wrapper has the Auditor write it), or of a successful allocation while records wait
// for their retry.
bool out_of_memory(Call&, CUresult, std::uint64_t requested_bytes);
void allocation_succeeded(Call&, std::uint64_t requested_bytes);
// cumemaudit_torch_oom(): PyTorch's out-of-memory observer fired (the Python helper registers it). True:
// the report is due now.
bool torch_out_of_memory(Recorder&, std::uint64_t requested_bytes);

}  // namespace cumemaudit::shim
