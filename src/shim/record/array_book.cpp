#include "shim/record/array_book.hpp"

namespace cumemaudit::shim {

void ArrayBook::primary_context(int device, CUcontext ctx) {
    std::lock_guard lock(mu_);
    primaries_[device] = ctx;
}

CUcontext ArrayBook::primary_of(int device) const {
    std::lock_guard lock(mu_);
    auto it = primaries_.find(device);
    return it == primaries_.end() ? nullptr : it->second;
}

void ArrayBook::created(std::uint64_t handle, CUcontext ctx) {
    std::lock_guard lock(mu_);
    arrays_[handle] = ctx;
}

void ArrayBook::destroyed(std::uint64_t handle) {
    std::lock_guard lock(mu_);
    arrays_.erase(handle);
}

bool ArrayBook::ended_with(std::uint64_t handle, CUcontext ctx) {
    std::lock_guard lock(mu_);
    auto it = arrays_.find(handle);
    if (it == arrays_.end() || ctx == nullptr || it->second != ctx) return false;
    arrays_.erase(it);
    return true;
}

}  // namespace cumemaudit::shim
