// safe_read: reads of this process's own memory that fail instead of faulting. The Python frame walker
// follows interpreter pointers by a layout it believes in; if that belief is wrong (an unknown build, a
// frame torn down under us), a plain load could crash the program. process_vm_readv on our own pid
// reports EFAULT instead, at ~0.3 µs a read: affordable at VMM calls, which cost tens of µs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cumemaudit::shim {

// Copies n bytes at addr into out; false if any of them is unreadable (nothing is then trusted).
bool safe_read(std::uintptr_t addr, void* out, std::size_t n);

template <typename T>
bool safe_load(std::uintptr_t addr, T& out) { return safe_read(addr, &out, sizeof out); }

// Whether safe_read works here at all (a seccomp filter may forbid process_vm_readv).
bool safe_read_available();

}  // namespace cumemaudit::shim
