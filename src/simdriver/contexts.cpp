// Contexts: primary contexts (retained, released, reset), contexts of a program's own (cuCtxCreate,
// cuCtxDestroy), their limits, and what the driver says of a pointer. A context reserves device memory while
// it lives (a fixed part and the kernel stack) and its end frees what it owns (tear_down); the answers follow
// the H200's (docs/DRIVER.md, "Context teardown" and "Contexts, kernel stacks and launches").
#include "state.hpp"
#include "state_impl.hpp"

#include "common/heap_bytes.hpp"

#include <algorithm>
#include <limits>

namespace cumemaudit::sim {

namespace {
constexpr std::size_t kStackStep = 16;  // measured: a stack limit of 1000 reads back as 1008
}

CUresult SimState::Impl::begin_context(CUcontext ctx) {
    // A primary context used after its reset without a retain (a limit set, a launch) may hold stack already.
    end_context(ctx);
    const std::uint64_t bytes = config.context_bytes + stack_bytes(kDefaultLimits[CU_LIMIT_STACK_SIZE]);
    // Before it refuses, the driver takes back the pools' idle memory, as for any device memory it needs.
    if (bytes != 0 && (!room_for(ctx->device, bytes) || !node->charge_classic(ctx->device, bytes)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    ctx->reserved = bytes;
    ctx->limits = kDefaultLimits;
    if (CUresult r = eager_library_modules(ctx); r != CUDA_SUCCESS) {
        end_context(ctx);
        return r;
    }
    return CUDA_SUCCESS;
}

CUresult SimState::Impl::set_stack(CUcontext ctx, std::size_t limit) {
    if (limit > std::numeric_limits<std::size_t>::max() - kStackStep) return CUDA_ERROR_OUT_OF_MEMORY;
    limit = round_up(limit, kStackStep);
    // Beyond what any device holds, checked before the product can overflow.
    if (config.sms != 0 && limit > config.memory_per_device / (static_cast<std::uint64_t>(config.sms) * kThreadsPerSm))
        return CUDA_ERROR_OUT_OF_MEMORY;
    const std::uint64_t now = ctx->stack_given_back ? 0 : stack_bytes(ctx->limits[CU_LIMIT_STACK_SIZE]);
    const std::uint64_t want = stack_bytes(limit);
    if (want > now) {
        if (!room_for(ctx->device, want - now) || !node->charge_classic(ctx->device, want - now)) return CUDA_ERROR_OUT_OF_MEMORY;
        ctx->reserved += want - now;
    } else {
        node->uncharge_classic(ctx->device, now - want);
        ctx->reserved -= now - want;
    }
    ctx->limits[CU_LIMIT_STACK_SIZE] = limit;
    ctx->stack_given_back = false;
    return CUDA_SUCCESS;
}

CUresult SimState::Impl::stack_for_launch(CUcontext ctx, std::size_t local) {
    const std::size_t limit = ctx->limits[CU_LIMIT_STACK_SIZE];
    if (local <= limit && !ctx->stack_given_back) return CUDA_SUCCESS;
    const CUresult r = set_stack(ctx, std::max(local, limit));
    if (r == CUDA_ERROR_OUT_OF_MEMORY && !ctx->stack_given_back) {
        // Measured on the H200: the refusing context's whole stack is given back; its limit still reads the same.
        const std::uint64_t held = stack_bytes(limit);
        node->uncharge_classic(ctx->device, held);
        ctx->reserved -= held;
        ctx->stack_given_back = true;
    }
    return r;
}

void SimState::Impl::end_context(CUcontext ctx) {
    node->uncharge_classic(ctx->device, ctx->reserved);
    ctx->reserved = 0;
    ctx->limits = kDefaultLimits;
    ctx->stack_given_back = false;
    ctx->heap_fixed = ctx->fifo_fixed = ctx->heap_code_taken = false;
    ctx->streams_live = 0;
    ctx->stream_room = 1;
    std::erase_if(streams, [&](CUstream st) {  // its streams end with it
        if (home(st->ctx) != ctx) return false;
        delete st;
        return true;
    });
}

CUresult SimState::Impl::heap_for_launch(CUcontext ctx) {
    if (ctx->heap_fixed) return CUDA_SUCCESS;
    // Measured: a heap larger than free memory is accepted by cuCtxSetLimit and refused here.
    const std::uint64_t bytes = heap_reservation(ctx->limits[CU_LIMIT_MALLOC_HEAP_SIZE]);
    if (!room_for(ctx->device, bytes) || !node->charge_classic(ctx->device, bytes)) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    ctx->reserved += bytes;
    ctx->heap_fixed = true;
    return CUDA_SUCCESS;
}

// A primary context begins at its first retain, or its first after a reset or last release: it reserves then.
CUresult SimState::primary_ctx_retain(CUcontext* ctx, CUdevice dev) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (CUresult r = s.check_device(dev); r != CUDA_SUCCESS) return r;
    const auto d = static_cast<std::size_t>(dev);
    if (!s.primary_active[d]) {
        SimNode::Lock node(*s.node);
        s.reap_all();
        if (CUresult r = s.begin_context(s.contexts[d].get()); r != CUDA_SUCCESS) return r;
    }
    ++s.ctx_retains[d];
    s.primary_active[d] = true;
    *ctx = s.contexts[d].get();
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
        s.end_context(s.contexts[d].get());
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
    s.end_context(s.contexts[d].get());
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
    auto made = std::make_unique<CUctx_st>(CUctx_st{dev, false});
    {
        SimNode::Lock node(*s.node);
        s.reap_all();
        if (CUresult r = s.begin_context(made.get()); r != CUDA_SUCCESS) return r;
    }
    s.own_contexts.push_back(std::move(made));
    push_current(s.own_contexts.back().get());
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
        s.end_context(ctx);
    }
    forget_current(ctx);
    s.own_contexts.erase(it);
    return CUDA_SUCCESS;
}

// The current context's limits. The stack's reservation moves at once; the printf FIFO and malloc heap are
// only remembered (what they reserve is not modelled). cuda.h: the device runtime's sync depth is for devices
// below compute capability 9.0, and the CIG limits are only read on a context that is not CIG.
CUresult SimState::ctx_get_limit(std::size_t* value, CUlimit limit) const {
    std::lock_guard lock(impl_->mu);
    int dev = 0;
    if (CUresult r = impl_->current_device(&dev); r != CUDA_SUCCESS) return r;
    if (static_cast<int>(limit) < 0 || static_cast<int>(limit) >= CU_LIMIT_MAX) return CUDA_ERROR_INVALID_VALUE;
    if (limit == CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH) return CUDA_ERROR_UNSUPPORTED_LIMIT;
    *value = Impl::home(tls_current)->limits[limit];
    return CUDA_SUCCESS;
}

CUresult SimState::ctx_set_limit(CUlimit limit, std::size_t value) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    int dev = 0;
    if (CUresult r = s.current_device(&dev); r != CUDA_SUCCESS) return r;
    const CUcontext ctx = Impl::home(tls_current);
    switch (limit) {
        case CU_LIMIT_STACK_SIZE: {
            SimNode::Lock node(*s.node);
            s.reap_all();
            return s.set_stack(ctx, value);
        }
        case CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH:
        case CU_LIMIT_SHMEM_SIZE:
        case CU_LIMIT_CIG_ENABLED:
            return CUDA_ERROR_UNSUPPORTED_LIMIT;
        case CU_LIMIT_MAX_L2_FETCH_GRANULARITY:  // a hint from 0 to 128 bytes, clamped
            ctx->limits[limit] = std::min<std::size_t>(value, 128);
            return CUDA_SUCCESS;
        case CU_LIMIT_MALLOC_HEAP_SIZE:
        case CU_LIMIT_PRINTF_FIFO_SIZE: {
            // Fixed by the first launch of a kernel that uses it (measured, raising or lowering alike).
            const bool fixed = limit == CU_LIMIT_MALLOC_HEAP_SIZE ? ctx->heap_fixed : ctx->fifo_fixed;
            if (fixed) return CUDA_ERROR_INVALID_VALUE;
            ctx->limits[limit] = value;
            return CUDA_SUCCESS;
        }
        case CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT:
        case CU_LIMIT_PERSISTING_L2_CACHE_SIZE:
        case CU_LIMIT_CIG_SHMEM_FALLBACK_ENABLED:
            ctx->limits[limit] = value;
            return CUDA_SUCCESS;
        default:
            return CUDA_ERROR_INVALID_VALUE;
    }
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

namespace cumemaudit::sim {

CUresult SimState::resource_desc(CUdevResourceDesc* out, unsigned sms) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    s.resource_descs.push_back(std::make_unique<CUdevResourceDesc_st>(CUdevResourceDesc_st{sms}));
    *out = s.resource_descs.back().get();
    return CUDA_SUCCESS;
}

// Measured on an H100: the creation took 6 MiB that its destroy did not give back (Config::green_context_bytes,
// held here by the primary context until its end), and its context shares the primary's stack limit and
// module code (docs/DRIVER.md, "Device heap, printf FIFO and green contexts").
CUresult SimState::green_create(CUgreenCtx* out, CUdevResourceDesc desc, CUdevice dev) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (CUresult r = s.check_device(dev); r != CUDA_SUCCESS) return r;
    auto known = [&](const auto& d) { return d.get() == desc; };
    if (std::none_of(s.resource_descs.begin(), s.resource_descs.end(), known)) return CUDA_ERROR_INVALID_VALUE;
    const auto d = static_cast<std::size_t>(dev);
    if (!s.primary_active[d]) return CUDA_ERROR_INVALID_CONTEXT;  // not modelled: see docs/DRIVER.md
    CUcontext primary = s.contexts[d].get();
    const std::uint64_t bytes = s.config.green_context_bytes;
    if (bytes != 0) {
        SimNode::Lock node(*s.node);
        s.reap_all();
        if (!s.room_for(dev, bytes) || !s.node->charge_classic(dev, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
    }
    primary->reserved += bytes;
    auto g = std::make_unique<CUgreenCtx_st>();
    g->ctx = std::make_unique<CUctx_st>(CUctx_st{dev, false});
    g->ctx->home = primary;
    g->sms = desc->sms;
    *out = g.get();
    s.green_contexts.push_back(std::move(g));
    return CUDA_SUCCESS;
}

// Measured on an H200: what its creation took, and a buffer allocated in its context, stayed after it; here
// both go when the primary context ends.
CUresult SimState::green_destroy(CUgreenCtx g) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = std::find_if(s.green_contexts.begin(), s.green_contexts.end(), [&](const auto& p) { return p.get() == g; });
    if (it == s.green_contexts.end()) return CUDA_ERROR_INVALID_HANDLE;
    CUcontext ctx = (*it)->ctx.get();
    s.retired_green.push_back(std::move((*it)->ctx));
    forget_current(ctx);
    s.green_contexts.erase(it);
    return CUDA_SUCCESS;
}

CUresult SimState::green_context(CUcontext* out, CUgreenCtx g) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = std::find_if(s.green_contexts.begin(), s.green_contexts.end(), [&](const auto& p) { return p.get() == g; });
    if (it == s.green_contexts.end()) return CUDA_ERROR_INVALID_HANDLE;
    *out = (*it)->ctx.get();
    return CUDA_SUCCESS;
}

}  // namespace cumemaudit::sim
