#include "shim/record/external_book.hpp"

namespace cumemaudit::shim {

void ExternalBook::mapped(std::uint64_t buffer, Object object) {
    std::lock_guard lock(mu_);
    if (!buffers_.emplace(buffer, object).second) return;
    ++objects_[object].buffers;
    live_buffers_.fetch_add(1, std::memory_order_relaxed);
}

bool ExternalBook::destroyed(Object object) {
    std::lock_guard lock(mu_);
    auto it = objects_.find(object);
    if (it == objects_.end()) return true;
    it->second.destroyed = true;
    return false;
}

ExternalBook::Object ExternalBook::buffer_freed(std::uint64_t buffer) {
    std::lock_guard lock(mu_);
    auto b = buffers_.find(buffer);
    if (b == buffers_.end()) return {};
    const Object object = b->second;
    buffers_.erase(b);
    live_buffers_.fetch_sub(1, std::memory_order_relaxed);
    auto it = objects_.find(object);
    if (it == objects_.end() || --it->second.buffers > 0) return {};
    const bool ends = it->second.destroyed;
    objects_.erase(it);
    return ends ? object : Object{};
}

}  // namespace cumemaudit::shim
