// owners: who holds device memory. Names are registered once (a few dozen at most); live and peak bytes
// are atomic counters per owner and kind, so a step sample reads O(owners) numbers and never takes the
// locks of the allocation tables. A change touches two cache lines: its owner's (live, peak and the split
// by kind, but for imports and IPC opens, whose kinds lie on the next line) and the totals'. Both are
// shared between threads, because the peaks are exact: a peak is the maximum of one live figure every
// change moves.
// Locked instructions are what a change costs (about 7 ns each, measured: tests/bench/RESULTS.md), so an
// owner's first kind has no counter of its own: it is live less the others. A change of that kind, which
// is nearly every change (an owner allocates one way), takes two: its owner's live and the total's.
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
    // A snapshot while other threads change the owner (exact when they do not), like every other figure.
    std::uint64_t live(OwnerId o, Kind k) const;
    std::uint64_t total_live() const { return total_live_.load(std::memory_order_relaxed); }
    std::uint64_t total_peak() const { return total_peak_.load(std::memory_order_relaxed); }

    void reset();  // zeroes the counters, keeps the names; one thread alive

private:
    // Cache-line aligned: threads allocating for different owners never share a line. Live and peak must
    // be one exact figure for the peak to be exact, so threads changing one owner meet here; the split by
    // kind has no peak but rides on the same line, so a change costs no line of its own for it.
    struct alignas(64) Counters {
        std::atomic<std::uint64_t> live{0}, peak{0};
        std::atomic<int> first_kind{-1};  // the kind of the owner's first change; by_kind[first_kind] stays 0
        std::array<std::atomic<std::uint64_t>, kKinds> by_kind{};
        int first_kind_for(int k);  // sets it on the first change
    };
    // An id from another ledger must not index past the table (bounded by the table, not by count(), so a
    // change reads no line of registration state).
    static OwnerId clamp(OwnerId o) { return o < kMaxOwners ? o : 0; }

    mutable std::mutex mu_;  // registration only
    std::array<std::string, kMaxOwners> names_;
    alignas(64) std::atomic<std::size_t> count_{1};
    std::array<Counters, kMaxOwners> counters_;
    alignas(64) std::atomic<std::uint64_t> total_live_{0}, total_peak_{0};
};

}  // namespace cumemaudit::ledger::detail
