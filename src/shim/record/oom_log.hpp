// oom_log: the recorder's keeper of out-of-memory records (history/oom_records.hpp): its lock, the clock,
// and the count of records waiting for their retry that the success path of every allocation reads. What
// makes a record is oom_watch.hpp; who held the device then is history/oom_breakdown.hpp.
#pragma once

#include "common/thread_annotations.hpp"
#include "history/history.hpp"
#include "history/oom_records.hpp"

#include <atomic>
#include <cstdint>
#include <vector>

namespace cumemaudit::shim {

class OomLog {
public:
    // `waiting` counts the records waiting for their retry, for the hot path (Recorder::Hot).
    explicit OomLog(std::atomic<int>& waiting) : pending_(waiting) {}

    // One relaxed load: is any record waiting for its retry? The success path of every allocation asks.
    bool pending() const { return pending_.load(std::memory_order_relaxed) > 0; }

    // Keeps the record; true when the report should be written now: the first OOM, then one per interval.
    bool refused(history::Oom, int interval_s);
    // A call of `api` for `bytes` succeeded: records waiting for that retry are recovered.
    void succeeded(const char* api, std::uint64_t bytes, std::uint64_t time_ns);
    // PyTorch raised OutOfMemoryError for `bytes` with these pools (history/oom_records.hpp). True: write now.
    bool torch_oom(std::uint64_t bytes, std::vector<history::TorchPool> pools, history::Oom fallback);

    void copy_to(history::History&) const;  // records and events

private:
    mutable Mutex mu_;
    history::OomRecords records_ GUARDED_BY(mu_);
    std::atomic<int>& pending_;
};

}  // namespace cumemaudit::shim
