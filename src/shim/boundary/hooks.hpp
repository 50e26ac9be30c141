// hooks: the rows of hooks.inc as data — which entry points are hooked, and the real entry point each
// wrapper forwards to, found lazily or adopted from a door. The wrappers themselves are wrapper.hpp.
#pragma once

#include "shim/services/cuda_api.hpp"

#include <atomic>
#include <cstdint>
#include <optional>
#include <string_view>

namespace cumemaudit::shim {

enum class HookId : std::uint16_t {
#define DRIVER_HOOK(symbol, event, api, params, args) symbol,
#define RUNTIME_HOOK(symbol, api, params, args) symbol,
#define DOOR_HOOK(symbol) symbol,
#include "shim/boundary/hooks.inc"
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

}  // namespace cumemaudit::shim
