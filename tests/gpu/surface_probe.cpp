// What the driver does at the edges of the memory surface the ledger models: context teardown, legacy IPC
// and dma-buf fds. One fact per forked child (CUDA is initialised in the child, never in the parent), each
// printed as one line "fact <name> key=value ...", values being CUresult names or MiB of the device's used
// memory (cuMemGetInfo) moved since the fact began. Run on the H200 and on the simulated driver; docs/DRIVER.md
// keeps the real answers and tests/gpu/test_surface.py holds the simulated driver to them.
//   surface_probe [FACT...]   (all facts without arguments)
#include "support/fd_passing.hpp"
#include "support/probe_facts.hpp"

#include <cuda.h>

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using cumemaudit::program::receive_fd;
using cumemaudit::program::send_fd;

using cumemaudit::program::g_fact;
using cumemaudit::program::name_of;
using cumemaudit::program::used_mib;
constexpr size_t kMiB = cumemaudit::program::kProbeMiB;

// What the driver says of a pointer: the answer to a context query.
std::string pointer_answer(CUdeviceptr p) {
    CUcontext ctx = nullptr;
    return name_of(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, p));
}

CUcontext primary(CUdevice dev) {
    CUcontext ctx = nullptr;
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
    return ctx;
}

// A pool's figure in bytes (reserved or used, current), or -1 when the driver will not say.
long long pool_bytes(CUmemoryPool pool, CUmemPool_attribute attr) {
    cuuint64_t v = 0;
    return cuMemPoolGetAttribute(pool, attr, &v) == CUDA_SUCCESS ? static_cast<long long>(v) : -1;
}
long long reserved_mib(CUmemoryPool pool) { return pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) / static_cast<long long>(kMiB); }
long long pool_used_mib(CUmemoryPool pool) { return pool_bytes(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) / static_cast<long long>(kMiB); }

CUmemoryPool device_pool(size_t max_size = 0) {
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    props.maxSize = max_size;
    CUmemoryPool pool = nullptr;
    MUST(cuMemPoolCreate(&pool, &props));
    return pool;
}

void keep_idle(CUmemoryPool pool) {
    cuuint64_t keep = ~cuuint64_t{0};
    MUST(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
}

long long graph_mem_mib(CUgraphMem_attribute attr) {
    cuuint64_t v = 0;
    return cuDeviceGetGraphMemAttribute(0, attr, &v) == CUDA_SUCCESS ? static_cast<long long>(v / kMiB) : -1;
}

// An fd across a Unix socket (SCM_RIGHTS), as a job passes pool and VMM handles between its processes.
struct Fact {
    const char* name;
    std::function<void()> run;
};

std::string out;
void put(const char* key, const std::string& value) { out += std::string(" ") + key + "=" + value; }
void put(const char* key, long long value) { put(key, std::to_string(value)); }

const std::vector<Fact>& facts() {
    static const std::vector<Fact> all = {
        // cudaDeviceReset: which allocations of the context the reset frees, and what their pointers answer.
        {"primary_reset", [] {
             primary(0);
             const long long base = used_mib();
             CUdeviceptr dev_mem = 0, managed = 0, async = 0;
             void* host = nullptr;
             MUST(cuMemAlloc(&dev_mem, 256 * kMiB));
             MUST(cuMemAllocHost(&host, 64 * kMiB));
             MUST(cuMemAllocManaged(&managed, 64 * kMiB, CU_MEM_ATTACH_GLOBAL));
             MUST(cuMemAllocAsync(&async, 256 * kMiB, nullptr));
             MUST(cuStreamSynchronize(nullptr));
             static char registered[1 << 20];
             MUST(cuMemHostRegister(registered, sizeof registered, 0));
             put("before", used_mib() - base);
             MUST(cuDevicePrimaryCtxReset(0));
             unsigned flags = 0;
             int active = -1;
             MUST(cuDevicePrimaryCtxGetState(0, &flags, &active));
             put("active", active);
             CUcontext current = nullptr;
             MUST(cuCtxGetCurrent(&current));
             put("current_kept", current != nullptr ? "yes" : "no");
             put("device_ptr", pointer_answer(dev_mem));
             put("host_ptr", pointer_answer(reinterpret_cast<CUdeviceptr>(host)));
             put("managed_ptr", pointer_answer(managed));
             put("async_ptr", pointer_answer(async));
             put("registered_ptr", pointer_answer(reinterpret_cast<CUdeviceptr>(registered)));
             primary(0);
             put("after", used_mib() - base);
             put("free_stale", name_of(cuMemFree(dev_mem)));
             put("unregister_stale", name_of(cuMemHostUnregister(registered)));
         }},
        // The last cuDevicePrimaryCtxRelease resets the context as cudaDeviceReset does.
        {"primary_last_release", [] {
             primary(0);
             const long long base = used_mib();
             CUdeviceptr dev_mem = 0;
             MUST(cuMemAlloc(&dev_mem, 256 * kMiB));
             put("before", used_mib() - base);
             MUST(cuDevicePrimaryCtxRelease(0));
             unsigned flags = 0;
             int active = -1;
             MUST(cuDevicePrimaryCtxGetState(0, &flags, &active));
             put("active", active);
             put("device_ptr", pointer_answer(dev_mem));
             primary(0);
             put("after", used_mib() - base);
         }},
        // A context of its own: cuCtxDestroy frees what was allocated in it, not what the primary holds.
        {"ctx_destroy", [] {
             primary(0);
             const long long base = used_mib();
             CUdeviceptr in_primary = 0, in_own = 0;
             MUST(cuMemAlloc(&in_primary, 128 * kMiB));
             CUcontext own = nullptr;
             MUST(cuCtxCreate(&own, nullptr, 0, 0));
             const long long with_context = used_mib();  // a context costs device memory of its own
             MUST(cuMemAlloc(&in_own, 256 * kMiB));
             put("before", used_mib() - with_context);
             MUST(cuCtxDestroy(own));
             CUcontext current = nullptr;
             MUST(cuCtxGetCurrent(&current));
             put("current_after", current == nullptr ? "none" : "other");
             put("own_ptr_no_ctx", pointer_answer(in_own));
             primary(0);
             put("own_ptr", pointer_answer(in_own));
             put("primary_ptr", pointer_answer(in_primary));
             put("after", used_mib() - base);
         }},
        // Legacy IPC: the importer's size, and whose memory an import keeps after the exporter's free.
        {"ipc_import", [] {
             int to_child[2], to_parent[2];
             MUST(pipe(to_child) == 0 ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN);
             MUST(pipe(to_parent) == 0 ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN);
             std::fflush(stdout);
             const pid_t importer = fork();
             if (importer == 0) {
                 MUST(cuInit(0));
                 primary(0);
                 char step = 0;
                 if (write(to_parent[1], "r", 1) != 1) _exit(1);  // its context exists: the exporter's baseline
                 CUipcMemHandle h;
                 if (read(to_child[0], &h, sizeof h) != sizeof h) _exit(1);
                 CUdeviceptr p = 0;
                 std::string line = " importer_open=" + name_of(cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
                 CUdeviceptr base = 0;
                 size_t size = 0;
                 line += " importer_range=" + name_of(cuMemGetAddressRange(&base, &size, p)) +
                         " importer_size=" + std::to_string(size) + " importer_base=" + (base == 0 ? "0" : base == p ? "ptr" : "other");
                 size_t range = 0;
                 line += " importer_range_size_attr=" +
                         name_of(cuPointerGetAttribute(&range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p)) + ":" + std::to_string(range);
                 if (write(to_parent[1], line.c_str(), line.size() + 1) < 0) _exit(1);
                 if (read(to_child[0], &step, 1) != 1) _exit(1);  // the exporter freed its memory
                 const std::string closed = name_of(cuIpcCloseMemHandle(p));
                 if (write(to_parent[1], closed.c_str(), closed.size() + 1) < 0) _exit(1);
                 if (read(to_child[0], &step, 1) != 1) _exit(1);  // measured: it may exit
                 _exit(0);
             }
             MUST(cuInit(0));
             primary(0);
             char ready = 0;
             if (read(to_parent[0], &ready, 1) != 1) _exit(1);
             const long long base = used_mib();
             CUdeviceptr p = 0;
             MUST(cuMemAlloc(&p, 1024 * kMiB));
             CUipcMemHandle h, again;
             put("get", name_of(cuIpcGetMemHandle(&h, p)));
             MUST(cuIpcGetMemHandle(&again, p));
             put("same_handle", std::memcmp(&h, &again, sizeof h) == 0 ? "yes" : "no");
             CUdeviceptr inside = p + 64 * kMiB;
             CUipcMemHandle of_inside;
             put("get_inside", name_of(cuIpcGetMemHandle(&of_inside, inside)));
             put("same_for_inside", std::memcmp(&h, &of_inside, sizeof h) == 0 ? "yes" : "no");
             CUdeviceptr own = 0;
             put("open_own", name_of(cuIpcOpenMemHandle(&own, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)));
             if (write(to_child[1], &h, sizeof h) != sizeof h) _exit(1);
             char line[256] = {};
             if (read(to_parent[0], line, sizeof line) <= 0) _exit(1);
             out += line;
             MUST(cuMemFree(p));
             put("after_exporter_free", used_mib() - base);
             if (write(to_child[1], "x", 1) != 1) _exit(1);
             char closed[64] = {};
             if (read(to_parent[0], closed, sizeof closed) <= 0) _exit(1);
             put("importer_close", closed);
             put("after_importer_close", used_mib() - base);
             if (write(to_child[1], "x", 1) != 1) _exit(1);
             int status = 0;
             waitpid(importer, &status, 0);
             CUdeviceptr pool_ptr = 0;
             MUST(cuMemAllocAsync(&pool_ptr, 64 * kMiB, nullptr));
             MUST(cuStreamSynchronize(nullptr));
             put("get_of_async", name_of(cuIpcGetMemHandle(&h, pool_ptr)));
         }},
        // Stream-ordered memory in the device's default pool: what it reserves, when it gives idle memory back.
        {"pool_default", [] {
             primary(0);
             const long long base = used_mib();
             CUmemoryPool pool = nullptr;
             MUST(cuDeviceGetDefaultMemPool(&pool, 0));
             CUmemoryPool current = nullptr;
             MUST(cuDeviceGetMemPool(&current, 0));
             put("current_is_default", current == pool ? "yes" : "no");
             cuuint64_t threshold = 1;
             MUST(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
             put("threshold", static_cast<long long>(threshold));
             CUdeviceptr a = 0, odd = 0;
             MUST(cuMemAllocAsync(&a, 100 * kMiB, nullptr));
             MUST(cuMemAllocAsync(&odd, kMiB + 1, nullptr));
             MUST(cuStreamSynchronize(nullptr));
             put("reserved", pool_bytes(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT));
             put("used", pool_bytes(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT));
             put("device_used", used_mib() - base);
             CUdeviceptr range_base = 0;
             size_t range = 0;
             put("range", name_of(cuMemGetAddressRange(&range_base, &range, odd)));
             put("range_size", static_cast<long long>(range));
             CUmemoryPool of_ptr = nullptr;
             put("ptr_pool", name_of(cuPointerGetAttribute(&of_ptr, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a)));
             put("ptr_pool_is_default", of_ptr == pool ? "yes" : "no");
             MUST(cuMemFreeAsync(a, nullptr));
             MUST(cuMemFreeAsync(odd, nullptr));
             put("freed_reserved", reserved_mib(pool));
             MUST(cuStreamSynchronize(nullptr));
             put("synced_reserved", reserved_mib(pool));
             put("synced_device_used", used_mib() - base);
             keep_idle(pool);
             MUST(cuMemAllocAsync(&a, 100 * kMiB, nullptr));
             MUST(cuMemFreeAsync(a, nullptr));
             MUST(cuStreamSynchronize(nullptr));
             put("kept_reserved", reserved_mib(pool));
             put("kept_used", pool_used_mib(pool));
             put("kept_device_used", used_mib() - base);
             put("trim_half", name_of(cuMemPoolTrimTo(pool, 50 * kMiB)));
             put("trim_half_reserved", reserved_mib(pool));
             MUST(cuMemPoolTrimTo(pool, 0));
             put("trimmed_reserved", reserved_mib(pool));
             put("trimmed_device_used", used_mib() - base);
             put("destroy_default", name_of(cuMemPoolDestroy(pool)));
             put("free_twice", name_of(cuMemFreeAsync(a, nullptr)));
             MUST(cuStreamSynchronize(nullptr));
         }},
        // A pool of the program's own: destroyed idle, destroyed with an allocation still out, made current.
        {"pool_created", [] {
             primary(0);
             const long long base = used_mib();
             CUmemoryPool pool = device_pool();
             keep_idle(pool);
             CUdeviceptr a = 0;
             MUST(cuMemAllocFromPoolAsync(&a, 256 * kMiB, pool, nullptr));
             MUST(cuMemFreeAsync(a, nullptr));
             MUST(cuStreamSynchronize(nullptr));
             put("idle_device_used", used_mib() - base);
             put("destroy_idle", name_of(cuMemPoolDestroy(pool)));
             put("destroyed_device_used", used_mib() - base);
             CUmemoryPool busy = device_pool();
             MUST(cuMemAllocFromPoolAsync(&a, 128 * kMiB, busy, nullptr));
             MUST(cuStreamSynchronize(nullptr));
             put("destroy_busy", name_of(cuMemPoolDestroy(busy)));
             put("busy_ptr", pointer_answer(a));
             put("busy_device_used", used_mib() - base);
             put("free_after_destroy", name_of(cuMemFreeAsync(a, nullptr)));
             MUST(cuStreamSynchronize(nullptr));
             put("freed_device_used", used_mib() - base);
             CUmemoryPool mine = device_pool();
             put("set_current", name_of(cuDeviceSetMemPool(0, mine)));
             MUST(cuMemAllocAsync(&a, 64 * kMiB, nullptr));
             CUmemoryPool of_ptr = nullptr;
             MUST(cuPointerGetAttribute(&of_ptr, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, a));
             put("async_from_current", of_ptr == mine ? "yes" : "no");
             MUST(cuMemFreeAsync(a, nullptr));
             MUST(cuStreamSynchronize(nullptr));
             put("destroy_current", name_of(cuMemPoolDestroy(mine)));
             CUmemoryPool after = nullptr;
             MUST(cuDeviceGetMemPool(&after, 0));
             CUmemoryPool dflt = nullptr;
             MUST(cuDeviceGetDefaultMemPool(&dflt, 0));
             put("current_after_destroy", after == dflt ? "default" : after == mine ? "destroyed" : "other");
         }},
        // Before it refuses an allocation, the driver takes idle pool memory back: which pools, and when.
        {"pool_refusal", [] {
             primary(0);
             const long long base = used_mib();
             CUmemoryPool dflt = nullptr;
             MUST(cuDeviceGetDefaultMemPool(&dflt, 0));
             keep_idle(dflt);
             CUmemoryPool capped = device_pool(512 * kMiB);
             keep_idle(capped);
             CUdeviceptr a = 0;
             MUST(cuMemAllocAsync(&a, 256 * kMiB, nullptr));
             MUST(cuMemFreeAsync(a, nullptr));
             MUST(cuMemAllocFromPoolAsync(&a, 256 * kMiB, capped, nullptr));
             MUST(cuMemFreeAsync(a, nullptr));
             MUST(cuStreamSynchronize(nullptr));
             put("idle_device_used", used_mib() - base);
             put("over_cap", name_of(cuMemAllocFromPoolAsync(&a, 1024 * kMiB, capped, nullptr)));
             put("over_cap_default_reserved", reserved_mib(dflt));
             put("over_cap_capped_reserved", reserved_mib(capped));
             MUST(cuMemAllocAsync(&a, 256 * kMiB, nullptr));
             MUST(cuMemFreeAsync(a, nullptr));
             MUST(cuStreamSynchronize(nullptr));
             size_t free = 0, total = 0;
             MUST(cuMemGetInfo(&free, &total));
             CUdeviceptr big = 0;
             put("over_device", name_of(cuMemAlloc(&big, free + 64 * kMiB)));
             put("over_device_default_reserved", reserved_mib(dflt));
         }},
        // Pools in host memory: allowed, and whether they move the device's used memory.
        {"pool_host", [] {
             primary(0);
             const long long base = used_mib();
             CUmemPoolProps props{};
             props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
             props.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
             props.location.id = 0;
             CUmemoryPool pool = nullptr;
             put("create_host_numa", name_of(cuMemPoolCreate(&pool, &props)));
             if (pool != nullptr) {
                 CUdeviceptr a = 0;
                 put("alloc", name_of(cuMemAllocFromPoolAsync(&a, 256 * kMiB, pool, nullptr)));
                 MUST(cuStreamSynchronize(nullptr));
                 put("device_used", used_mib() - base);
                 put("reserved", reserved_mib(pool));
                 CUmemorytype type{};
                 put("ptr_type", name_of(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a)));
                 put("ptr_type_is", type == CU_MEMORYTYPE_HOST ? "host" : type == CU_MEMORYTYPE_DEVICE ? "device" : "other");
                 MUST(cuMemFreeAsync(a, nullptr));
                 MUST(cuStreamSynchronize(nullptr));
                 MUST(cuMemPoolDestroy(pool));
             }
             props.location.type = CU_MEM_LOCATION_TYPE_HOST;
             props.location.id = 0;
             CUmemoryPool host = nullptr;
             put("create_host", name_of(cuMemPoolCreate(&host, &props)));
             if (host != nullptr) MUST(cuMemPoolDestroy(host));
             CUmemPoolProps managed{};
             managed.allocType = CU_MEM_ALLOCATION_TYPE_MANAGED;
             managed.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
             managed.location.id = 0;
             CUmemoryPool mp = nullptr;
             put("create_managed", name_of(cuMemPoolCreate(&mp, &managed)));
             if (mp != nullptr) {
                 CUdeviceptr a = 0;
                 put("managed_alloc", name_of(cuMemAllocFromPoolAsync(&a, 256 * kMiB, mp, nullptr)));
                 MUST(cuStreamSynchronize(nullptr));
                 put("managed_device_used", used_mib() - base);
                 if (a != 0) MUST(cuMemFreeAsync(a, nullptr));
                 MUST(cuStreamSynchronize(nullptr));
                 MUST(cuMemPoolDestroy(mp));
             }
         }},
        // CUDA 13's pool getters (what RMM's and cuda.core's pinned and managed resources use): the default pool
        // of each location and allocation type, what 256 MiB from it costs the device (at allocation, and once
        // a memset touched it), and the current pool a setter changes.
        {"pool_getters", [] {
             primary(0);
             auto location = [](CUmemLocationType type, int id) {
                 CUmemLocation l{};
                 l.type = type;
                 l.id = id;
                 return l;
             };
             auto try_pool = [&](const char* key, CUmemLocation l, CUmemAllocationType type, bool allocate) {
                 CUmemoryPool pool = nullptr;
                 put(key, name_of(cuMemGetDefaultMemPool(&pool, &l, type)));
                 if (pool == nullptr || !allocate) return pool;
                 const long long base = used_mib();
                 CUdeviceptr a = 0;
                 const std::string k(key);
                 put((k + "_alloc").c_str(), name_of(cuMemAllocFromPoolAsync(&a, 256 * kMiB, pool, nullptr)));
                 MUST(cuStreamSynchronize(nullptr));
                 put((k + "_used").c_str(), used_mib() - base);
                 put((k + "_reserved").c_str(), reserved_mib(pool));
                 if (a != 0) {
                     CUmemorytype mt{};
                     put((k + "_ptr").c_str(), cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a) != CUDA_SUCCESS ? "error"
                                               : mt == CU_MEMORYTYPE_HOST ? "host" : mt == CU_MEMORYTYPE_DEVICE ? "device" : "unified");
                     put((k + "_memset").c_str(), name_of(cuMemsetD8(a, 1, 256 * kMiB)));
                     MUST(cuCtxSynchronize());
                     put((k + "_touched").c_str(), used_mib() - base);
                     MUST(cuMemFreeAsync(a, nullptr));
                     MUST(cuStreamSynchronize(nullptr));
                     MUST(cuMemPoolTrimTo(pool, 0));
                 }
                 return pool;
             };
             CUmemoryPool by_device = nullptr;
             MUST(cuDeviceGetDefaultMemPool(&by_device, 0));
             const CUmemoryPool dev = try_pool("device", location(CU_MEM_LOCATION_TYPE_DEVICE, 0), CU_MEM_ALLOCATION_TYPE_PINNED, false);
             put("device_is_device_default", dev == by_device ? "yes" : "no");
             try_pool("bad_device", location(CU_MEM_LOCATION_TYPE_DEVICE, 64), CU_MEM_ALLOCATION_TYPE_PINNED, false);
             const CUmemoryPool host = try_pool("host", location(CU_MEM_LOCATION_TYPE_HOST, 0), CU_MEM_ALLOCATION_TYPE_PINNED, true);
             try_pool("host_numa", location(CU_MEM_LOCATION_TYPE_HOST_NUMA, 0), CU_MEM_ALLOCATION_TYPE_PINNED, true);
             try_pool("managed_none", location(CU_MEM_LOCATION_TYPE_NONE, 0), CU_MEM_ALLOCATION_TYPE_MANAGED, true);
             try_pool("managed_device", location(CU_MEM_LOCATION_TYPE_DEVICE, 0), CU_MEM_ALLOCATION_TYPE_MANAGED, true);
             try_pool("managed_host", location(CU_MEM_LOCATION_TYPE_HOST, 0), CU_MEM_ALLOCATION_TYPE_MANAGED, true);
             try_pool("pinned_none", location(CU_MEM_LOCATION_TYPE_NONE, 0), CU_MEM_ALLOCATION_TYPE_PINNED, false);
             // The current pool: the default until a setter names another of the same location and type.
             CUmemLocation h = location(CU_MEM_LOCATION_TYPE_HOST, 0);
             CUmemoryPool current = nullptr;
             put("current_host", name_of(cuMemGetMemPool(&current, &h, CU_MEM_ALLOCATION_TYPE_PINNED)));
             put("current_host_is_default", current != nullptr && current == host ? "yes" : "no");
             CUmemPoolProps props{};
             props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
             props.location = location(CU_MEM_LOCATION_TYPE_HOST, 0);
             CUmemoryPool mine = nullptr;
             MUST(cuMemPoolCreate(&mine, &props));
             put("set_host", name_of(cuMemSetMemPool(&h, CU_MEM_ALLOCATION_TYPE_PINNED, mine)));
             MUST(cuMemGetMemPool(&current, &h, CU_MEM_ALLOCATION_TYPE_PINNED));
             put("current_host_is_set", current == mine ? "yes" : "no");
             CUmemLocation d0 = location(CU_MEM_LOCATION_TYPE_DEVICE, 0);
             put("set_device_to_host_pool", name_of(cuMemSetMemPool(&d0, CU_MEM_ALLOCATION_TYPE_PINNED, mine)));
             const CUmemoryPool devpool = device_pool();
             put("set_device", name_of(cuMemSetMemPool(&d0, CU_MEM_ALLOCATION_TYPE_PINNED, devpool)));
             CUmemoryPool now = nullptr;
             MUST(cuDeviceGetMemPool(&now, 0));
             put("device_current_is_set", now == devpool ? "yes" : "no");
             put("set_managed_to_pinned_pool", name_of(cuMemSetMemPool(&d0, CU_MEM_ALLOCATION_TYPE_MANAGED, devpool)));
             MUST(cuMemPoolDestroy(devpool));
             MUST(cuDeviceGetMemPool(&now, 0));
             put("device_current_after_destroy_is_default", now == by_device ? "yes" : "no");
             MUST(cuMemPoolDestroy(mine));
             MUST(cuMemGetMemPool(&current, &h, CU_MEM_ALLOCATION_TYPE_PINNED));
             put("host_current_after_destroy_is_default", current == host ? "yes" : "no");
             CUmemPoolProps none{};
             none.allocType = CU_MEM_ALLOCATION_TYPE_MANAGED;
             none.location = location(CU_MEM_LOCATION_TYPE_NONE, 0);
             CUmemoryPool created_none = nullptr;
             put("create_managed_none", name_of(cuMemPoolCreate(&created_none, &none)));
             if (created_none != nullptr) MUST(cuMemPoolDestroy(created_none));
         }},
        // Graph memory: a graph built by hand with an allocation node, committed at upload, kept after the
        // exec is destroyed until the trim; and what a capture of cuMemAllocAsync charges before launch.
        {"graph_memory", [] {
             primary(0);
             const long long base = used_mib();
             CUgraph g = nullptr;
             MUST(cuGraphCreate(&g, 0));
             CUDA_MEM_ALLOC_NODE_PARAMS p{};
             p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
             p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
             p.poolProps.location.id = 0;
             p.bytesize = 256 * kMiB;
             CUgraphNode alloc_node = nullptr, free_node = nullptr;
             put("add_alloc", name_of(cuGraphAddMemAllocNode(&alloc_node, g, nullptr, 0, &p)));
             put("node_ptr", p.dptr != 0 ? "set" : "zero");
             put("node_ptr_known", pointer_answer(p.dptr));
             put("add_free", name_of(cuGraphAddMemFreeNode(&free_node, g, &alloc_node, 1, p.dptr)));
             put("built_device_used", used_mib() - base);
             CUgraphExec exec = nullptr;
             MUST(cuGraphInstantiate(&exec, g, 0));
             put("instantiated_device_used", used_mib() - base);
             put("instantiated_graph_reserved", graph_mem_mib(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT));
             MUST(cuGraphUpload(exec, nullptr));
             MUST(cuStreamSynchronize(nullptr));
             put("uploaded_device_used", used_mib() - base);
             put("uploaded_graph_reserved", graph_mem_mib(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT));
             put("uploaded_graph_used", graph_mem_mib(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT));
             MUST(cuGraphLaunch(exec, nullptr));
             MUST(cuStreamSynchronize(nullptr));
             put("launched_graph_reserved", graph_mem_mib(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT));
             put("launched_graph_used", graph_mem_mib(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT));
             MUST(cuGraphExecDestroy(exec));
             MUST(cuGraphDestroy(g));
             put("destroyed_device_used", used_mib() - base);
             put("destroyed_graph_reserved", graph_mem_mib(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT));
             put("destroyed_graph_used", graph_mem_mib(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT));
             MUST(cuDeviceGraphMemTrim(0));
             put("trimmed_device_used", used_mib() - base);
             put("trimmed_graph_reserved", graph_mem_mib(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT));
             // A captured cuMemAllocAsync with no free: the allocation outlives the launch.
             CUstream s = nullptr;
             MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
             MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
             CUdeviceptr kept = 0;
             MUST(cuMemAllocAsync(&kept, 128 * kMiB, s));
             put("captured_device_used", used_mib() - base);
             MUST(cuStreamEndCapture(s, &g));
             MUST(cuGraphInstantiate(&exec, g, 0));
             MUST(cuGraphLaunch(exec, s));
             MUST(cuStreamSynchronize(s));
             put("kept_graph_used", graph_mem_mib(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT));
             put("kept_device_used", used_mib() - base);
             put("relaunch_unfreed", name_of(cuGraphLaunch(exec, s)));
             cuStreamSynchronize(s);
             MUST(cuGraphExecDestroy(exec));
             MUST(cuGraphDestroy(g));
             put("kept_after_destroy_graph_used", graph_mem_mib(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT));
             put("free_outside", name_of(cuMemFreeAsync(kept, s)));
             MUST(cuStreamSynchronize(s));
             put("freed_graph_used", graph_mem_mib(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT));
             MUST(cuDeviceGraphMemTrim(0));
             put("freed_trimmed_device_used", used_mib() - base);
         }},
        // Arrays: device memory by descriptor, and whether a context's end frees them.
        {"arrays", [] {
             primary(0);
             const long long base = used_mib();
             CUDA_ARRAY3D_DESCRIPTOR d{};
             d.Width = 4096;
             d.Height = 4096;
             d.Format = CU_AD_FORMAT_FLOAT;
             d.NumChannels = 4;
             CUarray arr = nullptr;
             put("create_3d", name_of(cuArray3DCreate(&arr, &d)));
             put("array_device_used", used_mib() - base);
             CUDA_ARRAY_DESCRIPTOR d2{};
             d2.Width = 4096;
             d2.Height = 2048;
             d2.Format = CU_AD_FORMAT_FLOAT;
             d2.NumChannels = 4;
             CUarray arr2 = nullptr;
             put("create_2d", name_of(cuArrayCreate(&arr2, &d2)));
             put("both_device_used", used_mib() - base);
             CUmipmappedArray mip = nullptr;
             put("create_mipmapped", name_of(cuMipmappedArrayCreate(&mip, &d, 2)));
             put("mip_device_used", used_mib() - base);
             put("destroy", name_of(cuArrayDestroy(arr2)));
             put("destroyed_device_used", used_mib() - base);
             // A small array of an odd size: what the driver charges for it, in bytes.
             size_t free_before = 0, free_after = 0, total = 0;
             MUST(cuMemGetInfo(&free_before, &total));
             CUDA_ARRAY_DESCRIPTOR odd{};
             odd.Width = 1000;
             odd.Height = 1000;
             odd.Format = CU_AD_FORMAT_UNSIGNED_INT8;
             odd.NumChannels = 1;
             CUarray small = nullptr;
             put("create_odd", name_of(cuArrayCreate(&small, &odd)));
             MUST(cuMemGetInfo(&free_after, &total));
             put("odd_bytes", static_cast<long long>(free_before - free_after));
             CUDA_ARRAY3D_DESCRIPTOR linear{};
             linear.Width = 1 << 20;
             linear.Format = CU_AD_FORMAT_FLOAT;
             linear.NumChannels = 1;
             CUarray one_d = nullptr;
             MUST(cuMemGetInfo(&free_before, &total));
             put("create_1d", name_of(cuArray3DCreate(&one_d, &linear)));
             MUST(cuMemGetInfo(&free_after, &total));
             put("one_d_bytes", static_cast<long long>(free_before - free_after));
             MUST(cuDevicePrimaryCtxReset(0));
             primary(0);
             put("reset_device_used", used_mib() - base);
         }},
        // Pool IPC: a pool exported as a POSIX fd, a pointer of it imported by another process; what the
        // importer learns of its size and what its import keeps after the exporter's free.
        {"pool_ipc", [] {
             int sv[2];
             MUST(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0 ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN);
             std::fflush(stdout);
             const pid_t importer = fork();
             if (importer == 0) {
                 close(sv[0]);
                 MUST(cuInit(0));
                 primary(0);
                 if (write(sv[1], "r", 1) != 1) _exit(1);
                 const int fd = receive_fd(sv[1]);
                 CUmemPoolPtrExportData data;
                 if (read(sv[1], &data, sizeof data) != sizeof data) _exit(1);
                 CUmemoryPool pool = nullptr;
                 std::string line = " import_pool=" + name_of(cuMemPoolImportFromShareableHandle(
                                        &pool, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
                 CUdeviceptr p = 0;
                 line += " import_ptr=" + name_of(cuMemPoolImportPointer(&p, pool, &data));
                 CUdeviceptr base = 0;
                 size_t size = 0;
                 line += " importer_range=" + name_of(cuMemGetAddressRange(&base, &size, p)) +
                         " importer_size=" + std::to_string(size / kMiB);
                 line += " importer_reserved=" + std::to_string(reserved_mib(pool));
                 if (write(sv[1], line.c_str(), line.size() + 1) < 0) _exit(1);
                 char step = 0;
                 if (read(sv[1], &step, 1) != 1) _exit(1);
                 const std::string freed = name_of(cuMemFree(p));
                 if (write(sv[1], freed.c_str(), freed.size() + 1) < 0) _exit(1);
                 if (read(sv[1], &step, 1) != 1) _exit(1);
                 _exit(0);
             }
             close(sv[1]);  // an importer that dies ends the exchange instead of leaving it waiting
             MUST(cuInit(0));
             primary(0);
             char ready = 0;
             if (read(sv[0], &ready, 1) != 1) _exit(1);
             const long long base = used_mib();
             CUmemPoolProps props{};
             props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
             props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
             props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
             props.location.id = 0;
             CUmemoryPool pool = nullptr;
             MUST(cuMemPoolCreate(&pool, &props));
             CUdeviceptr p = 0;
             MUST(cuMemAllocFromPoolAsync(&p, 256 * kMiB, pool, nullptr));
             MUST(cuStreamSynchronize(nullptr));
             int fd = -1;
             put("export_pool", name_of(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)));
             CUmemPoolPtrExportData data{};
             put("export_ptr", name_of(cuMemPoolExportPointer(&data, p)));
             send_fd(sv[0], fd);
             if (write(sv[0], &data, sizeof data) != sizeof data) _exit(1);
             char line[512] = {};
             if (read(sv[0], line, sizeof line) <= 0) _exit(1);
             out += line;
             put("free_while_imported", name_of(cuMemFreeAsync(p, nullptr)));
             MUST(cuStreamSynchronize(nullptr));
             put("after_exporter_free", used_mib() - base);
             if (write(sv[0], "x", 1) != 1) _exit(1);
             char freed[64] = {};
             if (read(sv[0], freed, sizeof freed) <= 0) _exit(1);
             put("importer_free", freed);
             put("after_importer_free", used_mib() - base);
             if (write(sv[0], "x", 1) != 1) _exit(1);
             int status = 0;
             waitpid(importer, &status, 0);
             close(fd);
             const long long alone = used_mib();  // the importer's context gone too
             put("destroy", name_of(cuMemPoolDestroy(pool)));
             put("destroy_gave_back", alone - used_mib());
         }},
        // dma-buf: an fd for a range of classic memory, and what it keeps after the free.
        {"dmabuf_classic", [] {
             primary(0);
             const long long base = used_mib();
             CUdeviceptr p = 0;
             MUST(cuMemAlloc(&p, 1024 * kMiB));
             int fd = -1;
             put("get", name_of(cuMemGetHandleForAddressRange(&fd, p, 1024 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)));
             int part = -1;
             put("get_part", name_of(cuMemGetHandleForAddressRange(&part, p + 64 * kMiB, 64 * kMiB,
                                                                   CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)));
             int odd = -1;
             put("get_unaligned", name_of(cuMemGetHandleForAddressRange(&odd, p + 4096, 4096,
                                                                        CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)));
             if (part >= 0) close(part);
             if (odd >= 0) close(odd);
             MUST(cuMemFree(p));
             put("after_free", used_mib() - base);
             put("reuse_ptr", pointer_answer(p));
             close(fd);
             put("after_close", used_mib() - base);
         }},
        // dma-buf of part of an allocation: what it keeps after the free.
        {"dmabuf_part", [] {
             primary(0);
             const long long base = used_mib();
             CUdeviceptr p = 0;
             MUST(cuMemAlloc(&p, 1024 * kMiB));
             int fd = -1;
             MUST(cuMemGetHandleForAddressRange(&fd, p + 64 * kMiB, 64 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
             MUST(cuMemFree(p));
             put("after_free", used_mib() - base);
             close(fd);
             put("after_close", used_mib() - base);
         }},
        // dma-buf across a context reset: does the fd keep the memory the reset frees?
        {"dmabuf_reset", [] {
             primary(0);
             const long long base = used_mib();
             CUdeviceptr p = 0;
             MUST(cuMemAlloc(&p, 256 * kMiB));
             int fd = -1;
             MUST(cuMemGetHandleForAddressRange(&fd, p, 256 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
             MUST(cuDevicePrimaryCtxReset(0));
             primary(0);
             put("after_reset", used_mib() - base);
             close(fd);
             put("after_close", used_mib() - base);
         }},
        // dma-buf of VMM memory: the fd keeps the physical memory after unmap and release.
        {"dmabuf_vmm", [] {
             primary(0);
             const long long base = used_mib();
             CUmemAllocationProp prop{};
             prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
             prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
             prop.location.id = 0;
             prop.allocFlags.gpuDirectRDMACapable = 1;
             CUmemGenericAllocationHandle h = 0;
             MUST(cuMemCreate(&h, 1024 * kMiB, &prop, 0));
             CUdeviceptr va = 0;
             MUST(cuMemAddressReserve(&va, 1024 * kMiB, 0, 0, 0));
             MUST(cuMemMap(va, 1024 * kMiB, 0, h, 0));
             CUmemAccessDesc a{};
             a.location = prop.location;
             a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
             MUST(cuMemSetAccess(va, 1024 * kMiB, &a, 1));
             int fd = -1;
             put("get", name_of(cuMemGetHandleForAddressRange(&fd, va, 1024 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)));
             MUST(cuMemUnmap(va, 1024 * kMiB));
             MUST(cuMemRelease(h));
             MUST(cuMemAddressFree(va, 1024 * kMiB));
             put("after_release", used_mib() - base);
             close(fd);
             put("after_close", used_mib() - base);
         }},
        // External memory: the only exporter here is the driver itself, so a cuMemCreate POSIX fd is offered
        // as an opaque fd; whether the import takes it, what a mapped buffer is, and what keeps the memory.
        {"external_memory", [] {
             primary(0);
             const long long base = used_mib();
             CUmemAllocationProp prop{};
             prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
             prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
             prop.location.id = 0;
             prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
             CUmemGenericAllocationHandle h = 0;
             MUST(cuMemCreate(&h, 256 * kMiB, &prop, 0));
             int fd = -1;
             MUST(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
             CUDA_EXTERNAL_MEMORY_HANDLE_DESC desc{};
             desc.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
             desc.handle.fd = fd;
             desc.size = 256 * kMiB;
             CUexternalMemory ext = nullptr;
             const CUresult imported = cuImportExternalMemory(&ext, &desc);
             put("import_vmm_fd", name_of(imported));
             put("after_import", used_mib() - base);
             if (imported == CUDA_SUCCESS) {
                 CUDA_EXTERNAL_MEMORY_BUFFER_DESC b{};
                 b.size = 64 * kMiB;
                 CUdeviceptr p = 0;
                 put("mapped_buffer", name_of(cuExternalMemoryGetMappedBuffer(&p, ext, &b)));
                 put("after_buffer", used_mib() - base);
                 CUdeviceptr start = 0;
                 size_t size = 0;
                 put("buffer_range", name_of(cuMemGetAddressRange(&start, &size, p)));
                 put("buffer_size", static_cast<long long>(size / kMiB));
                 MUST(cuMemRelease(h));
                 put("after_release", used_mib() - base);
                 put("destroy_mapped", name_of(cuDestroyExternalMemory(ext)));
                 put("after_destroy", used_mib() - base);
                 put("free_buffer", name_of(cuMemFree(p)));
                 put("after_free", used_mib() - base);
             } else {
                 MUST(cuMemRelease(h));
                 close(fd);
             }
             // An fd no exporter made (a plain memfd).
             CUDA_EXTERNAL_MEMORY_HANDLE_DESC bogus{};
             bogus.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
             bogus.handle.fd = memfd_create("not-memory", 0);
             bogus.size = 2 * kMiB;
             CUexternalMemory none = nullptr;
             put("import_memfd", name_of(cuImportExternalMemory(&none, &bogus)));
         }},
    };
    return all;
}

void run_in_child(const Fact& f) {
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        g_fact = f.name;
        alarm(60);  // a fact that hangs (a driver that lacks an entry point its peer needs) ends; the rest go on
        // The two that fork an importer initialise after the fork.
        if (std::strcmp(f.name, "ipc_import") != 0 && std::strcmp(f.name, "pool_ipc") != 0) MUST(cuInit(0));
        f.run();
        std::printf("fact %s%s\n", f.name, out.c_str());
        std::fflush(stdout);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) std::printf("fact %s crashed-%d\n", f.name, WTERMSIG(status));
}

}  // namespace

int main(int argc, char** argv) {
    for (const Fact& f : facts()) {
        bool wanted = argc == 1;
        for (int i = 1; i < argc; ++i) wanted |= std::strcmp(argv[i], f.name) == 0;
        if (wanted) run_in_child(f);
    }
    return 0;
}
