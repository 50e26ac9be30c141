// unwind: the return addresses of the calling thread's stack, for stack_depth > 1. libunwind with its
// per-thread cache of decoded unwind info is about twenty times faster than glibc's backtrace(), which
// re-reads the DWARF of every frame (docs/HOT_PATH.md, "Deep stacks"). The shim links a static, hidden copy
// (scripts/libunwind); a build without it loads the system's libunwind.so.8 on first use, and where that
// is absent too, backtrace() stands in.
#pragma once

namespace cumemaudit::shim {

// Like backtrace(): fills up to `max` return addresses, innermost first, and returns how many.
int unwind(void** frames, int max);

}  // namespace cumemaudit::shim
