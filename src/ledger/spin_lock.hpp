// spin_lock: a lock held for tens of nanoseconds (a probe, a few counters; rarely a table's growth), biased
// towards the one thread that takes it most.
//
// Most programs make their allocations from one thread. For that thread (the lock's owner) taking the lock
// is a plain store and two loads, no locked instruction: an atomic exchange was a quarter of what the shim
// added to an async pair (docs/HOT_PATH.md, "The one ledger lock"). Until a thread has taken it
// kClaimStreak times in a row, every thread takes the exchange lock; then that thread owns it. Any other
// thread announces itself (others_), makes every thread of the process pass a full memory barrier
// (membarrier's private expedited command: the owner's store and loads then cannot pass each other
// unseen), waits for the owner to be out and takes the exchange lock, which the owner takes too while
// anyone else is announced. That costs the other thread a system call, so past kVisitsPerSecond visits by
// other threads within a second (an acquisition, or a Visit's many) the bias ends for good: every thread
// then takes the exchange lock, as they all do where membarrier is not available. The owner never changes to another
// thread (two threads could then both believe they own it). A waiter yields its core after a short spin,
// so a holder preempted on a busy machine gets it back.
#pragma once

#include <sched.h>
#include <time.h>

#include <atomic>
#include <cstdint>

namespace cumemaudit::ledger::detail {

class SpinLock {
public:
    // Inline for the owner and for an unbiased lock; the rest (a visit, another thread, before any owner)
    // out of line.
    [[gnu::always_inline]] void lock() noexcept {
        const void* owner = owner_.load(std::memory_order_acquire);
        if (owner == self()) [[likely]] {
            owner_in_.store(true, std::memory_order_relaxed);
            // Only the compiler is held back here; the hardware barrier is the other side's membarrier.
            std::atomic_signal_fence(std::memory_order_seq_cst);
            if (others_.load(std::memory_order_acquire) == 0 && owner_.load(std::memory_order_acquire) == owner)
                [[likely]] return;
            owner_in_.store(false, std::memory_order_release);
            take(false);
            return;
        }
        if (owner == none()) {
            take(false);
            return;
        }
        lock_rest(owner);
    }

    [[gnu::always_inline]] void unlock() noexcept {
        if (owner_in_.load(std::memory_order_relaxed) && owner_.load(std::memory_order_relaxed) == self()) {
            owner_in_.store(false, std::memory_order_release);
            return;
        }
        const bool counted = counted_;
        held_.store(false, std::memory_order_release);
        if (counted) others_.fetch_sub(1, std::memory_order_release);
    }

    // Whether this thread owns it: then it is the one producer of the lock's change log (change_log.hpp).
    [[gnu::always_inline]] bool owned_by_me() const noexcept {
        return owner_.load(std::memory_order_relaxed) == self();
    }

    // Whether a thread owns it (tests, benchmarks).
    bool biased() const noexcept {
        const void* owner = owner_.load(std::memory_order_acquire);
        return owner != nullptr && owner != none();
    }

    // A thread other than the owner that takes the lock many times in a row (a report walking the table
    // shard by shard) announces itself once for all of them: one membarrier, one visit counted.
    class Visit {
    public:
        explicit Visit(SpinLock& lock) noexcept : lock_(lock), announced_(lock.begin_visit()) {}
        ~Visit() {
            if (announced_) lock_.end_visit();
        }
        Visit(const Visit&) = delete;
        Visit& operator=(const Visit&) = delete;

    private:
        SpinLock& lock_;
        bool announced_;
    };

    static constexpr int kClaimStreak = 4096;  // more than a report's walks of the table take it
    static constexpr int kVisitsPerSecond = 32;  // each costs a membarrier: tens of microseconds in a VM

private:
    // This thread's identity: the address of a thread-local byte (initial-exec: no __tls_get_addr).
    static const void* self() noexcept {
        static thread_local char t_self __attribute__((tls_model("initial-exec")));
        return &t_self;
    }
    static const void* none() noexcept { return reinterpret_cast<const void*>(std::uintptr_t{1}); }
    // The lock this thread announced itself to for a Visit, if any.
    static const SpinLock*& visiting() noexcept {
        static thread_local const SpinLock* t_visiting __attribute__((tls_model("initial-exec"))) = nullptr;
        return t_visiting;
    }

    // Waits while `flag` is set: a short spin, then the core yielded so that a preempted holder gets it back.
    static void wait_while(const std::atomic<bool>& flag, std::memory_order order) noexcept {
        for (int spins = 0; flag.load(order); ++spins) {
            if (spins >= 64) sched_yield();
#if defined(__x86_64__)
            else __builtin_ia32_pause();
#endif
        }
    }

    [[gnu::always_inline]] void take(bool counted) noexcept {
        while (held_.exchange(true, std::memory_order_acquire)) wait_while(held_, std::memory_order_relaxed);
        counted_ = counted;
    }

    // Under the exchange lock, before any owner: the thread that takes it kClaimStreak times in a row owns it.
    void count_streak(const void* me) noexcept {
        if (streak_thread_ != me) {
            streak_thread_ = me;
            streak_ = 0;
        }
        if (++streak_ >= kClaimStreak) claim(me);
    }
    // Sets the owner where the process registered for membarrier (as the library loaded, and in a fork
    // child); refused (an old kernel, a seccomp filter): no bias.
    void claim(const void* me) noexcept;
    // Every thread of the process passes a full barrier before this returns; false if the kernel refused.
    static bool barrier_everywhere() noexcept;
    // The kernel refused a barrier it had agreed to (never seen): no bias from now on, and time for the
    // owner's store to leave its core before it is read.
    void give_up_bias() noexcept;

    // A visit announced this thread already, another thread owns it, or nobody owns it yet.
    [[gnu::noinline]] void lock_rest(const void* owner) noexcept;

    // Announced (others_), every thread past a full barrier, the owner out: from here the owner takes the
    // exchange lock too until others_ is back to 0.
    void announce() noexcept {
        others_.fetch_add(1, std::memory_order_acq_rel);
        if (!barrier_everywhere()) [[unlikely]]
            give_up_bias();
        wait_while(owner_in_, std::memory_order_acquire);
    }

    // Under the exchange lock, announced, with the owner out: the window is this holder's alone, and the
    // owner cannot come in before it has seen the end of the bias.
    void count_visit() noexcept {
        timespec now {};
        clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
        if (now.tv_sec != window_s_) {
            window_s_ = now.tv_sec;
            window_visits_ = 0;
        }
        if (++window_visits_ > kVisitsPerSecond) owner_.store(none(), std::memory_order_release);
    }

    void lock_as_other() noexcept {
        announce();
        take(true);
        count_visit();
    }

    bool begin_visit() noexcept {
        const void* owner = owner_.load(std::memory_order_acquire);
        if (owner == nullptr || owner == none() || owner == self() || visiting() != nullptr) return false;
        announce();
        take(false);
        count_visit();
        held_.store(false, std::memory_order_release);
        visiting() = this;
        return true;
    }

    void end_visit() noexcept {
        visiting() = nullptr;
        others_.fetch_sub(1, std::memory_order_release);
    }

    // 40 bytes, so that the owners' totals ride on the lock's line (owners.hpp); the owner's fast path
    // reads owner_ and others_ and writes owner_in_.
    std::atomic<const void*> owner_{nullptr};  // null: not yet claimed; none(): never biased again
    std::atomic<std::uint32_t> others_{0};     // other threads inside or waiting
    std::atomic<bool> owner_in_{false};        // the owner is inside without the exchange lock
    std::atomic<bool> held_{false};            // the exchange lock
    bool counted_ = false;                     // the holder of held_ counted itself in others_
    std::int32_t window_visits_ = 0;           // other threads' visits in the second window_s_
    std::int32_t streak_ = 0;                  // consecutive acquisitions by streak_thread_, before a claim
    std::int64_t window_s_ = 0;
    const void* streak_thread_ = nullptr;
};

}  // namespace cumemaudit::ledger::detail
