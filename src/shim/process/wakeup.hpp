// wakeup: how a signal handler or a program thread wakes the checkpoint thread. A futex word, not an fd:
// a daemon that closes every fd after start (or dup2()s over it) must never find the shim reading its
// pipe or writing its log through a recycled number; memory the shim owns cannot be closed under it.
#pragma once

#include <atomic>
#include <cstdint>

namespace cumemaudit::shim {

class Wakeup {
public:
    // Async-signal-safe: an atomic increment and one futex syscall.
    void notify();
    // Sleeps until notify() has been called since `seen` was read, or `timeout_ms` passed (< 0: no limit).
    // Returns the current count.
    std::uint32_t wait(std::uint32_t seen, long timeout_ms);
    std::uint32_t count() const { return word_.load(std::memory_order_acquire); }

private:
    std::atomic<std::uint32_t> word_{0};
};

}  // namespace cumemaudit::shim
