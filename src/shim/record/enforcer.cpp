#include "shim/record/enforcer.hpp"

namespace cumemaudit::shim {

void Enforcer::copy_to(history::History& h) const {
    std::lock_guard lock(state_->mu);
    h.reclaimed.clear();
    for (const auto& [key, row] : state_->reclaimed) h.reclaimed.push_back(row);
}

}  // namespace cumemaudit::shim
