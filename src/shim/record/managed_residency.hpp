// managed_residency: managed memory a device holds for this process. The driver counts managed memory as used
// on a device once a kernel, a memset or a prefetch touched it there, and keeps it there until it is freed;
// NVML charges it to no process (measured, docs/DRIVER.md). So it is read off at marks and out-of-memory
// moments as what the device uses beyond every process's NVML figure, less what the device used that way
// while this process held no managed memory there (the device's own baseline, learnt then), and never more
// than the managed memory this process holds. Without NVML's list it stays unattributed.
#pragma once

#include "common/thread_annotations.hpp"

#include <cstdint>
#include <map>

namespace cumemaudit::shim {

class ManagedResidency {
public:
    // `uncharged`: driver-used memory beyond every process's NVML figure, on `device`, now; `live_managed`:
    // the managed memory this process holds there. Learns the baseline when it holds none.
    std::uint64_t resident(int device, std::uint64_t uncharged, std::uint64_t live_managed);

private:
    Mutex mu_;
    std::map<int, std::uint64_t> baseline_ GUARDED_BY(mu_);  // per device; 0 until learnt
};

}  // namespace cumemaudit::shim
