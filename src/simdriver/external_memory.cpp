// External memory: an opaque fd imported as memory (cuImportExternalMemory), buffers mapped from it, and its
// destroy. The only exporter a node has is the driver itself (a cuMemCreate allocation's POSIX fd), which
// the H200 took as an opaque fd (docs/DRIVER.md, "External memory"): the object and each buffer hold the
// allocation, a buffer after the object's destroy too, and any other fd answers CUDA_ERROR_UNKNOWN.
#include "state.hpp"
#include "state_impl.hpp"

#include <sys/stat.h>
#include <unistd.h>

namespace cumemaudit::sim {

CUresult SimState::external_import(CUexternalMemory* out, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC& desc) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (desc.type != CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD) return CUDA_ERROR_NOT_SUPPORTED;  // none on Linux
    if (desc.size == 0) return CUDA_ERROR_INVALID_VALUE;
    SimNode::Lock node(*s.node);
    s.reap_all();
    struct stat st {};
    if (::fstat(desc.handle.fd, &st) != 0) return CUDA_ERROR_INVALID_VALUE;
    const std::uint64_t id = s.node->export_lookup(st.st_dev, st.st_ino);
    if (id == 0) return CUDA_ERROR_UNKNOWN;  // measured: a memfd no exporter made
    if (desc.size > s.node->size_of(id)) return CUDA_ERROR_INVALID_VALUE;
    if (!s.node->add_use(id, 1, 0)) return CUDA_ERROR_OUT_OF_MEMORY;
    ::close(desc.handle.fd);  // a successful import owns the fd (the driver API's documentation)
    s.external.push_back(std::make_unique<CUextMemory_st>(CUextMemory_st{id, desc.size, std::max(0, s.node->device_of(id))}));
    *out = s.external.back().get();
    return CUDA_SUCCESS;
}

CUresult SimState::external_buffer(CUdeviceptr* out, CUexternalMemory ext, const CUDA_EXTERNAL_MEMORY_BUFFER_DESC& desc) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = std::find_if(s.external.begin(), s.external.end(), [&](const auto& e) { return e.get() == ext; });
    if (it == s.external.end()) return CUDA_ERROR_INVALID_HANDLE;
    if (desc.size == 0 || desc.offset + desc.size > ext->size || desc.flags != 0) return CUDA_ERROR_INVALID_VALUE;
    SimNode::Lock node(*s.node);
    const std::uint64_t mapped = round_up(desc.size, kClassicRound);
    const std::uint64_t va = s.arena.take(mapped, kClassicRound);
    if (va == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!s.node->add_use(ext->alloc, 1, 0)) {
        s.arena.give(va, mapped);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    s.classic.emplace(va, Classic{desc.size, 0, mapped, ext->device, ClassicKind::external, tls_current, ext->alloc});
    *out = va;
    return CUDA_SUCCESS;
}

CUresult SimState::external_destroy(CUexternalMemory ext) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = std::find_if(s.external.begin(), s.external.end(), [&](const auto& e) { return e.get() == ext; });
    if (it == s.external.end()) return CUDA_ERROR_INVALID_HANDLE;
    SimNode::Lock node(*s.node);
    s.node->add_use(ext->alloc, -1, 0);
    s.maybe_free(ext->alloc);
    s.external.erase(it);
    return CUDA_SUCCESS;
}

}  // namespace cumemaudit::sim
