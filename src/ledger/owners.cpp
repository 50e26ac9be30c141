#include "owners.hpp"

#include <algorithm>
#include <mutex>

namespace cumemaudit::ledger::detail {
namespace {

// Under the owners' lock: one writer at a time, so a plain load and store (no locked instruction).
void move_by(std::atomic<std::uint64_t>& figure, std::uint64_t bytes, bool up) {
    const std::uint64_t now = figure.load(std::memory_order_relaxed);
    figure.store(up ? now + bytes : now - bytes, std::memory_order_relaxed);
}

void raise_peak(std::atomic<std::uint64_t>& peak, const std::atomic<std::uint64_t>& live) {
    const std::uint64_t now = live.load(std::memory_order_relaxed);
    if (now > peak.load(std::memory_order_relaxed)) peak.store(now, std::memory_order_relaxed);
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
    move_by(c.by_kind[static_cast<int>(k)], bytes, true);
    move_by(c.live, bytes, true);
    raise_peak(c.peak, c.live);
    move_by(totals_.live, bytes, true);
    raise_peak(totals_.peak, totals_.live);
    raise_peak(totals_.since_mark_peak, totals_.live);
}

std::uint64_t Owners::take_peak_since_mark() {
    Hold hold(*this);
    const std::uint64_t peak = std::max(totals_.since_mark_peak.load(std::memory_order_relaxed),
                                        totals_.live.load(std::memory_order_relaxed));
    totals_.since_mark_peak.store(totals_.live.load(std::memory_order_relaxed), std::memory_order_relaxed);
    return peak;
}

void Owners::sub(OwnerId o, Kind k, std::uint64_t bytes) {
    Counters& c = counters_[clamp(o)];
    move_by(c.by_kind[static_cast<int>(k)], bytes, false);
    move_by(c.live, bytes, false);
    move_by(totals_.live, bytes, false);
}

void Owners::add_apart(OwnerId o, Kind k, std::uint64_t bytes) {
    move_by(counters_[clamp(o)].by_kind[static_cast<int>(k)], bytes, true);
}

void Owners::sub_apart(OwnerId o, Kind k, std::uint64_t bytes) {
    move_by(counters_[clamp(o)].by_kind[static_cast<int>(k)], bytes, false);
}

}  // namespace cumemaudit::ledger::detail
