// pool_core: the state a pool's buffers share (cache, statistics, counters, granularities). Buffers hold
// it by shared_ptr, so a buffer that outlives its FabricPool still has somewhere to return its chunks, and
// the cache is released when the last of them goes.
//
// Thread safety: one mutex per pool, held only around cache and statistics updates (a map lookup), never
// across a driver call. Driver calls take tens of microseconds and the driver serialises them itself; a
// finer scheme (per size-class locks, lock-free lists) would buy nothing measurable around them.
#pragma once

#include "chunk_cache.hpp"

#include <map>
#include <mutex>

namespace cumemaudit::pool::detail {

struct PoolCore {
    explicit PoolCore(const PoolOptions& o) : options(o), cache_(o.cache_limit) {}

    // A chunk of exactly `size` bytes: from the cache, else created. Counted as live.
    PhysicalChunk acquire(int device, std::size_t size, HandleKind kind);
    // Takes a chunk back from a buffer: cached, or released past the bound. Counted as no longer live.
    void recycle(PhysicalChunk&& chunk) noexcept;
    // A chunk the buffer could not unmap: no longer live, never cached (it is released by its owner).
    void forget(std::size_t bytes) noexcept;
    std::size_t trim() noexcept;
    // A new bound for the cache; what it holds beyond the bound is released (all of it: the cache keeps
    // no order by age to choose from).
    void set_cache_limit(std::size_t bytes) noexcept;
    std::size_t granularity(int device, HandleKind kind);
    PoolStats stats() const;

    const PoolOptions options;
    CallCounter counter;

private:
    mutable std::mutex mu_;
    ChunkCache cache_;                   // guarded by mu_
    std::size_t live_ = 0, peak_ = 0;   // guarded by mu_
    std::uint64_t hits_ = 0;             // guarded by mu_
    std::map<std::pair<int, HandleKind>, std::size_t> granularity_;  // guarded by mu_
};

}  // namespace cumemaudit::pool::detail
