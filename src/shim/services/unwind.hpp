// unwind: the return addresses of the calling thread's stack, for stack_depth > 1. libunwind with its
// per-thread cache of decoded unwind info costs ~6 ns a frame where glibc's backtrace() re-reads the DWARF
// of every frame (~120 ns; docs/HOT_PATH.md, "Deep stacks"). The shim links a static, hidden copy
// (scripts/libunwind); a build without it loads the system's libunwind.so.8 on first use, and where that
// is absent too, backtrace() stands in.
#pragma once

namespace cumemaudit::shim {

// Like backtrace(): fills up to `max` return addresses, innermost first, and returns how many.
int unwind(void** frames, int max);

}  // namespace cumemaudit::shim
