// Contexts: primary contexts (retained, released, reset), contexts of a program's own (cuCtxCreate,
// cuCtxDestroy), and what the driver says of a pointer. A context's end frees what it owns (tear_down);
// the answers follow the H200's (docs/DRIVER.md, "Context teardown").
#include "state.hpp"
#include "state_impl.hpp"

namespace cumemaudit::sim {

CUresult SimState::primary_ctx_retain(CUcontext* ctx, CUdevice dev) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (CUresult r = s.check_device(dev); r != CUDA_SUCCESS) return r;
    ++s.ctx_retains[static_cast<std::size_t>(dev)];
    s.primary_active[static_cast<std::size_t>(dev)] = true;
    *ctx = s.contexts[static_cast<std::size_t>(dev)].get();
    return CUDA_SUCCESS;
}

CUresult SimState::primary_ctx_release(CUdevice dev) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (CUresult r = s.check_device(dev); r != CUDA_SUCCESS) return r;
    const auto d = static_cast<std::size_t>(dev);
    if (s.ctx_retains[d] == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (--s.ctx_retains[d] == 0) {  // the last release resets the context (the H200 frees its memory)
        SimNode::Lock node(*s.node);
        s.tear_down(s.contexts[d].get());
        s.primary_active[d] = false;
    }
    return CUDA_SUCCESS;
}

// The context object stays, current where it was: the next call through it initialises it again.
CUresult SimState::primary_ctx_reset(CUdevice dev) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (CUresult r = s.check_device(dev); r != CUDA_SUCCESS) return r;
    const auto d = static_cast<std::size_t>(dev);
    SimNode::Lock node(*s.node);
    s.tear_down(s.contexts[d].get());
    s.primary_active[d] = false;
    return CUDA_SUCCESS;
}

CUresult SimState::primary_ctx_state(CUdevice dev, unsigned* flags, int* active) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (CUresult r = s.check_device(dev); r != CUDA_SUCCESS) return r;
    *flags = 0;
    *active = s.primary_active[static_cast<std::size_t>(dev)] ? 1 : 0;
    return CUDA_SUCCESS;
}

CUresult SimState::ctx_create(CUcontext* out, CUdevice dev) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (CUresult r = s.check_device(dev); r != CUDA_SUCCESS) return r;
    s.own_contexts.push_back(std::make_unique<CUctx_st>(CUctx_st{dev, false}));
    if (tls_current != nullptr) tls_below.push_back(tls_current);
    tls_current = s.own_contexts.back().get();
    *out = tls_current;
    return CUDA_SUCCESS;
}

CUresult SimState::ctx_destroy(CUcontext ctx) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = std::find_if(s.own_contexts.begin(), s.own_contexts.end(), [&](const auto& c) { return c.get() == ctx; });
    if (it == s.own_contexts.end()) return CUDA_ERROR_INVALID_CONTEXT;  // a primary context is reset, not destroyed
    {
        SimNode::Lock node(*s.node);
        s.tear_down(ctx);
    }
    std::erase(tls_below, ctx);
    if (tls_current == ctx) {
        tls_current = tls_below.empty() ? nullptr : tls_below.back();
        if (!tls_below.empty()) tls_below.pop_back();
    }
    s.own_contexts.erase(it);
    return CUDA_SUCCESS;
}

CUresult SimState::pointer_attribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    // What the pointer is: a classic allocation, registered host memory or a mapping; else it is unknown.
    std::uint64_t start = 0, size = 0;
    CUcontext ctx = nullptr;
    int device = 0;
    CUmemorytype type = CU_MEMORYTYPE_DEVICE;
    CUmemoryPool pool = nullptr;
    if (auto c = s.classic_at(ptr); c != s.classic.end()) {
        pool = c->second.pool;
        start = c->first;
        size = c->second.size;
        ctx = c->second.ctx;
        device = c->second.device;
        if (c->second.kind == ClassicKind::host) type = CU_MEMORYTYPE_HOST;
        if (c->second.kind == ClassicKind::ipc) start = size = 0;  // an empty range, as cuMemGetAddressRange's (measured)
    } else if (auto r = s.registered.upper_bound(ptr); r != s.registered.begin() && ptr < std::prev(r)->first + std::prev(r)->second.bytes) {
        --r;
        start = r->first;
        size = r->second.bytes;
        ctx = r->second.ctx;
        device = ctx != nullptr ? ctx->device : 0;
        type = CU_MEMORYTYPE_HOST;
    } else if (auto m = s.mapping_at(ptr); m != s.mappings.end()) {
        start = m->first;
        size = m->second.size;
        SimNode::Lock node(*s.node);
        device = std::max(0, s.node->device_of(m->second.alloc));
    } else {
        return CUDA_ERROR_INVALID_VALUE;  // measured: a pointer a context's end freed answers this
    }
    switch (attribute) {
        case CU_POINTER_ATTRIBUTE_CONTEXT: *static_cast<CUcontext*>(data) = ctx; return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = device; return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE: *static_cast<unsigned*>(data) = type; return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *static_cast<CUdeviceptr*>(data) = start; return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<std::size_t*>(data) = size; return CUDA_SUCCESS;
        case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *static_cast<CUmemoryPool*>(data) = pool; return CUDA_SUCCESS;
        default: return CUDA_ERROR_NOT_SUPPORTED;  // not modelled
    }
}

}  // namespace cumemaudit::sim
