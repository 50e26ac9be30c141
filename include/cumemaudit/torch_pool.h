/* torch_pool.h: the pool (device_pool.hpp) as a PyTorch pluggable allocator, exported from
 * libcumemaudit_pool.so with plain C linkage:
 *
 *   alloc = torch.cuda.memory.CUDAPluggableAllocator(path, "cumemaudit_pool_alloc", "cumemaudit_pool_free")
 *   pool  = torch.cuda.MemPool(alloc.allocator())
 *
 * or, from Python, cumemaudit.pool.torch_mempool(). One DevicePool per device, made on first use with the
 * options cumemaudit_pool_configure() set (or the defaults) and kept until the process exits; every MemPool
 * over these entry points shares it. At exit its cache goes back to the driver, so the auditor sees no
 * reference nobody can release; segments PyTorch still holds stay mapped (reported as mapped at exit).
 *
 * Context: call with the device's context current, as PyTorch does (it passes the current device).
 *
 * Streams: a segment is usable on every stream as soon as alloc returns (mapping is synchronous). free
 * first waits for the work queued on `stream` (the one alloc was given, which PyTorch passes back), as
 * cudaFree waits for the device; work on other streams must already be ordered before the free (PyTorch's
 * caching allocator does this with its events before it gives a segment back). A free while `stream` is
 * capturing a CUDA graph is deferred (the segment stays mapped) to the next free or trim made outside any
 * capture, since waiting would end the capture and unmapping would pull memory from under the graph.
 *
 * Errors: alloc returns NULL (PyTorch then reports out of memory) and a free of an address that is not a
 * segment's start does nothing; both leave a message for cumemaudit_pool_last_error(). Never throws, never
 * aborts. */
#ifndef CUMEMAUDIT_TORCH_POOL_H
#define CUMEMAUDIT_TORCH_POOL_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The signatures torch.cuda.memory.CUDAPluggableAllocator loads (CUstream is cudaStream_t). */
void* cumemaudit_pool_alloc(ssize_t size, int device, CUstream stream);
void cumemaudit_pool_free(void* ptr, ssize_t size, int device, CUstream stream);

/* Beyond PyTorch's two: a segment grown in place to at least `size` bytes (1; its address stays), or not
 * (0: the address space after it is taken, nothing changed; -1: not a segment or the driver refused, with
 * a message), and shrunk from its end to the chunks still covering `size` (0, or -1 for a non-segment).
 * Both change only mapped memory, so the caller orders them against GPU work on the segment. */
int cumemaudit_pool_grow(void* ptr, size_t size, int device);
int cumemaudit_pool_shrink(void* ptr, size_t size, int device);
/* The mapped bytes of the segment starting at `ptr`; 0 for anything else. */
size_t cumemaudit_pool_size_of(void* ptr, int device);

/* Options for `device`'s pool: 0 on success. cache_limit applies at any time (what is cached beyond it is
 * released); va_capacity (0: twice the device's memory) only before the pool's first use, else -2.
 * -1: device out of range [0, 64). */
int cumemaudit_pool_configure(int device, size_t cache_limit, size_t va_capacity);

#define CUMEMAUDIT_POOL_APIS 16 /* room for every driver entry point the pool calls (10 today) */
typedef struct cumemaudit_pool_stats {
    uint64_t address_space_bytes; /* the one reservation */
    uint64_t reserved_bytes;      /* physical memory held: live + cached */
    uint64_t live_bytes;          /* mapped into live segments */
    uint64_t cached_bytes;        /* freed chunks kept for reuse */
    uint64_t peak_reserved_bytes;
    uint64_t segments;            /* live segments */
    uint64_t allocations, frees, failed_allocations, bad_frees, deferred_frees, cache_hits;
    uint64_t driver_calls[CUMEMAUDIT_POOL_APIS]; /* by cumemaudit_pool_api_name(i) */
} cumemaudit_pool_stats;

/* 0 and *out filled; 1 when the device's pool was never used (*out zeroed); -1 device out of range. */
int cumemaudit_pool_stats_get(int device, cumemaudit_pool_stats* out);
/* "cuMemCreate", ... for i < cumemaudit_pool_api_count(); NULL beyond. */
const char* cumemaudit_pool_api_name(int i);
int cumemaudit_pool_api_count(void);
/* Releases the cached chunks (and deferred frees no longer captured); returns the bytes released. */
size_t cumemaudit_pool_trim(int device);
/* The calling thread's last error message, "" when none. */
const char* cumemaudit_pool_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
