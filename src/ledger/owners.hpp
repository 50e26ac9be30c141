// owners: who holds device memory. Names are registered once (a few dozen at most); live and peak bytes
// per owner and kind, and the totals, are read without a lock, so a step sample reads O(owners) numbers.
// Every change of them is made under one lock, the same one the classic table takes (classic_table.hpp):
// a change is then a few plain stores, where counters of their own took a locked instruction each
// (tests/bench/RESULTS.md), and a classic allocation or free takes one locked instruction in all, none on
// the thread the lock is biased to (spin_lock.hpp). One lock
// costs no parallelism the driver gives: the driver serializes these calls itself (on an H200 host 16
// threads together make async pairs more slowly than one thread alone). The peaks stay exact: a peak is the
// maximum of one live figure every change moves.
#pragma once

#include "change_log.hpp"
#include "ledger/types.hpp"
#include "spin_lock.hpp"

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

    // The lock every change is made under; add and sub expect it held (through a Hold).
    SpinLock& lock() { return totals_.lock; }

    // The changes the lock's owner thread logged without the lock (change_log.hpp) and what applies them,
    // under it: the classic table's.
    void log_changes_in(ChangeLog& log, void (*apply)(void* table), void* table) {
        log_ = &log;
        apply_ = apply;
        table_ = table;
    }
    // The lock held, what was logged applied first: whoever holds it sees and changes the figures of every
    // call that has returned, in the order the calls made them.
    class Hold {
    public:
        explicit Hold(Owners& o) : o_(o) {
            o.lock().lock();
            try {
                o.apply_logged();
            } catch (...) {
                o.lock().unlock();
                throw;
            }
        }
        ~Hold() { o_.lock().unlock(); }
        Hold(const Hold&) = delete;
        Hold& operator=(const Hold&) = delete;

    private:
        Owners& o_;
    };
    // Before a read of the figures without the lock: what was logged, applied (the lock taken only then).
    void settle() {
        if (log_ != nullptr && log_->waiting()) Hold applied(*this);
    }
    void add(OwnerId, Kind, std::uint64_t bytes);
    void sub(OwnerId, Kind, std::uint64_t bytes);
    // A kind that holds no memory (multicast objects): its figure by kind moves, never live or peak bytes.
    void add_apart(OwnerId, Kind, std::uint64_t bytes);
    void sub_apart(OwnerId, Kind, std::uint64_t bytes);

    // Read without the lock: settle() first.
    std::uint64_t live(OwnerId o) const { return counters_[clamp(o)].live.load(std::memory_order_relaxed); }
    std::uint64_t peak(OwnerId o) const { return counters_[clamp(o)].peak.load(std::memory_order_relaxed); }
    std::uint64_t live(OwnerId o, Kind k) const {
        return counters_[clamp(o)].by_kind[static_cast<int>(k)].load(std::memory_order_relaxed);
    }
    std::uint64_t total_live() const { return totals_.live.load(std::memory_order_relaxed); }
    std::uint64_t total_peak() const { return totals_.peak.load(std::memory_order_relaxed); }
    // The highest total since the last call (a step mark): what a mark's figures cannot show, a peak between
    // two marks. Starts the next interval at the total now.
    std::uint64_t take_peak_since_mark();


private:
    // Atomic only so that readers without the lock see whole values; written under the lock with plain
    // stores. Cache-line aligned: each change touches its owner's line and the totals' line (which holds
    // the lock too); an owner's figures by kind ride on its line (but imports' and IPC opens', on the next).
    struct alignas(64) Counters {
        std::atomic<std::uint64_t> live{0}, peak{0};
        std::array<std::atomic<std::uint64_t>, kKinds> by_kind{};
    };
    struct alignas(64) Totals {
        SpinLock lock;
        std::atomic<std::uint64_t> live{0}, peak{0}, since_mark_peak{0};  // one line: a change touches it anyway
    };
    static_assert(sizeof(Totals) == 64, "the lock and the totals share one cache line");
    // Under the lock.
    void apply_logged() {
        if (log_ != nullptr && log_->waiting()) apply_(table_);
    }
    // An id from another ledger must not index past the table (bounded by the table, not by count(), so a
    // change reads no line of registration state).
    static OwnerId clamp(OwnerId o) { return o < kMaxOwners ? o : 0; }

    mutable std::mutex mu_;  // registration only
    std::array<std::string, kMaxOwners> names_;
    alignas(64) std::atomic<std::size_t> count_{1};
    std::array<Counters, kMaxOwners> counters_;
    Totals totals_;
    ChangeLog* log_ = nullptr;
    void (*apply_)(void*) = nullptr;
    void* table_ = nullptr;
};

}  // namespace cumemaudit::ledger::detail
