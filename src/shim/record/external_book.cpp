#include "shim/record/external_book.hpp"

namespace cumemaudit::shim {

void ExternalBook::mapped(std::uint64_t buffer, std::uint64_t object) {
    std::lock_guard lock(mu_);
    if (!buffers_.emplace(buffer, object).second) return;
    ++objects_[object].buffers;
    live_buffers_.fetch_add(1, std::memory_order_relaxed);
}

bool ExternalBook::destroyed(std::uint64_t object) {
    std::lock_guard lock(mu_);
    auto it = objects_.find(object);
    if (it == objects_.end()) return true;
    it->second.destroyed = true;
    return false;
}

std::uint64_t ExternalBook::buffer_freed(std::uint64_t buffer) {
    std::lock_guard lock(mu_);
    auto b = buffers_.find(buffer);
    if (b == buffers_.end()) return 0;
    const std::uint64_t object = b->second;
    buffers_.erase(b);
    live_buffers_.fetch_sub(1, std::memory_order_relaxed);
    auto it = objects_.find(object);
    if (it == objects_.end() || --it->second.buffers > 0) return 0;
    const bool ends = it->second.destroyed;
    objects_.erase(it);
    return ends ? object : 0;
}

}  // namespace cumemaudit::shim
