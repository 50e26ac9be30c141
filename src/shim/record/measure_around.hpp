// measure_around: what one driver call moved the device's used memory by, for memory the driver takes that no
// allocation names (module code, a stream's share of its context). A look before the call, a measure after it,
// on the calling thread: what this process's tracked allocations moved meanwhile (another thread's) is taken
// off, and, where asked, what other processes moved (NVML's figures for them).
#pragma once

#include "shim/record/call.hpp"

#include <cstdint>

namespace cumemaudit::shim {

enum class Others : bool { no, ask };

// Looks at the current device's used memory (when `worth`), and other processes' bytes (when asked and NVML
// lists this process). A look the next measure does not consume is overwritten by the next look.
void look_before(Call& call, bool worth = true, Others others = Others::no);
// What the call moved the device's used memory by since the look, less the tracked allocations' share and
// other processes'; 0 when either look could not be made (no context current) or the call switched device.
// Consumes the look.
std::int64_t moved_since_before(Call& call);
bool looked();         // a look waits for its measure
int looked_device();   // its device
void forget_look();

}  // namespace cumemaudit::shim
