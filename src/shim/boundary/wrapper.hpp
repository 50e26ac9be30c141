// wrapper: the tiny templates every row of hooks.inc expands into (heaptrack-style). One wrapper per entry
// point forwards to the real driver and, around that call, hands the Recorder of the process the events
// the call makes (events.hpp), enforce mode's translations (enforce.hpp) and the OOM watch (oom.hpp).
#pragma once

#include "shim/process/auditor.hpp"
#include "shim/record/call.hpp"
#include "shim/services/cuda_api.hpp"
#include "shim/record/enforce.hpp"
#include "shim/record/events.hpp"
#include "shim/boundary/fence.hpp"
#include "shim/boundary/hooks.hpp"
#include "shim/record/oom.hpp"
#include "shim/record/recorder.hpp"

#include <optional>

namespace cumemaudit::shim {

// After the record of a call: an allocation refused for lack of memory (true: the OOM report is due now),
// or the retry of one.
template <typename Event, typename... A>
inline bool watch_oom(Event e, Call& call, CUresult r, A... a) {
    // Decided at compile time: a free or a map never reads the OOM counter's line.
    if constexpr (std::is_same_v<decltype(requested(e, a...)), std::nullopt_t>) return false;
    if (r != CUDA_ERROR_OUT_OF_MEMORY && !(r == CUDA_SUCCESS && call.recorder().hot().oom_waiting.load(std::memory_order_relaxed) > 0))
        return false;
    const std::optional<std::uint64_t> bytes = requested(e, a...);
    if (!bytes) return false;
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return out_of_memory(call, r, *bytes);
    allocation_succeeded(call, *bytes);
    return false;
}

template <HookId Id, typename Event, typename Fn>
struct DriverHook;

// One intercepted driver call. Noexcept: the shim's work runs inside guarded() (fence.hpp), so a failure
// there leaves the call to the driver alone; what the program gets is always the driver's own answer.
//
// Cache lines a recorded classic allocation touches (default options, one-frame site, no enforce/CUPTI):
//   per thread:    ThreadState (depths, call counter, the pc cache's address), the pc cache entry    2
//   read-mostly:   g_real[Id]; the auditor's state, fork flag and address; the Recorder's Hot line
//                  (options the call reads, the capture and OOM counters)                           ~3
//   ledger data:   the classic table's hot line, its shard, its slot; the owner's line; the totals'
//                  line, which holds the one lock of the table and the figures (owners.hpp)          5
// A free touches the same but the pc cache entry and the hot line, and its shard and slot twice: its
// ticket read before the driver runs (without the lock), taken out after. Locked instructions: one a
// call, the lock. The totals' line is shared by every thread: it is what an exact peak costs. Before issue 18 an allocation also touched an order stripe's
// mutex, the shard map's bucket, a malloc'd node and malloc's own lines (freed again by the free), a
// per-thread kind stripe, the owners' registration count, a shared call-counter stripe, the TLS lines
// behind three __tls_get_addr calls and six read-mostly globals in five files: about 22 lines where there
// are now about 10. Counted by cachegrind with every line evicted before each call (tests/bench/RESULTS.md,
// "Cold caches"), stack frames, GOT entries and the driver's own lines included.
template <HookId Id, typename Event, typename... A>
struct DriverHook<Id, Event, CUresult(A...)> {
    static CUresult call(const char* api, void* caller, A... a) noexcept {
        using Real = CUresult(CUDAAPI*)(A...);
        Real real = nullptr;
        // No driver loaded, or it could not be looked up: what a missing libcuda gives.
        if (!guarded(api, [&] { real = reinterpret_cast<Real>(real_fn(Id)); }) || real == nullptr)
            return CUDA_ERROR_NOT_INITIALIZED;
        Recorder* rec = nullptr;
        if (!guarded(api, [&] { rec = recorder_for_call(); }) || rec == nullptr) return real(a...);
        Call call(*rec, api, caller, call_class(Event{}));  // allocates nothing, cannot throw
        const bool enforce = rec->enforcing();
        std::optional<CUresult> answered;
        decltype(before(Event{}, call, a...)) order;  // a stripe's lock, or NoHold
        bool prepared;
        {
            // A ledger lock may be taken here (a free's ticket read under the lock when writers keep moving
            // its shard; enforce mode's table): a SIGTERM's report written on this thread meanwhile would
            // wait for it forever, so the signal waits for the scope's end.
            ShimScope preparing;
            prepared = guarded(api, [&] {
                if (enforce) answered = enforce_before(Event{}, call, a...);
                if (!answered) order = before(Event{}, call, a...);
            });
        }
        if (answered) return *answered;
        CUresult r;
        {
            DriverScope in_driver;  // calls the driver makes on itself are not the program's
            r = real(a...);
        }
        ShimScope busy;
        guarded(api, [&] {
            record(Event{}, call, r, a...);
            if (watch_oom(Event{}, call, r, a...)) Auditor::get().oom_checkpoint();
            if (prepared && enforce) enforce_after(Event{}, call, r, a...);
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
