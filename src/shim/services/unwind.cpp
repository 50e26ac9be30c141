#include "shim/services/unwind.hpp"

#include <dlfcn.h>
#include <execinfo.h>

#ifndef CUMEMAUDIT_STATIC_LIBUNWIND
#define CUMEMAUDIT_STATIC_LIBUNWIND 0
#endif
#if CUMEMAUDIT_STATIC_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

namespace cumemaudit::shim {
namespace {

using Backtrace = int (*)(void**, int);

#if CUMEMAUDIT_STATIC_LIBUNWIND
// The copy linked in (scripts/libunwind), hidden: a program's own libunwind is neither seen nor disturbed.
Backtrace load_libunwind() {
    if (unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD) != 0) return nullptr;
    return unw_backtrace;
}
#else
// A build without it: a libunwind.so.8 of the system's, if there is one.
Backtrace load_libunwind() {
    void* lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return nullptr;
    auto backtrace_fn = reinterpret_cast<Backtrace>(dlsym(lib, "unw_backtrace"));
    // unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD), by their x86-64 local names.
    auto set_policy = reinterpret_cast<int (*)(void*, int)>(dlsym(lib, "_ULx86_64_set_caching_policy"));
    auto space = static_cast<void**>(dlsym(lib, "_ULx86_64_local_addr_space"));
    constexpr int kCachePerThread = 2;  // UNW_CACHE_PER_THREAD
    if (backtrace_fn == nullptr || set_policy == nullptr || space == nullptr || set_policy(*space, kCachePerThread) != 0)
        return nullptr;
    return backtrace_fn;
}
#endif

}  // namespace

int unwind(void** frames, int max) {
    static const Backtrace fast = load_libunwind();
    return fast != nullptr ? fast(frames, max) : backtrace(frames, max);
}

}  // namespace cumemaudit::shim
