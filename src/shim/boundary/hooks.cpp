// The exported wrappers and the maps the doors use, all expanded from hooks.inc.
#include "shim/boundary/hooks.hpp"

#include "shim/boundary/doors.hpp"
#include "shim/boundary/wrapper.hpp"

#include <dlfcn.h>

#include <array>
#include <unordered_map>

#define CUMA_EXPORT extern "C" __attribute__((visibility("default")))
#define CUMA_ARGS(...) __VA_ARGS__

// ---- door 1: the exported symbols. The caller's return address is taken here, in the function the
// program called, so it is the program's call site whichever door led it here.
#define DRIVER_HOOK(symbol, event, api, params, args)                                                   \
    CUMA_EXPORT CUresult CUDAAPI symbol params {                                                         \
        using namespace cumemaudit::shim;                                                                \
        return DriverHook<HookId::symbol, ev::event, CUresult params>::call(api, __builtin_return_address(0), \
                                                                             CUMA_ARGS args);            \
    }
#define RUNTIME_HOOK(symbol, api, params, args)                                                          \
    CUMA_EXPORT cudaError_t CUDARTAPI symbol params {                                                    \
        using namespace cumemaudit::shim;                                                                \
        return RuntimeHook<HookId::symbol, cudaError_t params>::call(api, __builtin_return_address(0),   \
                                                                      CUMA_ARGS args);                   \
    }
#define DOOR_HOOK(symbol)
#include "shim/boundary/hooks.inc"
#undef DRIVER_HOOK
#undef RUNTIME_HOOK
#undef DOOR_HOOK

namespace cumemaudit::shim {
namespace {

// Constant-initialized (no constructor runs before a door may need it): the wrapper's address is
// produced by a captureless lambda, since a cast to void* is not a constant expression.
#define CUMA_ADDRESS_OF(symbol) [] { return reinterpret_cast<void*>(&::symbol); }
constexpr std::array<HookInfo, kHookCount> kHooks = {{
#define DRIVER_HOOK(symbol, event, api, params, args) {#symbol, HookKind::driver, CUMA_ADDRESS_OF(symbol)},
#define RUNTIME_HOOK(symbol, api, params, args) {#symbol, HookKind::runtime, CUMA_ADDRESS_OF(symbol)},
#define DOOR_HOOK(symbol) {#symbol, HookKind::door, CUMA_ADDRESS_OF(symbol)},
#include "shim/boundary/hooks.inc"
#undef DRIVER_HOOK
#undef RUNTIME_HOOK
#undef DOOR_HOOK
}};

const std::unordered_map<std::string_view, HookId>& by_symbol() {
    static const auto* map = [] {
        auto* m = new std::unordered_map<std::string_view, HookId>();  // never destroyed: used until _exit
        for (std::size_t i = 0; i < kHooks.size(); ++i) m->emplace(kHooks[i].symbol, static_cast<HookId>(i));
        return m;
    }();
    return *map;
}

}  // namespace

const HookInfo& hook_info(HookId id) { return kHooks[static_cast<std::size_t>(id)]; }

HookId find_hook(std::string_view symbol) {
    // Every wrapped name starts with "cu" (cu* and cuda*): most dlsym look-ups leave here.
    if (symbol.size() < 3 || symbol[0] != 'c' || symbol[1] != 'u') return HookId::count;
    const auto& map = by_symbol();
    auto it = map.find(symbol);
    return it == map.end() ? HookId::count : it->second;
}

void adopt_real(HookId id, void* p) {
    if (p == nullptr || p == hook_info(id).wrapper()) return;
    void* expected = nullptr;
    g_real[static_cast<std::size_t>(id)].compare_exchange_strong(expected, p, std::memory_order_acq_rel);
}

void forget_unloaded_entries() {
    for (auto& entry : g_real) {
        void* p = entry.load(std::memory_order_acquire);
        Dl_info info{};
        if (p != nullptr && dladdr(p, &info) == 0) entry.compare_exchange_strong(p, nullptr);
    }
}

void* real_entry(HookId id) {
    const HookInfo& info = hook_info(id);
    // The next definition after us in the global scope: libcuda for -lcuda programs, libcudart for the
    // runtime, or another interposer loaded after us (which then sees the call as it would without us).
    // info.symbol views a string literal (kHooks below), so its data() is NUL-terminated.
    void* p = next_symbol(info.symbol.data());
    // cudart and others load libcuda.so.1 privately (RTLD_LOCAL): look in that very object.
    if (p == nullptr)
        p = info.kind == HookKind::runtime ? runtime_symbol(info.symbol.data()) : driver_symbol(info.symbol.data());
    adopt_real(id, p);
    return g_real[static_cast<std::size_t>(id)].load(std::memory_order_acquire);
}

void* swap_in(std::string_view symbol, void* p) {
    const HookId id = find_hook(symbol);
    if (id == HookId::count || p == nullptr) return p;
    adopt_real(id, p);
    return hook_info(id).wrapper();
}

}  // namespace cumemaudit::shim
