// thread_state: what the shim keeps per thread, on one cache line a recorded call reads first — whether a
// call made now is the program's (not while the shim or the driver is already on this thread's stack), the
// runtime wrapper's site for its nested driver call, this thread's call counter and caches, and a signal
// deferred while the thread held a shim lock.
#pragma once

#include <atomic>
#include <csignal>
#include <cstdint>

namespace cumemaudit::shim {

struct PcFacts;
struct StackFacts;
class Recorder;

// Per-thread state, initial-exec TLS: the wrappers touch it on every call, and the shim is loaded at start.
// The first cache line holds all a recorded call reads or writes of its own thread: no __tls_get_addr, no
// process-wide line to find the Recorder (the thread keeps the one it records into), and the call counter
// is this thread's, folded only when a report asks (calls_so_far).
struct alignas(64) ThreadState {
    int driver_depth = 0;              // > 0 while a real driver call made by a wrapper runs
    int shim_depth = 0;                // > 0 while the shim does its own bookkeeping
    const char* runtime_api = nullptr;  // set by a runtime wrapper for its nested driver call
    void* runtime_caller = nullptr;
    std::atomic<std::uint64_t> calls{0};  // recorded calls of this thread (written by it alone)
    PcFacts* pcs = nullptr;             // what is known of return addresses (pc_cache.cpp), made at first use
    // The process's Recorder once this thread recorded a call (set by the auditor), with its backend=cupti
    // flag. Null again in a fork child (the atfork handler; the child's one thread is the forking one).
    Recorder* recorder = nullptr;
    // A SIGTERM/SIGINT that arrived while this thread held a shim lock (shim_depth > 0): the report
    // writer would wait on that lock forever, so the signal is raised again when the outermost scope ends.
    // The flag is read by every ShimScope's end (first cache line); the siginfo only when one was deferred.
    int deferred_signal = 0;
    bool in_cupti_callback = false;     // the CUPTI backend is recording this call
    bool counted = false;               // `calls` is on the list calls_so_far() sums
    bool recorder_cupti_only = false;
    alignas(64) siginfo_t deferred_info{};  // second line: read only when a signal was deferred
    StackFacts* stacks = nullptr;           // deep stacks seen (pc_cache.cpp), made at a first deep site
};
// constinit: no dynamic initialization, so a use from another file reads it directly, with no TLS init
// function (which goes through __tls_get_addr) called first.
extern constinit thread_local ThreadState t_thread_state __attribute__((tls_model("initial-exec")));
inline ThreadState& thread_state() { return t_thread_state; }

// A call made now on this thread is the program's: neither the shim nor the driver is already running on it.
inline bool programs_call() {
    const ThreadState& t = thread_state();
    return t.driver_depth == 0 && t.shim_depth == 0;
}

// The first recorded call of a thread puts its counter on the list calls_so_far() sums; false when no
// counter can be kept (no thread-exit hook).
bool count_first_call();
// Counts a recorded call on this thread's counter. One writer: a plain increment, no locked instruction.
[[gnu::always_inline]] inline void count_call() {
    ThreadState& t = thread_state();
    if (!t.counted && !count_first_call()) [[unlikely]]
        return;
    t.calls.store(t.calls.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}
// Recorded calls of every thread, living or gone.
std::uint64_t calls_so_far();
// A fork child: only the calling thread is left; its count and the others' start from zero.
void reset_calls_after_fork();

// A non-local exit (a siglongjmp out of the driver, from the program's SIGSEGV handler) skips these
// destructors and leaves the depth raised: the next call the program makes finds it so and starts over
// (recorder_for_call_slow). A destructor then never takes a depth below 0.
class DriverScope {
public:
    DriverScope() { ++thread_state().driver_depth; }
    ~DriverScope() {
        ThreadState& t = thread_state();
        if (t.driver_depth > 0) --t.driver_depth;
    }
};

// Raises again the signal deferred on this thread (see ThreadState::deferred_signal).
void deliver_deferred_signal();

class ShimScope {
public:
    ShimScope() { ++thread_state().shim_depth; }
    // Always inline: on every wrapper's path twice, and an out-of-line call of it measured as a point of
    // the async pair's cost on the H200.
    [[gnu::always_inline]] ~ShimScope() {
        ThreadState& t = thread_state();
        if (t.shim_depth > 0 && --t.shim_depth == 0 && t.deferred_signal != 0) deliver_deferred_signal();
    }
};

// After a non-local exit out of a wrapper: this thread's depths and runtime site start over.
void forget_abandoned_scopes();

class RuntimeScope {
public:
    RuntimeScope(const char* api, void* caller);
    ~RuntimeScope();

private:
    const char* saved_api_;
    void* saved_caller_;
};

}  // namespace cumemaudit::shim
