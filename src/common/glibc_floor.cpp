// glibc_floor: what lets the shipped binaries (the shim, the simulated driver and NVML, the pool, the CLI)
// load under glibc 2.28 (Ubuntu 20.04+, RHEL 8, manylinux_2_28) although they are built on a newer one.
// A newer glibc gives each symbol whose ABI moved a new version (pthread_* and dl* went into libc in
// 2.34, stat in 2.33) and the static libstdc++/libgcc we carry use functions that appeared later
// (arc4random 2.36, _dl_find_object 2.35). Each is defined here, hidden, so every reference in the link —
// ours and the static archives' — binds to it: forwarders to the oldest version of the same function,
// or a small implementation where 2.28 has none. tests/reliability checks the result with objdump -T.
// Each stat function is defined under its own name: the build's 64-bit-offset renaming would make two of one.
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>

#define FLOOR extern "C" __attribute__((visibility("hidden")))

// The forwarders pass arguments through untouched; the headers' access attributes do not apply here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// `name` forwards to `name@version`: the alias old_name is bound to that version by .symver.
#define FORWARD(ret, name, version, params, args)                                   \
    extern "C" ret cumemaudit_old_##name params;                                    \
    __asm__(".symver cumemaudit_old_" #name "," #name "@" version);                 \
    FLOOR ret name params { return cumemaudit_old_##name args; }

FORWARD(int, pthread_sigmask, "GLIBC_2.2.5", (int how, const sigset_t* set, sigset_t* old), (how, set, old))
FORWARD(int, pthread_create, "GLIBC_2.2.5", (pthread_t * t, const pthread_attr_t* a, void* (*f)(void*), void* arg),
        (t, a, f, arg))
FORWARD(int, pthread_detach, "GLIBC_2.2.5", (pthread_t t), (t))
FORWARD(int, pthread_attr_setstacksize, "GLIBC_2.2.5", (pthread_attr_t * a, size_t n), (a, n))
FORWARD(int, pthread_join, "GLIBC_2.2.5", (pthread_t t, void** r), (t, r))
FORWARD(int, pthread_once, "GLIBC_2.2.5", (pthread_once_t * o, void (*f)()), (o, f))
FORWARD(int, pthread_key_create, "GLIBC_2.2.5", (pthread_key_t * k, void (*d)(void*)), (k, d))
FORWARD(int, __pthread_key_create, "GLIBC_2.2.5", (pthread_key_t * k, void (*d)(void*)), (k, d))
FORWARD(int, pthread_key_delete, "GLIBC_2.2.5", (pthread_key_t k), (k))
FORWARD(void*, pthread_getspecific, "GLIBC_2.2.5", (pthread_key_t k), (k))
FORWARD(int, pthread_setspecific, "GLIBC_2.2.5", (pthread_key_t k, const void* v), (k, v))
FORWARD(int, pthread_rwlock_rdlock, "GLIBC_2.2.5", (pthread_rwlock_t * l), (l))
FORWARD(int, pthread_rwlock_wrlock, "GLIBC_2.2.5", (pthread_rwlock_t * l), (l))
FORWARD(int, pthread_rwlock_unlock, "GLIBC_2.2.5", (pthread_rwlock_t * l), (l))
FORWARD(int, pthread_mutexattr_init, "GLIBC_2.2.5", (pthread_mutexattr_t * a), (a))
FORWARD(int, pthread_mutexattr_destroy, "GLIBC_2.2.5", (pthread_mutexattr_t * a), (a))
FORWARD(int, pthread_mutexattr_setpshared, "GLIBC_2.2.5", (pthread_mutexattr_t * a, int v), (a, v))
FORWARD(int, pthread_mutexattr_setrobust, "GLIBC_2.12", (pthread_mutexattr_t * a, int v), (a, v))
FORWARD(int, pthread_mutex_consistent, "GLIBC_2.12", (pthread_mutex_t * m), (m))
FORWARD(int, shm_open, "GLIBC_2.2.5", (const char* n, int f, mode_t m), (n, f, m))
FORWARD(int, shm_unlink, "GLIBC_2.2.5", (const char* n), (n))
FORWARD(int, dladdr, "GLIBC_2.2.5", (const void* a, Dl_info* i), (a, i))
FORWARD(void*, dlvsym, "GLIBC_2.2.5", (void* h, const char* n, const char* v), (h, n, v))
FORWARD(char*, dlerror, "GLIBC_2.2.5", (), ())
FORWARD(int, pthread_kill, "GLIBC_2.2.5", (pthread_t t, int sig), (t, sig))
FORWARD(int, pthread_mutex_trylock, "GLIBC_2.2.5", (pthread_mutex_t * m), (m))
#ifdef CUMEMAUDIT_FLOOR_EXECUTABLE  // the CLI: its start files and libm
FORWARD(int, __libc_start_main, "GLIBC_2.2.5",
        (int (*m)(int, char**, char**), int c, char** v, void (*i)(), void (*f)(), void (*r)(), void* s),
        (m, c, v, i, f, r, s))
#endif
#ifndef CUMEMAUDIT_FLOOR_KEEP_DL_DOORS  // the shim defines dlopen, dlsym and dlclose itself (its doors)
FORWARD(void*, dlopen, "GLIBC_2.2.5", (const char* f, int m), (f, m))
FORWARD(void*, dlsym, "GLIBC_2.2.5", (void* h, const char* n), (h, n))
FORWARD(int, dlclose, "GLIBC_2.2.5", (void* h), (h))
#endif

#ifdef CUMEMAUDIT_FLOOR_EXECUTABLE
// pow is a builtin the compiler knows, so its definition cannot be hidden and a .symver alias of it would
// bind back to this very definition: the libm one is looked up at run time instead.
extern "C" double pow(double x, double y) {
    using Fn = double (*)(double, double);
    static const Fn real = reinterpret_cast<Fn>(cumemaudit_old_dlvsym(RTLD_NEXT, "pow", "GLIBC_2.2.5"));
    return real(x, y);
}
#endif

// stat and friends became functions in 2.33; before, the header inlined calls to __xstat64 (version 1).
extern "C" int __xstat64(int, const char*, struct stat64*);
extern "C" int __lxstat64(int, const char*, struct stat64*);
extern "C" int __fxstat64(int, int, struct stat64*);
FLOOR int stat64(const char* p, struct stat64* b) { return __xstat64(1, p, b); }
FLOOR int lstat64(const char* p, struct stat64* b) { return __lxstat64(1, p, b); }
FLOOR int fstat64(int fd, struct stat64* b) { return __fxstat64(1, fd, b); }
FLOOR int stat(const char* p, struct stat* b) { return __xstat64(1, p, reinterpret_cast<struct stat64*>(b)); }
FLOOR int lstat(const char* p, struct stat* b) { return __lxstat64(1, p, reinterpret_cast<struct stat64*>(b)); }
FLOOR int fstat(int fd, struct stat* b) { return __fxstat64(1, fd, reinterpret_cast<struct stat64*>(b)); }

// libstdc++ skips atomic reference counts when this says one thread: never claiming so is always right.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wattributes"
__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;
#pragma GCC diagnostic pop

// std::random_device's default source in libstdc++ 12 (glibc 2.36); getrandom is 2.25.
FLOOR std::uint32_t arc4random() {
    std::uint32_t v = 0;
    while (getrandom(&v, sizeof v, 0) != sizeof v && errno == EINTR) {}
    return v;
}

// libgcc's unwinder finds an address's .eh_frame with _dl_find_object (2.35) when built against it, and
// then has no other way: the real one is used where it exists, else the same answer from dl_iterate_phdr.
#ifdef DLFO_STRUCT_HAS_EH_DBASE
FLOOR int _dl_find_object(void* pc, struct dl_find_object* out) {
    using Real = int (*)(void*, struct dl_find_object*);
    static const Real real = reinterpret_cast<Real>(cumemaudit_old_dlvsym(RTLD_DEFAULT, "_dl_find_object", "GLIBC_2.35"));
    if (real != nullptr) return real(pc, out);
    struct Search {
        std::uintptr_t pc;
        struct dl_find_object* out;
        bool found;
    } s{reinterpret_cast<std::uintptr_t>(pc), out, false};
    dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) {
            auto* s = static_cast<Search*>(data);
            std::uintptr_t lo = UINTPTR_MAX, hi = 0, eh = 0;
            bool inside = false;
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr)& ph = info->dlpi_phdr[i];
                const std::uintptr_t start = info->dlpi_addr + ph.p_vaddr;
                if (ph.p_type == PT_LOAD) {
                    lo = start < lo ? start : lo;
                    hi = start + ph.p_memsz > hi ? start + ph.p_memsz : hi;
                    if (s->pc >= start && s->pc < start + ph.p_memsz) inside = true;
                } else if (ph.p_type == PT_GNU_EH_FRAME) {
                    eh = start;
                }
            }
            if (!inside) return 0;
            *s->out = dl_find_object{};
            s->out->dlfo_map_start = reinterpret_cast<void*>(lo);
            s->out->dlfo_map_end = reinterpret_cast<void*>(hi);
            s->out->dlfo_eh_frame = reinterpret_cast<void*>(eh);
            s->found = true;
            return 1;
        },
        &s);
    return s.found ? 0 : -1;
}
#endif
