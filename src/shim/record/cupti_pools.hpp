// cupti_pools: what interposition cannot see — the stream-ordered pools behind cuMemAllocAsync grow and
// shrink inside the driver. CUPTI's activity records (MEMORY2, MEMORY_POOL) report each pool's reserved
// and utilized size; the latest figures join the step records. Pure bookkeeping, fed record by record;
// one per Recorder.
#pragma once

#include <cupti_activity.h>

#include <cstdint>
#include <map>
#include <mutex>

namespace cumemaudit::shim {

struct PoolFigures {
    std::uint64_t reserved = 0, used = 0;  // summed over the pools seen
};

class CuptiPools {
public:
    // Takes one activity record (other kinds are ignored).
    void absorb(const CUpti_Activity* record);
    // The sums over the records taken so far.
    PoolFigures figures() const;
    // The same after CUPTI has handed over the records it still buffers (zeros when CUPTI is not
    // subscribed). For marks, from program or sampler threads, never from inside a CUPTI callback.
    PoolFigures figures_now() const;

private:
    mutable std::mutex mu_;  // records arrive in buffers from CUPTI's thread; marks read the sums
    std::map<std::uint64_t, PoolFigures> by_address_;
};

// Set by the CUPTI backend once it receives activity records: hands over what CUPTI buffers (its buffers
// then reach the process's recorder through the backend).
void set_activity_flush(void (*flush)());

}  // namespace cumemaudit::shim
