// The CUPTI backend: the same hook table (hooks.inc), fed from CUPTI's driver-API callbacks instead of our
// wrappers, into the same record() functions and the same ledger, so a report reads the same whichever
// backend fed it. Loaded through CUDA_INJECTION64_PATH (InitializeInjection); libcupti is dlopen'ed, never
// linked. CUPTI allows one subscriber: when another tool holds it, the preload backend takes over (the CLI
// preloads the shim in standby for exactly that) and one message says which tool holds CUPTI.
#include "shim/boundary/cupti_backend.hpp"

#include "shim/process/auditor.hpp"
#include "shim/record/call.hpp"
#include "shim/record/entry_point.hpp"
#include "shim/boundary/fence.hpp"
#include "shim/services/log.hpp"
#include "shim/services/options_store.hpp"
#include "shim/record/pc_cache.hpp"
#include "shim/record/recorder.hpp"
#include "shim/services/unwind.hpp"

#include "common/paths.hpp"

#include <cupti.h>
#include <dlfcn.h>
#include <link.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

namespace cumemaudit::shim {
namespace {

// The program's call into the driver: the first frame outside the shim, CUPTI, libcuda and cudart (cudart
// standing in for its caller, as the runtime wrappers make it). What each frame's object is, is cached per
// thread by return address (pc_cache.hpp).
void* program_caller() {
    void* frames[64];
    const int n = unwind(frames, 64);
    for (int i = 0; i < n; ++i)
        if (!passes_on(reinterpret_cast<ledger::Pc>(frames[i]))) return frames[i];
    return n > 0 ? frames[n - 1] : nullptr;
}

// Into `target`, or the process's recorder when null.
template <typename Event, typename... A>
void record_from_cupti(Recorder* target, const char* api, CUresult r, A... a) {
    ThreadState& t = thread_state();
    t.in_cupti_callback = true;
    guarded(api, [&] {
        Recorder* rec = target == nullptr ? recorder_for_call() : programs_call() ? target : nullptr;
        if (rec == nullptr) return;
        using Row = Declared<Event, A...>;
        Call call(*rec, api, program_caller(), Row::d.call_class);
        ShimScope busy;
        Row::record_answer(call, r, a...);
        if (Row::watch_oom(call, r, a...)) rec->report_due();
    });
    t.in_cupti_callback = false;
}

// Before the driver runs (CUPTI's API_ENTER): what a row prepares (the figures a trim, a launch or an
// instantiation is priced against), as the wrapper does before its driver call.
template <typename Event, typename... A>
void prepare_from_cupti(Recorder* target, const char* api, A... a) {
    using Row = Declared<Event, A...>;
    if constexpr (Row::d.prepares) {
        ThreadState& t = thread_state();
        t.in_cupti_callback = true;
        guarded(api, [&] {
            Recorder* rec = target == nullptr ? recorder_for_call() : programs_call() ? target : nullptr;
            if (rec == nullptr) return;
            Call call(*rec, api, program_caller(), Row::d.call_class);
            ShimScope busy;
            prepare(Event{}, call, a...);
        });
        t.in_cupti_callback = false;
    }
}

#define CUMA_FIELDS_1(p, a) p->a
#define CUMA_FIELDS_2(p, a, ...) p->a, CUMA_FIELDS_1(p, __VA_ARGS__)
#define CUMA_FIELDS_3(p, a, ...) p->a, CUMA_FIELDS_2(p, __VA_ARGS__)
#define CUMA_FIELDS_4(p, a, ...) p->a, CUMA_FIELDS_3(p, __VA_ARGS__)
#define CUMA_FIELDS_5(p, a, ...) p->a, CUMA_FIELDS_4(p, __VA_ARGS__)
#define CUMA_FIELDS_6(p, a, ...) p->a, CUMA_FIELDS_5(p, __VA_ARGS__)
#define CUMA_FIELDS_7(p, a, ...) p->a, CUMA_FIELDS_6(p, __VA_ARGS__)
#define CUMA_FIELDS_8(p, a, ...) p->a, CUMA_FIELDS_7(p, __VA_ARGS__)
#define CUMA_FIELDS_9(p, a, ...) p->a, CUMA_FIELDS_8(p, __VA_ARGS__)
#define CUMA_FIELDS_10(p, a, ...) p->a, CUMA_FIELDS_9(p, __VA_ARGS__)
#define CUMA_FIELDS_11(p, a, ...) p->a, CUMA_FIELDS_10(p, __VA_ARGS__)
#define CUMA_PICK(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, name, ...) name
#define CUMA_FIELDS_N(p, ...) CUMA_PICK(__VA_ARGS__, CUMA_FIELDS_11, CUMA_FIELDS_10, CUMA_FIELDS_9, CUMA_FIELDS_8, CUMA_FIELDS_7, CUMA_FIELDS_6, CUMA_FIELDS_5, CUMA_FIELDS_4, CUMA_FIELDS_3, CUMA_FIELDS_2, CUMA_FIELDS_1)(p, __VA_ARGS__)
#define CUMA_FIELDS(p, args) CUMA_FIELDS_N(p, CUMA_UNPAREN args)
#define CUMA_UNPAREN(...) __VA_ARGS__

// The driver-API callback ids the hook table covers.
// Watched rows (kernel launches) are left out: a CUPTI callback on every launch costs what their wrappers
// avoid, so under CUPTI a refused launch makes no OOM record.
constexpr CUpti_CallbackId kCallbacks[] = {
#define DRIVER_HOOK(symbol, event, api, params, args)                                                      \
    ev::event::declared.call_class == CallClass::watched ? CUPTI_DRIVER_TRACE_CBID_INVALID                   \
                                                        : CUPTI_DRIVER_TRACE_CBID_##symbol,
#define RUNTIME_HOOK(symbol, api, params, args)
#define DOOR_HOOK(symbol)
#include "shim/boundary/hooks.inc"
#undef DRIVER_HOOK
#undef RUNTIME_HOOK
#undef DOOR_HOOK
};

using Subscribe = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*, CUpti_SubscriberParams*);
using EnableCallback = CUptiResult(CUPTIAPI*)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
using ResultString = CUptiResult(CUPTIAPI*)(CUptiResult, const char**);

// libcupti already in the process before the driver loaded us: a profiler (PyTorch's kineto, Nsight) links
// it and may subscribe later. CUPTI takes one subscriber, so the audit yields it rather than break that tool.
std::string cupti_loaded_by_others() {
    std::string found;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) {
            const std::string_view path = info->dlpi_name != nullptr ? info->dlpi_name : "";
            if (cumemaudit::basename(path).starts_with("libcupti")) {
                *static_cast<std::string*>(out) = std::string(path);
                return 1;
            }
            return 0;
        },
        &found);
    return found;
}

void* load_cupti() {
    // The toolkit's and the wheels' (nvidia-cuda-cupti) copies are rarely on the library path: the CLI
    // passes the one it found in CUMEMAUDIT_CUPTI_LIB.
    for (const char* name : {static_cast<const char*>(std::getenv("CUMEMAUDIT_CUPTI_LIB")), "libcupti.so.13", "libcupti.so",
                             "/usr/local/cuda/lib64/libcupti.so.13", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"})
        if (name != nullptr && *name != '\0')
            if (void* lib = dlopen(name, RTLD_NOW | RTLD_LOCAL)) return lib;
    return nullptr;
}

}  // namespace

void dispatch_cupti(Recorder* into, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) noexcept {
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
    const auto* info = static_cast<const CUpti_CallbackData*>(data);
    const bool entering = info->callbackSite == CUPTI_API_ENTER;
    if (info->functionParams == nullptr || (!entering && (info->callbackSite != CUPTI_API_EXIT || info->functionReturnValue == nullptr)))
        return;
    const CUresult r = entering ? CUDA_SUCCESS : *static_cast<const CUresult*>(info->functionReturnValue);
    switch (cbid) {
#define DRIVER_HOOK(symbol, event, api, params, args)                                    \
    case CUPTI_DRIVER_TRACE_CBID_##symbol: {                                             \
        const auto* p = static_cast<const symbol##_params*>(info->functionParams);       \
        if (entering) prepare_from_cupti<ev::event>(into, api, CUMA_FIELDS(p, args));    \
        else record_from_cupti<ev::event>(into, api, r, CUMA_FIELDS(p, args));           \
        break;                                                                           \
    }
#define RUNTIME_HOOK(symbol, api, params, args)
#define DOOR_HOOK(symbol)
#include "shim/boundary/hooks.inc"
#undef DRIVER_HOOK
#undef RUNTIME_HOOK
#undef DOOR_HOOK
        default: break;
    }
}

}  // namespace cumemaudit::shim

using namespace cumemaudit::shim;

// Called by the driver at cuInit for CUDA_INJECTION64_PATH. Returns 1 (success) even when CUPTI is taken:
// the preload backend then carries the audit, and the program must not notice either way.
namespace {
int initialize_injection();
}

// Noexcept through the fence: a failure here leaves the preload backend to carry the audit.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
    guarded("InitializeInjection", [] { initialize_injection(); });
    return 1;
}

namespace {
int initialize_injection() {
    if (current_options().backend == cumemaudit::options::Backend::preload) return 1;
    if (const std::string other = cupti_loaded_by_others(); !other.empty()) {
        log_warning("backend={}: {} was loaded before the driver started, so a profiler in this process may need "
                    "CUPTI, which takes one subscriber; the preload backend carries the audit and CUPTI is left to it",
                    cumemaudit::options::name_of(current_options().backend), other);
        return 1;
    }
    void* lib = load_cupti();
    auto subscribe = lib ? reinterpret_cast<Subscribe>(dlsym(lib, "cuptiSubscribe_v2")) : nullptr;
    auto enable = lib ? reinterpret_cast<EnableCallback>(dlsym(lib, "cuptiEnableCallback")) : nullptr;
    auto result_string = lib ? reinterpret_cast<ResultString>(dlsym(lib, "cuptiGetResultString")) : nullptr;
    if (subscribe == nullptr || enable == nullptr) {
        log_warning("backend={}: libcupti not found (set CUMEMAUDIT_CUPTI_LIB); the preload backend carries the audit",
                    cumemaudit::options::name_of(current_options().backend));
        return 1;
    }
    static CUpti_SubscriberHandle subscriber = nullptr;
    char holder[256] = {};
    CUpti_SubscriberParams params{};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "cumemaudit";
    params.oldSubscriberName = holder;
    params.oldSubscriberSize = sizeof holder;
    const CUptiResult res = subscribe(
        &subscriber, [](void*, CUpti_CallbackDomain d, CUpti_CallbackId id, const void* data) { dispatch_cupti(nullptr, d, id, data); },
        nullptr, &params);
    if (res != CUPTI_SUCCESS) {
        const char* why = nullptr;
        if (result_string != nullptr) result_string(res, &why);
        log_warning("backend={}: CUPTI is held by {} ({}); the preload backend carries the audit, and the other tool "
                    "keeps CUPTI", cumemaudit::options::name_of(current_options().backend), holder[0] != '\0' ? holder : "another tool",
                    why != nullptr ? why : "subscribe failed");
        return 1;
    }
    for (CUpti_CallbackId id : kCallbacks)
        if (id != CUPTI_DRIVER_TRACE_CBID_INVALID) enable(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, id);
    Auditor::cupti_subscribed(true);
    log_info("backend={}: subscribed to CUPTI's driver-API callbacks", cumemaudit::options::name_of(current_options().backend));
    return 1;
}
}  // namespace
