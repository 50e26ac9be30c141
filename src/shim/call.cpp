#include "call.hpp"

#include "auditor.hpp"
#include "cupti_backend.hpp"
#include "options.hpp"
#include "options_store.hpp"
#include "owners.hpp"
#include "unwind.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <new>

namespace cumemaudit::shim {
namespace {

thread_local ThreadState t_state __attribute__((tls_model("initial-exec")));

constexpr int kMaxDepth = kMaxStackDepth;
constexpr int kOwnFrames = 8;  // frames of the shim itself above the caller, at most

// Frames from the caller outwards, innermost first. One frame is the caller's return address, free;
// more need an unwind, and the unwind starts inside the shim, so it is cut at the caller's frame.
int capture(void* caller, int depth, ledger::Pc* out) {
    depth = std::clamp(depth, 1, kMaxDepth);
    out[0] = reinterpret_cast<ledger::Pc>(caller);
    if (depth == 1) return 1;
    std::array<void*, kMaxDepth + kOwnFrames> frames;
    const int n = unwind(frames.data(), depth + kOwnFrames);
    const auto at = std::find(frames.begin(), frames.begin() + n, caller);
    if (at == frames.begin() + n) return 1;  // caller not on the unwound stack (no unwind info): keep it alone
    int k = 0;
    for (auto it = at; it != frames.begin() + n && k < depth; ++it) out[k++] = reinterpret_cast<ledger::Pc>(*it);
    return k;
}

// One-frame sites, the default, repeat: the same call site allocates again and again. A per-thread cache
// from return address to (trace, owner) spares the trace tree's lock and the owner's dladdr.
struct SiteCacheEntry {
    ledger::Pc pc = 0;
    std::uint64_t generation = 0;  // ledger generation: a fork child's fresh ledger has new trace ids
    ledger::TraceId trace = 0;
    ledger::OwnerId owner = 0;
};
// On the heap, one per thread: in the TLS block itself it would overflow the static TLS a dlopen() may get.
thread_local std::unique_ptr<std::array<SiteCacheEntry, 256>> t_sites;

}  // namespace

ThreadState& thread_state() { return t_state; }

namespace {
struct alignas(64) Stripe {
    std::mutex m;
};
Stripe g_stripes[256];  // constant-initialized: no constructor order to worry about
}  // namespace

std::mutex& order_stripe(std::uint64_t value) {
    // Pointers and handles are aligned: drop the low bits before mixing.
    const std::uint64_t h = (value >> 6) * 0x9E3779B97F4A7C15ull;
    return g_stripes[h >> 56].m;
}

void reset_order_stripes_in_child() {
    // A parent thread may have held a stripe across its driver call when another forked: that thread does
    // not exist here, so its lock is made anew (the only thread of the child holds none).
    for (Stripe& s : g_stripes) new (&s.m) std::mutex();
}

RuntimeScope::RuntimeScope(const char* api, void* caller)
    : saved_api_(t_state.runtime_api), saved_caller_(t_state.runtime_caller) {
    // The outermost runtime call names the site: cudart may call itself (cudaMallocHost → cudaHostAlloc).
    if (t_state.runtime_api == nullptr) {
        t_state.runtime_api = api;
        t_state.runtime_caller = caller;
    }
}

RuntimeScope::~RuntimeScope() {
    t_state.runtime_api = saved_api_;
    t_state.runtime_caller = saved_caller_;
}

Call::Call(const char* api, void* caller) : api_(api), caller_(caller) {
    recording_ = t_state.driver_depth == 0 && t_state.shim_depth == 0 && Auditor::enter();
    // backend=cupti: CUPTI records; the wrappers stand by unless it could not subscribe.
    static const bool cupti_only = current_options().backend == "cupti";
    if (recording_ && cupti_only && !t_state.in_cupti_callback && cupti_subscribed()) recording_ = false;
    if (recording_ && t_state.runtime_api != nullptr) {
        api_ = t_state.runtime_api;
        caller_ = t_state.runtime_caller;
    }
}

const ledger::Site& Call::site() {
    if (!have_site_) {
        have_site_ = true;
        Auditor& a = Auditor::get();
        const auto pc = reinterpret_cast<ledger::Pc>(caller_);
        if (a.options().stack_depth <= 1) {
            if (!t_sites) t_sites = std::make_unique<std::array<SiteCacheEntry, 256>>();
            SiteCacheEntry& e = (*t_sites)[(pc >> 2) % t_sites->size()];
            if (e.pc != pc || e.generation != a.generation()) {
                const ledger::Pc one[1] = {pc};
                e = {pc, a.generation(), a.ledger().traces().intern(one), owner_of(one, a.ledger())};
            }
            site_ = ledger::Site{api_, e.trace, e.owner};
            return site_;
        }
        std::array<ledger::Pc, kMaxDepth> pcs;
        const int n = capture(caller_, a.options().stack_depth, pcs.data());
        const std::span<const ledger::Pc> frames(pcs.data(), static_cast<std::size_t>(n));
        site_ = ledger::Site{api_, a.ledger().traces().intern(frames), owner_of(frames, a.ledger())};
    }
    return site_;
}

}  // namespace cumemaudit::shim
