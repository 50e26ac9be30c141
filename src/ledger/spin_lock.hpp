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

// Asks for a line the holder of a lock will write, before the lock is taken: the miss overlaps the lock's
// exchange, and the lock is held for the change, not for the miss. PREFETCHW fetches the line ready to be
// written (on x86-64 CPUs older than Broadwell it is a NOP); elsewhere the compiler's write prefetch.
inline void warm_line(const void* p) {
#if defined(__x86_64__)
    asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
    __builtin_prefetch(p, 1);
#endif
}

}  // namespace cumemaudit::ledger::detail
