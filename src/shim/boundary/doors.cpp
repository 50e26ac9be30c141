// doors: the ways a program reaches the driver besides the exported symbols (hooks.cpp): dlsym and dlopen
// are overridden; cuGetProcAddress and _v2 call the real one with the caller's version and flags and swap in
// our wrapper of the exact variant it returned. See docs/ARCHITECTURE.md, "The three doors".

#include "common/cuda_catalog.hpp"
#include "shim/boundary/fence.hpp"
#include "shim/boundary/hooks.hpp"
#include "shim/services/log.hpp"
#include "shim/services/loader.hpp"
#include "shim/services/options_store.hpp"
#include "shim/services/stderr_out.hpp"

#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <climits>
#include <cstring>
#include <string>

// What the trampolines below call and read, hidden: the loader's own functions (services/loader.cpp) and the
// hooks. `used`: only the trampolines' assembly names them, which link-time optimization does not see.
extern "C" {
__attribute__((visibility("hidden"))) extern void* cumemaudit_next_dlsym;
__attribute__((visibility("hidden"))) extern void* cumemaudit_next_dlopen;
__attribute__((visibility("hidden"))) void cumemaudit_resolve_loader() noexcept;
__attribute__((visibility("hidden"), used)) void* cumemaudit_dlsym_hook(void* handle, const char* name) noexcept;
__attribute__((visibility("hidden"), used)) int cumemaudit_dlopen_flags(const char* file, int flags) noexcept;
}

// ---- door 2: dlsym and dlopen. Both depend on who calls them: dlsym(RTLD_NEXT) searches after the
// caller's object, and dlopen uses the caller's RUNPATH ($ORIGIN) and namespace. A C wrapper would make
// the shim the caller and break both, so these are tail jumps: the real function sees the program's return
// address. dlsym(RTLD_NEXT, …) goes straight on to the next dlsym, found first if need be (other
// interposers rely on it: torch_memory_saver's cudaMalloc finds the runtime's so, and through the hook it
// was handed itself and looped); every other dlsym goes through the hook, which asks the next dlsym and
// swaps in our wrapper of a symbol we wrap. dlopen only loses
// RTLD_DEEPBIND (which would let the library bind past us), unless deepbind=keep.
#if !defined(__x86_64__)
#error "the dlsym/dlopen trampolines are written for x86-64"
#endif
asm(R"(
    .macro CALL_KEEPING_ARGS fn
    pushq %rdi
    pushq %rsi
    subq $8, %rsp
    call \fn
    addq $8, %rsp
    popq %rsi
    popq %rdi
    .endm

    .text
    .globl dlsym
    .type dlsym, @function
dlsym:
    cmpq $-1, %rdi
    jne 1f
    movq cumemaudit_next_dlsym(%rip), %rax
    testq %rax, %rax
    jnz 4f
    CALL_KEEPING_ARGS cumemaudit_resolve_loader
    movq cumemaudit_next_dlsym(%rip), %rax
    testq %rax, %rax
    jz 1f
4:  jmp *%rax
1:  jmp cumemaudit_dlsym_hook
    .size dlsym, .-dlsym

    .globl dlopen
    .type dlopen, @function
dlopen:
    testl $0x8, %esi
    jz 2f
    CALL_KEEPING_ARGS cumemaudit_dlopen_flags
    movl %eax, %esi
2:  movq cumemaudit_next_dlopen(%rip), %rax
    testq %rax, %rax
    jnz 3f
    CALL_KEEPING_ARGS cumemaudit_resolve_loader
    movq cumemaudit_next_dlopen(%rip), %rax
3:  jmp *%rax
    .size dlopen, .-dlopen
)");

namespace {

// The answer of cuGetProcAddress, swapped for our wrapper of the variant the driver returned; when that
// fails, the driver's own pointer (the calls through it then go unaudited).
void answer(const char* symbol, int version, cuuint64_t flags, void** pfn) noexcept {
    if (symbol == nullptr || pfn == nullptr || *pfn == nullptr) return;
    void* const theirs = *pfn;
    void* ours = theirs;
    cumemaudit::shim::guarded("cuGetProcAddress", [&] {
        const auto r = cumemaudit::catalog::resolve(symbol, version, flags);
        if (r.status == cumemaudit::catalog::Lookup::found) ours = cumemaudit::shim::swap_in(r.symbol, theirs);
    });
    *pfn = ours;
}

}  // namespace

extern "C" void* cumemaudit_dlsym_hook(void* handle, const char* name) noexcept {
    void* p = cumemaudit::shim::next_dlsym(handle, name);
    if (p == nullptr || name == nullptr) return p;
    void* ours = p;
    cumemaudit::shim::guarded("dlsym", [&] { ours = cumemaudit::shim::swap_in(name, p); });
    return ours;
}

namespace {
// An interposer ahead of the shim in LD_PRELOAD that overrides dlsym the way HAMi-core does fills its own
// table of driver entry points with the loader's dlsym on libcuda.so.1: the calls it forwards never reach
// the shim, which cannot be put back in their way. Said once, at load, only then.
__attribute__((constructor)) void warn_if_preceded() {
    void* first = cumemaudit::shim::real_dlsym(RTLD_DEFAULT, "dlsym");
    Dl_info ours{}, theirs{};
    if (first == nullptr || dladdr(reinterpret_cast<void*>(&cumemaudit_dlsym_hook), &ours) == 0 ||
        dladdr(first, &theirs) == 0 || ours.dli_fbase == theirs.dli_fbase || theirs.dli_fname == nullptr)
        return;
    const std::string_view path = theirs.dli_fname;
    const std::string_view base = path.substr(path.rfind('/') + 1);
    if (base.starts_with("libc.so") || base.starts_with("libdl.so") || base.starts_with("ld-linux")) return;
    try {
        cumemaudit::shim::write_stderr(
            "cumemaudit warning: " + std::string(path) +
            " overrides dlsym and comes before libcumemaudit.so in LD_PRELOAD: the CUDA calls it forwards through "
            "its own table reach the driver unaudited; put libcumemaudit.so first (cumemaudit run does)\n");
    } catch (...) {  // no memory for a warning: the program goes on
    }
}
}  // namespace

// dlclose: a program may unload libcuda.so.1 (or cudart) and load it again, at another address. The real
// entry points the wrappers cached then point into unmapped memory: after every dlclose, each cached one
// that no loaded object contains any more is forgotten, and found again on next use.
extern "C" __attribute__((visibility("default"))) int dlclose(void* handle) {
    using CloseFn = int (*)(void*);
    static const auto real = reinterpret_cast<CloseFn>(cumemaudit::shim::loader_symbol("dlclose"));
    if (real == nullptr) return -1;
    const int r = real(handle);
    if (r == 0) cumemaudit::shim::guarded("dlclose", [] { cumemaudit::shim::forget_unloaded_entries(); });
    return r;
}

extern "C" int cumemaudit_dlopen_flags(const char* file, int flags) noexcept {
    using namespace cumemaudit::shim;
    int out = flags;  // a failure below leaves the program's flags as they were
    guarded("dlopen", [&] {
        if (current_options().deepbind == cumemaudit::options::Deepbind::keep) return;
        static std::atomic<bool> warned{false};
        if (!warned.exchange(true))
            log_warning("dlopen(\"{}\", RTLD_DEEPBIND): flag removed so the audit sees the library's CUDA calls "
                        "(deepbind=keep leaves it; warned once)",
                        file != nullptr ? file : "(null)");
        out = flags & ~RTLD_DEEPBIND;
    });
    return out;
}

// ---- door 3: cuGetProcAddress. The real one answers first, with the caller's version and flags; then
// the pointer it returned is exchanged for our wrapper of that exact variant. Asked for
// "cuGetProcAddress" itself, it returns our wrapper of the signature that version has (v1 below 12000):
// cudart asks at 11030 and 12000 and then uses only the pointer it got.
extern "C" __attribute__((visibility("default"))) CUresult CUDAAPI
cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                    CUdriverProcAddressQueryResult* status) {
    using namespace cumemaudit::shim;
    using Real = CUresult(CUDAAPI*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
    Real real = nullptr;
    if (!guarded("cuGetProcAddress_v2", [&] { real = reinterpret_cast<Real>(real_fn(HookId::cuGetProcAddress_v2)); }) ||
        real == nullptr)
        return CUDA_ERROR_NOT_INITIALIZED;
    const CUresult r = real(symbol, pfn, version, flags, status);
    if (r == CUDA_SUCCESS) answer(symbol, version, flags, pfn);
    return r;
}

extern "C" __attribute__((visibility("default"))) CUresult CUDAAPI
cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
    using namespace cumemaudit::shim;
    using Real = CUresult(CUDAAPI*)(const char*, void**, int, cuuint64_t);
    Real real = nullptr;
    if (!guarded("cuGetProcAddress", [&] { real = reinterpret_cast<Real>(real_fn(HookId::cuGetProcAddress)); }) ||
        real == nullptr)
        return CUDA_ERROR_NOT_INITIALIZED;
    const CUresult r = real(symbol, pfn, version, flags);
    if (r == CUDA_SUCCESS) answer(symbol, version, flags, pfn);
    return r;
}

