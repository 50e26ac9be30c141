// What the simulated driver takes as I/O memory (cuMemHostRegister with CU_MEMHOSTREGISTER_IOMEMORY): a range a
// device exposes through its BAR and a process maps, never ordinary host memory (the H100 refused that with
// CUDA_ERROR_INVALID_VALUE; docs/DRIVER.md, "Misuse answers"). A machine with no such device stands one in with
// a file: CUMEMAUDIT_SIM_BAR names it, and a range of this process's mappings of it is I/O memory.
#pragma once

#include <cstdint>

namespace cumemaudit::sim {

// Whether [start, end) lies within one mapping of the file CUMEMAUDIT_SIM_BAR names (by device and inode, as
// /proc/self/maps gives them). False when the variable is unset or the file cannot be read.
bool within_bar(std::uint64_t start, std::uint64_t end);

}  // namespace cumemaudit::sim
