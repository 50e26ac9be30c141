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

int Owners::Counters::first_kind_for(int k) {
    int first = first_kind.load(std::memory_order_relaxed);
    if (first < 0 && first_kind.compare_exchange_strong(first, k, std::memory_order_relaxed)) return k;
    return first;
}

void Owners::add(OwnerId o, Kind k, std::uint64_t bytes) {
    Counters& c = counters_[clamp(o)];
    const int kind = static_cast<int>(k);
    if (c.first_kind_for(kind) != kind) c.by_kind[kind].fetch_add(bytes, std::memory_order_relaxed);
    raise_peak(c.peak, c.live.fetch_add(bytes, std::memory_order_relaxed) + bytes);
    raise_peak(total_peak_, total_live_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void Owners::sub(OwnerId o, Kind k, std::uint64_t bytes) {
    Counters& c = counters_[clamp(o)];
    const int kind = static_cast<int>(k);
    c.live.fetch_sub(bytes, std::memory_order_relaxed);
    if (c.first_kind_for(kind) != kind) c.by_kind[kind].fetch_sub(bytes, std::memory_order_relaxed);
    total_live_.fetch_sub(bytes, std::memory_order_relaxed);
}

std::uint64_t Owners::live(OwnerId o, Kind k) const {
    const Counters& c = counters_[clamp(o)];
    const int kind = static_cast<int>(k);
    if (c.first_kind.load(std::memory_order_relaxed) != kind)
        return c.by_kind[kind].load(std::memory_order_relaxed);
    // Live less the other kinds. A change of another kind made between the reads can put the figure off
    // by that change's bytes (a snapshot, as every other counter read while threads run); exact when no
    // other kind changes meanwhile, and clamped at 0.
    const std::uint64_t live = c.live.load(std::memory_order_relaxed);
    std::uint64_t others = 0;
    for (int j = 0; j < kKinds; ++j)
        if (j != kind) others += c.by_kind[j].load(std::memory_order_relaxed);
    return live > others ? live - others : 0;
}

// Names survive: the shim caches owner ids by return address, and a fork child keeps those caches.
void Owners::reset() {
    for (auto& c : counters_) {
        c.live = 0;
        c.peak = 0;
        c.first_kind = -1;
        for (auto& k : c.by_kind) k = 0;
    }
    total_live_ = 0;
    total_peak_ = 0;
}

}  // namespace cumemaudit::ledger::detail
