// change_log: the classic allocations and frees of the thread the ledger's lock is biased to (spin_lock.hpp),
// kept in order without the lock until whoever takes the lock next applies them (owners.hpp, Owners::Hold).
//
// Why: after a real driver call none of the shim's code is in cache, and the record of a call (the lock, the
// table's probe, the owners' figures) is mostly code (docs/COST.md, "Where a recorded call's time goes").
// Appending a change is one store of 32 bytes and one of a count; applying a batch runs the record's code
// once, warm, for all of them. Every figure stays exact: changes are applied in the order
// the thread made them, and every reader takes the lock, so it applies them first (docs/HOT_PATH.md, "The
// allocating thread's log").
//
// One producer (the lock's owner: the owner never changes, spin_lock.hpp) and one consumer at a time (the
// lock's holder). Bounded: kEntries changes wait at most; a full log is applied by its producer.
#pragma once

#include "ledger/types.hpp"

#include <array>
#include <atomic>
#include <cstdint>

namespace cumemaudit::ledger::detail {

// An allocation (api set) or a successful free (api null; `size` holds the free's ticket, classic_table.hpp).
struct LoggedChange {
    std::uint64_t ptr;
    std::uint64_t size;
    const char* api;
    TraceId trace;
    OwnerId owner;
    Kind kind;
    std::uint8_t device_plus_one;  // the context's device + 1 (0: not known, host memory), as a slot keeps it
};
static_assert(sizeof(LoggedChange) == 32, "two changes a cache line");

class ChangeLog {
public:
    static constexpr std::uint32_t kEntries = 256;  // 8 KiB: a batch applied stays in the first-level cache

    // The producer only. False when kEntries changes wait: the caller applies them (under the lock) first.
    [[gnu::always_inline]] bool append(const LoggedChange& change) noexcept {
        const std::uint32_t head = head_.load(std::memory_order_relaxed);
        if (head - cached_tail_ == kEntries) [[unlikely]] {
            cached_tail_ = tail_.load(std::memory_order_acquire);
            if (head - cached_tail_ == kEntries) return false;
        }
        entries_[head % kEntries] = change;
        head_.store(head + 1, std::memory_order_release);
        return true;
    }

    // Whether a change waits to be applied; any thread.
    bool waiting() const noexcept {
        return head_.load(std::memory_order_acquire) != tail_.load(std::memory_order_relaxed);
    }

    // The consumer, under the lock: applies every change appended so far, oldest first. A change whose
    // apply throws is taken out all the same (an allocation the table could not grow for is not recorded,
    // as when it was recorded directly), and the exception goes on to the caller.
    template <class Apply>
    void take(Apply&& apply) {
        const std::uint32_t head = head_.load(std::memory_order_acquire);
        std::uint32_t tail = tail_.load(std::memory_order_relaxed);
        struct Publish {
            std::atomic<std::uint32_t>& to;
            const std::uint32_t& tail;
            ~Publish() { to.store(tail, std::memory_order_release); }
        } publish{tail_, tail};
        while (tail != head) apply(entries_[tail++ % kEntries]);
    }

private:
    // The producer's line, the consumer's line, then the entries: neither side writes the other's line.
    alignas(64) std::atomic<std::uint32_t> head_{0};
    std::uint32_t cached_tail_ = 0;  // the producer's last look at tail_
    alignas(64) std::atomic<std::uint32_t> tail_{0};
    alignas(64) std::array<LoggedChange, kEntries> entries_{};
};

}  // namespace cumemaudit::ledger::detail
