// call: what one recorded call knows about itself — the Recorder it records into, which API and caller it is
// attributed to (the runtime's caller when cudart made the driver call for it), and, computed only when an
// event needs it, its Site: the interned stack and the owner. Also the calling thread's own state: whether
// a call made now is the program's (not while the shim or the driver is already on this thread's stack).
#pragma once

#include "ledger/ledger.hpp"

#include <atomic>
#include <csignal>
#include <cstdint>
#include <mutex>

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

class DriverScope {
public:
    DriverScope() { ++thread_state().driver_depth; }
    ~DriverScope() { --thread_state().driver_depth; }
};

// Raises again the signal deferred on this thread (see ThreadState::deferred_signal).
void deliver_deferred_signal();

class ShimScope {
public:
    ShimScope() { ++thread_state().shim_depth; }
    ~ShimScope() {
        ThreadState& t = thread_state();
        if (--t.shim_depth == 0 && t.deferred_signal != 0) deliver_deferred_signal();
    }
};

class RuntimeScope {
public:
    RuntimeScope(const char* api, void* caller);
    ~RuntimeScope();

private:
    const char* saved_api_;
    void* saved_caller_;
};

// Order between threads that reuse a value. The driver hands a freed pointer or released handle out again
// at once, so "A frees p, B allocates p" must reach the ledger in that order: a call that ends a value's
// life holds the value's stripe across the driver call and its record; a call that begins one waits,
// before its record, until nobody holds the stripe. Waiting is enough: B got p from the driver, so A held
// the stripe before B could, and no later end of p can start before B returns p to the program. When no
// end is in flight the wait is one load, where taking a mutex cost two locked instructions and four cache
// lines (a VMM cycle 100 ns with cold caches). Different values rarely share one of the 256 stripes.
class OrderStripe {
public:
    void lock() noexcept;  // sleeps in the kernel while held: an end holds it across a driver call (ms at worst)
    void unlock() noexcept;
    void wait_while_held() noexcept;
    void reset() noexcept { state_.store(0, std::memory_order_relaxed); }  // a fork child: no holder exists

private:
    std::atomic<int> state_{0};  // a futex word: 0 free, 1 held, 2 held and somebody sleeps on it
};
OrderStripe& order_stripe(std::uint64_t value);

using OrderHold = std::unique_lock<OrderStripe>;
inline OrderHold hold_order(std::uint64_t value) { return OrderHold(order_stripe(value)); }
inline void wait_for_order(std::uint64_t value) { order_stripe(value).wait_while_held(); }
// What a call that holds no stripe keeps across the driver call: nothing, at no cost (a classic free's
// order is its ticket, Call::free_ticket).
struct NoHold {};
// In a fork child, from the atfork handler only (one thread alive).
void reset_order_stripes_in_child();

// VMM calls are rare and slow (tens of µs), so their sites get the deep native stack and the Python frames
// by default; classic calls are frequent and cheap, so theirs keep one return address unless asked.
enum class CallClass : std::uint8_t { classic, vmm };

class Call {
public:
    // A runtime wrapper on this thread's stack names the call: cudart's caller and API, not cudart's.
    Call(Recorder& recorder, const char* api, void* caller, CallClass cls = CallClass::classic)
        : recorder_(recorder), api_(api), caller_(caller), class_(cls) {
        const ThreadState& t = thread_state();
        if (t.runtime_api != nullptr) [[unlikely]] {
            api_ = t.runtime_api;
            caller_ = t.runtime_caller;
        }
    }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

    Recorder& recorder() const { return recorder_; }
    const char* api() const { return api_; }
    // The site of this call: captured (stack_depth, or vmm_stack_depth at VMM calls, frames from the caller
    // outwards, then the Python frames where python_frames asks) and interned on first use, so events that
    // need none (a successful free) cost nothing for it.
    const ledger::Site& site();
    // A site with the API only, for events whose site the ledger does not keep.
    ledger::Site bare() const { return ledger::Site{api_, 0, 0}; }
    // A classic free's ticket for its record, taken before the driver ran (Ledger::freeing).
    ledger::Ledger::FreeTicket free_ticket = 0;

private:
    Recorder& recorder_;
    const char* api_;
    void* caller_;
    CallClass class_;
    bool have_site_ = false;
    ledger::Site site_;
};

}  // namespace cumemaudit::shim
