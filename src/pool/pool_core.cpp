#include "pool_core.hpp"

#include "driver.hpp"

#include <algorithm>

namespace cumemaudit::pool::detail {

PhysicalChunk PoolCore::acquire(int device, std::size_t size, HandleKind kind) {
    {
        std::lock_guard lock(mu_);
        if (auto c = cache_.take(ChunkKey{device, size, kind})) {
            live_ += size;  // moved from cached to live: the peak cannot change
            ++hits_;
            return std::move(*c);
        }
    }
    PhysicalChunk c = PhysicalChunk::create(device, size, kind, &counter);  // outside the lock (see header)
    std::lock_guard lock(mu_);
    live_ += size;
    peak_ = std::max(peak_, live_ + cache_.bytes());
    return c;
}

void PoolCore::recycle(PhysicalChunk&& chunk) noexcept {
    if (!chunk) return;
    std::optional<PhysicalChunk> refused;
    {
        std::lock_guard lock(mu_);
        live_ -= chunk.size();
        refused = cache_.put(std::move(chunk));
    }
    // `refused`, if any, is released here, after the lock is dropped.
}

void PoolCore::forget(std::size_t bytes) noexcept {
    std::lock_guard lock(mu_);
    live_ -= bytes;
}

std::size_t PoolCore::trim() noexcept {
    std::vector<PhysicalChunk> drained;
    {
        std::lock_guard lock(mu_);
        drained = cache_.drain();
    }
    std::size_t n = 0;
    for (auto& c : drained) {
        n += c.size();
        c.reset();
    }
    return n;
}

void PoolCore::set_cache_limit(std::size_t bytes) noexcept {
    bool over = false;
    {
        std::lock_guard lock(mu_);
        cache_.set_limit(bytes);
        over = cache_.bytes() > bytes;
    }
    if (over) trim();
}

std::size_t PoolCore::granularity(int device, HandleKind kind) {
    {
        std::lock_guard lock(mu_);
        auto it = granularity_.find({device, kind});
        if (it != granularity_.end()) return it->second;
    }
    const std::size_t g = pool::granularity(device, kind, &counter);
    std::lock_guard lock(mu_);
    granularity_[{device, kind}] = g;
    return g;
}

PoolStats PoolCore::stats() const {
    PoolStats s;
    {
        std::lock_guard lock(mu_);
        s.live_bytes = live_;
        s.cached_bytes = cache_.bytes();
        s.peak_bytes = peak_;
        s.cache_hits = hits_;
    }
    s.calls = counter.snapshot();
    return s;
}

}  // namespace cumemaudit::pool::detail
