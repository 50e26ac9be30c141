#include "history/oom_records.hpp"

#include <utility>

namespace cumemaudit::history {

bool OomRecords::due(Clock::time_point now, std::chrono::seconds interval) {
    if (written_ && now - last_write_ < interval) return false;
    written_ = true;
    last_write_ = now;
    return true;
}

OomRecords::Refusal OomRecords::refused(Oom oom, Clock::time_point now, std::chrono::seconds interval) {
    ++events_;
    Refusal r;
    if (records_.size() < kKept) {
        records_.push_back(std::move(oom));
        r.kept = true;
    }
    r.due = due(now, interval);
    return r;
}

int OomRecords::succeeded(const std::string& api, std::uint64_t bytes, std::uint64_t time_ns) {
    int recovered = 0;
    for (Oom& r : records_) {
        if (r.recovered || r.requested_bytes != bytes || r.api != api) continue;
        r.recovered = true;
        r.recovered_time_ns = time_ns;
        ++recovered;
    }
    return recovered;
}

bool OomRecords::torch_oom(std::uint64_t bytes, std::vector<TorchPool> pools, Oom fallback, Clock::time_point now) {
    if (!records_.empty() && records_.back().torch_pools.empty() && records_.back().api != "torch") {
        records_.back().torch_pools = std::move(pools);
    } else {
        // PyTorch refused on its own (a memory fraction, or a driver OOM this shim did not see).
        ++events_;
        fallback.requested_bytes = bytes;
        fallback.torch_pools = std::move(pools);
        if (records_.size() < kKept) records_.push_back(std::move(fallback));
    }
    const bool first = !torch_written_;
    torch_written_ = true;
    if (first) {
        written_ = true;
        last_write_ = now;
    }
    return first;
}

}  // namespace cumemaudit::history
