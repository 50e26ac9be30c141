// safe_read: reads of this process's own memory that fail instead of faulting. The Python frame walker
// follows interpreter pointers by a layout it believes in; if that belief is wrong (an unknown build, a
// frame torn down under us), a plain load could crash the program. process_vm_readv on our own pid
// reports EFAULT instead. A system call costs microseconds, so the walker batches its reads and caches what
// it decoded per code object.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cumemaudit::shim {

// Copies n bytes at addr into out; false if any of them is unreadable (nothing is then trusted).
bool safe_read(std::uintptr_t addr, void* out, std::size_t n);

template <typename T>
bool safe_load(std::uintptr_t addr, T& out) { return safe_read(addr, &out, sizeof out); }

// Several reads in one system call (a VMM site may need dozens: one call each would cost more than the
// driver call). Returns how many spans, from the first, were read whole; the rest are not to be trusted.
struct ReadSpan {
    std::uintptr_t addr;
    void* out;
    std::size_t n;
};
int safe_read_spans(const ReadSpan* spans, int count);

// Whether safe_read works here at all (a seccomp filter may forbid process_vm_readv).
bool safe_read_available();

}  // namespace cumemaudit::shim
