// deepep_adapter: the method shape of DeepEP's fabric allocator (allocate, free, get_handle, open_handle,
// close_handle; their calls are in docs/DRIVER.md) on the pool, so code written against that shape
// switches with one line and cannot leak the three references of DeepEP issue 799.
//
// Where each reference lives instead:
//   the creation reference  owned by the local Buffer's chunks; free() hands them back to the pool
//   the retained reference  never taken: get_handle() exports each chunk through its own handle
//   the import reference    owned by the PeerView open_handle() made; close_handle() releases it
// Whatever is still allocated or open when the adapter goes is released by its destructor, peers first.
//
// A buffer may be several chunks (the pool's size classes), so a handle is one shareable handle per chunk,
// in address order; a receiving rank rebuilds them with ExportedHandle::from_fabric / adopt_fd. Thread-safe:
// one mutex around the tables, held across a driver call only by get_handle (the buffer must stay while it exports).
#pragma once

#include "cumemaudit/fabric_pool.hpp"

#include <map>
#include <mutex>
#include <span>
#include <vector>

namespace cumemaudit::pool {

class PoolFabricAllocator {
public:
    explicit PoolFabricAllocator(FabricPool& pool) : pool_(pool) {}
    PoolFabricAllocator(const PoolFabricAllocator&) = delete;
    PoolFabricAllocator& operator=(const PoolFabricAllocator&) = delete;
    ~PoolFabricAllocator();

    // A buffer of at least `size` bytes (create + map + access, through the pool's cache).
    [[nodiscard]] void* allocate(std::size_t size);
    // Gives a buffer allocate() returned back: unmapped, its chunks to the pool. Throws PoolError
    // (CUDA_ERROR_INVALID_VALUE) for any other pointer.
    void free(void* ptr);
    // Shareable handles of the buffer's chunks, in address order (no reference taken; POSIX fds owned by
    // the returned handles, closed when they go).
    [[nodiscard]] std::vector<ExportedHandle> get_handle(void* ptr) const;
    // Imports and maps a peer's buffer from its handles (only read: close them once this returns); the
    // mapping is readable and writable from the pool's device.
    [[nodiscard]] void* open_handle(std::span<const ExportedHandle> handles);
    // Unmaps a peer buffer open_handle() returned and releases its import references.
    void close_handle(void* ptr);

    std::size_t allocated() const;  // buffers live
    std::size_t opened() const;     // peer buffers open

private:
    FabricPool& pool_;
    mutable std::mutex mu_;
    std::map<CUdeviceptr, Buffer> local_;   // guarded by mu_
    std::map<CUdeviceptr, PeerView> peer_;  // guarded by mu_
};

}  // namespace cumemaudit::pool
