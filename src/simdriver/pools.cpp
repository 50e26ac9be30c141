// Stream-ordered pools: a device's default pool, pools of the program's own (device or host located),
// their reserved, used and idle memory, the release threshold applied at synchronisation, trims, and the
// driver taking idle memory back before it refuses memory. The answers follow the H200's (docs/DRIVER.md,
// "Stream-ordered pools").
#include "state.hpp"
#include "state_impl.hpp"

#include <cstring>

namespace cumemaudit::sim {
namespace {

void* host_pages(std::size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

CUresult SimState::pool_create(CUmemoryPool* out, const CUmemPoolProps& props) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (props.allocType != CU_MEM_ALLOCATION_TYPE_PINNED && props.allocType != CU_MEM_ALLOCATION_TYPE_MANAGED)
        return CUDA_ERROR_INVALID_VALUE;
    SimPool p;
    p.managed = props.allocType == CU_MEM_ALLOCATION_TYPE_MANAGED;
    p.where = props.location.type;
    switch (props.location.type) {
        case CU_MEM_LOCATION_TYPE_DEVICE:
            if (props.location.id < 0 || props.location.id >= s.config.devices) return CUDA_ERROR_INVALID_DEVICE;
            p.device = props.location.id;
            p.where_id = p.device;
            break;
        case CU_MEM_LOCATION_TYPE_HOST:
        case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
            p.host = true;
            break;
        case CU_MEM_LOCATION_TYPE_HOST_NUMA:  // one NUMA node, 0
            if (props.location.id != 0) return CUDA_ERROR_INVALID_VALUE;
            p.host = true;
            break;
        case CU_MEM_LOCATION_TYPE_NONE:  // managed memory with no preferred location (measured: accepted)
            if (!p.managed) return CUDA_ERROR_INVALID_VALUE;
            p.host = true;
            break;
        default:
            return CUDA_ERROR_INVALID_VALUE;
    }
    // A managed pool on a device charges it at allocation; one elsewhere charges nothing until a touch on
    // the device (measured).
    constexpr unsigned known = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC;
    if ((props.handleTypes & ~known) != 0) return CUDA_ERROR_NOT_SUPPORTED;
    p.max_size = props.maxSize;
    p.handle_types = props.handleTypes;
    p.object = std::make_unique<CUmemPoolHandle_st>(CUmemPoolHandle_st{p.device});
    CUmemoryPool handle = p.object.get();
    s.pools.emplace(handle, std::move(p));
    *out = handle;
    return CUDA_SUCCESS;
}

CUresult SimState::pool_destroy(CUmemoryPool pool) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.pools.find(pool);
    if (it == s.pools.end() || it->second.destroyed || it->second.is_default) return CUDA_ERROR_INVALID_VALUE;
    SimPool& p = it->second;
    // A device whose current pool this was allocates from its default pool again (measured).
    for (std::size_t d = 0; d < s.current_pools.size(); ++d)
        if (s.current_pools[d] == pool) s.current_pools[d] = s.default_pools[d];
    SimNode::Lock node(*s.node);
    s.shrink_pool(p, 0);
    if (p.used == 0 && p.lent.empty()) s.pools.erase(it);
    else p.destroyed = true;  // measured: its allocations stay valid, and it goes with the last
    return CUDA_SUCCESS;
}

CUresult SimState::pool_trim(CUmemoryPool pool, std::size_t keep) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.pools.find(pool);
    if (it == s.pools.end() || it->second.destroyed) return CUDA_ERROR_INVALID_VALUE;
    SimNode::Lock node(*s.node);
    s.shrink_pool(it->second, keep);
    return CUDA_SUCCESS;
}

CUresult SimState::pool_set_attribute(CUmemoryPool pool, CUmemPool_attribute attr, const void* value) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.pools.find(pool);
    if (it == s.pools.end() || it->second.destroyed || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    SimPool& p = it->second;
    cuuint64_t v = 0;
    switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            return CUDA_SUCCESS;  // reuse policies: nothing executes, so nothing to reorder
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
            std::memcpy(&v, value, sizeof v);
            p.threshold = v;
            return CUDA_SUCCESS;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:  // the watermarks may only be reset, to 0
            std::memcpy(&v, value, sizeof v);
            if (v != 0) return CUDA_ERROR_INVALID_VALUE;
            (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH ? p.reserved_high : p.used_high) =
                attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH ? p.reserved : p.used;
            return CUDA_SUCCESS;
        default:
            return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult SimState::pool_get_attribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.pools.find(pool);
    if (it == s.pools.end() || value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const SimPool& p = it->second;
    cuuint64_t v = 0;
    switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES: {
            const int on = 1;
            std::memcpy(value, &on, sizeof on);
            return CUDA_SUCCESS;
        }
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: v = p.threshold; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: v = p.reserved; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: v = p.reserved_high; break;
        case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: v = p.used; break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH: v = p.used_high; break;
        default: return CUDA_ERROR_INVALID_VALUE;
    }
    std::memcpy(value, &v, sizeof v);
    return CUDA_SUCCESS;
}

CUresult SimState::default_pool(CUmemoryPool* out, CUdevice dev) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (CUresult r = s.check_device(dev); r != CUDA_SUCCESS) return r;
    *out = s.default_pools[static_cast<std::size_t>(dev)];
    return CUDA_SUCCESS;
}

CUresult SimState::current_pool(CUmemoryPool* out, CUdevice dev) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (CUresult r = s.check_device(dev); r != CUDA_SUCCESS) return r;
    *out = s.current_pools[static_cast<std::size_t>(dev)];
    return CUDA_SUCCESS;
}

CUresult SimState::set_current_pool(CUdevice dev, CUmemoryPool pool) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (CUresult r = s.check_device(dev); r != CUDA_SUCCESS) return r;
    auto it = s.pools.find(pool);
    if (it == s.pools.end() || it->second.destroyed || it->second.host || it->second.device != dev)
        return CUDA_ERROR_INVALID_VALUE;
    s.current_pools[static_cast<std::size_t>(dev)] = pool;
    return CUDA_SUCCESS;
}

CUresult SimState::pool_alloc(CUdeviceptr* out, std::size_t bytes, CUmemoryPool pool) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    int dev = 0;
    if (CUresult r = s.current_device(&dev); r != CUDA_SUCCESS) return r;
    if (pool == nullptr) pool = s.current_pools[static_cast<std::size_t>(dev)];
    auto it = s.pools.find(pool);
    // An imported pool makes no allocations (the driver API's documentation): its pointers are imported.
    if (it == s.pools.end() || it->second.destroyed || it->second.imported) return CUDA_ERROR_INVALID_VALUE;
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    SimPool& p = it->second;
    SimNode::Lock node(*s.node);
    s.reap_all();
    if (p.used + bytes > p.reserved) {
        const std::uint64_t grow = round_up(p.used + bytes - p.reserved, kPoolChunk);
        if (p.max_size != 0 && p.reserved + grow > p.max_size) {
            // Measured: the refusal of a capped pool takes back the device's idle pool memory, and the
            // capped pool is left holding its cap.
            if (!p.host) {
                for (auto& [other, q] : s.pools)
                    if (!q.host && q.device == p.device) s.shrink_pool(q, 0);
                const std::uint64_t cap = round_up(p.max_size, kPoolChunk);
                if (p.reserved < cap && s.room_for(p.device, cap - p.reserved) && s.node->charge_classic(p.device, cap - p.reserved))
                    p.reserved = cap;
            }
            p.reserved_high = std::max(p.reserved_high, p.reserved);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (!p.host) {
            if (!s.room_for(p.device, grow) || !s.node->charge_classic(p.device, grow)) return CUDA_ERROR_OUT_OF_MEMORY;
        }
        p.reserved += grow;
        p.reserved_high = std::max(p.reserved_high, p.reserved);
    }
    const ClassicKind kind = !p.host ? ClassicKind::device : p.managed ? ClassicKind::managed : ClassicKind::host;
    Classic c{bytes, 0, 0, p.host ? dev : p.device, kind, nullptr};
    c.pool = pool;
    std::uint64_t va = 0;
    if (p.host) {
        c.mapped = bytes;
        va = reinterpret_cast<std::uint64_t>(host_pages(bytes));
    } else {
        c.mapped = round_up(bytes, kClassicRound);
        va = s.arena.take(c.mapped, kClassicRound);
    }
    if (va == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    p.used += bytes;
    p.used_high = std::max(p.used_high, p.used);
    s.classic.emplace(va, c);
    *out = va;
    return CUDA_SUCCESS;
}

namespace {

using LocationKey = std::tuple<int, int, int>;

// A location's pools' key (location type, id, allocation type), or the driver's refusal: a device ordinal,
// the host, host NUMA node 0, or no location for managed memory (measured: pinned memory with none, and a
// device past the last, answer CUDA_ERROR_INVALID_VALUE).
CUresult location_key(int devices, const CUmemLocation& l, CUmemAllocationType type, LocationKey& key) {
    if (type != CU_MEM_ALLOCATION_TYPE_PINNED && type != CU_MEM_ALLOCATION_TYPE_MANAGED) return CUDA_ERROR_INVALID_VALUE;
    int id = 0;
    switch (l.type) {
        case CU_MEM_LOCATION_TYPE_DEVICE:
            if (l.id < 0 || l.id >= devices) return CUDA_ERROR_INVALID_VALUE;
            id = l.id;
            break;
        case CU_MEM_LOCATION_TYPE_HOST: break;
        case CU_MEM_LOCATION_TYPE_HOST_NUMA:
            if (l.id != 0) return CUDA_ERROR_INVALID_VALUE;
            break;
        case CU_MEM_LOCATION_TYPE_NONE:
            if (type != CU_MEM_ALLOCATION_TYPE_MANAGED) return CUDA_ERROR_INVALID_VALUE;
            break;
        default: return CUDA_ERROR_INVALID_VALUE;
    }
    key = {l.type, id, type};
    return CUDA_SUCCESS;
}

bool device_pinned(const LocationKey& k) {
    return std::get<0>(k) == CU_MEM_LOCATION_TYPE_DEVICE && std::get<2>(k) == CU_MEM_ALLOCATION_TYPE_PINNED;
}

}  // namespace

// The location's default pool, made at the first question (a device's pinned one exists from cuInit).
CUmemoryPool SimState::Impl::location_default(const std::tuple<int, int, int>& key) {
    if (device_pinned(key)) return default_pools[static_cast<std::size_t>(std::get<1>(key))];
    if (auto it = default_by_location.find(key); it != default_by_location.end()) return it->second;
    SimPool p;
    p.where = static_cast<CUmemLocationType>(std::get<0>(key));
    p.where_id = std::get<1>(key);
    p.managed = std::get<2>(key) == CU_MEM_ALLOCATION_TYPE_MANAGED;
    p.host = p.where != CU_MEM_LOCATION_TYPE_DEVICE;
    p.device = p.host ? 0 : p.where_id;
    p.is_default = true;
    p.object = std::make_unique<CUmemPoolHandle_st>(CUmemPoolHandle_st{p.device});
    CUmemoryPool handle = p.object.get();
    pools.emplace(handle, std::move(p));
    default_by_location.emplace(key, handle);
    return handle;
}

// The location's default pool, or (`current`) the one its setter named last, that default until then.
CUresult SimState::location_pool(CUmemoryPool* out, const CUmemLocation& where, CUmemAllocationType type, bool current) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    LocationKey key;
    if (CUresult r = location_key(s.config.devices, where, type, key); r != CUDA_SUCCESS) return r;
    if (current && device_pinned(key)) *out = s.current_pools[static_cast<std::size_t>(std::get<1>(key))];
    else if (auto it = s.current_by_location.find(key); current && it != s.current_by_location.end()) *out = it->second;
    else *out = s.location_default(key);
    return CUDA_SUCCESS;
}

// Measured: a pool of another location or allocation type is refused. A host location's current pool is
// not reset when that pool is destroyed (the getter no longer answers its default), as a device's is.
CUresult SimState::set_location_pool(const CUmemLocation& where, CUmemAllocationType type, CUmemoryPool pool) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    LocationKey key;
    if (CUresult r = location_key(s.config.devices, where, type, key); r != CUDA_SUCCESS) return r;
    auto it = s.pools.find(pool);
    if (it == s.pools.end() || it->second.destroyed || it->second.imported) return CUDA_ERROR_INVALID_VALUE;
    const SimPool& p = it->second;
    const int id = p.where == CU_MEM_LOCATION_TYPE_DEVICE || p.where == CU_MEM_LOCATION_TYPE_HOST_NUMA ? p.where_id : 0;
    const LocationKey of_pool{p.where, id, p.managed ? CU_MEM_ALLOCATION_TYPE_MANAGED : CU_MEM_ALLOCATION_TYPE_PINNED};
    if (of_pool != key) return CUDA_ERROR_INVALID_VALUE;
    if (device_pinned(key)) s.current_pools[static_cast<std::size_t>(std::get<1>(key))] = pool;
    else s.current_by_location[key] = pool;
    return CUDA_SUCCESS;
}

// Managed memory touched on `dev` (a memset, a prefetch to it): the pages of the range move there, and stay
// until the allocation is freed, a prefetch back to the host included (measured: 1024 of 1024 MiB, for
// cuMemAllocManaged memory and a managed pool's with no location; a prefetch of the upper 128 MiB of 256 MiB
// moved 128 MiB). A managed pool's with a host location stays on the host. Once some of it is on one device,
// a touch on another moves nothing (moves between devices are not modelled).
CUresult SimState::Impl::make_resident(Classic& a, int dev, std::uint64_t offset, std::uint64_t bytes) {
    if (a.kind != ClassicKind::managed || bytes == 0 || (a.charged != 0 && a.device != dev)) return CUDA_SUCCESS;
    if (a.pool != nullptr) {
        const auto p = pools.find(a.pool);
        if (p == pools.end() || p->second.where != CU_MEM_LOCATION_TYPE_NONE) return CUDA_SUCCESS;
    }
    if (a.resident.empty()) a.resident.resize((a.size + kManagedPage - 1) / kManagedPage);
    const std::uint64_t first = offset / kManagedPage, end = (offset + bytes + kManagedPage - 1) / kManagedPage;
    std::uint64_t moving = 0;
    for (std::uint64_t page = first; page < end; ++page)
        if (!a.resident[page]) moving += std::min(kManagedPage, a.size - page * kManagedPage);
    if (moving == 0) return CUDA_SUCCESS;
    SimNode::Lock lock(*node);
    if (!room_for(dev, moving) || !node->charge_unlisted(dev, moving)) return CUDA_ERROR_OUT_OF_MEMORY;
    for (std::uint64_t page = first; page < end; ++page) a.resident[page] = true;
    a.charged += moving;
    a.device = dev;
    return CUDA_SUCCESS;
}

CUresult SimState::memset(CUdeviceptr ptr, std::size_t bytes) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto c = s.classic_at(ptr);
    if (c == s.classic.end()) return s.mapping_at(ptr) != s.mappings.end() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    Classic& a = c->second;
    // Measured: a host pool's memory is refused (cuMemAllocHost's and registered memory are not measured).
    if (a.kind == ClassicKind::host || a.kind == ClassicKind::ipc || ptr + bytes > c->first + a.size)
        return CUDA_ERROR_INVALID_VALUE;
    int dev = 0;
    if (CUresult r = s.current_device(&dev); r != CUDA_SUCCESS) return r;
    return s.make_resident(a, dev, ptr - c->first, bytes);
}

CUresult SimState::prefetch(CUdeviceptr ptr, std::size_t bytes, const CUmemLocation& to) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto c = s.classic_at(ptr);
    if (c == s.classic.end() || c->second.kind != ClassicKind::managed || ptr + bytes > c->first + c->second.size)
        return CUDA_ERROR_INVALID_VALUE;  // not managed memory (the driver's documented answer)
    switch (to.type) {
        case CU_MEM_LOCATION_TYPE_DEVICE:
            if (CUresult r = s.check_device(to.id); r != CUDA_SUCCESS) return r;
            return s.make_resident(c->second, to.id, ptr - c->first, bytes);
        case CU_MEM_LOCATION_TYPE_HOST:
        case CU_MEM_LOCATION_TYPE_HOST_NUMA:
        case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
            return CUDA_SUCCESS;  // measured: what the device holds stays until the free
        default:
            return CUDA_ERROR_INVALID_VALUE;
    }
}

void SimState::synchronized() {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    SimNode::Lock node(*s.node);
    for (auto& [handle, p] : s.pools)
        if (p.reserved - p.used > p.threshold || !p.lent.empty()) s.shrink_pool(p, p.threshold);
    // A pool destroyed while an importer held memory it lent goes once the last hold is given back.
    std::erase_if(s.pools, [](const auto& e) { return e.second.destroyed && e.second.used == 0 && e.second.lent.empty(); });
}

}  // namespace cumemaudit::sim
