#include "unwind.hpp"

#include <dlfcn.h>
#include <execinfo.h>

namespace cumemaudit::shim {
namespace {

using Backtrace = int (*)(void**, int);

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

}  // namespace

int unwind(void** frames, int max) {
    static const Backtrace fast = load_libunwind();
    return fast != nullptr ? fast(frames, max) : backtrace(frames, max);
}

}  // namespace cumemaudit::shim
