// The simulated driver's state and rules (init, classic memory, VMM, multicast, streams); see state.hpp. Rules follow the real driver's (docs/DRIVER.md).
#include "state.hpp"
#include "state_impl.hpp"

#include "config.hpp"
#include "fabric_blob.hpp"
#include "node.hpp"
#include "va_arena.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <pthread.h>
#include <random>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace cumemaudit::sim {

namespace {
SimState* g_instance = nullptr;
}

SimState& SimState::get() {
    static SimState* instance = g_instance = new SimState();  // leaked on purpose, see state.hpp
    return *instance;
}

// fork: the state's lock is held across fork (taken in prepare, released in parent and child), so no
// other thread is halfway through an update when the child's copy is made, and the child's lock is
// free. A real driver's child never hangs on its parent's threads either.
void SimState::before_fork() {
    if (g_instance != nullptr) g_instance->impl_->mu.lock();
}

void SimState::after_fork() {
    if (g_instance != nullptr) g_instance->impl_->mu.unlock();
}

void SimState::on_unload() {
    // dlclose of the driver (the process is not necessarily exiting): the address space goes back when no
    // device memory is out, so the next dlopen can reserve its own. At exit this changes nothing anyone
    // can see: nothing points into an empty arena.
    if (g_instance == nullptr) return;
    Impl& s = *g_instance->impl_;
    std::unique_lock lock(s.mu, std::try_to_lock);
    if (!lock.owns_lock()) return;  // another thread is inside the driver: leave everything as it is
    s.arena.close_if_unused();
}

namespace {
__attribute__((constructor)) void register_fork_handler() {
    pthread_atfork([] { SimState::before_fork(); }, [] { SimState::after_fork(); }, [] { SimState::after_fork(); });
}
__attribute__((destructor)) void release_on_unload() { SimState::on_unload(); }
}  // namespace

SimState::SimState() : impl_(std::make_unique<Impl>()) {}
SimState::~SimState() = default;

CUresult SimState::init() {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (s.initialized) return CUDA_SUCCESS;
    const ConfigResult cfg = read_config(std::getenv("CUMEMAUDIT_SIM_MEMORY"), std::getenv("CUMEMAUDIT_SIM_DEVICES"),
                                             std::getenv("CUMEMAUDIT_SIM_GRAPH_EXEC"));
    if (!cfg.error.empty()) {
        if (!s.config_reported) std::fprintf(stderr, "%s\n", cfg.error.c_str());
        s.config_reported = true;
        return CUDA_ERROR_INVALID_VALUE;
    }
    std::string err;
    s.node = SimNode::open(std::getenv("CUMEMAUDIT_SIM_NODE"), cfg.config, err);
    if (!s.node) {
        if (!s.config_reported) std::fprintf(stderr, "%s\n", err.c_str());
        s.config_reported = true;
        return CUDA_ERROR_OPERATING_SYSTEM;
    }
    s.config = s.node->config();  // a node's first process set its shape
    s.config.graph_exec_bytes = cfg.config.graph_exec_bytes;  // each process's own: its graphs are its own
    const auto n = static_cast<std::size_t>(s.config.devices);
    for (std::size_t d = 0; d < n; ++d) s.contexts.push_back(std::make_unique<CUctx_st>(CUctx_st{static_cast<int>(d), true}));
    s.ctx_retains.assign(n, 0);
    s.primary_active.assign(n, false);
    s.graph_memory.assign(n, 0);
    s.graph_memory_high.assign(n, 0);
    for (std::size_t d = 0; d < n; ++d) {  // each device's default pool, current until one is set
        SimPool p;
        p.device = static_cast<int>(d);
        p.is_default = true;
        p.object = std::make_unique<CUmemPoolHandle_st>(CUmemPoolHandle_st{p.device});
        CUmemoryPool handle = p.object.get();
        s.pools.emplace(handle, std::move(p));
        s.default_pools.push_back(handle);
        s.current_pools.push_back(handle);
    }
    // On a shared node each process draws device addresses from its own slice, so pointers never collide.
    const bool va = s.node->shared() ? s.arena.open_at(s.node->va_slice(), kNodeVaSlice) : s.arena.open();
    if (!va) {
        std::fprintf(stderr, "cumemaudit-sim: cannot reserve address space for device memory\n");
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    s.initialized = true;
    return CUDA_SUCCESS;
}

bool SimState::initialized() const {
    std::lock_guard lock(impl_->mu);
    return impl_->initialized;
}

int SimState::device_count() const {
    std::lock_guard lock(impl_->mu);
    return impl_->initialized ? impl_->config.devices : 0;
}

std::uint64_t SimState::capacity() const {
    std::lock_guard lock(impl_->mu);
    return impl_->config.memory_per_device;
}

CUcontext SimState::current_context() const { return tls_current; }

CUresult SimState::set_current_context(CUcontext ctx) {
    std::lock_guard lock(impl_->mu);
    if (!impl_->initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (ctx != nullptr && !impl_->is_our_context(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    tls_current = ctx;
    return CUDA_SUCCESS;
}

CUresult SimState::current_device(int* dev) const {
    std::lock_guard lock(impl_->mu);
    return impl_->current_device(dev);
}

std::vector<SimNode::ProcessUse> SimState::processes(int device) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.node || device < 0 || device >= s.config.devices) return {};
    SimNode::Lock node(*s.node);
    s.reap_all();
    return s.node->processes(device);
}

// ---------------- classic memory ----------------

CUresult SimState::mem_get_info(std::size_t* free, std::size_t* total) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    int dev = 0;
    if (CUresult r = s.current_device(&dev); r != CUDA_SUCCESS) return r;
    SimNode::Lock node(*s.node);
    s.reap_all();
    *total = s.config.memory_per_device;
    *free = s.config.memory_per_device - s.node->used(dev);
    return CUDA_SUCCESS;
}

CUresult SimState::device_alloc(CUdeviceptr* out, std::size_t bytes) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    int dev = 0;
    if (CUresult r = s.current_device(&dev); r != CUDA_SUCCESS) return r;
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    const std::uint64_t charged = round_up(bytes, kClassicRound);
    SimNode::Lock node(*s.node);
    s.reap_all();
    if (!s.room_for(dev, charged)) return CUDA_ERROR_OUT_OF_MEMORY;
    const std::uint64_t va = s.arena.take(charged, kClassicRound);
    if (va == 0) return CUDA_ERROR_OUT_OF_MEMORY;
    s.node->charge_classic(dev, charged);
    s.classic.emplace(va, Classic{bytes, charged, charged, dev, ClassicKind::device, tls_current});
    *out = va;
    return CUDA_SUCCESS;
}

namespace {
void* host_map(std::size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}
}  // namespace

// Managed and pinned host memory are real host pages, charged to no device, owned by the current context.
CUresult SimState::host_backed_alloc(std::uint64_t* out, std::size_t bytes, bool managed) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    int dev = 0;
    if (CUresult r = s.current_device(&dev); r != CUDA_SUCCESS) return r;
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    void* p = host_map(bytes);
    if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
    *out = reinterpret_cast<std::uint64_t>(p);
    s.classic.emplace(*out, Classic{bytes, 0, bytes, dev, managed ? ClassicKind::managed : ClassicKind::host, tls_current});
    return CUDA_SUCCESS;
}

CUresult SimState::managed_alloc(CUdeviceptr* out, std::size_t bytes) {
    std::uint64_t p = 0;
    const CUresult r = host_backed_alloc(&p, bytes, true);
    if (r == CUDA_SUCCESS) *out = p;
    return r;
}

CUresult SimState::host_alloc(void** out, std::size_t bytes) {
    std::uint64_t p = 0;
    const CUresult r = host_backed_alloc(&p, bytes, false);
    if (r == CUDA_SUCCESS) *out = reinterpret_cast<void*>(p);
    return r;
}

CUresult SimState::device_free(CUdeviceptr ptr) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (ptr == 0) return CUDA_SUCCESS;  // freeing null is a no-op, as for free(3)
    auto it = s.classic.find(ptr);
    // A legacy IPC open is closed, not freed; a pool pointer imported is freed (its pool is set).
    if (it == s.classic.end() || (it->second.kind == ClassicKind::ipc && it->second.pool == nullptr) ||
        (it->second.kind == ClassicKind::host && it->second.pool == nullptr))
        return CUDA_ERROR_INVALID_VALUE;
    SimNode::Lock node(*s.node);
    s.release_classic(it->first, it->second);
    s.classic.erase(it);
    return CUDA_SUCCESS;
}

CUresult SimState::host_free(void* ptr) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    auto it = s.classic.find(reinterpret_cast<std::uint64_t>(ptr));
    if (it == s.classic.end() || it->second.kind != ClassicKind::host || it->second.pool != nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    SimNode::Lock node(*s.node);
    s.release_classic(it->first, it->second);
    s.classic.erase(it);
    return CUDA_SUCCESS;
}

CUresult SimState::host_register(void* ptr, std::size_t bytes, unsigned flags) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    constexpr unsigned known = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_IOMEMORY |
                               CU_MEMHOSTREGISTER_READ_ONLY;
    if (ptr == nullptr || bytes == 0 || (flags & ~known) != 0) return CUDA_ERROR_INVALID_VALUE;
    const std::uint64_t start = reinterpret_cast<std::uint64_t>(ptr), end = start + bytes;
    auto next = s.registered.lower_bound(end);  // the first range at or past the end overlaps nothing
    if (next != s.registered.begin() && std::prev(next)->first + std::prev(next)->second.bytes > start)
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    s.registered.emplace(start, Registration{bytes, tls_current});
    return CUDA_SUCCESS;
}

CUresult SimState::host_unregister(void* ptr) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (s.registered.erase(reinterpret_cast<std::uint64_t>(ptr)) == 0) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    return CUDA_SUCCESS;
}

CUresult SimState::address_range(CUdeviceptr ptr, CUdeviceptr* base, std::size_t* size) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (auto c = s.classic_at(ptr); c != s.classic.end() && c->second.kind != ClassicKind::host) {
        // An IPC open answers with an empty range (measured on the H200): its importer cannot learn the size.
        const bool ipc = c->second.kind == ClassicKind::ipc;
        if (base) *base = ipc ? 0 : c->first;
        if (size) *size = ipc ? 0 : c->second.size;
        return CUDA_SUCCESS;
    }
    // VMM: the mapping containing ptr (NCCL unmaps and frees exactly the range this returns).
    auto m = s.mapping_at(ptr);
    if (m == s.mappings.end()) return CUDA_ERROR_NOT_FOUND;
    if (base) *base = m->first;
    if (size) *size = m->second.size;
    return CUDA_SUCCESS;
}

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
