// device_pool: one growable reservation per device, carved into segments: what a PyTorch pluggable
// allocator (include/cumemaudit/torch_pool.h) hands out, and usable from C++ directly.
//
// Why it exists: capture-time temporaries churn PyTorch's caching allocator into tens of GiB reserved but
// unallocated, and expandable segments, the usual cure, would remap buffers DeepEP/NVSHMEM registered. A
// MemPool over this pool keeps those temporaries apart from the default pool; each segment's physical
// memory is chunks of the FabricPool kind (fabric_pool.hpp: every reference owned once), mapped into the
// device's one reservation, so freeing a segment gives its chunks back (to a bounded cache, else to the
// driver) wherever it sits, and nothing that is mapped ever moves.
//
// Segments: granularity-aligned, rounded up to the granularity, placed first fit from the start of the
// reservation. grow() maps more chunks after a segment when the address space after it is free (the
// address stays); shrink() unmaps from its end. Thread-safe: one mutex for the address-space bookkeeping
// and the segment table, never held across a driver call (chunk_cache's rule).
//
// Stream semantics: none here. free() unmaps at once, so the caller must know the GPU is done with the
// segment (torch_pool.h's entry point synchronises the allocation's stream first, as cudaFree would).
#pragma once

#include "cumemaudit/fabric_pool.hpp"

#include <map>
#include <memory>
#include <mutex>

namespace cumemaudit::pool {

namespace detail {
class VaRanges;
}

struct DevicePoolOptions {
    int device = 0;
    HandleKind kind = HandleKind::posix_fd;  // works on any Linux GPU (fabric needs an IMEX channel)
    std::size_t va_capacity = 0;             // the one reservation; 0: twice the device's memory
    std::size_t max_chunk = std::size_t{1} << 30;
    std::size_t cache_limit = std::size_t{1} << 30;  // bytes of freed chunks kept for reuse
};

struct DevicePoolStats {
    std::size_t address_space_bytes = 0;  // the reservation
    std::size_t reserved_bytes = 0;       // physical memory held from the driver: live + cached
    std::size_t live_bytes = 0;           // mapped into live segments
    std::size_t cached_bytes = 0;         // freed chunks kept for reuse
    std::size_t peak_reserved_bytes = 0;
    std::size_t segments = 0;             // live segments
    std::uint64_t allocations = 0, frees = 0, failed_allocations = 0, bad_frees = 0, cache_hits = 0;
    CallCounts calls;                     // driver calls this pool made
};

class DevicePool {
public:
    explicit DevicePool(DevicePoolOptions options = {});  // reserves the address space (throws PoolError)
    DevicePool(const DevicePool&) = delete;
    DevicePool& operator=(const DevicePool&) = delete;
    ~DevicePool();  // unmaps every live segment, releases every chunk, frees the reservation

    // A new segment of at least `bytes` (rounded up to the granularity). When the driver is out of memory
    // the cache is given back and the segment tried once more. Throws PoolError.
    [[nodiscard]] CUdeviceptr allocate(std::size_t bytes);
    // Unmaps the segment starting at `ptr`; its chunks go to the cache (or the driver past its bound).
    // Throws PoolError(CUDA_ERROR_INVALID_VALUE) for an address that is not a live segment's start.
    void free(CUdeviceptr ptr);
    // Grows the segment in place to at least `bytes`: true when done (the address is unchanged), false when
    // the address space after it is taken (nothing changed). Throws PoolError when the driver refuses.
    bool grow(CUdeviceptr ptr, std::size_t bytes);
    // Unmaps whole chunks from the segment's end while what stays still covers `bytes` (they go to the cache).
    void shrink(CUdeviceptr ptr, std::size_t bytes);
    std::size_t size_of(CUdeviceptr ptr) const;  // mapped bytes of a live segment; 0 for anything else

    std::size_t trim();  // gives every cached chunk back to the driver; returns the bytes
    void set_cache_limit(std::size_t bytes);  // trims when the cache already holds more
    DevicePoolStats stats() const;
    std::size_t granularity() const noexcept { return granularity_; }
    const DevicePoolOptions& options() const noexcept { return options_; }  // as built (va_capacity resolved)

private:
    struct Segment {
        std::size_t offset = 0;  // from the reservation's base
        std::size_t span = 0;    // address space this segment owns (>= mapped)
        detail::ChunkRun run;
    };
    void release(Segment& seg) noexcept;  // unmaps and gives the span back

    DevicePoolOptions options_;
    std::shared_ptr<detail::PoolCore> core_;
    std::size_t granularity_ = 0;
    Reservation va_;  // declared before the segments: freed after every unmap
    mutable std::mutex mu_;
    std::unique_ptr<detail::VaRanges> free_;    // guarded by mu_
    std::map<CUdeviceptr, Segment> segments_;   // guarded by mu_
    std::uint64_t allocations_ = 0, frees_ = 0, failed_ = 0, bad_frees_ = 0;  // guarded by mu_
};

}  // namespace cumemaudit::pool
