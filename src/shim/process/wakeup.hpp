// wakeup: how a signal handler or a program thread wakes the checkpoint thread, and how a request from
// outside the process (`cumemaudit snapshot`) reaches it. A counter with a futex on it for wakes from inside,
// and one real-time signal (live::request_signal()) that the CLI sends to that thread alone for requests
// from outside. No fd (a daemon that closes every fd after start, or dup2()s over it, must never find the
// shim reading its pipe or writing its log through a recycled number), and no handler (the program's
// disposition of that signal is never used or changed).
//
// The thread never waits in sigtimedwait: a thread waiting there for a signal is one the kernel may hand
// that signal to when it is sent to the process, and a program may use the same number itself (queued to
// itself, a POSIX timer), blocked in its own threads and taken in the order it was queued. Taking one and
// queuing it back would put it behind the ones queued meanwhile. So the thread sleeps on the futex and,
// every kLookMs, asks whether the signal is pending for it alone; only then does it take it, and a thread's
// own pending signals come before the process's.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <vector>

namespace cumemaudit::shim {

// A request from outside: who sent it, and the number the answer is filed under (0: sent without one).
struct OutsideRequest {
    pid_t sender = 0;
    std::uint64_t number = 0;
};

class Wakeup {
public:
    // From the waiting thread's first line (start() waits for it).
    void attach_waiter();
    // Async-signal-safe: an atomic increment and one futex wake.
    void notify();
    // Sleeps until notify() has been called since `seen` was read, a request came from outside, or
    // `timeout_ms` passed (< 0: no limit). Appends the outside requests taken to `outside`. Returns the
    // current count. Only the attached thread waits.
    std::uint32_t wait(std::uint32_t seen, long timeout_ms, std::vector<OutsideRequest>& outside);
    std::uint32_t count() const { return word_.load(std::memory_order_acquire); }
    bool attached() const { return waiter_.load() != 0; }

private:
    // Takes the request signals pending for this thread alone, never the process's.
    void take_requests(std::vector<OutsideRequest>& outside);

    // The futex word: 32 bits, as the kernel reads it.
    std::atomic<std::uint32_t> word_{0};
    std::atomic<pid_t> waiter_{0};
};

}  // namespace cumemaudit::shim
