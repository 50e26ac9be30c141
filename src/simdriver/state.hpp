// state: every piece of mutable state of the simulated driver, behind one interface.
// Entry points (entry_*.cpp) only validate pointers and translate; every rule of the real driver's
// (docs/DRIVER.md: reference counting, handle reuse, mapping checks) and capacity lives here, under one
// mutex. What the processes of one simulated node share sits in SimNode (node.hpp), in shared memory
// when CUMEMAUDIT_SIM_NODE names a node, so nothing else may keep state of its own.
#pragma once

#include <cuda.h>

#include "node.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace cumemaudit::sim {

class SimState {
public:
    // The process's one instance, created on first use and never destroyed (CUDA calls may come from
    // atexit handlers and other threads after static destruction begins).
    static SimState& get();
    // Process hooks: fork (the lock held across it), the library's unload (address space given back).
    static void before_fork();
    static void after_fork();
    static void on_unload();

    // --- init and devices ---
    CUresult init();  // reads the environment on the first successful call; idempotent afterwards
    bool initialized() const;
    int device_count() const;
    std::uint64_t capacity() const;  // bytes per device
    // Multiprocessors per device: CUMEMAUDIT_SIM_SMS, or an H200's 132 when that is 0 (no stack modelled).
    int multiprocessors() const;
    // A device's capacity and the bytes used on it, node-wide (the simulated NVML's memory figures); false
    // before cuInit or for a device that is not there.
    bool device_memory(int device, std::uint64_t* total, std::uint64_t* used);

    // --- contexts (the current context is per thread) ---
    // A context reserves device memory from its beginning (a primary context's first retain after none or a
    // reset, cuCtxCreate; CUDA_ERROR_OUT_OF_MEMORY and no context when it does not fit) to its end (its
    // destruction, a primary context's reset or last release), which also frees its classic allocations, host
    // and managed memory, IPC opens, registrations and modules (docs/DRIVER.md).
    CUresult primary_ctx_retain(CUcontext* ctx, CUdevice dev);
    CUresult primary_ctx_release(CUdevice dev);
    CUresult primary_ctx_reset(CUdevice dev);
    CUresult primary_ctx_state(CUdevice dev, unsigned* flags, int* active);
    CUresult ctx_create(CUcontext* out, CUdevice dev);  // made current, on top of the thread's stack
    CUresult ctx_destroy(CUcontext ctx);
    // Green contexts: a share of `sms` multiprocessors over the device's primary context, which must be
    // active; their context (cuCtxFromGreenCtx) shares its modules' heaps, limits and reservations.
    CUresult resource_desc(CUdevResourceDesc* out, unsigned sms);
    CUresult green_create(CUgreenCtx* out, CUdevResourceDesc desc, CUdevice dev);
    CUresult green_destroy(CUgreenCtx g);
    CUresult green_context(CUcontext* out, CUgreenCtx g);
    // The current context's limits; setting the stack moves its reservation at once.
    CUresult ctx_get_limit(std::size_t* value, CUlimit limit) const;
    CUresult ctx_set_limit(CUlimit limit, std::size_t value);
    // cuPointerGetAttribute for the attributes modelled (context, device ordinal, memory type, range).
    CUresult pointer_attribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr);
    CUcontext current_context() const;
    CUresult set_current_context(CUcontext ctx);
    // The thread's context stack: the current context is its top.
    CUresult push_context(CUcontext ctx);
    CUresult pop_context(CUcontext* out);  // out may be null
    // Device of the current context: NOT_INITIALIZED / INVALID_CONTEXT when there is none.
    CUresult current_device(int* dev) const;

    // What the simulated NVML lists for `device` (empty before cuInit: no node is open yet).
    std::vector<SimNode::ProcessUse> processes(int device);

    // --- classic memory ---
    CUresult mem_get_info(std::size_t* free, std::size_t* total);
    // On the current context's device, owned by the current context.
    CUresult device_alloc(CUdeviceptr* out, std::size_t bytes);
    CUresult managed_alloc(CUdeviceptr* out, std::size_t bytes);
    CUresult host_alloc(void** out, std::size_t bytes);
    CUresult device_free(CUdeviceptr ptr);  // device, managed or stream-ordered
    CUresult host_free(void* ptr);
    // Page-locking the program's own memory: ranges that must not overlap, unregistered by their start.
    CUresult host_register(void* ptr, std::size_t bytes, unsigned flags);
    CUresult host_unregister(void* ptr);
    CUresult address_range(CUdeviceptr ptr, CUdeviceptr* base, std::size_t* size);

    // --- stream-ordered pools (docs/DRIVER.md, "Stream-ordered pools") ---
    CUresult pool_create(CUmemoryPool* out, const CUmemPoolProps& props);
    CUresult pool_destroy(CUmemoryPool pool);
    CUresult pool_trim(CUmemoryPool pool, std::size_t keep);
    CUresult pool_set_attribute(CUmemoryPool pool, CUmemPool_attribute attr, const void* value);
    CUresult pool_get_attribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value);
    CUresult default_pool(CUmemoryPool* out, CUdevice dev);
    CUresult current_pool(CUmemoryPool* out, CUdevice dev);
    CUresult set_current_pool(CUdevice dev, CUmemoryPool pool);
    // CUDA 13's pools by location and allocation type (pools.cpp).
    CUresult location_pool(CUmemoryPool* out, const CUmemLocation& where, CUmemAllocationType type, bool current);
    CUresult set_location_pool(const CUmemLocation& where, CUmemAllocationType type, CUmemoryPool pool);
    // cuMemsetD8: the range must lie in one allocation the device can write; a managed pool's memory with no
    // device location becomes resident on the current device (measured).
    CUresult memset(CUdeviceptr ptr, std::size_t bytes);
    CUresult prefetch(CUdeviceptr ptr, std::size_t bytes, const CUmemLocation& to);  // cuMemPrefetchAsync_v2
    // Pool IPC (pool_ipc.cpp): a pool as a POSIX fd, imported elsewhere on the node; its pointers likewise.
    CUresult pool_export(void* handle_out, CUmemoryPool pool, CUmemAllocationHandleType type);
    CUresult pool_import(CUmemoryPool* out, int fd, CUmemAllocationHandleType type);
    CUresult pool_export_pointer(CUmemPoolPtrExportData* out, CUdeviceptr ptr);
    CUresult pool_import_pointer(CUdeviceptr* out, CUmemoryPool pool, const CUmemPoolPtrExportData& data);
    // From `pool`, or the current context's device's current pool when null.
    CUresult pool_alloc(CUdeviceptr* out, std::size_t bytes, CUmemoryPool pool);
    // A synchronisation point (a stream's or the context's): each pool gives back its idle memory above its
    // release threshold.
    void synchronized();

    // --- device memory shared outside its allocation: legacy IPC and dma-buf fds ---
    CUresult ipc_get(CUipcMemHandle* out, CUdeviceptr ptr);
    CUresult ipc_open(CUdeviceptr* out, const CUipcMemHandle& handle);
    CUresult ipc_close(CUdeviceptr ptr);
    // A dma-buf fd for [ptr, ptr + size) of a classic allocation or a mapping: it keeps the whole allocation.
    CUresult dma_buf(int* fd, CUdeviceptr ptr, std::size_t size);

    // --- virtual memory management ---
    CUresult mem_create(CUmemGenericAllocationHandle* out, std::size_t size, const CUmemAllocationProp& prop);
    CUresult mem_release(CUmemGenericAllocationHandle h);
    CUresult address_reserve(CUdeviceptr* out, std::size_t size, std::size_t alignment);
    CUresult address_free(CUdeviceptr ptr, std::size_t size);
    CUresult map(CUdeviceptr ptr, std::size_t size, std::size_t offset, CUmemGenericAllocationHandle h);
    CUresult unmap(CUdeviceptr ptr, std::size_t size);
    CUresult set_access(CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc, std::size_t count);
    CUresult get_access(unsigned long long* flags, const CUmemLocation& loc, CUdeviceptr ptr);
    CUresult retain_handle(CUmemGenericAllocationHandle* out, CUdeviceptr addr);
    CUresult export_handle(void* out, CUmemGenericAllocationHandle h, CUmemAllocationHandleType type);
    CUresult import_handle(CUmemGenericAllocationHandle* out, void* os_handle, CUmemAllocationHandleType type);
    CUresult properties(CUmemAllocationProp* out, CUmemGenericAllocationHandle h);

    // --- multicast objects (handles like memory's: released, mapped, exported and imported the same way) ---
    CUresult multicast_create(CUmemGenericAllocationHandle* out, const CUmulticastObjectProp& prop);
    CUresult multicast_add_device(CUmemGenericAllocationHandle mc, CUdevice dev);
    CUresult multicast_bind_mem(CUmemGenericAllocationHandle mc, std::size_t mc_offset, CUmemGenericAllocationHandle mem,
                                std::size_t mem_offset, std::size_t size);
    CUresult multicast_bind_addr(CUmemGenericAllocationHandle mc, std::size_t mc_offset, CUdeviceptr ptr, std::size_t size);
    CUresult multicast_unbind(CUmemGenericAllocationHandle mc, CUdevice dev, std::size_t mc_offset, std::size_t size);

    // --- streams and graphs (plain objects; nothing executes) ---
    CUresult stream_create(CUstream* out);
    CUresult stream_destroy(CUstream s);
    CUresult stream_check(CUstream s) const;  // the null and special streams are valid
    // Into a graph of its own, or into `into` (cuStreamBeginCaptureToGraph).
    CUresult stream_begin_capture(CUstream s, CUstreamCaptureMode mode, CUgraph into = nullptr);
    // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED where a capture forbids a synchronising call from this thread.
    CUresult check_unsafe_during_capture() const;
    CUresult stream_end_capture(CUstream s, CUgraph* out);
    CUresult stream_is_capturing(CUstream s, CUstreamCaptureStatus* out) const;
    CUresult graph_instantiate(CUgraphExec* out, CUgraph g, unsigned long long flags);
    CUresult graph_destroy(CUgraph g);
    CUresult graph_exec_destroy(CUgraphExec e);
    CUresult graph_create(CUgraph* out);
    // --- graph memory (docs/DRIVER.md, "Graph memory") ---
    CUresult graph_add_alloc(CUgraphNode* node, CUgraph g, CUDA_MEM_ALLOC_NODE_PARAMS& params);
    CUresult graph_add_free(CUgraphNode* node, CUgraph g, CUdeviceptr ptr);
    // cuMemAllocAsync / cuMemFreeAsync on a capturing stream: an allocation of the graph it builds, and a
    // free of one (false: not the graph's, freed as outside a capture).
    CUresult captured_alloc(CUstream s, std::size_t bytes, CUdeviceptr* out);
    bool captured_free(CUstream s, CUdeviceptr ptr);
    bool capturing(CUstream s) const;
    CUresult graph_launch(CUgraphExec e, CUstream s);  // cuGraphLaunch and cuGraphUpload
    CUresult graph_mem_trim(CUdevice dev);
    CUresult graph_mem_attribute(CUdevice dev, CUgraphMem_attribute attr, cuuint64_t* value);

    // --- modules and launches (kernels.cpp; docs/DRIVER.md, "Contexts, kernel stacks and launches" and
    // "Module code and globals"): PTX read for its kernels, their local memory and code, and its globals,
    // loaded into the current context, which holds device memory for the code and globals; nothing executes ---
    CUresult module_load(CUmodule* out, const char* image);
    CUresult module_unload(CUmodule m);
    // A library: its image read at the load, a module of the current context made at the first ask (under
    // eager loading, at the load).
    CUresult library_load(CUlibrary* out, const char* image);
    CUresult library_module(CUmodule* out, CUlibrary lib);
    CUresult library_unload(CUlibrary lib);
    CUresult library_kernel(CUkernel* out, CUlibrary lib, const char* name);
    CUresult kernel_function(CUfunction* out, CUkernel k);  // in the current context
    CUresult kernel_library(CUlibrary* out, CUkernel k);
    CUresult loading_mode(CUmoduleLoadingMode* out) const;
    // The function named; under lazy loading its code is taken at the first get.
    CUresult module_function(CUfunction* out, CUmodule m, const char* name);
    CUresult function_attribute(int* out, CUfunction_attribute attr, CUfunction f);
    CUresult function_name(const char** out, CUfunction f);
    // A launch in the current context (of a function, or of a library's kernel as cuda.h allows): a kernel
    // needing more local memory than the stack limit raises it.
    CUresult launch(CUfunction f, CUstream s, const unsigned grid[3], const unsigned block[3]);

    // --- external memory (docs/DRIVER.md, "External memory"): an opaque fd of a VMM export on the node ---
    CUresult external_import(CUexternalMemory* out, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC& desc);
    CUresult external_buffer(CUdeviceptr* out, CUexternalMemory ext, const CUDA_EXTERNAL_MEMORY_BUFFER_DESC& desc);
    CUresult external_destroy(CUexternalMemory ext);

    // --- arrays (docs/DRIVER.md, "Arrays"): device memory by descriptor, owned by the current context ---
    CUresult array_create(CUarray* out, const CUDA_ARRAY3D_DESCRIPTOR& desc);
    CUresult mipmapped_create(CUmipmappedArray* out, const CUDA_ARRAY3D_DESCRIPTOR& desc, unsigned levels);
    CUresult array_destroy(CUarray a);
    CUresult mipmapped_destroy(CUmipmappedArray m);
    CUresult array_descriptor(CUDA_ARRAY3D_DESCRIPTOR* out, CUarray a);
    CUresult mipmapped_level(CUarray* out, CUmipmappedArray m, unsigned level);

    SimState(const SimState&) = delete;
    SimState& operator=(const SimState&) = delete;

private:
    // A load's PTX compile (CUMEMAUDIT_SIM_JIT_MS), spent before any lock: another process may allocate meanwhile.
    void compile_wait();
    CUresult host_backed_alloc(std::uint64_t* out, std::size_t bytes, bool managed);
    void await_team(CUmemGenericAllocationHandle h);
    CUresult multicast_of(CUmemGenericAllocationHandle mc, CUdevice dev, std::uint64_t* id);  // both locks held
    CUresult bind(CUmemGenericAllocationHandle mc, std::size_t mc_offset, std::uint64_t mem, std::size_t mem_offset,
                  std::size_t size);  // with both locks held
    SimState();
    ~SimState();
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace cumemaudit::sim
