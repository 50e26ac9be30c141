// spin_lock: a lock held for tens of nanoseconds (a probe, a few counters; rarely a table's growth). It
// takes one atomic exchange and releases with a plain store, where a mutex pays a second atomic to
// release (locked instructions are what the hot path costs: docs/HOT_PATH.md). A waiter yields its core
// after a short spin, so a holder preempted on a busy machine gets it back.
#pragma once

#include <sched.h>

#include <atomic>

namespace cumemaudit::ledger::detail {

class SpinLock {
public:
    void lock() noexcept {
        for (int spins = 0; held_.exchange(true, std::memory_order_acquire); ++spins) {
            while (held_.load(std::memory_order_relaxed)) {
                if (spins++ >= 64) sched_yield();
#if defined(__x86_64__)
                else __builtin_ia32_pause();
#endif
            }
        }
    }
    void unlock() noexcept { held_.store(false, std::memory_order_release); }
    // A fork child: the holder may be a thread that no longer exists.
    void reset() noexcept { held_.store(false, std::memory_order_relaxed); }

private:
    std::atomic<bool> held_{false};
};

}  // namespace cumemaudit::ledger::detail
