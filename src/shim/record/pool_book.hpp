// pool_book: the stream-ordered pools this process allocates from (each device's default pool, the pools it
// creates) and what the driver last said of each: reserved, used and idle bytes. Learnt from the pool rows
// of the hook table and, for default pools, at marks; the driver is asked at marks, at out-of-memory moments
// and around trims and destroys, never on the allocation path. That path asks one thing, lock-free: what a
// pool's allocations are — device memory, or, for a pool off the device, host memory or managed memory.
#pragma once

#include "shim/services/driver_query.hpp"

#include "common/thread_annotations.hpp"
#include "ledger/types.hpp"
#include "history/history.hpp"

#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

namespace cumemaudit::shim {

using AskPool = PoolFigures (*)(CUmemoryPool);

class PoolBook {
public:
    void created(CUmemoryPool pool, const CUmemPoolProps& props, const ledger::Site& site, std::uint64_t step);
    void seen_default(CUmemoryPool pool, int device, std::uint64_t step);
    // A pool a getter or setter named (cuMemGetDefaultMemPool, cuMemGetMemPool, cuMemSetMemPool) for a location
    // and allocation type: RMM's and cuda.core's pinned and managed resources reach their pools this way.
    void named(CUmemoryPool pool, const CUmemLocation& where, CUmemAllocationType type, const ledger::Site& site,
               std::uint64_t step);
    // Another process's pool (cuMemPoolImportFromShareableHandle): it holds nothing here; its pointers do.
    void imported(CUmemoryPool pool, int device, const ledger::Site& site, std::uint64_t step);
    void destroyed(CUmemoryPool pool);
    void threshold_set(CUmemoryPool pool, std::uint64_t bytes);
    // What an allocation from `pool` is: async_pool (device memory), async_pool_host (a pinned pool in host
    // memory) or managed (a managed pool with no device location: nothing on a device until touched there).
    ledger::Kind allocation_kind(CUmemoryPool pool) const noexcept;
    // Its id in the report (0: not known) and device (-1: host, or not known).
    std::uint64_t id_of(CUmemoryPool pool) const;
    int device_of(CUmemoryPool pool) const;

    // Asks the driver about every live pool and keeps the answers. Returns the sums over `device`'s pools.
    struct Sums {
        std::uint64_t reserved = 0, used = 0;
        std::uint64_t idle() const { return reserved - std::min(reserved, used); }
    };
    Sums look(AskPool ask, int device);
    Sums last(int device) const;  // the same from the last look

    void copy_to(history::History&) const;  // the pools and how many went untracked

private:
    struct Entry {
        CUmemoryPool handle = nullptr;
        history::Pool row;
    };
    Entry* find(CUmemoryPool pool) REQUIRES(mu_);
    const Entry* find(CUmemoryPool pool) const REQUIRES(mu_);
    void add(Entry e) REQUIRES(mu_);
    // Pools off the device, for allocation_kind(); a pool on a device is not remembered.
    void remember_kind(CUmemoryPool pool, const CUmemLocation& where, CUmemAllocationType type) REQUIRES(mu_);
    Sums sums(int device) const REQUIRES(mu_);

    mutable Mutex mu_;
    std::vector<Entry> pools_ GUARDED_BY(mu_);  // at most history::kPoolsKept
    std::uint64_t untracked_ GUARDED_BY(mu_) = 0;
    static constexpr std::size_t kOffDevicePools = 64;  // pools off the device the allocation path can tell apart
    std::array<std::atomic<CUmemoryPool>, kOffDevicePools> off_device_{};
    std::array<ledger::Kind, kOffDevicePools> off_device_kind_{};  // written before the count is published
    std::atomic<std::size_t> off_device_count_{0};
};

}  // namespace cumemaudit::shim
