// loader: the dynamic loader's own answers, past the shim's overrides of dlsym and dlopen. The doors need
// them to look up what a wrapper forwards to; the services need them for the few questions the shim asks
// the driver itself (free memory at a mark, enforce mode's releases).
#pragma once

namespace cumemaudit::shim {

// The loader's own function `name` (dlsym, dlopen, dlclose), found with dlvsym(RTLD_NEXT, ..., "GLIBC_2.34"),
// then "GLIBC_2.2.5"; never through a global look-up, which would find our own override and recurse.
void* loader_symbol(const char* name);
// The loader's own dlsym, for the shim's own look-ups: no other interposer answers them.
void* real_dlsym(void* handle, const char* name);
// The dlsym the program would reach without the shim (another interposer's override loaded after us, or the
// loader's): the program's own look-ups go through it, so that interposer still answers them.
void* next_dlsym(void* handle, const char* name);

// Look-ups a wrapper makes on its first call. They allocate nothing (the first call of an entry point must
// reach the driver even when memory is short: boundary/fence.hpp), so names are NUL-terminated strings.
// `name` as the next object after the shim defines it (RTLD_NEXT from here), or null.
void* next_symbol(const char* name);
// `name` in the libcuda.so.1 already loaded in this process (however privately), or null.
void* driver_symbol(const char* name);
// The same, as the function type the caller names: driver_function<CUresult(CUDAAPI*)(CUdevice*)>("cuCtxGetDevice").
template <typename Fn>
Fn driver_function(const char* name) {
    return reinterpret_cast<Fn>(driver_symbol(name));
}
// `name` in the libcudart.so already loaded in this process, or null.
void* runtime_symbol(const char* name);
// The driver entry point `name` as a wrapper would reach it: the next definition after the shim (libcuda
// for -lcuda programs, or another interposer, which then sees the call as it would without us), else the
// libcuda.so.1 that cudart or the program loaded privately (RTLD_LOCAL).
void* driver_entry(const char* name);
// Whether the loaded libcuda.so.1 is cumemaudit's simulated driver; its version string if so.
const char* simulated_driver_version();

}  // namespace cumemaudit::shim
