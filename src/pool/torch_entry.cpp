// The C entry points of include/cumemaudit/torch_pool.h: PyTorch's pluggable-allocator signatures over one
// DevicePool per device. Everything here is a boundary: no exception leaves it, failures become NULL or a
// no-op plus a message for cumemaudit_pool_last_error().
#include "cumemaudit/torch_pool.h"

#include "cumemaudit/device_pool.hpp"

#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace {

using cumemaudit::pool::DevicePool;
using cumemaudit::pool::DevicePoolOptions;

constexpr int kMaxDevices = 64;

struct Slot {
    std::mutex mu;                         // creation, options, deferred frees
    std::atomic<DevicePool*> pool{nullptr};  // made once, never destroyed (frees may come during exit)
    std::size_t cache_limit = std::size_t{1} << 30;
    std::size_t va_capacity = 0;
    std::vector<std::pair<CUdeviceptr, CUstream>> deferred;  // freed while their stream was capturing
    std::uint64_t deferred_frees = 0;
};

// Leaked on purpose: PyTorch may free segments from its own static destructors, after ours would run.
std::array<Slot, kMaxDevices>& slots() {
    static auto* s = new std::array<Slot, kMaxDevices>();
    return *s;
}

thread_local std::string t_error;

void set_error(std::string what) noexcept {
    try {
        t_error = std::move(what);
    } catch (...) {  // out of memory for the message itself: keep the old one
    }
}

void trim_at_exit() noexcept;

Slot* slot_for(int device) noexcept {
    if (device < 0 || device >= kMaxDevices) {
        set_error("device " + std::to_string(device) + " out of range [0, " + std::to_string(kMaxDevices) + ")");
        return nullptr;
    }
    return &slots()[static_cast<std::size_t>(device)];
}

DevicePool* pool_for(int device) noexcept {
    Slot* s = slot_for(device);
    if (s == nullptr) return nullptr;
    if (DevicePool* p = s->pool.load(std::memory_order_acquire)) return p;
    std::lock_guard lock(s->mu);
    if (DevicePool* p = s->pool.load(std::memory_order_relaxed)) return p;
    try {
        DevicePoolOptions o;
        o.device = device;
        o.cache_limit = s->cache_limit;
        o.va_capacity = s->va_capacity;
        auto* p = new DevicePool(o);
        // Registered now, while the program runs, so it runs before the handlers registered when the
        // process started: the auditor's final report (an on_exit handler of the preloaded shim) comes after.
        static const bool registered = std::atexit(trim_at_exit) == 0;
        (void)registered;
        s->pool.store(p, std::memory_order_release);
        return p;
    } catch (const std::exception& e) {
        set_error(std::string("cumemaudit_pool: device ") + std::to_string(device) + ": " + e.what());
        return nullptr;
    }
}

bool capturing(CUstream stream) noexcept {
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    return cuStreamIsCapturing(stream, &st) == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}

// Waits for `stream`, then unmaps. A stream the driver no longer knows (destroyed since) is waited for by
// waiting for the whole context.
void release_now(DevicePool& pool, CUdeviceptr ptr, CUstream stream) noexcept {
    if (cuStreamSynchronize(stream) != CUDA_SUCCESS) (void)cuCtxSynchronize();
    try {
        pool.free(ptr);
    } catch (const std::exception& e) {
        set_error(std::string("cumemaudit_pool_free: ") + e.what());
    }
}

// The deferred frees whose stream has stopped capturing, released now.
void drain_deferred(Slot& s, DevicePool& pool) noexcept {
    std::vector<std::pair<CUdeviceptr, CUstream>> ready;
    {
        std::lock_guard lock(s.mu);
        for (auto it = s.deferred.begin(); it != s.deferred.end();) {
            if (capturing(it->second)) {
                ++it;
                continue;
            }
            ready.push_back(*it);
            it = s.deferred.erase(it);
        }
    }
    for (auto [ptr, stream] : ready) release_now(pool, ptr, stream);
}

void trim_at_exit() noexcept {
    for (Slot& s : slots())
        if (DevicePool* p = s.pool.load(std::memory_order_acquire)) {
            p->set_cache_limit(0);  // frees after this go straight back to the driver
            p->trim();
        }
}

}  // namespace

extern "C" {

void* cumemaudit_pool_alloc(ssize_t size, int device, CUstream /*stream: a mapping is usable on all*/) {
    if (size <= 0) {
        set_error("cumemaudit_pool_alloc: size " + std::to_string(size) + " (must be positive)");
        return nullptr;
    }
    DevicePool* pool = pool_for(device);
    if (pool == nullptr) return nullptr;
    try {
        return reinterpret_cast<void*>(pool->allocate(static_cast<std::size_t>(size)));
    } catch (const std::exception& e) {
        set_error(std::string("cumemaudit_pool_alloc: ") + std::to_string(size) + " bytes on device " +
                  std::to_string(device) + ": " + e.what());
        return nullptr;
    }
}

void cumemaudit_pool_free(void* ptr, ssize_t /*size: the pool knows its segments*/, int device, CUstream stream) {
    Slot* s = slot_for(device);
    if (s == nullptr) return;
    DevicePool* pool = s->pool.load(std::memory_order_acquire);
    const auto va = reinterpret_cast<CUdeviceptr>(ptr);
    if (pool == nullptr) {
        set_error("cumemaudit_pool_free: device " + std::to_string(device) + " has no pool");
        return;
    }
    if (pool->size_of(va) == 0) {  // not a segment: nothing to wait for; counted as a bad free
        try {
            pool->free(va);
        } catch (const std::exception& e) {
            set_error(std::string("cumemaudit_pool_free: ") + e.what());
        }
        return;
    }
    if (capturing(stream)) {
        try {
            std::lock_guard lock(s->mu);
            s->deferred.emplace_back(va, stream);
            ++s->deferred_frees;
        } catch (...) {
            set_error("cumemaudit_pool_free: out of host memory deferring a free during capture");
        }
        return;
    }
    release_now(*pool, va, stream);
    drain_deferred(*s, *pool);
}

int cumemaudit_pool_grow(void* ptr, size_t size, int device) {
    DevicePool* pool = pool_for(device);
    if (pool == nullptr) return -1;
    try {
        return pool->grow(reinterpret_cast<CUdeviceptr>(ptr), size) ? 1 : 0;
    } catch (const std::exception& e) {
        set_error(std::string("cumemaudit_pool_grow: ") + e.what());
        return -1;
    }
}

int cumemaudit_pool_shrink(void* ptr, size_t size, int device) {
    DevicePool* pool = pool_for(device);
    if (pool == nullptr) return -1;
    try {
        pool->shrink(reinterpret_cast<CUdeviceptr>(ptr), size);
        return 0;
    } catch (const std::exception& e) {
        set_error(std::string("cumemaudit_pool_shrink: ") + e.what());
        return -1;
    }
}

size_t cumemaudit_pool_size_of(void* ptr, int device) {
    Slot* s = slot_for(device);
    DevicePool* pool = s == nullptr ? nullptr : s->pool.load(std::memory_order_acquire);
    return pool == nullptr ? 0 : pool->size_of(reinterpret_cast<CUdeviceptr>(ptr));
}

int cumemaudit_pool_configure(int device, size_t cache_limit, size_t va_capacity) {
    Slot* s = slot_for(device);
    if (s == nullptr) return -1;
    DevicePool* pool = nullptr;
    {
        std::lock_guard lock(s->mu);
        pool = s->pool.load(std::memory_order_relaxed);
        if (pool != nullptr && va_capacity != 0 && va_capacity != pool->options().va_capacity) {
            set_error("cumemaudit_pool_configure: device " + std::to_string(device) +
                      "'s pool is in use; its address space is fixed at " + std::to_string(pool->options().va_capacity));
            return -2;
        }
        s->cache_limit = cache_limit;
        if (pool == nullptr) s->va_capacity = va_capacity;
    }
    if (pool != nullptr) pool->set_cache_limit(cache_limit);
    return 0;
}

int cumemaudit_pool_stats_get(int device, cumemaudit_pool_stats* out) {
    Slot* s = slot_for(device);
    if (s == nullptr || out == nullptr) return -1;
    *out = cumemaudit_pool_stats{};
    DevicePool* pool = s->pool.load(std::memory_order_acquire);
    if (pool == nullptr) return 1;
    const auto st = pool->stats();
    out->address_space_bytes = st.address_space_bytes;
    out->reserved_bytes = st.reserved_bytes;
    out->live_bytes = st.live_bytes;
    out->cached_bytes = st.cached_bytes;
    out->peak_reserved_bytes = st.peak_reserved_bytes;
    out->segments = st.segments;
    out->allocations = st.allocations;
    out->frees = st.frees;
    out->failed_allocations = st.failed_allocations;
    out->bad_frees = st.bad_frees;
    out->cache_hits = st.cache_hits;
    {
        std::lock_guard lock(s->mu);
        out->deferred_frees = s->deferred_frees;
    }
    static_assert(cumemaudit::pool::kApiCount <= CUMEMAUDIT_POOL_APIS);
    for (std::size_t i = 0; i < cumemaudit::pool::kApiCount; ++i) out->driver_calls[i] = st.calls.n[i];
    return 0;
}

const char* cumemaudit_pool_api_name(int i) {
    if (i < 0 || i >= cumemaudit_pool_api_count()) return nullptr;
    return cumemaudit::pool::api_name(static_cast<cumemaudit::pool::Api>(i));
}

int cumemaudit_pool_api_count(void) { return static_cast<int>(cumemaudit::pool::kApiCount); }

size_t cumemaudit_pool_trim(int device) {
    Slot* s = slot_for(device);
    if (s == nullptr) return 0;
    DevicePool* pool = s->pool.load(std::memory_order_acquire);
    if (pool == nullptr) return 0;
    drain_deferred(*s, *pool);  // what it frees lands in the cache, which the trim then empties
    return pool->trim();
}

const char* cumemaudit_pool_last_error(void) { return t_error.c_str(); }

}  // extern "C"
