#include "shim/services/thread_state.hpp"

#include <pthread.h>

#include <mutex>
#include <new>
#include <vector>

namespace cumemaudit::shim {

constinit thread_local ThreadState t_thread_state __attribute__((tls_model("initial-exec")));

namespace {

// The threads whose counters calls_so_far() sums, and what exited threads counted. A thread leaves the
// list at its exit through a pthread key's destructor (initial-exec TLS runs no destructor of its own).
std::mutex g_counted_mu;
std::vector<ThreadState*>* g_counted = nullptr;  // never destroyed: threads may exit during static destruction
std::uint64_t g_gone_calls = 0;
pthread_key_t g_exit_key;

void on_thread_exit(void* p) {
    auto* ts = static_cast<ThreadState*>(p);
    std::lock_guard lock(g_counted_mu);
    g_gone_calls += ts->calls.load(std::memory_order_relaxed);
    std::erase(*g_counted, ts);
    ts->counted = false;
}

}  // namespace

bool count_first_call() {
    ShimScope busy;  // exit() from a signal handler that interrupted this must not wait on the lock below
    std::lock_guard lock(g_counted_mu);
    static const bool key_made = [] {
        g_counted = new std::vector<ThreadState*>();
        return pthread_key_create(&g_exit_key, on_thread_exit) == 0;
    }();
    if (!key_made) return false;  // no thread-exit hook: count nothing rather than read a dead thread later
    g_counted->push_back(&t_thread_state);  // may throw: the caller's fence degrades the call to pass-through
    pthread_setspecific(g_exit_key, &t_thread_state);
    t_thread_state.counted = true;
    return true;
}

std::uint64_t calls_so_far() {
    std::lock_guard lock(g_counted_mu);
    std::uint64_t total = g_gone_calls;
    if (g_counted != nullptr)
        for (const ThreadState* ts : *g_counted) total += ts->calls.load(std::memory_order_relaxed);
    return total;
}

void reset_calls_after_fork() {
    // One thread alive and the lock possibly held by a thread that no longer exists: rebuild, do not lock.
    new (&g_counted_mu) std::mutex();
    g_gone_calls = 0;
    t_thread_state.calls.store(0, std::memory_order_relaxed);
    if (g_counted == nullptr) return;
    g_counted->clear();
    if (t_thread_state.counted) g_counted->push_back(&t_thread_state);
}

void forget_abandoned_scopes() {
    ThreadState& t = t_thread_state;
    t.driver_depth = 0;
    t.shim_depth = 0;
    t.runtime_api = nullptr;
    t.runtime_caller = nullptr;
}

RuntimeScope::RuntimeScope(const char* api, void* caller)
    : saved_api_(t_thread_state.runtime_api), saved_caller_(t_thread_state.runtime_caller) {
    // The outermost runtime call names the site: cudart may call itself (cudaMallocHost → cudaHostAlloc).
    if (t_thread_state.runtime_api == nullptr) {
        t_thread_state.runtime_api = api;
        t_thread_state.runtime_caller = caller;
    }
}

RuntimeScope::~RuntimeScope() {
    t_thread_state.runtime_api = saved_api_;
    t_thread_state.runtime_caller = saved_caller_;
}

}  // namespace cumemaudit::shim
