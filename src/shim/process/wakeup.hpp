// wakeup: how a signal handler or a program thread wakes the checkpoint thread, and how a request from
// outside the process (`cumemaudit snapshot`) reaches it. A counter and one real-time signal sent to that
// thread alone (live::request_signal()), which it blocks like every signal and takes with sigtimedwait: no
// fd (a daemon that closes every fd after start, or dup2()s over it, must never find the shim reading its
// pipe or writing its log through a recycled number), and no handler (the program's disposition of that
// signal is never used or changed; a thread-directed signal is taken only by the thread it names).
//
// A program may use the same signal number itself (queued to itself, a POSIX timer). While the thread
// waits in sigtimedwait it would take those too, process-directed as they are: anything that is neither our
// own wake nor a marked request from another process is handed back to the process unchanged, and until
// the program has taken it the thread waits without sigtimedwait (short sleeps, looking at its own pending
// signals alone), so it never takes the same signal twice.
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
    // From the waiting thread's first line: the thread notify() signals. Before it, notify() only counts
    // (the thread looks at what it was asked before its first wait).
    void attach_waiter();
    // Async-signal-safe: an atomic increment and, at most once per wait, one tgkill.
    void notify();
    // Sleeps until notify() has been called since `seen` was read, a request came from outside, or
    // `timeout_ms` passed (< 0: no limit). Appends the outside requests taken to `outside`. Returns the
    // current count. Only the attached thread waits.
    std::uint32_t wait(std::uint32_t seen, long timeout_ms, std::vector<OutsideRequest>& outside);
    std::uint32_t count() const { return word_.load(std::memory_order_acquire); }
    bool attached() const { return waiter_.load() != 0; }

private:
    // Takes the pending request signals at once (timeout 0), sorting outside ones from our own wakes; while
    // a signal of the program's own waits for it, only those pending for this thread alone.
    void take_pending(std::vector<OutsideRequest>& outside);
    // Our own wake, an outside request, or the program's own signal, handed back: then true.
    bool note(const siginfo_t&, std::vector<OutsideRequest>& outside);
    // The program's own signal was handed back and may wait at the process level (the waiter's alone).
    bool foreign_ = false;

    std::atomic<std::uint32_t> word_{0};
    std::atomic<pid_t> waiter_{0};
    // A wake signal is on its way: notify() sends no second one (a burst of SIGUSR2 queues one signal).
    std::atomic<bool> signalled_{false};
};

}  // namespace cumemaudit::shim
