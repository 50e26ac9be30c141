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

// Initial-exec TLS with a constant initializer: no __tls_get_addr call and no guard on the allocation path
// (the shim, which links this, is preloaded and uses initial-exec TLS already).
int Owners::stripe() {
    static std::atomic<unsigned> next{0};
    static thread_local int mine __attribute__((tls_model("initial-exec"))) = -1;
    if (mine < 0) mine = static_cast<int>(next.fetch_add(1, std::memory_order_relaxed) % kKindStripes);
    return mine;
}

std::uint64_t Owners::live(OwnerId o, Kind k) const {
    std::uint64_t sum = 0;
    for (const KindStripe& s : kinds_) sum += s.by_owner[clamp(o)][static_cast<int>(k)].load(std::memory_order_relaxed);
    return sum;
}

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
    return names_[clamp(o)];
}

void Owners::add(OwnerId o, Kind k, std::uint64_t bytes) {
    Counters& c = counters_[clamp(o)];
    raise_peak(c.peak, c.live.fetch_add(bytes, std::memory_order_relaxed) + bytes);
    kinds_[stripe()].by_owner[clamp(o)][static_cast<int>(k)].fetch_add(bytes, std::memory_order_relaxed);
    raise_peak(total_peak_, total_live_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void Owners::sub(OwnerId o, Kind k, std::uint64_t bytes) {
    Counters& c = counters_[clamp(o)];
    c.live.fetch_sub(bytes, std::memory_order_relaxed);
    kinds_[stripe()].by_owner[clamp(o)][static_cast<int>(k)].fetch_sub(bytes, std::memory_order_relaxed);
    total_live_.fetch_sub(bytes, std::memory_order_relaxed);
}

// Names survive: the shim caches owner ids by return address, and a fork child keeps those caches.
void Owners::reset() {
    for (auto& c : counters_) {
        c.live = 0;
        c.peak = 0;
    }
    for (auto& s : kinds_)
        for (auto& owner : s.by_owner)
            for (auto& k : owner) k = 0;
    total_live_ = 0;
    total_peak_ = 0;
}

}  // namespace cumemaudit::ledger::detail
