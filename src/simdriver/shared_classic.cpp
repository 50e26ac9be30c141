// Device memory shared outside its allocation: legacy IPC handles (cuIpcGetMemHandle / cuIpcOpenMemHandle)
// and dma-buf fds (cuMemGetHandleForAddressRange). Sharing turns a classic allocation's charge into a node
// allocation's (state_impl.hpp, Classic::node_id), so the exporter's free leaves it charged while an
// importer holds it open or an fd is open, as the H200 does (docs/DRIVER.md, "Shared classic memory").
#include "state.hpp"
#include "state_impl.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace cumemaudit::sim {
namespace {

constexpr std::uint64_t kIpcMagic = 0x6370692d6d697363ull;  // "csim-ipc"

// The 64 bytes of a CUipcMemHandle: which node allocation, and proof that the handle came from it.
struct IpcBlob {
    std::uint64_t magic, node, alloc, nonce[4], unused;
};
static_assert(sizeof(IpcBlob) == sizeof(CUipcMemHandle));

}  // namespace

std::uint64_t SimState::Impl::share(Classic& c) {
    Impl& s = *this;
    if (c.node_id != 0) return c.node_id;
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = c.device;
    std::uint64_t nonce[4];
    for (auto& n : nonce) n = s.rng();
    s.node->uncharge_classic(c.device, c.charged);
    std::uint64_t id = 0;
    if (s.node->create(c.device, c.charged, prop, nonce, &id) != SimNode::CreateResult::ok) {
        s.node->charge_classic(c.device, c.charged);
        return 0;
    }
    return c.node_id = id;
}

CUresult SimState::ipc_get(CUipcMemHandle* out, CUdeviceptr ptr) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto c = s.classic_at(ptr);
    // Only cuMemAlloc memory: stream-ordered memory is refused (measured), as are host and managed memory.
    if (c == s.classic.end() || c->second.kind != ClassicKind::device || c->second.ctx == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    SimNode::Lock node(*s.node);
    const std::uint64_t id = s.share(c->second);
    if (id == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    IpcBlob blob{kIpcMagic, s.node->node_id(), id, {}, 0};
    s.node->nonce_of(id, blob.nonce);
    std::memcpy(out, &blob, sizeof blob);  // the same handle for every pointer into the allocation (measured)
    return CUDA_SUCCESS;
}

CUresult SimState::ipc_open(CUdeviceptr* out, const CUipcMemHandle& handle) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    int dev = 0;
    if (CUresult r = s.current_device(&dev); r != CUDA_SUCCESS) return r;
    IpcBlob blob;
    std::memcpy(&blob, &handle, sizeof blob);
    SimNode::Lock node(*s.node);
    s.reap_all();
    if (blob.magic != kIpcMagic || blob.node != s.node->node_id() || !s.node->nonce_matches(blob.alloc, blob.nonce))
        return CUDA_ERROR_INVALID_VALUE;
    for (auto& [start, c] : s.classic) {
        if (c.node_id != blob.alloc) continue;
        if (c.kind != ClassicKind::ipc) return CUDA_ERROR_INVALID_CONTEXT;  // its own memory (measured)
        ++c.opens;  // opened again: the same pointer, one more close to come
        *out = start;
        return CUDA_SUCCESS;
    }
    const std::uint64_t size = s.node->size_of(blob.alloc);
    const std::uint64_t va = s.arena.take(size, kClassicRound);
    if (va == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!s.node->add_use(blob.alloc, 1, 0)) {
        s.arena.give(va, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    s.classic.emplace(va, Classic{size, 0, size, s.node->device_of(blob.alloc), ClassicKind::ipc, tls_current, blob.alloc, 1});
    *out = va;
    return CUDA_SUCCESS;
}

CUresult SimState::ipc_close(CUdeviceptr ptr) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.classic.find(ptr);
    if (it == s.classic.end() || it->second.kind != ClassicKind::ipc) return CUDA_ERROR_INVALID_VALUE;
    if (--it->second.opens > 0) return CUDA_SUCCESS;
    SimNode::Lock node(*s.node);
    s.release_classic(it->first, it->second);
    s.classic.erase(it);
    return CUDA_SUCCESS;
}

CUresult SimState::dma_buf(int* fd, CUdeviceptr ptr, std::size_t size) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    SimNode::Lock node(*s.node);
    std::uint64_t id = 0;
    if (auto c = s.classic_at(ptr); c != s.classic.end() && c->second.kind == ClassicKind::device) {
        if (ptr + size > c->first + c->second.size) return CUDA_ERROR_INVALID_VALUE;
        if ((id = s.share(c->second)) == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    } else if (auto m = s.mapping_at(ptr); m != s.mappings.end()) {
        if (ptr + size > m->first + m->second.size) return CUDA_ERROR_INVALID_VALUE;
        id = m->second.alloc;
    } else {
        return CUDA_ERROR_INVALID_VALUE;
    }
    // The fd pins the whole allocation, as an exported POSIX fd does (node.hpp): the write end of a pipe.
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    struct stat st {};
    if (::fstat(fds[1], &st) != 0 || !s.node->add_export(id, fds[0], st.st_dev, st.st_ino)) {
        ::close(fds[0]);
        ::close(fds[1]);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *fd = fds[1];
    return CUDA_SUCCESS;
}

}  // namespace cumemaudit::sim
