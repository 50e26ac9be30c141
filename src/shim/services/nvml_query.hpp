// nvml_query: the process's own device memory as NVML sees it (nvidia-smi's per-process column), for step
// records. cuMemGetInfo counts every process on the device; this figure counts only ours, where the
// driver has it (NVML present, our pid visible to it: a container's pid namespace can hide it).
#pragma once

#include "shim/services/cuda_api.hpp"

#include <cstdint>

namespace cumemaudit::shim {

// Bytes NVML charges to this process on `device` (a CUDA ordinal), or 0 when unknown. Loads NVML on the
// first call (marks only, never the allocation path); after a failure to load or initialize it, never
// tries again.
std::uint64_t nvml_process_used(CUdevice device);

}  // namespace cumemaudit::shim
