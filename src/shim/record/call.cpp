#include "shim/record/call.hpp"

#include "shim/record/pc_cache.hpp"
#include "shim/services/python_stack.hpp"
#include "shim/record/recorder.hpp"
#include "shim/services/unwind.hpp"

#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <array>
#include <memory>
#include <new>
#include <vector>

namespace cumemaudit::shim {

constinit thread_local ThreadState t_thread_state __attribute__((tls_model("initial-exec")));

namespace {

constexpr int kMaxDepth = options::kMaxStackDepth;
constexpr int kMaxPythonDepth = options::kMaxPythonDepth;
constexpr int kOwnFrames = 8;  // frames of the shim itself above the caller, at most

// The shim's own frames above the caller, the most seen (3 on a wrapper's path in the LTO build). An unwind
// walks depth + that many frames, not depth + kOwnFrames: at a 16-frame VMM site, 19 frames where it
// walked 24, and each costs a cache miss or two after a real driver call.
std::atomic<int> g_own_frames{0};

// Frames from the caller outwards, innermost first. One frame is the caller's return address, free;
// more need an unwind, and the unwind starts inside the shim, so it is cut at the caller's frame. What it
// returns is what an unwind of depth + kOwnFrames frames gives: a walk that may have cut frames the site
// keeps is made again with room for them.
int capture(void* caller, int depth, ledger::Pc* out) {
    depth = std::clamp(depth, 1, kMaxDepth);
    out[0] = reinterpret_cast<ledger::Pc>(caller);
    if (depth == 1) return 1;
    std::array<void*, kMaxDepth + kOwnFrames> frames;
    for (int own = g_own_frames.load(std::memory_order_relaxed);;) {
        const int want = depth + own;
        const int n = unwind(frames.data(), want);
        const int at = static_cast<int>(std::find(frames.begin(), frames.begin() + n, caller) - frames.begin());
        if (n == want && own < kOwnFrames && (at == n || at > own)) {  // the stack went on past the walk
            own = at == n ? kOwnFrames : std::min(at, kOwnFrames);
            if (at < n && at > g_own_frames.load(std::memory_order_relaxed))
                g_own_frames.store(own, std::memory_order_relaxed);  // a race may keep the smaller: a walk more
            continue;
        }
        if (at == n) return 1;  // caller not on the unwound stack (no unwind info): keep it alone
        int k = 0;
        for (int i = at; i < n && k < depth; ++i) out[k++] = reinterpret_cast<ledger::Pc>(frames[i]);
        return k;
    }
}

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
    free_thread_pc_cache();  // the exiting thread's own
}

}  // namespace

bool count_first_call() {
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

namespace {
struct alignas(64) Stripe {
    OrderStripe s;
};
Stripe g_stripes[256];  // constant-initialized: no constructor order to worry about

long futex(std::atomic<int>& word, int op, int value) {
    return syscall(SYS_futex, reinterpret_cast<int*>(&word), op, value, nullptr, nullptr, 0);
}
}  // namespace

// Drepper's "Futexes Are Tricky", mutex 2: an unlock enters the kernel only when somebody sleeps.
void OrderStripe::lock() noexcept {
    int c = 0;
    if (state_.compare_exchange_strong(c, 1, std::memory_order_acquire)) return;
    if (c != 2) c = state_.exchange(2, std::memory_order_acquire);
    while (c != 0) {
        futex(state_, FUTEX_WAIT_PRIVATE, 2);
        c = state_.exchange(2, std::memory_order_acquire);
    }
}

void OrderStripe::unlock() noexcept {
    if (state_.exchange(0, std::memory_order_release) == 2) futex(state_, FUTEX_WAKE_PRIVATE, 1);
}

void OrderStripe::wait_while_held() noexcept {
    if (state_.load(std::memory_order_acquire) == 0) return;
    lock();
    unlock();
}

OrderStripe& order_stripe(std::uint64_t value) {
    // Pointers and handles are aligned: drop the low bits before mixing.
    const std::uint64_t h = (value >> 6) * 0x9E3779B97F4A7C15ull;
    return g_stripes[h >> 56].s;
}

void reset_order_stripes_in_child() {
    // A parent thread may have held a stripe across its driver call when another forked: that thread does
    // not exist here (the only thread of the child holds none).
    for (Stripe& s : g_stripes) s.s.reset();
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

const ledger::Site& Call::site() {
    if (!have_site_) {
        have_site_ = true;
        const Recorder::Hot& o = recorder_.hot();
        const bool vmm = class_ == CallClass::vmm;
        const int depth = vmm ? o.vmm_stack_depth : o.stack_depth;
        const bool python = o.python_frames == options::PythonFrames::all ||
                            (vmm && o.python_frames == options::PythonFrames::vmm);
        if (depth <= 1 && !python) {
            site_ = one_frame_site(recorder_, api_, reinterpret_cast<ledger::Pc>(caller_));
            return site_;
        }
        // Native frames, then the Python frames (tagged pcs): one trace, so a site is both together.
        ledger::Ledger& book = recorder_.ledger();
        std::array<ledger::Pc, kMaxDepth + kMaxPythonDepth> pcs;
        const int n = capture(caller_, depth, pcs.data());
        const int py = python ? python_stack(book.python_frames(), pcs.data() + n,
                                             std::clamp(o.python_depth, 0, kMaxPythonDepth))
                              : 0;
        const std::span<const ledger::Pc> frames(pcs.data(), static_cast<std::size_t>(n + py));
        site_ = deep_site(recorder_, api_, frames, static_cast<std::size_t>(n));
    }
    return site_;
}

}  // namespace cumemaudit::shim
