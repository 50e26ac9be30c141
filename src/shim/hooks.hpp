// hooks: the tiny templates every row of hooks.inc expands into (heaptrack-style), and the per-hook
// state they share: the real entry point each wrapper forwards to, found lazily or adopted from a door.
#pragma once

#include "cuda_api.hpp"
#include "call.hpp"
#include "enforce.hpp"
#include "events.hpp"
#include "fence.hpp"
#include "oom.hpp"

#include <atomic>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cumemaudit::shim {

enum class HookId : std::uint16_t {
#define DRIVER_HOOK(symbol, event, api, params, args) symbol,
#define RUNTIME_HOOK(symbol, api, params, args) symbol,
#define DOOR_HOOK(symbol) symbol,
#include "hooks.inc"
#undef DRIVER_HOOK
#undef RUNTIME_HOOK
#undef DOOR_HOOK
    count
};
inline constexpr std::size_t kHookCount = static_cast<std::size_t>(HookId::count);

enum class HookKind : std::uint8_t { driver, runtime, door };

struct HookInfo {
    std::string_view symbol;  // exported name, e.g. "cuMemAlloc_v2"
    HookKind kind;
    void* (*wrapper)();       // the address of our exported function of that name
};

// Row i describes HookId i.
const HookInfo& hook_info(HookId);

// The hook whose exported name is `symbol`, or HookId::count.
HookId find_hook(std::string_view symbol);

// The entry point a wrapper forwards to. Resolved on first use (RTLD_NEXT, then the loaded libcuda.so.1)
// unless a door already adopted the pointer the real driver handed out for that exact variant.
void* real_entry(HookId);
inline std::atomic<void*> g_real[kHookCount];

inline void* real_fn(HookId id) {
    void* p = g_real[static_cast<std::size_t>(id)].load(std::memory_order_acquire);
    return p != nullptr ? p : real_entry(id);
}

// Forgets every cached real entry point that no loaded object contains any more (after a dlclose).
void forget_unloaded_entries();

// Keeps `p` as the real entry point of `id` unless one is known already; `p` must not be our wrapper.
void adopt_real(HookId id, void* p);

// What a door hands back for a pointer the real driver or loader gave it for `symbol`: our wrapper of
// that exact variant (keeping `p` as its real target), or `p` itself when we do not wrap that symbol.
void* swap_in(std::string_view symbol, void* p);

template <HookId Id, typename Event, typename Fn>
struct DriverHook;

// One intercepted driver call. Noexcept: the shim's work runs inside guarded() (fence.hpp), so a failure
// there leaves the call to the driver alone; what the program gets is always the driver's own answer.
//
// Cache lines a recorded classic allocation touches (default options, one-frame site, no enforce/CUPTI):
//   per thread:    ThreadState (depths, call counter, site cache address), the site cache entry     2
//   read-mostly:   g_real[Id]; the auditor's state and address; the CUPTI/enforce flags; options'
//                  stack depth and the ledger generation; Timeline::capturing                     ~6
//   ledger data:   the classic table's hot line, its shard, its slot; the owner's line; the totals    5
// A free touches the same but the site and the hot line, and its shard and slot twice: marked before the
// driver runs (no lock held across it), taken out after. The totals' line is shared by every thread: it is
// what an exact peak costs. Before issue 18 an allocation also touched an order stripe's mutex, the shard
// map's bucket, a malloc'd node and malloc's own lines (freed again by the free), a per-thread kind stripe,
// the owners' registration count, a shared call-counter stripe and the TLS lines behind three
// __tls_get_addr calls: about 22 lines where there are now about 13. Counted by cachegrind with every line
// evicted before each call (tests/bench/RESULTS.md, "Cold caches"), stack frames, GOT entries and the
// driver's own lines included: 66 D1 misses an alloc+free pair, where there were 105.
template <HookId Id, typename Event, typename... A>
struct DriverHook<Id, Event, CUresult(A...)> {
    static CUresult call(const char* api, void* caller, A... a) noexcept {
        using Real = CUresult(CUDAAPI*)(A...);
        Real real = nullptr;
        // No driver loaded, or it could not be looked up: what a missing libcuda gives.
        if (!guarded(api, [&] { real = reinterpret_cast<Real>(real_fn(Id)); }) || real == nullptr)
            return CUDA_ERROR_NOT_INITIALIZED;
        std::optional<Call> call;
        if (!guarded(api, [&] { call.emplace(api, caller, call_class(Event{})); }) || !call->recording()) return real(a...);
        std::optional<CUresult> answered;
        OrderHold order;
        const bool prepared = guarded(api, [&] {
            if (enforcing()) answered = enforce_before(Event{}, *call, a...);
            if (!answered) order = before(Event{}, *call, a...);
        });
        if (answered) return *answered;
        CUresult r;
        {
            DriverScope in_driver;  // calls the driver makes on itself are not the program's
            r = real(a...);
        }
        ShimScope busy;
        guarded(api, [&] {
            record(Event{}, *call, r, a...);
            watch_oom(Event{}, *call, r, a...);  // an allocation refused for lack of memory, or its retry
            if (prepared && enforcing()) enforce_after(Event{}, r, a...);
        });
        return r;
    }
};

template <HookId Id, typename Fn>
struct RuntimeHook;

template <HookId Id, typename... A>
struct RuntimeHook<Id, cudaError_t(A...)> {
    static cudaError_t call(const char* api, void* caller, A... a) noexcept {
        using Real = cudaError_t(CUDARTAPI*)(A...);
        Real real = nullptr;
        if (!guarded(api, [&] { real = reinterpret_cast<Real>(real_fn(Id)); }) || real == nullptr)
            return cudaErrorInitializationError;
        RuntimeScope named(api, caller);  // the nested driver call records with this caller and API
        return real(a...);
    }
};

}  // namespace cumemaudit::shim
