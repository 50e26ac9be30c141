// own_stack: work that needs a deep stack — symbolizing reads DWARF line tables, JSON nests — run on a thread
// of the shim's whose stack size is known, for a caller whose own stack may be small (a worker thread made
// with 64 KiB, a main thread under `ulimit -s 160`). The caller waits at most `bound`; past it the work
// goes on in the background. Where no thread can be made, the work runs on the caller's stack.
#pragma once

#include <chrono>
#include <functional>

namespace cumemaudit::shim {

enum class Ran { done, timed_out };

Ran run_on_own_stack(std::function<void()> work, std::chrono::milliseconds bound);

}  // namespace cumemaudit::shim
