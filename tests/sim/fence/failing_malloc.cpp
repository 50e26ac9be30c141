// failing_malloc: a preload library for the fence test. Once armed, every allocation requested from
// inside libcumemaudit.so fails (malloc returns null, so the shim's operator new throws bad_alloc), while
// the program's, the C library's and the simulated driver's allocations go on as usual. It allocates
// nothing itself: it forwards to glibc's own __libc_* entry points.
#include <link.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);
}

namespace {

std::atomic<bool> g_armed{false};
std::atomic<long> g_refused{0};
std::uintptr_t g_lo = 0, g_hi = 0;  // the shim's loaded segments

bool refuse(void* caller) {
    if (!g_armed.load(std::memory_order_relaxed)) return false;
    const auto pc = reinterpret_cast<std::uintptr_t>(caller);
    if (pc < g_lo || pc >= g_hi) return false;
    g_refused.fetch_add(1, std::memory_order_relaxed);
    errno = ENOMEM;
    return true;
}

}  // namespace

#define EXPORT extern "C" __attribute__((visibility("default")))

// Arms (on != 0) or disarms; false when the shim is not loaded. The shim's range is found here, not in
// malloc, so malloc itself stays free of the loader.
EXPORT int failing_malloc_arm(int on) {
    if (on != 0 && g_hi == 0) {
        dl_iterate_phdr(
            [](dl_phdr_info* info, size_t, void*) {
                if (info->dlpi_name == nullptr || std::strstr(info->dlpi_name, "libcumemaudit.so") == nullptr) return 0;
                for (int i = 0; i < info->dlpi_phnum; ++i) {
                    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
                    if (ph.p_type != PT_LOAD) continue;
                    const std::uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
                    if (g_lo == 0 || lo < g_lo) g_lo = lo;
                    if (hi > g_hi) g_hi = hi;
                }
                return 1;
            },
            nullptr);
        if (g_hi == 0) return 0;
    }
    g_armed.store(on != 0);
    return 1;
}

EXPORT long failing_malloc_refused() { return g_refused.load(); }

EXPORT void* malloc(size_t n) { return refuse(__builtin_return_address(0)) ? nullptr : __libc_malloc(n); }
EXPORT void* calloc(size_t k, size_t n) { return refuse(__builtin_return_address(0)) ? nullptr : __libc_calloc(k, n); }
EXPORT void* realloc(void* p, size_t n) { return refuse(__builtin_return_address(0)) ? nullptr : __libc_realloc(p, n); }
EXPORT void free(void* p) { __libc_free(p); }
EXPORT void* memalign(size_t a, size_t n) { return refuse(__builtin_return_address(0)) ? nullptr : __libc_memalign(a, n); }
EXPORT void* aligned_alloc(size_t a, size_t n) { return refuse(__builtin_return_address(0)) ? nullptr : __libc_memalign(a, n); }
EXPORT int posix_memalign(void** out, size_t a, size_t n) {
    if (refuse(__builtin_return_address(0))) return ENOMEM;
    void* p = __libc_memalign(a, n);
    if (p == nullptr) return ENOMEM;
    *out = p;
    return 0;
}
