// Door 1, the exported symbols: one wrapper per row of hooks.inc, under the row's own name.
#include "shim/boundary/hooks.hpp"
#include "shim/boundary/wrapper.hpp"

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

