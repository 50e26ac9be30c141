// managed_residency: managed memory a device holds for this process. The driver counts managed memory as used
// on a device once a kernel, a memset or a prefetch touched it there, and keeps it there until it is freed;
// NVML charges it to no process (measured, docs/DRIVER.md). So it is read off at marks and out-of-memory
// moments as what the device uses beyond every process's NVML figure, less what the device used that way
// while this process held no managed memory there (the device's own baseline, learnt then), and never more
// than the managed memory this process holds. Without NVML's list it stays unattributed.
//
// What a kernel touches has no call to name; a prefetch to a device does. So the prefetches of live managed
// allocations are kept by allocation and device, and the site whose prefetches moved the most bytes onto a
// device names that device's managed memory in an out-of-memory record.
#pragma once

#include "common/thread_annotations.hpp"
#include "ledger/types.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>

namespace cumemaudit::shim {

class ManagedResidency {
public:
    // `uncharged`: driver-used memory beyond every process's NVML figure, on `device`, now; `live_managed`:
    // the managed memory this process holds there. Learns the baseline when it holds none.
    std::uint64_t resident(int device, std::uint64_t uncharged, std::uint64_t live_managed);

    // A prefetch of `bytes` of the managed allocation at `base` to `device`. An
    // allocation prefetched again to the same device keeps the larger extent and the site that moved it.
    void prefetched(std::uint64_t base, std::uint64_t bytes, int device, const ledger::Site&);
    // Managed memory at `base` freed: its prefetches go. One relaxed load while none is kept.
    void freed(std::uint64_t base);
    // A context ended, and the driver freed the managed memory made in it without a call: the prefetches of
    // allocations `still_valid` says are gone go. Asks it outside the lock (a driver call).
    void forget_freed_by_driver(const std::function<bool(std::uint64_t base)>& still_valid);

    // The site whose prefetches of live allocations moved the most bytes onto `device` (-1: any), and those
    // bytes; {0, {}} when none did.
    struct Mover {
        std::uint64_t bytes = 0;
        ledger::Site site;
    };
    Mover largest_mover(int device) const;

    // Prefetches kept at most (allocations × devices): a job that prefetches ever new allocations without
    // freeing them keeps the first ones; what they name is still a true part of the device's managed memory.
    static constexpr std::size_t kPrefetchesKept = 4096;

private:
    struct Prefetch {
        std::uint64_t bytes = 0;
        ledger::Site site;
    };
    mutable Mutex mu_;
    std::map<int, std::uint64_t> baseline_ GUARDED_BY(mu_);  // per device; 0 until learnt
    std::map<std::pair<std::uint64_t, int>, Prefetch> prefetches_ GUARDED_BY(mu_);  // (base, device)
    std::atomic<std::size_t> kept_{0};  // prefetches_.size(), read without the lock by freed()
};

}  // namespace cumemaudit::shim
