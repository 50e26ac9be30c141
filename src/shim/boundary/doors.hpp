// doors: the three ways a program reaches the driver (DESIGN.md), besides the exported symbols that
// hooks.cpp defines. dlsym and dlopen are overridden; cuGetProcAddress and _v2 call the real one with the
// caller's version and flags and swap in our wrapper of the exact variant it returned.
#pragma once

#include "shim/services/cuda_api.hpp"

#include <string_view>

namespace cumemaudit::shim {

// The loader's own dlsym/dlopen, found with dlvsym(RTLD_NEXT, ..., "GLIBC_2.34"), then "GLIBC_2.2.5";
// never through a global look-up, which would find our own override and recurse.
void* real_dlsym(void* handle, const char* name);

// Look-ups a wrapper makes on its first call. They allocate nothing (the first call of an entry point must
// reach the driver even when memory is short: fence.hpp), so names are NUL-terminated strings.
// `name` as the next object after the shim defines it (RTLD_NEXT from here), or null.
void* next_symbol(const char* name);
// `name` in the libcuda.so.1 already loaded in this process (however privately), or null.
void* driver_symbol(const char* name);
// `name` in the libcudart.so already loaded in this process, or null.
void* runtime_symbol(const char* name);
// Whether the loaded libcuda.so.1 is cumemaudit's simulated driver; its version string if so.
const char* simulated_driver_version();

}  // namespace cumemaudit::shim
