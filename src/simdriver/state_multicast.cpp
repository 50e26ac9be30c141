// The simulated driver's multicast object rules (create, add a device, bind, unbind); see state.hpp.
#include "state.hpp"
#include "state_impl.hpp"

#include "node.hpp"

#include <time.h>

#include <cstdint>
#include <mutex>

namespace cumemaudit::sim {

// ---------------- multicast objects ----------------
// Modelled on the driver API's documentation and NCCL's, PyTorch's and TransformerEngine's call sequences:
// multicast objects cannot be created on the GPU machine these answers are checked on (docs/DRIVER.md).

namespace {
constexpr std::uint64_t kMulticastMinimum = kGranularity;
}  // namespace

CUresult SimState::multicast_create(CUmemGenericAllocationHandle* out, const CUmulticastObjectProp& prop) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (prop.flags != 0 || prop.numDevices == 0 || prop.size == 0 || prop.size % kMulticastMinimum != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (prop.numDevices > static_cast<unsigned>(s.config.devices)) return CUDA_ERROR_INVALID_VALUE;
    constexpr unsigned long long known = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC;
    if ((prop.handleTypes & ~known) != 0) return CUDA_ERROR_NOT_SUPPORTED;
    SimNode::Lock node(*s.node);
    s.reap_all();
    std::uint64_t nonce[4];
    for (auto& n : nonce) n = s.rng();
    std::uint64_t id = 0;
    if (s.node->create_multicast(prop.size, prop.numDevices, prop.handleTypes, nonce, &id) != SimNode::CreateResult::ok)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *out = s.new_value(id);
    return CUDA_SUCCESS;
}

// The checks a call naming an object and a device makes first: CUDA_SUCCESS with the object's node id.
// Called with both locks held.
CUresult SimState::multicast_of(CUmemGenericAllocationHandle mc, CUdevice dev, std::uint64_t* id) {
    Impl& s = *impl_;
    if (dev < 0 || dev >= s.config.devices) return CUDA_ERROR_INVALID_DEVICE;
    HandleRec* rec = s.live_handle(mc);
    if (rec == nullptr || !s.node->is_multicast(rec->alloc)) return CUDA_ERROR_INVALID_VALUE;
    *id = rec->alloc;
    return CUDA_SUCCESS;
}

CUresult SimState::multicast_add_device(CUmemGenericAllocationHandle mc, CUdevice dev) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    SimNode::Lock node(*s.node);
    std::uint64_t id = 0;
    if (CUresult r = multicast_of(mc, dev, &id); r != CUDA_SUCCESS) return r;
    return s.node->add_team_device(id, dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

void SimState::await_team(CUmemGenericAllocationHandle h) {
    // A bind or a map of a multicast object waits, as the real one does, until every device of the team
    // was added (by this process or the node's others).
    for (;;) {
        {
            std::lock_guard lock(impl_->mu);
            HandleRec* rec = impl_->live_handle(h);
            if (rec == nullptr) return;
            SimNode::Lock node(*impl_->node);
            if (!impl_->node->is_multicast(rec->alloc) || impl_->node->team_complete(rec->alloc)) return;
        }
        timespec t{0, 1'000'000};
        nanosleep(&t, nullptr);
    }
}

CUresult SimState::bind(CUmemGenericAllocationHandle mc, std::size_t mc_offset, std::uint64_t mem,
                        std::size_t mem_offset, std::size_t size) {
    Impl& s = *impl_;
    HandleRec* rec = s.live_handle(mc);
    if (rec == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const std::uint64_t id = rec->alloc;
    if (!s.node->is_multicast(id) || s.node->is_multicast(mem)) return CUDA_ERROR_INVALID_VALUE;
    if (size == 0 || size % kMulticastMinimum != 0 || mc_offset % kMulticastMinimum != 0 ||
        mem_offset % kMulticastMinimum != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (mem_offset + size > s.node->size_of(mem) || mc_offset + size > s.node->size_of(id)) return CUDA_ERROR_INVALID_VALUE;
    const int dev = s.node->device_of(mem);
    if (dev < 0 || !s.node->team_has(id, dev)) return CUDA_ERROR_INVALID_DEVICE;  // host memory is no team's
    // An object that can be shared (or was) takes only memory that can be shared too.
    if (s.node->prop_of(id).requestedHandleTypes != 0 && s.node->prop_of(mem).requestedHandleTypes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!s.node->bind(id, mem, dev, mc_offset, size)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult SimState::multicast_bind_mem(CUmemGenericAllocationHandle mc, std::size_t mc_offset,
                                      CUmemGenericAllocationHandle mem, std::size_t mem_offset, std::size_t size) {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    await_team(mc);
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    HandleRec* m = s.live_handle(mem);
    if (m == nullptr) return CUDA_ERROR_INVALID_VALUE;
    SimNode::Lock node(*s.node);
    return bind(mc, mc_offset, m->alloc, mem_offset, size);
}

CUresult SimState::multicast_bind_addr(CUmemGenericAllocationHandle mc, std::size_t mc_offset, CUdeviceptr ptr,
                                       std::size_t size) {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    await_team(mc);
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    // Memory mapped from cuMemCreate here; pool memory (which the real driver also takes) is not simulated.
    auto it = s.mapping_at(ptr);
    if (it == s.mappings.end()) return CUDA_ERROR_INVALID_VALUE;
    SimNode::Lock node(*s.node);
    return bind(mc, mc_offset, it->second.alloc, ptr - it->first, size);
}

CUresult SimState::multicast_unbind(CUmemGenericAllocationHandle mc, CUdevice dev, std::size_t mc_offset, std::size_t size) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    SimNode::Lock node(*s.node);
    std::uint64_t id = 0;
    if (CUresult r = multicast_of(mc, dev, &id); r != CUDA_SUCCESS) return r;
    if (size == 0 || size % kMulticastMinimum != 0 || mc_offset % kMulticastMinimum != 0 || mc_offset + size > s.node->size_of(id))
        return CUDA_ERROR_INVALID_VALUE;
    s.node->unbind(id, dev, mc_offset, size);  // nothing bound there is not refused
    s.sweep_values();
    return CUDA_SUCCESS;
}

}  // namespace cumemaudit::sim
