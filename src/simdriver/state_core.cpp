// The simulated driver's state and rules for init and classic memory; see state.hpp. VMM lives in
// state_vmm.cpp, multicast in state_multicast.cpp. Rules follow the real driver's (docs/DRIVER.md).
#include "state.hpp"
#include "state_impl.hpp"

#include "config.hpp"
#include "io_memory.hpp"
#include "node.hpp"
#include "va_arena.hpp"

#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
                                         std::getenv("CUMEMAUDIT_SIM_GRAPH_EXEC"), std::getenv("CUMEMAUDIT_SIM_CONTEXT"),
                                         std::getenv("CUMEMAUDIT_SIM_SMS"), std::getenv("CUMEMAUDIT_SIM_HEAP_CODE"),
                                         std::getenv("CUMEMAUDIT_SIM_GREEN_CONTEXT"), std::getenv("CUMEMAUDIT_SIM_JIT_MS"),
                                         std::getenv("CUMEMAUDIT_SIM_STREAM_CHUNK"));
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
    // A node's first process set its shape (the segment keeps only capacity and count); the rest is each
    // process's own: its graphs, its contexts' reservations, its streams, its compile time.
    const Config shape = s.node->config();
    s.config = cfg.config;
    s.config.memory_per_device = shape.memory_per_device;
    s.config.devices = shape.devices;
    const char* loading = std::getenv("CUDA_MODULE_LOADING");  // read at cuInit, as the real driver reads it
    s.eager_loading = loading != nullptr && std::strcmp(loading, "EAGER") == 0;
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

int SimState::multiprocessors() const {
    std::lock_guard lock(impl_->mu);
    // 0 unless set: a caller computing the stack reservation (limit × multiprocessors × threads each) must get
    // what the simulated driver reserves, which is nothing without CUMEMAUDIT_SIM_SMS. Nothing executes here.
    return impl_->config.sms;
}

bool SimState::device_memory(int device, std::uint64_t* total, std::uint64_t* used) {
    std::lock_guard lock(impl_->mu);
    Impl& s = *impl_;
    if (!s.node || device < 0 || device >= s.config.devices) return false;
    SimNode::Lock node(*s.node);
    s.reap_all();
    *total = s.config.memory_per_device;
    *used = s.node->used(device);
    return true;
}

CUcontext SimState::current_context() const { return tls_current; }

CUresult SimState::set_current_context(CUcontext ctx) {
    std::lock_guard lock(impl_->mu);
    if (!impl_->initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (ctx != nullptr && !impl_->is_our_context(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    tls_current = ctx;
    return CUDA_SUCCESS;
}

CUresult SimState::push_context(CUcontext ctx) {
    std::lock_guard lock(impl_->mu);
    if (!impl_->initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (ctx == nullptr || !impl_->is_our_context(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    push_current(ctx);
    return CUDA_SUCCESS;
}

CUresult SimState::pop_context(CUcontext* out) {
    std::lock_guard lock(impl_->mu);
    if (!impl_->initialized) return CUDA_ERROR_NOT_INITIALIZED;
    if (tls_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
    if (out != nullptr) *out = tls_current;
    pop_current();
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
    if ((flags & CU_MEMHOSTREGISTER_IOMEMORY) != 0 && !within_bar(start, end)) return CUDA_ERROR_INVALID_VALUE;
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

}  // namespace cumemaudit::sim
