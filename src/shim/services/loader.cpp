#include "shim/services/loader.hpp"

#include <dlfcn.h>
#include <link.h>

#include <climits>
#include <cstring>
#include <string_view>

// The loader's functions, hidden; the dlsym/dlopen trampolines (boundary/doors.cpp) read them. `used`: only
// the trampolines' assembly names them, which link-time optimization does not see, so it would drop them.
extern "C" {
// The dlsym the program would reach without the shim: the next definition after it (another interposer's,
// or the loader's own). The trampolines jump to it; the shim's own look-ups use the loader's (below).
__attribute__((visibility("hidden"), used)) void* cumemaudit_next_dlsym = nullptr;
__attribute__((visibility("hidden"), used)) void* cumemaudit_next_dlopen = nullptr;
__attribute__((visibility("hidden"), used)) void cumemaudit_resolve_loader() noexcept;
}

namespace {

using DlsymFn = void* (*)(void*, const char*);
// The loader's own dlsym (dlvsym, which matches no unversioned definition, so no interposer's answers).
DlsymFn g_loader_dlsym = nullptr;
using DlopenFn = void* (*)(const char*, int);

DlopenFn real_dlopen() {
    if (cumemaudit_next_dlopen == nullptr) cumemaudit_resolve_loader();
    return reinterpret_cast<DlopenFn>(cumemaudit_next_dlopen);
}

// The first loaded object whose file name starts with `prefix` ("libcuda.so", "libcudart.so"), found by
// walking the link maps: it may have been loaded privately (RTLD_LOCAL), out of reach of RTLD_NEXT.
void* symbol_in_loaded(std::string_view prefix, const char* name) {
    struct Search {
        std::string_view prefix;
        char path[PATH_MAX];
    } search{prefix, {}};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
            auto* s = static_cast<Search*>(data);
            const char* path = info->dlpi_name;
            if (path == nullptr || *path == '\0') return 0;
            const char* slash = std::strrchr(path, '/');
            std::string_view base = slash != nullptr ? slash + 1 : path;
            if (base.substr(0, s->prefix.size()) != s->prefix) return 0;
            if (std::strlen(path) >= sizeof s->path) return 0;  // longer than any path open() takes
            std::strcpy(s->path, path);
            return 1;
        },
        &search);
    if (search.path[0] == '\0') return nullptr;
    void* handle = real_dlopen()(search.path, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) return nullptr;
    void* p = cumemaudit::shim::real_dlsym(handle, name);
    dlclose(handle);  // balances the reference NOLOAD took; the object stays loaded
    return p;
}

}  // namespace

extern "C" void cumemaudit_resolve_loader() noexcept {
    using cumemaudit::shim::loader_symbol;
    if (g_loader_dlsym == nullptr) g_loader_dlsym = reinterpret_cast<DlsymFn>(loader_symbol("dlsym"));
    if (cumemaudit_next_dlsym == nullptr && g_loader_dlsym != nullptr) {
        // Asked from here, RTLD_NEXT is the object after the shim: an interposer such as HAMi-core loaded after
        // us keeps its dlsym override, and answers the program's look-ups as it would without us.
        void* next = g_loader_dlsym(RTLD_NEXT, "dlsym");
        cumemaudit_next_dlsym = next != nullptr ? next : reinterpret_cast<void*>(g_loader_dlsym);
    }
    if (cumemaudit_next_dlopen == nullptr) cumemaudit_next_dlopen = loader_symbol("dlopen");
}

namespace cumemaudit::shim {

void* loader_symbol(const char* name) {
    // dlvsym is not overridden, so this cannot reach our own dlsym.
    void* p = dlvsym(RTLD_NEXT, name, "GLIBC_2.34");
    return p != nullptr ? p : dlvsym(RTLD_NEXT, name, "GLIBC_2.2.5");
}

void* real_dlsym(void* handle, const char* name) {
    if (g_loader_dlsym == nullptr) cumemaudit_resolve_loader();
    return g_loader_dlsym != nullptr ? g_loader_dlsym(handle, name) : nullptr;
}

void* next_dlsym(void* handle, const char* name) {
    if (cumemaudit_next_dlsym == nullptr) cumemaudit_resolve_loader();
    return cumemaudit_next_dlsym != nullptr ? reinterpret_cast<DlsymFn>(cumemaudit_next_dlsym)(handle, name) : nullptr;
}

void* next_symbol(const char* name) { return real_dlsym(RTLD_NEXT, name); }

void* driver_symbol(const char* name) { return symbol_in_loaded("libcuda.so", name); }

void* runtime_symbol(const char* name) { return symbol_in_loaded("libcudart.so", name); }

void* driver_entry(const char* name) {
    void* p = next_symbol(name);
    return p != nullptr ? p : driver_symbol(name);
}

const char* simulated_driver_version() {
    void* p = symbol_in_loaded("libcuda.so", "cumemaudit_sim_driver_version");
    return p != nullptr ? *static_cast<const char* const*>(p) : nullptr;
}

}  // namespace cumemaudit::shim
