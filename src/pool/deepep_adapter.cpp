// PoolFabricAllocator: DeepEP's allocator methods as thin moves of pool objects into and out of two tables;
// the objects release their own references, so no method has a release to forget.
#include "cumemaudit/deepep_adapter.hpp"


#include <utility>

namespace cumemaudit::pool {
namespace {

CUdeviceptr address(void* ptr) { return reinterpret_cast<CUdeviceptr>(ptr); }
void* pointer(CUdeviceptr va) { return reinterpret_cast<void*>(va); }

}  // namespace

PoolFabricAllocator::~PoolFabricAllocator() {
    std::lock_guard lock(mu_);
    peer_.clear();  // the peers first: they may map this process's own chunks
    local_.clear();
}

void* PoolFabricAllocator::allocate(std::size_t size) {
    Buffer b = pool_.create_buffer(size);
    const CUdeviceptr va = b.ptr();
    std::lock_guard lock(mu_);
    local_.emplace(va, std::move(b));
    return pointer(va);
}

void PoolFabricAllocator::free(void* ptr) {
    Buffer gone;
    {
        std::lock_guard lock(mu_);
        auto node = local_.extract(address(ptr));
        if (node.empty()) throw PoolError(CUDA_ERROR_INVALID_VALUE, "PoolFabricAllocator::free (not allocated here)");
        gone = std::move(node.mapped());
    }
}  // `gone` returns its chunks to the pool here, outside the lock

std::vector<ExportedHandle> PoolFabricAllocator::get_handle(void* ptr) const {
    std::lock_guard lock(mu_);
    auto it = local_.find(address(ptr));
    if (it == local_.end()) throw PoolError(CUDA_ERROR_INVALID_VALUE, "PoolFabricAllocator::get_handle (not allocated here)");
    std::vector<ExportedHandle> out;
    for (std::size_t i = 0; i < it->second.chunk_count(); ++i) out.push_back(it->second.chunk(i).export_handle());
    return out;
}

void* PoolFabricAllocator::open_handle(std::span<const ExportedHandle> handles) {
    if (handles.empty()) throw PoolError(CUDA_ERROR_INVALID_VALUE, "PoolFabricAllocator::open_handle (no handles)");
    std::size_t total = 0;
    for (const ExportedHandle& h : handles) total += h.size();
    // Exactly the peer's size: each handle's size is a granularity multiple, so the sum is one too.
    PeerView v = PeerView::reserve(total, pool_.options().device, &pool_.counter());
    v.extend(handles);
    const CUdeviceptr va = v.ptr();
    std::lock_guard lock(mu_);
    peer_.emplace(va, std::move(v));
    return pointer(va);
}

void PoolFabricAllocator::close_handle(void* ptr) {
    PeerView gone;
    {
        std::lock_guard lock(mu_);
        auto node = peer_.extract(address(ptr));
        if (node.empty()) throw PoolError(CUDA_ERROR_INVALID_VALUE, "PoolFabricAllocator::close_handle (not opened here)");
        gone = std::move(node.mapped());
    }
}

std::size_t PoolFabricAllocator::allocated() const {
    std::lock_guard lock(mu_);
    return local_.size();
}

std::size_t PoolFabricAllocator::opened() const {
    std::lock_guard lock(mu_);
    return peer_.size();
}

}  // namespace cumemaudit::pool
