#include "owners.hpp"

namespace cumemaudit::ledger::detail {
namespace {

void raise_peak(std::atomic<std::uint64_t>& peak, std::uint64_t now) {
    std::uint64_t seen = peak.load(std::memory_order_relaxed);
    while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
    }
}

}  // namespace

Owners::Owners() { names_[0] = "unknown"; }

OwnerId Owners::id(std::string_view name) {
    std::lock_guard lock(mu_);
    const std::size_t n = count_.load(std::memory_order_relaxed);
    for (std::size_t i = 0; i < n; ++i)
        if (names_[i] == name) return static_cast<OwnerId>(i);
    if (n == kMaxOwners) return 0;
    names_[n] = std::string(name);
    count_.store(n + 1, std::memory_order_release);  // publishes the name to lock-free readers of count()
    return static_cast<OwnerId>(n);
}

std::string Owners::name(OwnerId o) const {
    std::lock_guard lock(mu_);
    return names_[o < count() ? o : 0];
}

void Owners::add(OwnerId o, Kind k, std::uint64_t bytes) {
    Counters& c = counters_[clamp(o)];
    raise_peak(c.peak, c.live.fetch_add(bytes, std::memory_order_relaxed) + bytes);
    c.by_kind[static_cast<int>(k)].fetch_add(bytes, std::memory_order_relaxed);
    raise_peak(total_peak_, total_live_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void Owners::sub(OwnerId o, Kind k, std::uint64_t bytes) {
    Counters& c = counters_[clamp(o)];
    c.live.fetch_sub(bytes, std::memory_order_relaxed);
    c.by_kind[static_cast<int>(k)].fetch_sub(bytes, std::memory_order_relaxed);
    total_live_.fetch_sub(bytes, std::memory_order_relaxed);
}

// Names survive: the shim caches owner ids by return address, and a fork child keeps those caches.
void Owners::reset() {
    for (auto& c : counters_) {
        c.live = 0;
        c.peak = 0;
        for (auto& k : c.by_kind) k = 0;
    }
    total_live_ = 0;
    total_peak_ = 0;
}

}  // namespace cumemaudit::ledger::detail
