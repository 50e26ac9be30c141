// The maps the doors use, expanded from hooks.inc. The exported wrappers themselves are exports.cpp.
#include "shim/boundary/hooks.hpp"

#include "shim/services/loader.hpp"
#include "shim/services/thread_state.hpp"

#include <dlfcn.h>

#include <array>
#include <unordered_map>

// The exported wrappers (exports.cpp), declared as the rows spell them: the per-thread runtime twins have no
// declaration in the toolkit's headers.
#define DRIVER_HOOK(symbol, event, api, params, args) extern "C" CUresult CUDAAPI symbol params;
#define RUNTIME_HOOK(symbol, api, params, args) extern "C" cudaError_t CUDARTAPI symbol params;
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
    ShimScope looking_up;  // dladdr holds the loader's lock: see real_entry
    for (auto& entry : g_real) {
        void* p = entry.load(std::memory_order_acquire);
        Dl_info info{};
        if (p != nullptr && dladdr(p, &info) == 0) entry.compare_exchange_strong(p, nullptr);
    }
}

void* real_entry(HookId id) {
    // The look-up holds the dynamic loader's lock. A report needs that lock (it names the driver's build and
    // symbolizes), so exit() from a signal handler that interrupts the look-up must find this thread inside
    // the shim's own work and write none, rather than wait on a report that waits on this thread.
    ShimScope looking_up;
    const HookInfo& info = hook_info(id);
    // info.symbol views a string literal (kHooks below), so its data() is NUL-terminated.
    void* p = info.kind == HookKind::runtime ? next_symbol(info.symbol.data()) : driver_entry(info.symbol.data());
    // cudart loads privately (RTLD_LOCAL) too: look in that very object.
    if (p == nullptr && info.kind == HookKind::runtime) p = runtime_symbol(info.symbol.data());
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
