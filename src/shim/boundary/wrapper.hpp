// wrapper: the tiny templates every row of hooks.inc expands into (heaptrack-style). One wrapper per entry
// point forwards to the real driver and, around that call, does what its event's row declares
// (record/events.inc, derived in record/entry_point.hpp): enforce mode's part, the order between threads,
// the ledger event, the OOM watch. A report the record asks for is written by the process room.
#pragma once

#include "shim/boundary/fence.hpp"
#include "shim/boundary/hooks.hpp"
#include "shim/process/auditor.hpp"
#include "shim/record/entry_point.hpp"
#include "shim/services/cuda_api.hpp"

#include <optional>

namespace cumemaudit::shim {

template <HookId Id, typename Event, typename Fn>
struct DriverHook;

// One intercepted driver call. Noexcept: the shim's work runs inside guarded() (fence.hpp), so a failure
// there leaves the call to the driver alone; what the program gets is always the driver's own answer.
// Everything it does besides the driver call comes from the event's row (record/events.inc), through
// Declared. Which cache lines and locked instructions a call touches is docs/HOT_PATH.md.
template <HookId Id, typename Event, typename... A>
struct DriverHook<Id, Event, CUresult(A...)> {
    using Row = Declared<Event, A...>;
    static CUresult call(const char* api, void* caller, A... a) noexcept {
        using Real = CUresult(CUDAAPI*)(A...);
        Real real = nullptr;
        // No driver loaded, or it could not be looked up: what a missing libcuda gives.
        if (!guarded(api, [&] { real = reinterpret_cast<Real>(real_fn(Id)); }) || real == nullptr)
            return CUDA_ERROR_NOT_INITIALIZED;
        if constexpr (Row::d.call_class == CallClass::watched) {
            // One compare on the way back: only a refusal for lack of memory is the shim's business, and a
            // launch's device heap that does not fit is refused as CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES. A first
            // use (a kernel's first launch, which may load its code) goes the whole way below.
            if (!Row::is_first_use(a...)) [[likely]] {
                const CUresult r = real(a...);
                if (r == CUDA_SUCCESS) [[likely]] return r;
                if (r == CUDA_ERROR_OUT_OF_MEMORY || r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES) refused(api, caller, r, a...);
                return r;
            }
        }
        Recorder* rec = nullptr;
        if (!guarded(api, [&] { rec = recorder_for_call(caller); }) || rec == nullptr) return real(a...);
        Call call(*rec, api, caller, Row::d.call_class);  // allocates nothing, cannot throw
        const bool enforce = rec->enforcing();
        std::optional<CUresult> answered;
        decltype(Row::before_driver(call, a...)) order;  // a stripe's lock, or NoHold
        bool prepared = true;
        if (enforce || Row::acts_before) {
            // A ledger lock may be taken here (a free's ticket read under the lock when writers keep moving
            // its shard; enforce mode's table): a SIGTERM's report written on this thread meanwhile would
            // wait for it forever, so the signal waits for the scope's end.
            ShimScope preparing;
            prepared = guarded(api, [&] {
                if (enforce) answered = Row::enforce_first(call, a...);
                if (!answered) order = Row::before_driver(call, a...);
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
            Row::record_answer(call, r, a...);
            if (Row::watch_oom(call, r, a...)) rec->report_due();
            if (prepared && enforce) Row::enforce_last(call, r, a...);
        });
        return r;
    }

    // A watched call the driver refused, maybe for lack of memory: recorded (its OOM record) as any call is.
    [[gnu::noinline, gnu::cold]] static void refused(const char* api, void* caller, CUresult r, A... a) noexcept {
        Recorder* rec = nullptr;
        if (!guarded(api, [&] { rec = recorder_for_call(caller); }) || rec == nullptr) return;
        Call call(*rec, api, caller, Row::d.call_class);
        ShimScope busy;
        guarded(api, [&] { Row::record_answer(call, r, a...); });
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
