// owners: who holds device memory. Names are registered once (a few dozen at most); live and peak bytes
// are atomic counters per owner and kind, so a step sample reads O(owners) numbers and never takes the
// locks of the allocation tables.
#pragma once

#include "ledger.hpp"

#include <array>
#include <atomic>
#include <mutex>

namespace cumemaudit::ledger::detail {

inline constexpr int kKinds = static_cast<int>(Kind::count);

class Owners {
public:
    Owners();
    OwnerId id(std::string_view name);  // registers; 0 ("unknown") once the table is full
    std::string name(OwnerId) const;
    std::size_t count() const { return count_.load(std::memory_order_acquire); }

    void add(OwnerId, Kind, std::uint64_t bytes);
    void sub(OwnerId, Kind, std::uint64_t bytes);

    std::uint64_t live(OwnerId o) const { return counters_[clamp(o)].live.load(std::memory_order_relaxed); }
    std::uint64_t peak(OwnerId o) const { return counters_[clamp(o)].peak.load(std::memory_order_relaxed); }
    std::uint64_t live(OwnerId o, Kind k) const;  // sums the stripes
    std::uint64_t total_live() const { return total_live_.load(std::memory_order_relaxed); }
    std::uint64_t total_peak() const { return total_peak_.load(std::memory_order_relaxed); }

    void reset();  // zeroes the counters, keeps the names; one thread alive

private:
    // Cache-line aligned: threads allocating for different owners never share a line. Live and peak must
    // be one exact figure for the peak to be exact, so threads changing one owner meet here.
    struct alignas(64) Counters {
        std::atomic<std::uint64_t> live{0}, peak{0};
    };
    // The split by kind has no peak, so each thread adds into its own stripe (a free on another thread
    // than its allocation leaves one stripe "negative": the sum, modulo 2^64, is still right). Two threads
    // allocating for one owner then share only the live/peak line and the totals.
    static constexpr int kKindStripes = 8;
    struct alignas(64) KindStripe {
        std::array<std::array<std::atomic<std::uint64_t>, kKinds>, kMaxOwners> by_owner{};
    };
    static int stripe();
    // An id from another ledger (or a stale one after reset) must not index past the table.
    OwnerId clamp(OwnerId o) const { return o < count() ? o : 0; }

    mutable std::mutex mu_;  // registration only
    std::array<std::string, kMaxOwners> names_;
    // Read on every change (clamp), written only at registration: kept off the lines changes write.
    alignas(64) std::atomic<std::size_t> count_{1};
    alignas(64) std::array<Counters, kMaxOwners> counters_;
    std::array<KindStripe, kKindStripes> kinds_;
    alignas(64) std::atomic<std::uint64_t> total_live_{0}, total_peak_{0};
};

}  // namespace cumemaudit::ledger::detail
