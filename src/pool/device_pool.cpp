// DevicePool: segments carved from one reservation per device. The segment table and the free address
// ranges are bookkeeping under one mutex; every driver call (map, unmap, create, release) happens outside
// it, on a segment only the calling thread can reach at that moment (taken out of the table, or not yet in).
#include "cumemaudit/device_pool.hpp"

#include "driver.hpp"
#include "pool_core.hpp"
#include "size_classes.hpp"
#include "va_ranges.hpp"

#include <algorithm>
#include <exception>
#include <utility>

namespace cumemaudit::pool {
namespace {

PoolOptions core_options(const DevicePoolOptions& o) {
    PoolOptions p;
    p.device = o.device;
    p.kind = o.kind;
    p.max_chunk = o.max_chunk;
    p.cache_limit = o.cache_limit;
    return p;
}

std::size_t device_memory(int device) {
    CUdevice dev = 0;
    std::size_t total = 0;
    // Not counted as pool calls: they read properties and change nothing.
    if (cuDeviceGet(&dev, device) != CUDA_SUCCESS || cuDeviceTotalMem(&total, dev) != CUDA_SUCCESS)
        throw PoolError(CUDA_ERROR_INVALID_DEVICE, "cuDeviceTotalMem");
    return total;
}

}  // namespace

DevicePool::DevicePool(DevicePoolOptions options) : options_(options) {
    const bool pow2 = options_.max_chunk != 0 && (options_.max_chunk & (options_.max_chunk - 1)) == 0;
    if (!pow2) throw PoolError(CUDA_ERROR_INVALID_VALUE, "DevicePool (max_chunk must be a power of two)");
    core_ = std::make_shared<detail::PoolCore>(core_options(options_));
    granularity_ = core_->granularity(options_.device, options_.kind);
    // Twice the device's memory: room for every byte to be live at once, with as much again for the gaps
    // first fit leaves between segments.
    const std::size_t want = options_.va_capacity != 0 ? options_.va_capacity : 2 * device_memory(options_.device);
    options_.va_capacity = detail::round_up(want, granularity_);
    va_ = Reservation::create(options_.va_capacity, 0, &core_->counter);
    free_ = std::make_unique<detail::VaRanges>(options_.va_capacity);
}

DevicePool::~DevicePool() {
    for (auto& [ptr, seg] : segments_) seg.run.shrink_to(core_.get(), 0);
    segments_.clear();
    core_->trim();
    va_.reset();  // nothing is mapped in it any more
}

CUdeviceptr DevicePool::allocate(std::size_t bytes) {
    if (bytes == 0) throw PoolError(CUDA_ERROR_INVALID_VALUE, "DevicePool::allocate (0 bytes)");
    const std::size_t span = detail::round_up(bytes, granularity_);
    Segment seg;
    {
        std::lock_guard lock(mu_);
        const auto at = free_->take(span);
        if (!at) {
            ++failed_;
            throw PoolError(CUDA_ERROR_OUT_OF_MEMORY, "DevicePool::allocate (address space exhausted)");
        }
        seg.offset = *at;
        seg.span = span;
    }
    for (int attempt = 0;; ++attempt) {
        try {
            seg.run.grow_to(*core_, va_, seg.offset, seg.span, options_.device, options_.kind, span);
            break;
        } catch (const PoolError& e) {
            seg.run.shrink_to(core_.get(), 0);
            // Out of memory with chunks of other sizes cached: give them back and try once more.
            if (attempt == 0 && e.result() == CUDA_ERROR_OUT_OF_MEMORY && core_->trim() > 0) continue;
            std::lock_guard lock(mu_);
            free_->give(seg.offset, seg.span);
            ++failed_;
            throw;
        }
    }
    const CUdeviceptr ptr = va_.base() + seg.offset;
    std::lock_guard lock(mu_);
    segments_.emplace(ptr, std::move(seg));
    ++allocations_;
    return ptr;
}

void DevicePool::free(CUdeviceptr ptr) {
    std::map<CUdeviceptr, Segment>::node_type node;
    {
        std::lock_guard lock(mu_);
        node = segments_.extract(ptr);
        if (node.empty()) {
            ++bad_frees_;
            throw PoolError(CUDA_ERROR_INVALID_VALUE, "DevicePool::free (not a segment of this pool)");
        }
        ++frees_;
    }
    release(node.mapped());
}

void DevicePool::release(Segment& seg) noexcept {
    seg.run.shrink_to(core_.get(), 0);
    std::lock_guard lock(mu_);
    free_->give(seg.offset, seg.span);
}

bool DevicePool::grow(CUdeviceptr ptr, std::size_t bytes) {
    std::map<CUdeviceptr, Segment>::node_type node;
    {
        std::lock_guard lock(mu_);
        auto it = segments_.find(ptr);
        if (it == segments_.end()) throw PoolError(CUDA_ERROR_INVALID_VALUE, "DevicePool::grow (not a segment of this pool)");
        const std::size_t want = detail::round_up(bytes, granularity_);
        Segment& seg = it->second;
        if (want > seg.span) {
            if (!free_->take_at(seg.offset + seg.span, want - seg.span)) return false;
            seg.span = want;
        }
        node = segments_.extract(it);  // only this thread reaches it while the driver maps
    }
    Segment& seg = node.mapped();
    std::exception_ptr failed;
    try {
        seg.run.grow_to(*core_, va_, seg.offset, seg.span, options_.device, options_.kind, bytes);
    } catch (...) {
        failed = std::current_exception();  // the segment keeps what it had mapped; its span stays its own
    }
    std::lock_guard lock(mu_);
    segments_.insert(std::move(node));
    if (failed) std::rethrow_exception(failed);
    return true;
}

void DevicePool::shrink(CUdeviceptr ptr, std::size_t bytes) {
    std::map<CUdeviceptr, Segment>::node_type node;
    {
        std::lock_guard lock(mu_);
        node = segments_.extract(ptr);
        if (node.empty()) throw PoolError(CUDA_ERROR_INVALID_VALUE, "DevicePool::shrink (not a segment of this pool)");
    }
    Segment& seg = node.mapped();
    seg.run.shrink_to(core_.get(), std::max<std::size_t>(bytes, 1));  // a segment keeps at least one chunk
    std::lock_guard lock(mu_);
    // The address space past what stays mapped goes back, so a neighbour (or this segment) can grow into it.
    const std::size_t keep = seg.run.mapped();
    if (keep < seg.span) {
        free_->give(seg.offset + keep, seg.span - keep);
        seg.span = keep;
    }
    segments_.insert(std::move(node));
}

std::size_t DevicePool::size_of(CUdeviceptr ptr) const {
    std::lock_guard lock(mu_);
    auto it = segments_.find(ptr);
    return it == segments_.end() ? 0 : it->second.run.mapped();
}

std::size_t DevicePool::trim() { return core_->trim(); }

void DevicePool::set_cache_limit(std::size_t bytes) { core_->set_cache_limit(bytes); }

DevicePoolStats DevicePool::stats() const {
    const PoolStats core = core_->stats();
    DevicePoolStats s;
    s.address_space_bytes = va_.size();
    s.live_bytes = core.live_bytes;
    s.cached_bytes = core.cached_bytes;
    s.reserved_bytes = core.live_bytes + core.cached_bytes;
    s.peak_reserved_bytes = core.peak_bytes;
    s.cache_hits = core.cache_hits;
    s.calls = core.calls;
    std::lock_guard lock(mu_);
    s.segments = segments_.size();
    s.allocations = allocations_;
    s.frees = frees_;
    s.failed_allocations = failed_;
    s.bad_frees = bad_frees_;
    return s;
}

}  // namespace cumemaudit::pool
