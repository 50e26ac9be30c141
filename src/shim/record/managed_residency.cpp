#include "shim/record/managed_residency.hpp"

#include <algorithm>
#include <limits>
#include <vector>

namespace cumemaudit::shim {

namespace {
constexpr int kAnyDevice = std::numeric_limits<int>::min();  // below every device in a (base, device) key
}

std::uint64_t ManagedResidency::resident(int device, std::uint64_t uncharged, std::uint64_t live_managed) {
    MutexLock lock(mu_);
    std::uint64_t& baseline = baseline_[device];
    if (live_managed == 0) {
        baseline = uncharged;
        return 0;
    }
    return std::min(live_managed, uncharged - std::min(uncharged, baseline));
}

void ManagedResidency::prefetched(std::uint64_t base, std::uint64_t bytes, int device, const ledger::Site& site) {
    MutexLock lock(mu_);
    const auto key = std::make_pair(base, device);
    auto it = prefetches_.find(key);
    if (it == prefetches_.end()) {
        if (prefetches_.size() == kPrefetchesKept) return;
        prefetches_.emplace(key, Prefetch{bytes, site});
        kept_.store(prefetches_.size(), std::memory_order_relaxed);
    } else if (bytes > it->second.bytes) {
        it->second = {bytes, site};
    }
}

void ManagedResidency::freed(std::uint64_t base) {
    if (kept_.load(std::memory_order_relaxed) == 0) return;
    MutexLock lock(mu_);
    prefetches_.erase(prefetches_.lower_bound({base, kAnyDevice}), prefetches_.lower_bound({base + 1, kAnyDevice}));
    kept_.store(prefetches_.size(), std::memory_order_relaxed);
}

void ManagedResidency::forget_freed_by_driver(const std::function<bool(std::uint64_t)>& still_valid) {
    if (kept_.load(std::memory_order_relaxed) == 0) return;
    std::vector<std::uint64_t> bases;
    {
        MutexLock lock(mu_);
        for (const auto& [key, p] : prefetches_)
            if (bases.empty() || bases.back() != key.first) bases.push_back(key.first);
    }
    for (const std::uint64_t base : bases)
        if (!still_valid(base)) freed(base);
}

ManagedResidency::Mover ManagedResidency::largest_mover(int device) const {
    MutexLock lock(mu_);
    // By call and stack: two prefetches from one line are one mover.
    std::map<std::pair<const char*, ledger::TraceId>, Mover> by_site;
    for (const auto& [key, p] : prefetches_) {
        if (device >= 0 && key.second != device) continue;
        Mover& m = by_site[{p.site.api, p.site.trace}];
        m.bytes += p.bytes;
        m.site = p.site;
    }
    Mover largest;
    for (const auto& [site, m] : by_site)
        if (m.bytes > largest.bytes) largest = m;
    return largest;
}

}  // namespace cumemaudit::shim
