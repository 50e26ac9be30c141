// context_query: what the driver reserves for a context besides the program's allocations, asked at
// context creation, at marks and at out-of-memory moments only: the kernel stack limit of a context and the
// threads a device holds (the stack reservation is their product, kept after the launch that raised it), and
// a kernel's name and local memory (for a launch the driver refused).
#pragma once

#include "shim/services/cuda_api.hpp"

#include <cstdint>
#include <string>

namespace cumemaudit::shim {

// `ctx`'s limit `which` (made current for the question, then the thread's own context is current again); 0
// when the driver cannot say (a context that ended).
std::uint64_t limit_of(CUcontext ctx, CUlimit which);
// Its CU_LIMIT_STACK_SIZE in bytes per thread.
inline std::uint64_t stack_limit_of(CUcontext ctx) { return limit_of(ctx, CU_LIMIT_STACK_SIZE); }
// The threads `device` holds at once (multiprocessors × threads per multiprocessor); 0 when unknown.
std::uint64_t device_threads(int device);

// A kernel's local memory in bytes per thread (CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES; -1 when unknown) and its
// name ("" when unknown). Accepts a CUkernel passed as a CUfunction, as a launch does.
struct KernelFacts {
    std::string name;
    std::int64_t local_bytes_per_thread = -1;
    // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: a larger block fails for its registers, whatever memory is free
    // (-1: unknown; a CUkernel's is not asked).
    std::int64_t max_threads_per_block = -1;
};
KernelFacts kernel_facts(CUfunction f);

}  // namespace cumemaudit::shim
