// oom_records: the out-of-memory records of one process, at most kKept (later ones only counted), whether a
// retry recovered each, and the rate limit on the reports they trigger: the first at once, then one per
// interval. Pure: the caller locks and gives the time.
#pragma once

#include "history/types.hpp"

#include <chrono>
#include <cstdint>
#include <vector>

namespace cumemaudit::history {

class OomRecords {
public:
    static constexpr std::size_t kKept = 64;
    using Clock = std::chrono::steady_clock;

    struct Refusal {
        bool kept = false;  // the record waits for its retry
        bool due = false;   // write the report now
    };
    Refusal refused(Oom, Clock::time_point now, std::chrono::seconds interval);
    // A call of `api` for `bytes` succeeded: returns how many kept records it recovered.
    int succeeded(const std::string& api, std::uint64_t bytes, std::uint64_t time_ns);
    // PyTorch raised OutOfMemoryError: its pools join the latest record that has none, or, when the driver
    // refused nothing first, `fallback` is a record of its own. True: write now (PyTorch's first view).
    bool torch_oom(std::uint64_t bytes, std::vector<TorchPool> pools, Oom fallback, Clock::time_point now);

    const std::vector<Oom>& records() const { return records_; }
    std::uint64_t events() const { return events_; }

private:
    bool due(Clock::time_point now, std::chrono::seconds interval);
    std::vector<Oom> records_;
    std::uint64_t events_ = 0;
    bool written_ = false, torch_written_ = false;
    Clock::time_point last_write_{};
};

}  // namespace cumemaudit::history
