#include "shim/record/oom_log.hpp"

#include <algorithm>
#include <chrono>

namespace cumemaudit::shim {

bool OomLog::refused(history::Oom oom, int interval_s) {
    MutexLock lock(mu_);
    const auto r = records_.refused(std::move(oom), std::chrono::steady_clock::now(), std::chrono::seconds(std::max(interval_s, 0)));
    if (r.kept) pending_.fetch_add(1, std::memory_order_relaxed);
    return r.due;
}

void OomLog::succeeded(const char* api, std::uint64_t bytes, std::uint64_t time_ns) {
    MutexLock lock(mu_);
    if (const int n = records_.succeeded(api, bytes, time_ns); n != 0) pending_.fetch_sub(n, std::memory_order_relaxed);
}

bool OomLog::torch_oom(std::uint64_t bytes, std::vector<history::TorchPool> pools, history::Oom fallback) {
    MutexLock lock(mu_);
    return records_.torch_oom(bytes, std::move(pools), std::move(fallback), std::chrono::steady_clock::now());
}

void OomLog::copy_to(history::History& h) const {
    MutexLock lock(mu_);
    h.ooms = records_.records();
    h.oom_events = records_.events();
}

}  // namespace cumemaudit::shim
