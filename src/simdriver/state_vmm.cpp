// The simulated driver's virtual memory management rules (cuMemCreate, reserve, map, access, export and
// import of handles); see state.hpp. Rules follow the real driver's (docs/DRIVER.md).
#include "state.hpp"
#include "state_impl.hpp"

#include "fabric_blob.hpp"
#include "node.hpp"
#include "va_arena.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

namespace cumemaudit::sim {

// ---------------- virtual memory management ----------------

CUresult SimState::mem_create(CUmemGenericAllocationHandle* out, std::size_t size, const CUmemAllocationProp& prop) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (prop.type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
    int dev = -1;  // host memory: no device's
    switch (prop.location.type) {
        case CU_MEM_LOCATION_TYPE_DEVICE:
            dev = prop.location.id;
            if (dev < 0 || dev >= s.config.devices) return CUDA_ERROR_INVALID_DEVICE;
            break;
        case CU_MEM_LOCATION_TYPE_HOST:
        case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
            break;
        case CU_MEM_LOCATION_TYPE_HOST_NUMA:  // one NUMA node, 0
            if (prop.location.id != 0) return CUDA_ERROR_INVALID_VALUE;
            break;
        default:
            return CUDA_ERROR_INVALID_VALUE;
    }
    constexpr unsigned known = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC;
    if ((prop.requestedHandleTypes & ~known) != 0) return CUDA_ERROR_NOT_SUPPORTED;
    if (size == 0 || size % kGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
    SimNode::Lock node(*s.node);
    s.reap_all();
    std::uint64_t nonce[4];
    for (auto& n : nonce) n = s.rng();
    std::uint64_t id = 0;
    if (dev >= 0 && !s.room_for(dev, size)) return CUDA_ERROR_OUT_OF_MEMORY;
    if (s.node->create(dev, size, prop, nonce, &id) != SimNode::CreateResult::ok) return CUDA_ERROR_OUT_OF_MEMORY;
    *out = s.new_value(id);
    return CUDA_SUCCESS;
}

CUresult SimState::mem_release(CUmemGenericAllocationHandle h) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    HandleRec* rec = s.live_handle(h);
    if (rec == nullptr) return CUDA_ERROR_INVALID_VALUE;  // unknown, or already released
    --rec->refs;
    const std::uint64_t id = rec->alloc;
    SimNode::Lock node(*s.node);
    s.node->add_use(id, -1, 0);
    s.maybe_free(id);  // while mapped this frees nothing: the memory goes at the last unmap
    return CUDA_SUCCESS;
}

CUresult SimState::address_reserve(CUdeviceptr* out, std::size_t size, std::size_t alignment) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (size == 0 || size % kGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
    if (alignment != 0 && (alignment & (alignment - 1)) != 0) return CUDA_ERROR_INVALID_VALUE;
    const std::uint64_t va = s.arena.take(size, std::max<std::uint64_t>(alignment, kGranularity));
    if (va == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    s.reservations.emplace(va, size);
    *out = va;
    return CUDA_SUCCESS;
}

CUresult SimState::address_free(CUdeviceptr ptr, std::size_t size) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.reservations.find(ptr);
    if (it == s.reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;  // exact match only
    auto m = s.mappings.lower_bound(ptr);
    if (m != s.mappings.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;  // still mapped
    s.reservations.erase(it);
    s.arena.give(ptr, size);
    return CUDA_SUCCESS;
}

CUresult SimState::map(CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle h) {
    if (initialized()) await_team(h);
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (offset != 0 || size == 0 || size % kGranularity != 0 || ptr % kGranularity != 0) return CUDA_ERROR_INVALID_VALUE;
    HandleRec* rec = s.live_handle(h);
    if (rec == nullptr) return CUDA_ERROR_INVALID_VALUE;
    SimNode::Lock node(*s.node);
    if (size > s.node->size_of(rec->alloc)) return CUDA_ERROR_INVALID_VALUE;
    auto r = s.reservations.upper_bound(ptr);  // the reservation must hold the whole range
    if (r == s.reservations.begin()) return CUDA_ERROR_INVALID_VALUE;
    --r;
    if (ptr + size > r->first + r->second) return CUDA_ERROR_INVALID_VALUE;
    auto m = s.mappings.lower_bound(ptr);  // and no existing mapping may overlap it
    if (m != s.mappings.end() && m->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
    if (s.mapping_at(ptr) != s.mappings.end()) return CUDA_ERROR_INVALID_VALUE;
    if (!s.node->add_use(rec->alloc, 0, 1)) return CUDA_ERROR_OUT_OF_MEMORY;  // node table of users full
    s.mappings.emplace(ptr, Mapping{size, h, rec->alloc, {}});
    return CUDA_SUCCESS;
}

CUresult SimState::unmap(CUdeviceptr ptr, std::size_t size) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (size == 0) return CUDA_ERROR_INVALID_VALUE;
    auto tiles = s.tiling(ptr, size);  // whole mapped ranges only
    if (tiles.empty()) {
        // Measured on an H200 (docs/DRIVER.md): unmapping a reserved range that nothing maps any more is
        // not refused. A partial range, or one outside every reservation, is (documented; probe pending).
        const auto r = s.reservations.upper_bound(ptr);
        const bool reserved = r != s.reservations.begin() && ptr + size <= std::prev(r)->first + std::prev(r)->second;
        const auto m = s.mappings.lower_bound(ptr + size);
        const bool overlaps = m != s.mappings.begin() && std::prev(m)->first + std::prev(m)->second.size > ptr;
        return reserved && !overlaps ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    std::vector<std::uint64_t> touched;
    SimNode::Lock node(*s.node);
    for (auto it : tiles) {
        const std::uint64_t id = it->second.alloc;
        s.node->add_use(id, 0, -1);
        touched.push_back(id);
        s.mappings.erase(it);
    }
    for (auto id : touched) s.maybe_free(id);
    return CUDA_SUCCESS;
}

CUresult SimState::set_access(CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc, std::size_t count) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (size == 0 || count == 0) return CUDA_ERROR_INVALID_VALUE;
    for (std::size_t i = 0; i < count; ++i) {
        if (desc[i].flags > CU_MEM_ACCESS_FLAGS_PROT_READWRITE) return CUDA_ERROR_INVALID_VALUE;
        if (host_access(desc[i].location)) continue;  // the host's own access (NCCL's host buffers ask it)
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
        if (desc[i].location.id < 0 || desc[i].location.id >= s.config.devices) return CUDA_ERROR_INVALID_DEVICE;
    }
    auto tiles = s.tiling(ptr, size);  // the range must be fully mapped
    if (tiles.empty()) return CUDA_ERROR_INVALID_VALUE;
    for (auto it : tiles)
        for (std::size_t i = 0; i < count; ++i)
            it->second.access[host_access(desc[i].location) ? kHostAccess : desc[i].location.id] = desc[i].flags;
    return CUDA_SUCCESS;
}

CUresult SimState::get_access(unsigned long long* flags, const CUmemLocation& loc, CUdeviceptr ptr) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    const bool host = host_access(loc);
    if (!host && (loc.type != CU_MEM_LOCATION_TYPE_DEVICE || loc.id < 0 || loc.id >= s.config.devices))
        return CUDA_ERROR_INVALID_VALUE;
    auto m = s.mapping_at(ptr);
    if (m == s.mappings.end()) return CUDA_ERROR_INVALID_VALUE;
    auto a = m->second.access.find(host ? kHostAccess : loc.id);
    *flags = a == m->second.access.end() ? static_cast<unsigned long long>(CU_MEM_ACCESS_FLAGS_PROT_NONE) : a->second;
    return CUDA_SUCCESS;
}

CUresult SimState::retain_handle(CUmemGenericAllocationHandle* out, CUdeviceptr addr) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto m = s.mapping_at(addr);
    if (m == s.mappings.end()) return CUDA_ERROR_INVALID_VALUE;
    // The value mapped there, even when its own references were all released: the mapping keeps
    // the allocation (and with it the value) alive, and this makes it referenced again.
    SimNode::Lock node(*s.node);
    if (!s.node->add_use(m->second.alloc, 1, 0)) return CUDA_ERROR_OUT_OF_MEMORY;
    ++s.handles.at(m->second.handle).refs;
    *out = m->second.handle;
    return CUDA_SUCCESS;
}

CUresult SimState::export_handle(void* out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType type) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    HandleRec* rec = s.live_handle(h);
    if (rec == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR && type != CU_MEM_HANDLE_TYPE_FABRIC)
        return CUDA_ERROR_NOT_SUPPORTED;
    SimNode::Lock node(*s.node);
    if ((s.node->prop_of(rec->alloc).requestedHandleTypes & type) == 0) return CUDA_ERROR_INVALID_VALUE;
    if (type == CU_MEM_HANDLE_TYPE_FABRIC) {
        FabricRef ref{s.node->node_id(), rec->alloc, {}};
        s.node->nonce_of(rec->alloc, ref.nonce);
        *static_cast<CUmemFabricHandle*>(out) = encode_fabric(ref);
        return CUDA_SUCCESS;  // a fabric handle is only a name: it pins nothing
    }
    // POSIX fd: the program gets the write end of a pipe; the read end tells us when all its copies
    // are closed (POLLHUP), and the pipe's inode identifies the allocation on import (node.hpp).
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return CUDA_ERROR_OUT_OF_MEMORY;
    struct stat st {};
    if (::fstat(fds[1], &st) != 0) {
        ::close(fds[0]);
        ::close(fds[1]);
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    if (!s.node->add_export(rec->alloc, fds[0], st.st_dev, st.st_ino)) {
        ::close(fds[0]);
        ::close(fds[1]);
        return CUDA_ERROR_OUT_OF_MEMORY;  // the node's export table is full
    }
    *static_cast<int*>(out) = fds[1];
    return CUDA_SUCCESS;
}

CUresult SimState::import_handle(CUmemGenericAllocationHandle* out, void* os_handle, CUmemAllocationHandleType type) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    std::uint64_t id = 0;
    SimNode::Lock node(*s.node);
    if (type == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
        const int fd = static_cast<int>(reinterpret_cast<std::intptr_t>(os_handle));
        struct stat st {};
        // A closed fd number: the real driver answers UNKNOWN (measured on the H200, 2026-12-01).
        if (::fstat(fd, &st) != 0) return CUDA_ERROR_UNKNOWN;
        id = s.node->export_lookup(st.st_dev, st.st_ino);
        if (id == 0) return CUDA_ERROR_INVALID_VALUE;
    } else if (type == CU_MEM_HANDLE_TYPE_FABRIC) {
        if (os_handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
        const auto ref = decode_fabric(*static_cast<const CUmemFabricHandle*>(os_handle));
        if (!ref || ref->node != s.node->node_id()) return CUDA_ERROR_INVALID_VALUE;
        if (!s.node->nonce_matches(ref->alloc, ref->nonce)) return CUDA_ERROR_INVALID_VALUE;  // freed since export, or forged
        id = ref->alloc;
    } else {
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    if (!s.node->add_use(id, 1, 0)) return CUDA_ERROR_OUT_OF_MEMORY;  // node table of users full
    // A new value with one reference, even in the exporting process (measured).
    *out = s.new_value(id);
    return CUDA_SUCCESS;
}

CUresult SimState::properties(CUmemAllocationProp* out, CUmemGenericAllocationHandle h) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    HandleRec* rec = s.live_handle(h);
    if (rec == nullptr) return CUDA_ERROR_INVALID_VALUE;
    SimNode::Lock node(*s.node);
    if (s.node->is_multicast(rec->alloc)) return CUDA_ERROR_INVALID_VALUE;  // not memory: no allocation properties
    *out = s.node->prop_of(rec->alloc);
    return CUDA_SUCCESS;
}

}  // namespace cumemaudit::sim
