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
    std::uint64_t live(OwnerId o, Kind k) const {
        return counters_[clamp(o)].by_kind[static_cast<int>(k)].load(std::memory_order_relaxed);
    }
    std::uint64_t total_live() const { return total_live_.load(std::memory_order_relaxed); }
    std::uint64_t total_peak() const { return total_peak_.load(std::memory_order_relaxed); }

    void reset();  // zeroes the counters, keeps the names; one thread alive

private:
    struct Counters {
        std::atomic<std::uint64_t> live{0}, peak{0};
        std::array<std::atomic<std::uint64_t>, kKinds> by_kind{};
    };
    // An id from another ledger (or a stale one after reset) must not index past the table.
    OwnerId clamp(OwnerId o) const { return o < count() ? o : 0; }

    mutable std::mutex mu_;  // registration only
    std::array<std::string, kMaxOwners> names_;
    std::atomic<std::size_t> count_{1};
    std::array<Counters, kMaxOwners> counters_;
    std::atomic<std::uint64_t> total_live_{0}, total_peak_{0};
};

}  // namespace cumemaudit::ledger::detail
