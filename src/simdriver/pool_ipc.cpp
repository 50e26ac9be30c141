// Pool IPC: a pool exported as a POSIX fd and imported by another process of the node, and its pointers
// exported and imported. An allocation an importer holds stays charged to the device after the exporter's
// own free, outside its pool's figures, until a later give-back of the pool finds the hold gone (measured on
// the H200: docs/DRIVER.md, "Stream-ordered pools"); the importer's pool and pointer hold nothing of their
// own, and the importer cannot learn the pointer's size.
#include "state.hpp"
#include "state_impl.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

namespace cumemaudit::sim {
namespace {

constexpr std::uint64_t kPoolMagic = 0x6c6f6f702d6d6973ull;  // "sim-pool"
constexpr std::uint64_t kPtrMagic = 0x7274702d6d697363ull;   // "csim-ptr"

// What an exported pool's fd holds (a memfd of its own): the node and the device of the pool.
struct PoolBlob {
    std::uint64_t magic, node;
    std::int32_t device, unused;
};

// The 64 bytes of a CUmemPoolPtrExportData: the node token that keeps the allocation, and proof of it.
struct PtrBlob {
    std::uint64_t magic, node, token, nonce[4];
    std::int32_t device, unused;
};
static_assert(sizeof(PtrBlob) == sizeof(CUmemPoolPtrExportData));

}  // namespace

CUresult SimState::pool_export(void* handle_out, CUmemoryPool pool, CUmemAllocationHandleType type) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.pools.find(pool);
    if (it == s.pools.end() || it->second.imported || handle_out == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || (it->second.handle_types & type) == 0)
        return CUDA_ERROR_INVALID_VALUE;
    const int fd = ::memfd_create("cumemaudit-sim-pool", MFD_CLOEXEC);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    SimNode::Lock node(*s.node);
    const PoolBlob blob{kPoolMagic, s.node->node_id(), it->second.device, 0};
    if (::pwrite(fd, &blob, sizeof blob, 0) != static_cast<ssize_t>(sizeof blob)) {
        ::close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *static_cast<int*>(handle_out) = fd;
    return CUDA_SUCCESS;
}

CUresult SimState::pool_import(CUmemoryPool* out, int fd, CUmemAllocationHandleType type) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_INVALID_VALUE;
    PoolBlob blob{};
    SimNode::Lock node(*s.node);
    if (::pread(fd, &blob, sizeof blob, 0) != static_cast<ssize_t>(sizeof blob) || blob.magic != kPoolMagic ||
        blob.node != s.node->node_id())
        return CUDA_ERROR_INVALID_VALUE;
    SimPool p;
    p.device = blob.device;
    p.imported = true;
    p.object = std::make_unique<CUmemPoolHandle_st>(CUmemPoolHandle_st{p.device});
    CUmemoryPool handle = p.object.get();
    s.pools.emplace(handle, std::move(p));
    *out = handle;
    return CUDA_SUCCESS;
}

CUresult SimState::pool_export_pointer(CUmemPoolPtrExportData* out, CUdeviceptr ptr) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto c = s.classic_at(ptr);
    if (c == s.classic.end() || c->second.pool == nullptr || c->second.kind == ClassicKind::ipc) return CUDA_ERROR_INVALID_VALUE;
    auto pool = s.pools.find(c->second.pool);
    if (pool == s.pools.end() || (pool->second.handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0)
        return CUDA_ERROR_INVALID_VALUE;
    SimNode::Lock node(*s.node);
    PtrBlob blob{kPtrMagic, s.node->node_id(), c->second.node_id, {}, c->second.device, 0};
    if (blob.token == 0) {
        // A token of no device (nothing charged: the pool carries the bytes) that each holder references.
        for (auto& n : blob.nonce) n = s.rng();
        CUmemAllocationProp prop{};
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        if (s.node->create(-1, c->second.size, prop, blob.nonce, &blob.token) != SimNode::CreateResult::ok)
            return CUDA_ERROR_OUT_OF_MEMORY;
        c->second.node_id = blob.token;
    }
    s.node->nonce_of(blob.token, blob.nonce);
    std::memcpy(out, &blob, sizeof blob);
    return CUDA_SUCCESS;
}

CUresult SimState::pool_import_pointer(CUdeviceptr* out, CUmemoryPool pool, const CUmemPoolPtrExportData& data) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.pools.find(pool);
    if (it == s.pools.end() || !it->second.imported) return CUDA_ERROR_INVALID_VALUE;
    PtrBlob blob;
    std::memcpy(&blob, &data, sizeof blob);
    SimNode::Lock node(*s.node);
    s.reap_all();
    if (blob.magic != kPtrMagic || blob.node != s.node->node_id() || !s.node->nonce_matches(blob.token, blob.nonce))
        return CUDA_ERROR_INVALID_VALUE;
    const std::uint64_t size = s.node->size_of(blob.token);
    const std::uint64_t va = s.arena.take(round_up(size, kClassicRound), kClassicRound);
    if (va == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!s.node->add_use(blob.token, 1, 0)) {
        s.arena.give(va, round_up(size, kClassicRound));
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    Classic c{size, 0, round_up(size, kClassicRound), blob.device, ClassicKind::ipc, tls_current, blob.token, 1};
    c.pool = pool;  // freed with cuMemFree or cuMemFreeAsync, unlike a legacy IPC open
    s.classic.emplace(va, c);
    *out = va;
    return CUDA_SUCCESS;
}

}  // namespace cumemaudit::sim
