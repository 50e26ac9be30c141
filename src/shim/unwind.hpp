// unwind: the return addresses of the calling thread's stack, for stack_depth > 1. libunwind with its
// per-thread cache of decoded unwind info costs ~15 ns a frame where glibc's backtrace() re-reads the DWARF
// of every frame (~100 ns; tests/bench/RESULTS.md). libunwind is loaded with dlopen on first use and never
// linked, so the shim still loads where it is absent; backtrace() stands in then.
#pragma once

namespace cumemaudit::shim {

// Like backtrace(): fills up to `max` return addresses, innermost first, and returns how many.
int unwind(void** frames, int max);

}  // namespace cumemaudit::shim
