#include "shim/record/pool_book.hpp"

#include <algorithm>

namespace cumemaudit::shim {
namespace {

std::string location_text(const CUmemLocation& l, CUmemAllocationType type) {
    const std::string managed = type == CU_MEM_ALLOCATION_TYPE_MANAGED ? "managed, " : "";
    switch (l.type) {
        case CU_MEM_LOCATION_TYPE_DEVICE: return managed + "device " + std::to_string(l.id);
        case CU_MEM_LOCATION_TYPE_HOST: return managed + "host";
        case CU_MEM_LOCATION_TYPE_HOST_NUMA: return managed + "host NUMA " + std::to_string(l.id);
        case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: return managed + "host NUMA (current)";
        case CU_MEM_LOCATION_TYPE_NONE: return type == CU_MEM_ALLOCATION_TYPE_MANAGED ? "managed" : "";
        default: return "";
    }
}

}  // namespace

PoolBook::Entry* PoolBook::find(CUmemoryPool pool) {
    for (Entry& e : pools_)
        if (e.handle == pool && !e.row.destroyed) return &e;
    return nullptr;
}

const PoolBook::Entry* PoolBook::find(CUmemoryPool pool) const {
    return const_cast<PoolBook*>(this)->find(pool);
}

void PoolBook::add(Entry e) {
    if (pools_.size() >= history::kPoolsKept) {
        ++untracked_;
        return;
    }
    e.row.id = pools_.size() + 1;
    pools_.push_back(std::move(e));
}

void PoolBook::created(CUmemoryPool pool, const CUmemPoolProps& props, const ledger::Site& site, std::uint64_t step) {
    Entry e;
    e.handle = pool;
    e.row.site = site;
    e.row.origin = "created";
    e.row.location = location_text(props.location, props.allocType);
    e.row.device = props.location.type == CU_MEM_LOCATION_TYPE_DEVICE ? props.location.id : -1;
    e.row.step = step;
    MutexLock lock(mu_);
    add(std::move(e));
    remember_kind(pool, props.location, props.allocType);
}

void PoolBook::named(CUmemoryPool pool, const CUmemLocation& where, CUmemAllocationType type, const ledger::Site& site,
                     std::uint64_t step) {
    MutexLock lock(mu_);
    if (find(pool) != nullptr) return;  // created here, or named before: the row says what it is already
    Entry e;
    e.handle = pool;
    e.row.site = site;
    e.row.origin = "default";  // a getter's pool not created here is a location's default (measured)
    e.row.location = location_text(where, type);
    e.row.device = where.type == CU_MEM_LOCATION_TYPE_DEVICE ? where.id : -1;
    e.row.step = step;
    add(std::move(e));
    remember_kind(pool, where, type);
}

void PoolBook::remember_kind(CUmemoryPool pool, const CUmemLocation& where, CUmemAllocationType type) {
    if (where.type == CU_MEM_LOCATION_TYPE_DEVICE) return;  // device memory, managed or not (measured)
    const std::size_t n = off_device_count_.load(std::memory_order_relaxed);
    if (n >= kOffDevicePools) return;
    off_device_kind_[n] = type == CU_MEM_ALLOCATION_TYPE_MANAGED ? ledger::Kind::managed : ledger::Kind::async_pool_host;
    off_device_[n].store(pool, std::memory_order_relaxed);
    off_device_count_.store(n + 1, std::memory_order_release);
}

void PoolBook::seen_default(CUmemoryPool pool, int device, std::uint64_t step) {
    MutexLock lock(mu_);
    if (find(pool) != nullptr) return;
    Entry e;
    e.handle = pool;
    e.row.origin = "default";
    e.row.location = "device " + std::to_string(device);
    e.row.device = device;
    e.row.step = step;
    add(std::move(e));
}

void PoolBook::imported(CUmemoryPool pool, int device, const ledger::Site& site, std::uint64_t step) {
    Entry e;
    e.handle = pool;
    e.row.site = site;
    e.row.origin = "imported";
    e.row.location = device >= 0 ? "device " + std::to_string(device) : "";
    e.row.device = device;
    e.row.step = step;
    MutexLock lock(mu_);
    add(std::move(e));
}

void PoolBook::destroyed(CUmemoryPool pool) {
    MutexLock lock(mu_);
    if (Entry* e = find(pool)) {  // its idle memory went back; what allocations hold goes with their frees
        e->row.destroyed = true;
        e->row.reserved_bytes = e->row.used_bytes;
        e->row.idle_bytes = 0;
    }
    // A host pool's handle may come back for a device pool: it is no longer off the device.
    const std::size_t n = off_device_count_.load(std::memory_order_relaxed);
    for (std::size_t i = 0; i < n; ++i)
        if (off_device_[i].load(std::memory_order_relaxed) == pool) off_device_[i].store(nullptr, std::memory_order_relaxed);
}

void PoolBook::threshold_set(CUmemoryPool pool, std::uint64_t bytes) {
    MutexLock lock(mu_);
    if (Entry* e = find(pool)) e->row.release_threshold = bytes;
}

ledger::Kind PoolBook::allocation_kind(CUmemoryPool pool) const noexcept {
    const std::size_t n = off_device_count_.load(std::memory_order_acquire);
    for (std::size_t i = 0; i < n; ++i)
        if (off_device_[i].load(std::memory_order_relaxed) == pool) return off_device_kind_[i];
    return ledger::Kind::async_pool;
}

std::uint64_t PoolBook::id_of(CUmemoryPool pool) const {
    MutexLock lock(mu_);
    const Entry* e = find(pool);
    return e != nullptr ? e->row.id : 0;
}

int PoolBook::device_of(CUmemoryPool pool) const {
    MutexLock lock(mu_);
    const Entry* e = find(pool);
    return e != nullptr ? static_cast<int>(e->row.device) : -1;
}

PoolBook::Sums PoolBook::look(AskPool ask, int device) {
    MutexLock lock(mu_);
    for (Entry& e : pools_) {
        if (e.row.destroyed) continue;
        const PoolFigures f = ask(e.handle);
        if (!f.known) continue;
        e.row.reserved_bytes = f.reserved;
        e.row.used_bytes = f.used;
        e.row.idle_bytes = f.reserved - std::min(f.reserved, f.used);
        e.row.peak_reserved_bytes = std::max(e.row.peak_reserved_bytes, f.peak_reserved);
    }
    return sums(device);
}

PoolBook::Sums PoolBook::last(int device) const {
    MutexLock lock(mu_);
    return sums(device);
}

PoolBook::Sums PoolBook::sums(int device) const {
    Sums s;
    for (const Entry& e : pools_)
        if (!e.row.destroyed && e.row.device == device) {
            s.reserved += e.row.reserved_bytes;
            s.used += e.row.used_bytes;
        }
    return s;
}

void PoolBook::copy_to(history::History& h) const {
    MutexLock lock(mu_);
    h.pools.clear();
    h.pools.reserve(pools_.size());
    for (const Entry& e : pools_) h.pools.push_back(e.row);
    h.untracked_pools = untracked_;
}

}  // namespace cumemaudit::shim
