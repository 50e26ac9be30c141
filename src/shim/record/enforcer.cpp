#include "shim/record/enforcer.hpp"

namespace cumemaudit::shim {

std::vector<report::ReclaimInput> Enforcer::reclaimed() const {
    std::lock_guard lock(state_->mu);
    std::vector<report::ReclaimInput> out;
    for (const auto& [key, row] : state_->reclaimed) out.push_back(row);
    return out;
}

}  // namespace cumemaudit::shim
