// call: what one intercepted call knows about itself — whether it is recorded at all (not while the shim
// or the driver is already on this thread's stack, not when auditing is off), which API and caller it is
// attributed to (the runtime's caller when cudart made the driver call for it), and, computed only when an
// event needs it, its Site: the interned stack and the owner.
#pragma once

#include "ledger/ledger.hpp"

#include <csignal>

#include <mutex>

namespace cumemaudit::shim {

// Per-thread state, initial-exec TLS: the wrappers touch it on every call, and the shim is loaded at start.
struct ThreadState {
    int driver_depth = 0;              // > 0 while a real driver call made by a wrapper runs
    int shim_depth = 0;                // > 0 while the shim does its own bookkeeping
    const char* runtime_api = nullptr;  // set by a runtime wrapper for its nested driver call
    void* runtime_caller = nullptr;
    bool in_cupti_callback = false;     // the CUPTI backend is recording this call
    // A SIGTERM/SIGINT that arrived while this thread held a shim lock (shim_depth > 0): the report
    // writer would wait on that lock forever, so the signal is raised again when the outermost scope ends.
    int deferred_signal = 0;
    siginfo_t deferred_info{};
};
ThreadState& thread_state();

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
// life holds the value's stripe across the driver call and its record; a call that begins one records
// under the same stripe. Different values rarely share one of the 256 stripes.
std::mutex& order_stripe(std::uint64_t value);

using OrderHold = std::unique_lock<std::mutex>;
inline OrderHold hold_order(std::uint64_t value) { return OrderHold(order_stripe(value)); }
// In a fork child, from the atfork handler only (one thread alive).
void reset_order_stripes_in_child();

class Call {
public:
    Call(const char* api, void* caller);
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

    bool recording() const { return recording_; }
    const char* api() const { return api_; }
    // The site of this call: captured (stack_depth frames from the caller outwards) and interned on first
    // use, so events that need none (a successful free) cost nothing for it.
    const ledger::Site& site();
    // A site with the API only, for events whose site the ledger does not keep.
    ledger::Site bare() const { return ledger::Site{api_, 0, 0}; }

private:
    const char* api_;
    void* caller_;
    bool recording_;
    bool have_site_ = false;
    ledger::Site site_;
};

}  // namespace cumemaudit::shim
