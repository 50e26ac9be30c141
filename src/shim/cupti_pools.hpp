// cupti_pools: what interposition cannot see — the stream-ordered pools behind cuMemAllocAsync grow and
// shrink inside the driver. CUPTI's activity records (MEMORY2, MEMORY_POOL) report each pool's reserved
// and utilized size; the latest figures join the step records. Pure bookkeeping, fed record by record.
#pragma once

#include <cupti_activity.h>

#include <cstdint>

namespace cumemaudit::shim {

struct PoolFigures {
    std::uint64_t reserved = 0, used = 0;  // summed over the pools seen
};

// Takes one activity record (other kinds are ignored).
void absorb_activity(const CUpti_Activity* record);

PoolFigures pool_figures();

}  // namespace cumemaudit::shim
