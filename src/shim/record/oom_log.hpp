// oom_log: the out-of-memory records of one Recorder — each refusal's request and who held the device at
// that instant (report::Oom, whose parts add up to the driver's used memory), whether a retry recovered it,
// and the rate limit on the reports they trigger. What makes a record is oom_watch.hpp.
#pragma once

#include "ledger/ledger.hpp"
#include "report/build.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

namespace cumemaudit::shim {

// The breakdown at an OOM: parts of driver-used memory, largest first (see report::OomPart). Pure over its
// inputs, so it is unit-tested without a driver. `device` >= 0: only what is on that device (a process that
// drives several, whose driver-used figure is the failing device's).
report::OomInput oom_breakdown(const ledger::Ledger&, const std::vector<report::Graph>& graphs,
                               std::uint64_t driver_used, std::uint64_t pool_reserved, std::uint64_t pool_used,
                               std::uint64_t graph_memory = 0, int device = -1);

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

}  // namespace cumemaudit::shim
