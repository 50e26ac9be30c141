#include "shim/record/managed_residency.hpp"

#include <algorithm>

namespace cumemaudit::shim {

std::uint64_t ManagedResidency::resident(int device, std::uint64_t uncharged, std::uint64_t live_managed) {
    MutexLock lock(mu_);
    std::uint64_t& baseline = baseline_[device];
    if (live_managed == 0) {
        baseline = uncharged;
        return 0;
    }
    return std::min(live_managed, uncharged - std::min(uncharged, baseline));
}

}  // namespace cumemaudit::shim
