// state_impl: the simulated driver's state itself, shared by the files that implement SimState (state_core.cpp,
// state_vmm.cpp, state_multicast.cpp, contexts.cpp, kernels.cpp, shared_classic.cpp). Private to the driver; every
// member is used with `mu` held.
#pragma once

#include "state.hpp"

#include "config.hpp"
#include "node.hpp"
#include "va_arena.hpp"

#include "common/heap_bytes.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <map>
#include <tuple>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

// The opaque handle types of cuda.h are ours to define in the driver.

// A context's limits (cuCtxGetLimit) as a new one has them: the H200's stack, printf FIFO and malloc heap
// (measured), the pending launch count cuda.h documents, 0 for the rest.
inline constexpr std::array<std::size_t, CU_LIMIT_MAX> kDefaultLimits = [] {
    std::array<std::size_t, CU_LIMIT_MAX> l{};
    l[CU_LIMIT_STACK_SIZE] = 1024;
    l[CU_LIMIT_PRINTF_FIFO_SIZE] = 8650752;
    l[CU_LIMIT_MALLOC_HEAP_SIZE] = cumemaudit::kDefaultHeapBytes;
    l[CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048;
    return l;
}();

// Where a context keeps module code or module globals: offsets only grow and are never reused, and each
// kModuleChunk of it is charged to the context's device while a live range overlaps it.
struct ModuleHeap {
    std::uint64_t next = 0;
    std::map<std::uint64_t, unsigned> live;  // chunk index -> live ranges overlapping it
};
// A context's code heap begins with the driver's own code in its first chunk, which the context's reservation
// holds (never charged apart, never given back): the first small module of a context takes nothing (measured
// twice: a fresh context's two small kernels, and a library kernel's first launch), and a first large kernel
// crosses into the next chunk. Any start from 1,622,017 to 1,728,512 bytes gives every measured answer in
// docs/DRIVER.md, "Module code and globals"; this one is in the middle.
constexpr std::uint64_t kDriverCodeBytes = 1675264;
inline ModuleHeap driver_code_heap() { return ModuleHeap{kDriverCodeBytes, {{0, 1}}}; }
struct HeapRange {
    std::uint64_t offset = 0, bytes = 0;  // bytes 0: nothing taken
};

struct CUctx_st {
    int device;
    bool primary;  // a device's primary context, which lives as long as the driver; else cuCtxCreate's
    // Device memory it holds while it lives, charged as a classic allocation of its process (NVML charges a
    // process its contexts): Config::context_bytes and the kernel stack at its current limit.
    std::uint64_t reserved = 0;
    std::array<std::size_t, CU_LIMIT_MAX> limits = kDefaultLimits;
    // A launch refused for want of stack gave the whole stack back (measured); the next launch or stack
    // limit set reserves it again, at the limit then.
    bool stack_given_back = false;
    // The device heap (malloc in kernels) and the printf FIFO: the first launch of a kernel that uses one
    // fixes that limit (measured: set again, CUDA_ERROR_INVALID_VALUE); the heap's bytes are reserved then,
    // the FIFO takes no device memory. `heap_code_taken`: what the first load of a kernel that calls malloc
    // brings with it (Config::heap_code_bytes) is held.
    bool heap_fixed = false, fifo_fixed = false, heap_code_taken = false;
    // Its streams: how many live, and how many it holds room for (Config::stream_chunk_bytes). Room is kept
    // when a stream is destroyed, and reused (measured).
    unsigned streams_live = 0, stream_room = 1;
    ModuleHeap code = driver_code_heap(), data{};
    // A green context's: the primary context of its device, whose module heaps, limits, stack and device heap
    // it shares (measured: its stack limit reads the primary's, and a module loaded and launched in it took
    // nothing). Null for every other context.
    CUcontext home = nullptr;  // its modules' code and globals (docs/DRIVER.md, "Module code and globals")
};
// A green context (cuGreenCtxCreate): a share of a device's multiprocessors, and the context that runs on
// them (cuCtxFromGreenCtx).
struct CUgreenCtx_st {
    std::unique_ptr<CUctx_st> ctx;
    unsigned sms = 0;
};
// What cuDevResourceGenerateDesc made of its resources: the multiprocessors they add up to.
struct CUdevResourceDesc_st {
    unsigned sms = 0;
};
// A module loaded from PTX (nothing is compiled): its kernels, each with the local memory one of its threads
// needs, which a launch may raise the context's stack to, and the code it takes on the device once loaded.
struct CUfunc_st {
    CUmod_st* module;
    std::string name;
    std::uint64_t local_bytes = 0;
    std::uint64_t code_bytes = 0;
    bool loaded = false;  // its code taken in its context's code heap (lazily: at the first get)
    HeapRange code{};
    bool uses_heap = false, prints = false;  // its body calls malloc or free, vprintf
};
struct CUmod_st {
    CUcontext ctx;  // the context it was loaded into, which unloads it at its end
    std::vector<std::unique_ptr<CUfunc_st>> functions;
    CUlibrary library = nullptr;  // the library it was made for (cuLibraryGetModule), which unloads it
    HeapRange globals{};          // its module-scope .global variables, taken at its making
};
// A kernel of a library (cuLibraryGetKernel): a name that becomes a function in each context that asks.
struct CUkern_st {
    CUlibrary library;
    std::string name;
};
// A library (cuLibraryLoadData): loaded into no context; its image becomes a module of the current context
// when one is asked for (or at once, under eager loading).
struct CUlib_st {
    std::string image;
    std::map<CUcontext, CUmodule> modules;
    std::vector<std::unique_ptr<CUkern_st>> kernels;  // one per kernel of the image, for cuLibraryGetKernel
    std::uint64_t serial = 0;  // load order: a context begun eagerly makes their modules in it
};
struct CUstream_st {
    CUcontext ctx;
    bool capturing;
    CUstreamCaptureMode mode;  // of the capture under way
    std::thread::id captor;    // the thread that began it
    CUgraph graph = nullptr;   // what the capture builds
};
// A graph's memory allocation (an allocation node, or a cuMemAllocAsync captured): its address is fixed when
// the node is made, its memory committed to the device's graph memory at the first upload or launch.
struct GraphAlloc {
    std::uint64_t va = 0, bytes = 0;
    int device = 0;
    bool freed_in_graph = false;  // a free node (or a captured cuMemFreeAsync) ends it within each launch
};
struct CUgraphNode_st {
    int unused;
};
struct CUgraph_st {
    std::vector<GraphAlloc> allocs;
    std::vector<std::unique_ptr<CUgraphNode_st>> nodes;
};
// A CUDA array, or one level of a mipmapped array (owned by its mipmapped array, never destroyed alone).
struct CUarray_st {
    CUDA_ARRAY3D_DESCRIPTOR desc;
};
// External memory imported (cuImportExternalMemory): a reference on the node allocation its fd named.
struct CUextMemory_st {
    std::uint64_t alloc = 0, size = 0;
    int device = 0;
};
// A mipmapped array: its levels, each a CUarray of its own.
struct CUmipmappedArray_st {
    std::vector<std::unique_ptr<CUarray_st>> levels;
};
// A stream-ordered pool (cuMemPoolCreate, or a device's default pool).
struct CUmemPoolHandle_st {
    int device;
};
struct CUgraphExec_st {
    int device;
    std::uint64_t charged;  // device memory it holds (Config::graph_exec_bytes at instantiation)
    std::vector<GraphAlloc> allocs;  // its graph's, as instantiated
    bool committed = false;          // its allocations' memory is in the device's graph memory
    bool auto_free = false;          // CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH
};

namespace cumemaudit::sim {

constexpr std::uint64_t kGranularity = 2ull << 20;  // measured: minimum and recommended, 2 MiB
constexpr std::uint64_t kClassicRound = 512;         // classic allocations are charged in 512-byte units
constexpr std::uint64_t kPoolChunk = 32ull << 20;  // measured: pools reserve and give back 32 MiB at a time
constexpr std::uint64_t kModuleChunk = 2ull << 20;  // measured: module code and globals are charged 2 MiB at a time
constexpr std::uint64_t kManagedPage = 2ull << 20;  // chosen (not measured): managed memory moves in large pages
constexpr std::uint64_t kFirstHandle = 0x5e0000001ull;  // recognisable in logs; never 0

// The current context is per thread, as in the real driver; it names an object SimState owns. It is the
// top of the thread's context stack: cuCtxCreate pushes the new context, and destroying the current one
// pops it, making current again the one below.
inline thread_local CUcontext tls_current = nullptr;
inline thread_local std::vector<CUcontext> tls_below;

// `ctx` made current on top of the thread's stack (cuCtxCreate, cuCtxPushCurrent).
inline void push_current(CUcontext ctx) {
    if (tls_current != nullptr) tls_below.push_back(tls_current);
    tls_current = ctx;
}
// The top of the thread's stack taken off, the one below current again (cuCtxPopCurrent).
inline void pop_current() {
    tls_current = tls_below.empty() ? nullptr : tls_below.back();
    if (!tls_below.empty()) tls_below.pop_back();
}
// A context that ended leaves the thread's stack, wherever it is in it.
inline void forget_current(CUcontext ctx) {
    std::erase(tls_below, ctx);
    if (tls_current == ctx) pop_current();
}

inline std::uint64_t round_up(std::uint64_t v, std::uint64_t m) { return (v + m - 1) / m * m; }

// Access by the host itself (a host location in cuMemSetAccess / cuMemGetAccess), kept under this key.
constexpr int kHostAccess = -1;
inline bool host_access(const CUmemLocation& l) {
    return l.type == CU_MEM_LOCATION_TYPE_HOST || l.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT ||
           (l.type == CU_MEM_LOCATION_TYPE_HOST_NUMA && l.id == 0);
}

// Handle values are per process, as in the real driver; the allocations they name live on the node.
struct HandleRec {
    std::uint64_t alloc = 0;  // the node's allocation id
    long refs = 0;  // 0: released, but the value stays taken while its allocation lives
};

struct Mapping {
    std::uint64_t size = 0;
    CUmemGenericAllocationHandle handle = 0;  // the value cuMemRetainAllocationHandle hands back
    std::uint64_t alloc = 0;
    std::map<int, unsigned long long> access;  // device -> CUmemAccess_flags
};

// ipc: another process's device memory opened here (cuIpcOpenMemHandle), charged to the exporter's.
// external: a buffer mapped from external memory (cuExternalMemoryGetMappedBuffer): a reference on the
// memory's node allocation until cuMemFree, which the object's destroy leaves in place (measured).
enum class ClassicKind { device, managed, host, ipc, external };
struct Classic {
    std::uint64_t size = 0;     // requested
    std::uint64_t charged = 0;  // counted against the device (0 for host, managed and IPC opens)
    std::uint64_t mapped = 0;   // host mapping length (host and managed), VA taken (device, IPC)
    int device = 0;
    ClassicKind kind = ClassicKind::device;
    // The context it ends with (cuCtxDestroy, a primary context's reset); null for stream-ordered memory,
    // which belongs to the device's pool and outlives contexts.
    CUcontext ctx = nullptr;
    // Device memory shared outside this allocation (a legacy IPC handle, a dma-buf fd) is a node
    // allocation that carries its charge, so that an importer or an open fd keeps it after the free: this
    // allocation's reference on it. IPC opens hold a reference on the exporter's.
    std::uint64_t node_id = 0;
    int opens = 0;  // IPC opens: times this process opened the handle (each close takes one back)
    CUmemoryPool pool = nullptr;  // stream-ordered memory: the pool that carries its charge
    // A graph allocation that outlived its launch (no free node): the device's graph memory carries its
    // charge, and its address stays the graph's.
    bool graph_kept = false;
    // Managed memory: which of its kManagedPage pages a touch or a prefetch moved onto `device` (charged holds
    // their bytes). Sized at the first move.
    std::vector<bool> resident{};
};

// A stream-ordered pool's figures. Its reserved memory is charged to its device (none for a host pool) in
// chunks; `used` is the exact bytes of its live allocations (measured).
struct SimPool {
    std::unique_ptr<CUmemPoolHandle_st> object;
    int device = 0;
    bool host = false;        // off the device: host memory, or managed memory with no device location
    bool managed = false;     // CU_MEM_ALLOCATION_TYPE_MANAGED
    CUmemLocationType where = CU_MEM_LOCATION_TYPE_DEVICE;  // its location's type, as created (for the setter)
    int where_id = 0;
    bool is_default = false;  // a device's default pool, which cannot be destroyed
    bool destroyed = false;   // destroyed with allocations out: it goes when the last is freed
    std::uint64_t max_size = 0;  // 0: no cap but the device's memory
    std::uint64_t threshold = 0;  // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: idle bytes it keeps at a synchronisation
    std::uint64_t reserved = 0, used = 0, reserved_high = 0, used_high = 0;
    unsigned long long handle_types = 0;  // what it may be exported as (CUmemPoolProps::handleTypes)
    bool imported = false;  // another process's pool (cuMemPoolImportFromShareableHandle): it holds nothing here
    // Its allocations another process imported (cuMemPoolImportPointer) and this one freed: node tokens and
    // their bytes. The pool's figures no longer count them, but the device stays charged until a later give-back
    // of the pool (a synchronisation, trim or destroy) finds the importer's hold gone (measured).
    std::vector<std::pair<std::uint64_t, std::uint64_t>> lent;
};

// A CUDA array's (or a mipmapped array's) memory, charged to its device and ended with its context.
struct SimArray {
    std::uint64_t charged = 0;
    int device = 0;
    CUcontext ctx = nullptr;
    std::unique_ptr<CUarray_st> array;            // a plain array
    std::unique_ptr<CUmipmappedArray_st> mipmap;  // or a mipmapped one
};

// Host memory page-locked by cuMemHostRegister, in the context that registered it.
struct Registration {
    std::uint64_t bytes = 0;
    CUcontext ctx = nullptr;
};

struct SimState::Impl {
    mutable std::mutex mu;
    bool initialized = false;
    bool config_reported = false;
    Config config;
    VaArena arena;
    std::unique_ptr<SimNode> node;  // allocations, capacity and exports: shared by a simulated node's processes
    std::mt19937_64 rng{std::random_device{}()};

    std::vector<std::unique_ptr<CUctx_st>> contexts;  // primary contexts, one per device
    std::vector<unsigned> ctx_retains;
    std::vector<bool> primary_active;                 // retained since its last reset (cuDevicePrimaryCtxGetState)
    std::vector<std::unique_ptr<CUctx_st>> own_contexts;  // cuCtxCreate's, until cuCtxDestroy
    std::vector<std::unique_ptr<CUgreenCtx_st>> green_contexts;  // cuGreenCtxCreate's, until cuGreenCtxDestroy
    // Destroyed green contexts' contexts: what was allocated and loaded in them stays (measured), until their
    // primary context ends.
    std::vector<std::unique_ptr<CUctx_st>> retired_green;
    std::vector<std::unique_ptr<CUdevResourceDesc_st>> resource_descs;  // cuDevResourceGenerateDesc's (never freed)

    std::uint64_t next_handle = kFirstHandle;
    std::vector<CUmemGenericAllocationHandle> free_handles;  // LIFO: the last value freed is reused first
    // This process's values naming each node allocation, oldest first; taken while the allocation lives.
    std::unordered_map<std::uint64_t, std::vector<CUmemGenericAllocationHandle>> alloc_values;
    std::unordered_map<CUmemGenericAllocationHandle, HandleRec> handles;
    std::map<std::uint64_t, std::uint64_t> reservations;  // start -> size
    std::map<std::uint64_t, Mapping> mappings;            // start -> mapping
    std::map<std::uint64_t, Classic> classic;             // start -> allocation
    std::map<std::uint64_t, Registration> registered;     // host memory page-locked, by start
    std::map<const void*, SimArray> arrays;               // by CUarray or CUmipmappedArray
    std::vector<std::unique_ptr<CUextMemory_st>> external;  // imported external memory, until destroyed

    std::map<CUmemoryPool, SimPool> pools;
    // Per device: memory committed to graphs (cuDeviceGetGraphMemAttribute's used and reserved figures, equal
    // in every measurement) and its high-water mark.
    std::vector<std::uint64_t> graph_memory, graph_memory_high;
    std::vector<CUmemoryPool> default_pools, current_pools;  // per device
    // The other locations' pools by (location type, id, allocation type): made at the first getter's question.
    std::map<std::tuple<int, int, int>, CUmemoryPool> default_by_location, current_by_location;

    std::unordered_set<CUstream> streams;
    std::unordered_set<CUgraph> graphs;
    std::unordered_set<CUgraphExec> execs;

    std::map<CUmodule, std::unique_ptr<CUmod_st>> modules;  // loaded, until unloaded or their context ends
    std::map<CUlibrary, std::unique_ptr<CUlib_st>> libraries;  // loaded, until unloaded
    std::unordered_set<CUfunction> functions;               // the kernels of those modules
    std::unordered_set<CUkernel> kernels;                   // the kernels of those libraries
    std::uint64_t libraries_loaded = 0;
    // CUDA_MODULE_LOADING=EAGER at cuInit: a module's code is taken at its making, and every context has a
    // module of every library; else (the driver's default, lazy) a function's code at its first get.
    bool eager_loading = false;

    // ---- helpers; all called with mu held, and the node's lock when they touch the node ----
    CUmemGenericAllocationHandle take_handle_value() {
        if (node->shared()) sweep_values();
        if (!free_handles.empty()) {
            const auto v = free_handles.back();
            free_handles.pop_back();
            return v;
        }
        return next_handle++;
    }

    // A new value naming node allocation `id`, with one reference.
    CUmemGenericAllocationHandle new_value(std::uint64_t id) {
        const auto h = take_handle_value();
        alloc_values[id].push_back(h);
        handles[h] = HandleRec{id, 1};
        return h;
    }

    void free_values(std::uint64_t id) {
        auto it = alloc_values.find(id);
        if (it == alloc_values.end()) return;
        for (auto h : it->second) {
            handles.erase(h);
            free_handles.push_back(h);
        }
        alloc_values.erase(it);
    }

    // Values naming allocations freed elsewhere: by another process of the node, or by an export closing.
    void sweep_values() {
        std::vector<std::uint64_t> gone;
        for (const auto& [id, values] : alloc_values)
            if (!node->alive(id)) gone.push_back(id);
        std::sort(gone.begin(), gone.end());  // freed in allocation order, whatever the hash order
        for (auto id : gone) free_values(id);
    }

    // Frees the allocation when nothing on the node holds it: no reference, no mapping, no open exported fd.
    void maybe_free(std::uint64_t id) {
        if (node->maybe_free(id)) free_values(id);
    }

    // Exported fds are checked lazily, at cuMemGetInfo and before charging memory, because nothing tells
    // the driver when a process closes an fd.
    void reap_all() {
        node->reap_exports();
        sweep_values();
    }

    HandleRec* live_handle(CUmemGenericAllocationHandle h) {
        auto it = handles.find(h);
        return (it == handles.end() || it->second.refs <= 0) ? nullptr : &it->second;
    }

    // The mapping containing addr, or end().
    std::map<std::uint64_t, Mapping>::iterator mapping_at(std::uint64_t addr) {
        auto it = mappings.upper_bound(addr);
        if (it == mappings.begin()) return mappings.end();
        --it;
        return addr < it->first + it->second.size ? it : mappings.end();
    }

    // Mappings tiling [ptr, ptr+size) exactly, each wholly inside; empty when they do not.
    std::vector<std::map<std::uint64_t, Mapping>::iterator> tiling(std::uint64_t ptr, std::uint64_t size) {
        std::vector<std::map<std::uint64_t, Mapping>::iterator> out;
        std::uint64_t at = ptr;
        const std::uint64_t end = ptr + size;
        while (at < end) {
            auto it = mappings.find(at);
            if (it == mappings.end() || at + it->second.size > end) return {};
            out.push_back(it);
            at += it->second.size;
        }
        return out;
    }

    CUresult current_device(int* dev) const {
        if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
        if (tls_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
        *dev = tls_current->device;
        return CUDA_SUCCESS;
    }

    CUresult check_device(CUdevice dev) const {
        if (!initialized) return CUDA_ERROR_NOT_INITIALIZED;
        return dev >= 0 && dev < config.devices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    }

    bool is_our_context(CUcontext c) const {
        auto is = [&](const auto& p) { return p.get() == c; };
        auto green = [&](const auto& g) { return g->ctx.get() == c; };
        return std::any_of(contexts.begin(), contexts.end(), is) || std::any_of(own_contexts.begin(), own_contexts.end(), is) ||
               std::any_of(green_contexts.begin(), green_contexts.end(), green);
    }

    // The context whose module heaps, limits and reservations `c` uses: its own, or a green context's primary.
    static CUcontext home(CUcontext c) { return c != nullptr && c->home != nullptr ? c->home : c; }

    // The classic allocation containing ptr, or classic.end().
    std::map<std::uint64_t, Classic>::iterator classic_at(std::uint64_t ptr) {
        auto it = classic.upper_bound(ptr);
        if (it == classic.begin()) return classic.end();
        --it;
        return ptr < it->first + std::max<std::uint64_t>(it->second.size, 1) ? it : classic.end();
    }

    // Gives back what a classic allocation holds: its charge (or its reference on the node allocation that
    // carries it now) and its addresses. Its record is the caller's to erase. Both locks held.
    // Managed memory touched on `dev` moves there (pools.cpp). Both locks' order: the state's held.
    CUresult make_resident(Classic& a, int dev, std::uint64_t offset, std::uint64_t bytes);

    // A location's default pool for its key (location type, id, allocation type); made at first use. In pools.cpp.
    CUmemoryPool location_default(const std::tuple<int, int, int>& key);

    void release_classic(std::uint64_t start, const Classic& c) {
        if (c.pool != nullptr) return_to_pool(c);
        if (c.node_id != 0) {
            node->add_use(c.node_id, -1, 0);
            const bool gone = node->maybe_free(c.node_id);
            if (!gone && c.pool != nullptr && c.kind != ClassicKind::ipc) lend(c);
        } else if (c.kind == ClassicKind::device) {
            node->uncharge_classic(c.device, c.charged);
        } else if (c.kind == ClassicKind::managed) {
            node->uncharge_unlisted(c.device, c.charged);  // what a touch made resident (pools.cpp)
        }
        if (c.mapped == 0) return;  // a graph allocation's address stays its graph's
        if (c.kind == ClassicKind::device || c.kind == ClassicKind::ipc || c.kind == ClassicKind::external)
            arena.give(start, c.mapped);
        else ::munmap(reinterpret_cast<void*>(start), c.mapped);
    }

    // The node allocation carrying a device allocation's charge, made on its first share (an IPC handle,
    // a dma-buf fd); 0 when the node's table is full. Both locks held. In shared_classic.cpp.
    std::uint64_t share(Classic& c);

    // A pool keeps at least `keep` bytes reserved (whole chunks) and gives the rest back. Both locks held.
    void shrink_pool(SimPool& p, std::uint64_t keep) {
        std::uint64_t returned = 0;  // lent bytes no importer holds any more
        std::erase_if(p.lent, [&](const auto& l) {
            if (node->alive(l.first)) return false;
            returned += l.second;
            return true;
        });
        if (!p.host) node->uncharge_classic(p.device, returned);
        const std::uint64_t target = std::min(p.reserved, round_up(std::max(p.used, keep), kPoolChunk));
        if (!p.host) node->uncharge_classic(p.device, p.reserved - target);
        p.reserved = target;
    }

    // A stream-ordered allocation's bytes go back to its pool, idle until a synchronisation or a trim; a
    // pool destroyed while they were out goes with its last one. Both locks held.
    void return_to_pool(const Classic& c) {
        auto it = pools.find(c.pool);
        if (it == pools.end()) return;
        SimPool& p = it->second;
        p.used -= std::min(p.used, c.size);
        if (p.destroyed && p.used == 0) {
            shrink_pool(p, 0);
            pools.erase(it);
        }
    }

    // A pool allocation freed here that an importer still holds: it leaves the pool's figures, its charge
    // stays. Both locks held.
    void lend(const Classic& c) {
        auto it = pools.find(c.pool);
        if (it == pools.end()) return;
        SimPool& p = it->second;
        const std::uint64_t bytes = std::min(p.reserved, c.size);
        p.reserved -= bytes;
        p.lent.emplace_back(c.node_id, bytes);
    }

    // Before it refuses device memory the driver takes back every pool's idle memory on that device
    // (measured: also when that cannot satisfy the request). Whether `bytes` fit after. Both locks held.
    bool room_for(int dev, std::uint64_t bytes) {
        if (bytes <= config.memory_per_device - node->used(dev)) return true;
        for (auto& [handle, p] : pools)
            if (!p.host && p.device == dev) shrink_pool(p, 0);
        trim_graph_memory(dev);  // the graph memory no launch holds goes too
        return bytes <= config.memory_per_device - node->used(dev);
    }

    // A graph's allocation at a new address, nothing charged; and an executable's commit at its upload or
    // launch (graphs.cpp). Both locks held.
    CUresult add_graph_alloc(CUgraph g, std::uint64_t bytes, int dev, CUdeviceptr* va);
    CUresult commit(CUgraphExec e);

    // An array of `levels` levels validated, charged and kept under `object`, the handle the caller hands
    // out; and its destroy (arrays.cpp). mu held.
    CUresult book_array(const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned levels, SimArray rec, const void* object);
    CUresult destroy_array(const void* object, bool mipmap);

    // cuDeviceGraphMemTrim: graph memory goes back but for allocations that outlived their launch, and each
    // executable commits its memory again at its next launch (nothing runs here, so nothing is in use).
    // Both locks held.
    void trim_graph_memory(int dev) {
        std::uint64_t kept = 0;
        for (const auto& [start, c] : classic)
            if (c.graph_kept && c.device == dev) kept += c.size;
        const auto d = static_cast<std::size_t>(dev);
        if (graph_memory[d] > kept) node->uncharge_classic(dev, graph_memory[d] - kept);
        graph_memory[d] = std::min(graph_memory[d], kept);
        for (CUgraphExec e : execs)
            if (e->device == dev) e->committed = false;
    }

    // The kernel stack a context reserves at a per-thread limit: one for every thread the device can hold.
    std::uint64_t stack_bytes(std::size_t limit) const {
        return static_cast<std::uint64_t>(limit) * static_cast<std::uint64_t>(config.sms) * kThreadsPerSm;
    }

    // A context's reservation (contexts.cpp): taken as it begins (a primary context's first retain, cuCtxCreate)
    // or CUDA_ERROR_OUT_OF_MEMORY (also when, under eager loading, the libraries' modules it begins with do not
    // fit); its stack limit moved (rounded up to 16) with the difference reserved or given back at once, or
    // CUDA_ERROR_OUT_OF_MEMORY changing nothing; all given back at its end, its limits as a new context's again.
    // Both locks held.
    CUresult begin_context(CUcontext ctx);
    CUresult set_stack(CUcontext ctx, std::size_t limit);
    // A launch needing `local` bytes per thread: the stack raised to it (or taken again after a refusal); a
    // refusal gives the whole stack back.
    CUresult stack_for_launch(CUcontext ctx, std::size_t local);
    // The heap a kernel that calls malloc needs at its first launch in `ctx`: reserved at the limit then in
    // force, or CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (not OUT_OF_MEMORY, measured) with nothing taken.
    CUresult heap_for_launch(CUcontext ctx);
    void end_context(CUcontext ctx);

    // What a context's end frees (cuCtxDestroy, a primary context's reset): its classic allocations, host
    // and managed memory included, its IPC opens, its host registrations, its arrays and its modules, and
    // those of the green contexts destroyed over it; never
    // stream-ordered or cuMemCreate memory. Memory a dma-buf fd or another process's IPC open still holds stays
    // charged. Its own reservation is end_context's. Both locks held.
    void tear_down(CUcontext ctx) {
        for (const auto& retired : retired_green)
            if (retired->home == ctx) tear_down(retired.get());
        std::erase_if(retired_green, [&](const auto& retired) { return retired->home == ctx; });
        for (auto it = classic.begin(); it != classic.end();) {
            if (it->second.ctx != ctx) {
                ++it;
                continue;
            }
            release_classic(it->first, it->second);
            it = classic.erase(it);
        }
        std::erase_if(registered, [&](const auto& r) { return r.second.ctx == ctx; });
        std::erase_if(arrays, [&](const auto& a) {
            if (a.second.ctx == ctx) node->uncharge_classic(a.second.device, a.second.charged);
            return a.second.ctx == ctx;
        });
        std::erase_if(modules, [&](const auto& m) {
            if (m.second->ctx == ctx) release_module(*m.second);
            return m.second->ctx == ctx;
        });
    }

    // ---- modules (kernels.cpp; docs/DRIVER.md, "Module code and globals"). Both locks held.
    // A module made in its context (m->ctx): its globals taken at once, and under eager loading its code;
    // kept, or CUDA_ERROR_OUT_OF_MEMORY with nothing taken.
    CUresult make_module(std::unique_ptr<CUmod_st> m, std::uint64_t global_bytes, CUmodule* out);
    // A function's code, taken in its context's code heap unless it was already.
    CUresult load_code(CUfunction f);
    // What a module holds given back and its functions forgotten; its record is the caller's to erase.
    void release_module(CUmod_st& m);
    // A library's module in `ctx`, made at the first ask.
    CUresult library_module(CUlibrary lib, CUcontext ctx, CUmodule* out);
    // A library kernel's function in `ctx`, its code loaded.
    CUresult kernel_function(CUkernel k, CUcontext ctx, CUfunction* out);
    // Under eager loading a context begun holds a module of every library loaded; else nothing to do.
    CUresult eager_library_modules(CUcontext ctx);
    // A range of a context's heap, its chunks charged when a range first overlaps them, given back when the
    // last one goes.
    CUresult take_range(CUcontext ctx, ModuleHeap& heap, std::uint64_t bytes, HeapRange* out);
    void give_range(CUcontext ctx, ModuleHeap& heap, HeapRange r);
};

}  // namespace cumemaudit::sim
