// nvml_query: who holds a device as NVML sees it (nvidia-smi's process list): this process's own figure,
// for step records, and every other process's, so memory a neighbour holds is named, not "unattributed".
// cuMemGetInfo counts every process on the device; NVML charges each its share, where the driver has it
// (NVML present, the pids visible to it: a container's pid namespace can hide them).
#pragma once

#include "history/types.hpp"
#include "shim/services/cuda_api.hpp"

#include <cstdint>
#include <vector>

namespace cumemaudit::shim {

struct DeviceProcesses {
    bool listed = false;          // NVML answered, and this process is in its list
    std::uint64_t self = 0;       // this process's bytes (0: not in the list)
    std::vector<history::OtherProcess> others;  // with their command names where /proc shows them
};

// The processes on `device` (a CUDA ordinal). Loads NVML on the first call (marks and out-of-memory
// moments only, never the allocation path); after a failure to load or initialize it, never tries again.
// `names`: read each other process's command name too (an out-of-memory moment; a mark needs only bytes).
DeviceProcesses nvml_processes(CUdevice device, bool names);

}  // namespace cumemaudit::shim
