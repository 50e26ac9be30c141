// Scenario programs for the auditor, one subcommand each. Each calls the driver exactly as a real program
// would (linked against the toolkit's stub libcuda), checks the return codes it gets against what the
// driver documents, and prints what the test compares with the report. Sites the tests look for are
// marked with `// site:NAME` on the line of the call.
#include "support/driver_checks.hpp"
#include "support/fd_passing.hpp"
#include "support/program.hpp"

#include <cuda.h>
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using cumemaudit::program::init_primary_context;

constexpr size_t kMiB = 1 << 20;
constexpr size_t kGran = 2 * kMiB;

CUmemAllocationProp props(unsigned handle_types = CU_MEM_HANDLE_TYPE_NONE) {
    return cumemaudit::program::device_prop(0, handle_types);
}

size_t free_bytes() {
    size_t free = 0, total = 0;
    OK(cuMemGetInfo(&free, &total));
    return free;
}

__attribute__((noinline)) CUmemGenericAllocationHandle create_first(size_t size) {
    CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, size, &p, 0));  // site:reuse_first
    return h;
}

__attribute__((noinline)) CUmemGenericAllocationHandle create_second(size_t size) {
    CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, size, &p, 0));  // site:reuse_second
    return h;
}

// Double release, address free while mapped, a map onto a mapped range: the driver's codes reach us.
int misuse() {
    init_primary_context();
    CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, kGran, &p, 0));
    CUdeviceptr va = 0;
    OK(cuMemAddressReserve(&va, kGran, 0, 0, 0));
    OK(cuMemMap(va, kGran, 0, h, 0));
    CHECK(cuMemMap(va, kGran, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  // site:map_onto_mapped
    CHECK(cuMemAddressFree(va, kGran), CUDA_ERROR_INVALID_VALUE);  // site:free_mapped
    OK(cuMemUnmap(va, kGran));
    OK(cuMemAddressFree(va, kGran));
    OK(cuMemRelease(h));
    CHECK(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);  // site:double_release
    std::printf("misuse: done\n");
    return 0;
}

// A handle value released and created again: the leak is the second creation's, not the first's.
int reuse() {
    init_primary_context();
    const size_t before = free_bytes();
    CUmemGenericAllocationHandle a = create_first(kGran);
    OK(cuMemRelease(a));
    CUmemGenericAllocationHandle b = create_second(kGran);
    std::printf("reuse: same_value=%d drop=%zu\n", a == b ? 1 : 0, before - free_bytes());
    return 0;
}

// An exported POSIX fd left open pins memory after every reference is gone.
int open_export() {
    init_primary_context();
    CUmemAllocationProp p = props(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, 2 * kGran, &p, 0));
    int fd = -1;
    OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));  // site:export
    OK(cuMemRelease(h));
    int closed_fd = -1;
    CUmemGenericAllocationHandle h2 = 0;
    OK(cuMemCreate(&h2, kGran, &p, 0));
    OK(cuMemExportToShareableHandle(&closed_fd, h2, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    OK(cuMemRelease(h2));
    close(closed_fd);  // this one is closed: its memory is free again
    std::printf("open_export: fd=%d\n", fd);
    return 0;
}

// An allocation pinned twice: its creation reference is never released and its exported fd stays open. The
// reference alone would hold it (nothing can release it), so it is unreachable, not open-export.
int held_export() {
    init_primary_context();
    CUmemAllocationProp p = props(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, 3 * kGran, &p, 0));  // site:held_create
    int fd = -1;
    OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CUdeviceptr va = 0;
    OK(cuMemAddressReserve(&va, 3 * kGran, 0, 0, 0));
    OK(cuMemMap(va, 3 * kGran, 0, h, 0));
    OK(cuMemUnmap(va, 3 * kGran));
    OK(cuMemAddressFree(va, 3 * kGran));
    std::printf("held_export: fd=%d\n", fd);
    return 0;
}

const char* result_name(CUresult r) {
    const char* name = nullptr;
    cuGetErrorName(r, &name);
    return name != nullptr ? name : "?";
}

// cuBLAS under PyTorch graph capture: a synchronous cuMemFree while a stream captures in global mode is
// refused (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and the memory stays allocated; once capture ends the
// same free succeeds. Prints the two answers.
int capture_free() {
    init_primary_context();
    CUdeviceptr d = 0;
    OK(cuMemAlloc(&d, 5 * 4096));
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    const CUresult during = cuMemFree(d);  // site:capture_free
    CUgraph g;
    cuStreamEndCapture(s, &g);  // the real driver may answer that the refused call invalidated the capture
    const CUresult after = cuMemFree(d);
    std::printf("capture_free: during=%s after=%s\n", result_name(during), result_name(after));
    return 0;
}

__attribute__((noinline)) void planted_leak(CUdeviceptr* out) {
    OK(cuMemAlloc(out, 3 * 4096));  // site:planted
}

// 8 threads churn allocations; thread i leaks i+1 allocations of 12 KiB at one site.
int threads() {
    init_primary_context();
    CUcontext ctx;
    OK(cuCtxGetCurrent(&ctx));
    std::vector<std::thread> pool;
    for (int t = 0; t < 8; ++t) {
        pool.emplace_back([t, ctx] {
            OK(cuCtxSetCurrent(ctx));
            for (int i = 0; i < 2000; ++i) {
                CUdeviceptr d = 0;
                OK(cuMemAlloc(&d, 4096 + 512 * (i % 7)));
                CUmemAllocationProp p = props();
                CUmemGenericAllocationHandle h = 0;
                if (i % 100 == 0) {
                    OK(cuMemCreate(&h, kGran, &p, 0));
                    OK(cuMemRelease(h));
                }
                OK(cuMemFree(d));
            }
            for (int k = 0; k <= t; ++k) {
                CUdeviceptr d;
                planted_leak(&d);
            }
        });
    }
    for (auto& th : pool) th.join();
    std::printf("threads: planted=%d bytes=%d\n", 36, 36 * 3 * 4096);
    return 0;
}

__attribute__((noinline)) CUresult child_leak() {
    CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h = 0;
    return cuMemCreate(&h, 3 * kGran, &p, 0);  // site:child
}

// The parent leaks nothing; the forked child leaks one allocation and writes its own report. (A real driver
// refuses CUDA in a child forked after cuInit: the child then reports the driver's answer and leaks nothing.)
int fork_child() {
    init_primary_context();
    CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, kGran, &p, 0));
    const pid_t pid = fork();
    if (pid == 0) {
        std::printf("child pid=%d\n", getpid());
        const CUresult r = child_leak();
        const char* name = nullptr;
        cuGetErrorName(r, &name);
        std::printf("child cuMemCreate=%s\n", name != nullptr ? name : "?");
        std::fflush(stdout);
        std::exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    OK(cuMemRelease(h));
    std::printf("parent pid=%d child_status=%d\n", getpid(), WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}

__attribute__((noinline)) void leak_one_vmm(size_t size) {
    CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, size, &p, 0));  // site:gate
}

// Leaks one 2 MiB allocation and exits with the code given.
int exit_with(int code) {
    init_primary_context();
    leak_one_vmm(kGran);
    return code;
}

// Leaks, prints "ready", then waits to be killed.
int wait_for_signal() {
    init_primary_context();
    leak_one_vmm(kGran);
    std::printf("ready\n");
    std::fflush(stdout);
    for (int i = 0; i < 600; ++i) sleep(1);
    return 0;
}

// Classic allocation kinds, one each left unfreed, the async one through the per-thread variant.
int classic() {
    init_primary_context();
    using AllocAsync = CUresult(CUDAAPI*)(CUdeviceptr*, size_t, CUstream);
    void* fn = nullptr;
    CUdriverProcAddressQueryResult st;
    OK(cuGetProcAddress("cuMemAllocAsync", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    CUdeviceptr d1, d2, d3;
    OK(cuMemAlloc(&d1, 1 * kMiB));                                         // site:classic_device
    OK(reinterpret_cast<AllocAsync>(fn)(&d2, 2 * kMiB, nullptr));          // site:classic_async_ptsz
    OK(cuMemAllocManaged(&d3, 3 * kMiB, CU_MEM_ATTACH_GLOBAL));            // site:classic_managed
    void* host = nullptr;
    OK(cuMemHostAlloc(&host, 4 * kMiB, 0));                                // site:classic_host
    CUdeviceptr freed;
    OK(cuMemAlloc(&freed, 5 * kMiB));
    OK(cuMemFree(freed));
    CHECK(cuMemFree(freed), CUDA_ERROR_INVALID_VALUE);                     // site:classic_double_free
    std::printf("classic: done\n");
    return 0;
}

// A library loaded with RTLD_DEEPBIND leaks 7 MiB through its own direct libcuda binding.
int deepbind(const char* library) {
    init_primary_context();
    std::printf("deepbind: free before %zu\n", free_bytes());  // one intercepted call of our own
    void* lib = dlopen(library, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (lib == nullptr) {
        std::fprintf(stderr, "dlopen %s: %s\n", library, dlerror());
        return 98;
    }
    auto leak = reinterpret_cast<int (*)()>(dlsym(lib, "leak_through_library"));
    if (leak == nullptr || leak() != 0) return 97;
    std::printf("deepbind: done\n");
    return 0;
}

// Writes a checkpoint through the C API (found with dlsym, as a program that does not link us would),
// then ends without running exit handlers: the checkpoint is the report left behind.
int checkpoint_then_vanish() {
    init_primary_context();
    leak_one_vmm(kGran);
    auto checkpoint = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "cumemaudit_checkpoint"));
    std::printf("checkpoint api: %s\n", checkpoint != nullptr ? "found" : "absent");
    std::fflush(stdout);
    if (checkpoint != nullptr) checkpoint();
    _exit(0);
}

// The stream-ordered pool grows over four marked steps (each keeps 64 MiB more); the CUPTI backend's
// activity records show the pool's growth in the step records.
int async_growth() {
    init_primary_context();
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    CUstream s;
    OK(cuStreamCreate(&s, 0));
    for (uint64_t n = 1; n <= 4; ++n) {
        CUdeviceptr d;
        OK(cuMemAllocAsync(&d, 64 * kMiB, s));
        OK(cuStreamSynchronize(s));
        if (step != nullptr) step(n);
    }
    std::printf("async_growth: done\n");
    return 0;
}

// NCCL's host buffers (src/include/alloc.h: ncclCuMemHostAlloc, ncclCuMemHostFree): physical memory on
// the GPU's host NUMA node, mapped, and made accessible to the device and to the host. Three steps each
// add a 512 MiB buffer (host memory: no growth of device memory); then two are freed NCCL's way and the
// last one's range goes with its creation reference still held (a leak of host memory).
__attribute__((noinline)) CUdeviceptr nccl_host_alloc(size_t size, CUmemGenericAllocationHandle* out) {
    CUdevice dev = 0;
    OK(cuCtxGetDevice(&dev));
    int numa = -1;
    OK(cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev));
    if (numa < 0) numa = 0;
    CUmemAllocationProp p{};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location = {CU_MEM_LOCATION_TYPE_HOST_NUMA, numa};
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t gran = 0;
    OK(cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size = (size + gran - 1) / gran * gran;
    OK(cuMemCreate(out, size, &p, 0));  // site:nccl_host_create
    CUdeviceptr ptr = 0;
    OK(cuMemAddressReserve(&ptr, size, gran, 0, 0));
    OK(cuMemMap(ptr, size, 0, *out, 0));
    CUmemAccessDesc access{};
    access.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    OK(cuMemSetAccess(ptr, size, &access, 1));
    access.location = {CU_MEM_LOCATION_TYPE_HOST_NUMA, numa};
    OK(cuMemSetAccess(ptr, size, &access, 1));
    return ptr;
}

void nccl_host_free(CUdeviceptr ptr, size_t size) {
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemRetainAllocationHandle(&h, reinterpret_cast<void*>(ptr)));
    OK(cuMemRelease(h));
    OK(cuMemUnmap(ptr, size));
    OK(cuMemRelease(h));
    OK(cuMemAddressFree(ptr, size));
}

int nccl_host() {
    init_primary_context();
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    const size_t size = 512 * kMiB;
    std::vector<CUdeviceptr> buffers;
    const size_t free_before = free_bytes();
    for (uint64_t n = 1; n <= 3; ++n) {
        CUmemGenericAllocationHandle h = 0;
        buffers.push_back(nccl_host_alloc(size, &h));
        if (step != nullptr) step(n);
    }
    nccl_host_free(buffers[0], size);
    nccl_host_free(buffers[1], size);
    OK(cuMemUnmap(buffers[2], size));  // the range goes; the creation reference stays
    OK(cuMemAddressFree(buffers[2], size));
    std::printf("nccl_host: device_drop=%zu\n", free_before - free_bytes());
    return 0;
}

// Host memory page-locked by the program (XLA's and PyTorch's host allocators, NVSHMEM, UCX): 512 MiB
// registered and unregistered, a second registration of it refused, an unregister of memory no longer
// registered refused, and 64 MiB left registered at exit.
int host_register() {
    init_primary_context();
    const size_t big = 512 * kMiB, small = 64 * kMiB;
    void* a = std::aligned_alloc(4096, big);
    void* b = std::aligned_alloc(4096, small);
    OK(cuMemHostRegister(a, big, 0));
    CHECK(cuMemHostRegister(a, big, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);  // site:register_twice
    OK(cuMemHostUnregister(a));
    CHECK(cuMemHostUnregister(a), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);  // site:unregister_twice
    OK(cuMemHostRegister(b, small, CU_MEMHOSTREGISTER_PORTABLE));  // site:left_registered
    std::free(a);
    std::printf("host_register: done\n");
    return 0;
}

// A context's end frees what it owns: a test harness resets the device between cases (cudaDeviceReset is
// cuDevicePrimaryCtxReset), and a library tears down a context of its own. Device and pinned host memory the
// program never freed goes with the reset; stream-ordered and cuMemCreate memory survives it (measured on
// the H200), and a free of a pointer the reset took is refused.
int context_reset() {
    init_primary_context();
    CUdeviceptr device = 0, async = 0;
    void* pinned = nullptr;
    OK(cuMemAlloc(&device, 256 * kMiB));       // site:reset_alloc
    OK(cuMemAllocHost(&pinned, 64 * kMiB));    // site:reset_host
    OK(cuMemAllocAsync(&async, 128 * kMiB, nullptr));
    CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, kGran, &p, 0));
    OK(cuDevicePrimaryCtxReset(0));            // site:reset_call
    init_primary_context();
    CHECK(cuMemFree(device), CUDA_ERROR_INVALID_VALUE);  // site:free_stale
    OK(cuMemFreeAsync(async, nullptr));
    OK(cuMemRelease(h));
    CUcontext own = nullptr;
    OK(cuCtxCreate(&own, nullptr, 0, 0));
    CUdeviceptr in_own = 0;
    OK(cuMemAlloc(&in_own, 16 * kMiB));        // site:own_ctx_alloc
    OK(cuCtxDestroy(own));                     // site:ctx_destroy
    CUdeviceptr kept = 0;
    OK(cuMemAlloc(&kept, 32 * kMiB));          // site:after_reset_alloc
    std::printf("context_reset: done\n");
    return 0;
}

// Memory shared outside its allocation, as vLLM's custom all-reduce and DeepEP's intranode buffers share
// cudaMalloc memory (legacy IPC) and NCCL's network plugins register dma-buf fds: the importer never closes
// its open, the exporter frees its buffer, and three dma-buf fds stay open past the free (of classic memory,
// of part of it, which keeps the whole allocation, and of a VMM mapping); a fourth is closed first and
// leaves nothing. Runs on a shared simulated node
// (CUMEMAUDIT_SIM_NODE): the importer is a forked process.
int ipc_dmabuf() {
    int to_child[2], to_parent[2];
    if (pipe(to_child) != 0 || pipe(to_parent) != 0) return 2;
    const pid_t importer = fork();
    if (importer == 0) {
        CUipcMemHandle h;
        if (read(to_child[0], &h, sizeof h) != sizeof h) _exit(2);
        init_primary_context();
        CUdeviceptr peer = 0;
        OK(cuIpcOpenMemHandle(&peer, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));  // site:ipc_open
        char step = 0;
        if (write(to_parent[1], "o", 1) != 1 || read(to_child[0], &step, 1) != 1) _exit(2);
        std::printf("ipc_dmabuf: importer done\n");
        std::exit(0);  // never closed: the exporter's memory stays until this process is gone
    }
    init_primary_context();
    CUdeviceptr buffer = 0;
    OK(cuMemAlloc(&buffer, 1024 * kMiB));
    CUipcMemHandle h;
    OK(cuIpcGetMemHandle(&h, buffer));  // site:ipc_get
    char step = 0;
    if (write(to_child[1], &h, sizeof h) != sizeof h || read(to_parent[0], &step, 1) != 1) return 2;
    OK(cuMemFree(buffer));
    CUdeviceptr registered = 0, closed_first = 0;
    int fd = -1, vmm_fd = -1, closed_fd = -1;
    OK(cuMemAlloc(&registered, 256 * kMiB));
    OK(cuMemGetHandleForAddressRange(&fd, registered, 256 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));  // site:dmabuf_get
    OK(cuMemFree(registered));
    CUdeviceptr partly = 0;
    int part_fd = -1;
    OK(cuMemAlloc(&partly, 128 * kMiB));       // site:dmabuf_part_buffer
    OK(cuMemGetHandleForAddressRange(&part_fd, partly + 64 * kMiB, 32 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));  // site:dmabuf_part_get
    OK(cuMemFree(partly));
    OK(cuMemAlloc(&closed_first, 32 * kMiB));
    OK(cuMemGetHandleForAddressRange(&closed_fd, closed_first, 32 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
    close(closed_fd);
    OK(cuMemFree(closed_first));
    CUmemAllocationProp p = props();
    p.allocFlags.gpuDirectRDMACapable = 1;  // what a dma-buf of VMM memory asks for (NCCL's ncclCuMemAlloc)
    CUmemGenericAllocationHandle vmm = 0;
    OK(cuMemCreate(&vmm, 64 * kMiB, &p, 0));
    CUdeviceptr va = 0;
    OK(cuMemAddressReserve(&va, 64 * kMiB, 0, 0, 0));
    OK(cuMemMap(va, 64 * kMiB, 0, vmm, 0));
    OK(cuMemGetHandleForAddressRange(&vmm_fd, va, 64 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));  // site:dmabuf_vmm_get
    OK(cuMemUnmap(va, 64 * kMiB));
    OK(cuMemRelease(vmm));
    OK(cuMemAddressFree(va, 64 * kMiB));
    size_t free_now = 0, total = 0;
    OK(cuMemGetInfo(&free_now, &total));
    std::printf("ipc_dmabuf: used %zu MiB\n", (total - free_now) >> 20);
    if (write(to_child[1], "x", 1) != 1) return 2;
    int status = 0;
    waitpid(importer, &status, 0);
    std::printf("ipc_dmabuf: importer %d\n", static_cast<int>(importer));
    return 0;
}

// cuMemMapArrayAsync takes handles inside a list: with a live handle the simulated driver answers
// NOT_SUPPORTED (it has no sparse arrays), with a made-up one INVALID_VALUE. Then the handle's only mapping
// goes and its range is freed while the reference is held, the program allocates again (where enforce mode
// reclaims what that range free left unreachable), and the list is tried again. Prints each answer and
// whether the program's list came back untouched.
int map_array() {
    init_primary_context();
    CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, kGran, &p, 0));
    CUarrayMapInfo m{};
    m.resourceType = CU_RESOURCE_TYPE_ARRAY;
    m.subresourceType = CU_ARRAY_SPARSE_SUBRESOURCE_TYPE_MIPTAIL;
    m.memOperationType = CU_MEM_OPERATION_TYPE_MAP;
    m.memHandleType = CU_MEM_HANDLE_TYPE_GENERIC;
    m.memHandle.memHandle = h;
    m.deviceBitMask = 1;
    const CUresult live = cuMemMapArrayAsync(&m, 1, nullptr);
    const bool intact = m.memHandle.memHandle == h;
    m.memHandle.memHandle = h ^ 0x5a5a0000u;
    const CUresult madeup = cuMemMapArrayAsync(&m, 1, nullptr);
    m.memHandle.memHandle = h;
    CUdeviceptr va = 0;
    OK(cuMemAddressReserve(&va, kGran, 0, 0, 0));
    OK(cuMemMap(va, kGran, 0, h, 0));
    OK(cuMemUnmap(va, kGran));
    OK(cuMemAddressFree(va, kGran));
    CUmemGenericAllocationHandle next = 0;
    OK(cuMemCreate(&next, kGran, &p, 0));
    OK(cuMemRelease(next));
    const CUresult after = cuMemMapArrayAsync(&m, 1, nullptr);
    OK(cuMemRelease(h));
    std::printf("map_array: live=%s madeup=%s intact=%d after_unreachable=%s\n", result_name(live),
                result_name(madeup), intact ? 1 : 0, result_name(after));
    return 0;
}

}  // namespace

// RMM's cuda_async_memory_resource (rmm/mr/device/cuda_async_memory_resource.hpp): a pool of its own with the
// release threshold at the device's total, primed with an allocation of half the free memory freed at once,
// so the pool holds it idle. The job then allocates from the pool, trims it (PyTorch's empty_cache does so on
// its cudaMallocAsync backend), and a library's cuMemAlloc finds too little left: the driver takes the pool's
// idle memory back before it refuses. A pinned host pool (cuda.core's) holds host memory, never the device's.
int pool_idle() {
    init_primary_context();
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    CUmemPoolProps pp{};
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = 0;
    CUmemoryPool pool = nullptr;
    OK(cuMemPoolCreate(&pool, &pp));  // site:pool_create
    size_t free = 0, total = 0;
    OK(cuMemGetInfo(&free, &total));
    cuuint64_t threshold = total;
    OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    CUdeviceptr prime = 0;
    OK(cuMemAllocFromPoolAsync(&prime, free / 2, pool, nullptr));
    OK(cuMemFreeAsync(prime, nullptr));
    OK(cuStreamSynchronize(nullptr));
    if (step != nullptr) step(1);
    CUdeviceptr work = 0;
    OK(cuMemAllocFromPoolAsync(&work, 256 * kMiB, pool, nullptr));  // site:pool_alloc
    if (step != nullptr) step(2);
    OK(cuMemPoolTrimTo(pool, 1024 * kMiB));  // site:pool_trim
    if (step != nullptr) step(3);
    CUmemPoolProps hp{};
    hp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    hp.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    hp.location.id = 0;
    CUmemoryPool host = nullptr;
    OK(cuMemPoolCreate(&host, &hp));
    CUdeviceptr staging = 0;
    OK(cuMemAllocFromPoolAsync(&staging, 64 * kMiB, host, nullptr));  // site:host_pool_alloc
    OK(cuMemGetInfo(&free, &total));
    CUdeviceptr big = 0;
    CHECK(cuMemAlloc(&big, free + 1024 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);  // site:pool_refused
    std::printf("pool_idle: free=%zu\n", free);
    return 0;
}

// Pool IPC as nvbandwidth's multinode pool allocation and cuda.core's IPC buffers share stream-ordered memory:
// a pool made exportable (POSIX fds on one node), a buffer allocated from it and synchronised, the pool's fd
// and the pointer's export data sent to a peer, which imports both. The exporter frees its buffer while the
// peer holds it; the peer never frees its import. Runs on a shared simulated node (CUMEMAUDIT_SIM_NODE):
// the importer is a forked process.
int pool_ipc() {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 2;
    std::fflush(stdout);
    const pid_t importer = fork();
    if (importer == 0) {
        close(sv[0]);
        init_primary_context();
        const int fd = cumemaudit::program::receive_fd(sv[1]);
        CUmemPoolPtrExportData data;
        if (read(sv[1], &data, sizeof data) != sizeof data) _exit(2);
        CUmemoryPool pool = nullptr;
        void* shared = reinterpret_cast<void*>(static_cast<intptr_t>(fd));  // a POSIX fd travels as the pointer
        OK(cuMemPoolImportFromShareableHandle(&pool, shared, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));  // site:pool_import
        CUdeviceptr peer = 0;
        OK(cuMemPoolImportPointer(&peer, pool, &data));  // site:pool_import_ptr
        char step = 0;
        if (write(sv[1], "o", 1) != 1 || read(sv[1], &step, 1) != 1) _exit(2);
        std::printf("pool_ipc: importer done\n");
        std::exit(0);  // never freed: the exporter's pool keeps the memory until this process is gone
    }
    close(sv[1]);
    init_primary_context();
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    CUmemPoolProps pp{};
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = 0;
    CUmemoryPool pool = nullptr;
    OK(cuMemPoolCreate(&pool, &pp));
    CUdeviceptr buffer = 0;
    OK(cuMemAllocFromPoolAsync(&buffer, 256 * kMiB, pool, nullptr));
    OK(cuStreamSynchronize(nullptr));
    int fd = -1;
    OK(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CUmemPoolPtrExportData data{};
    OK(cuMemPoolExportPointer(&data, buffer));  // site:pool_export_ptr
    cumemaudit::program::send_fd(sv[0], fd);
    if (write(sv[0], &data, sizeof data) != sizeof data) return 2;
    char opened = 0;
    if (read(sv[0], &opened, 1) != 1) return 2;
    OK(cuMemFreeAsync(buffer, nullptr));
    OK(cuStreamSynchronize(nullptr));
    if (step != nullptr) step(1);
    if (write(sv[0], "x", 1) != 1) return 2;
    int status = 0;
    waitpid(importer, &status, 0);
    close(fd);
    std::printf("pool_ipc: importer %d\n", static_cast<int>(importer));
    return 0;
}

// External memory as Vulkan interop imports it (the CUDA samples' simpleVulkan: an opaque fd and its size,
// one buffer mapped over it, cuMemFree of the buffer and cuDestroyExternalMemory at the end). The exporter
// here is the driver itself: a cuMemCreate allocation's POSIX fd, which the H200 imports as an opaque fd. The
// object is destroyed while its buffer is mapped (the buffer keeps the memory); a second one is never destroyed.
int external_memory() {
    init_primary_context();
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    auto exported = [](size_t bytes) {
        CUmemAllocationProp p = props();
        p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        CUmemGenericAllocationHandle h = 0;
        OK(cuMemCreate(&h, bytes, &p, 0));
        int fd = -1;
        OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        OK(cuMemRelease(h));  // the exporter is done with it: the fd (then the import) keeps it
        return fd;
    };
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC desc{};
    desc.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
    desc.handle.fd = exported(256 * kMiB);
    desc.size = 256 * kMiB;
    CUexternalMemory ext = nullptr;
    OK(cuImportExternalMemory(&ext, &desc));  // site:ext_import
    CUDA_EXTERNAL_MEMORY_BUFFER_DESC whole{};
    whole.size = 64 * kMiB;
    CUdeviceptr buffer = 0;
    OK(cuExternalMemoryGetMappedBuffer(&buffer, ext, &whole));
    if (step != nullptr) step(1);
    OK(cuDestroyExternalMemory(ext));
    if (step != nullptr) step(2);
    OK(cuMemFree(buffer));
    if (step != nullptr) step(3);
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC kept = desc;
    kept.handle.fd = exported(128 * kMiB);
    kept.size = 128 * kMiB;
    CUexternalMemory never_destroyed = nullptr;
    OK(cuImportExternalMemory(&never_destroyed, &kept));  // site:ext_kept
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC bogus = desc;
    bogus.handle.fd = memfd_create("not-memory", 0);
    bogus.size = 2 * kMiB;
    CUexternalMemory none = nullptr;
    CHECK(cuImportExternalMemory(&none, &bogus), CUDA_ERROR_UNKNOWN);
    std::printf("external_memory: done\n");
    return 0;
}

// CUDA arrays as CuPy's CUDAArray makes them (cupy/cuda/texture.pyx: cudaMalloc3DArray for every shape,
// cudaFreeArray when the object goes): a texture kept for the whole run, a scratch array freed, a mipmapped
// array and a small one. A context reset frees all three still live; the texture made again after it is held
// at exit. A one-dimensional array wider than the device allows is refused and books nothing.
CUDA_ARRAY3D_DESCRIPTOR texels(size_t width, size_t height, CUarray_format format, unsigned channels) {
    CUDA_ARRAY3D_DESCRIPTOR d{};
    d.Width = width;
    d.Height = height;
    d.Format = format;
    d.NumChannels = channels;
    return d;
}

int arrays() {
    init_primary_context();
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    const CUDA_ARRAY3D_DESCRIPTOR rgba = texels(4096, 4096, CU_AD_FORMAT_FLOAT, 4);
    CUarray texture = nullptr, scratch = nullptr, small = nullptr, refused = nullptr;
    OK(cuArray3DCreate(&texture, &rgba));  // site:array_texture
    CUDA_ARRAY_DESCRIPTOR half{4096, 2048, CU_AD_FORMAT_FLOAT, 4};
    OK(cuArrayCreate(&scratch, &half));
    OK(cuArrayDestroy(scratch));
    if (step != nullptr) step(1);
    CUmipmappedArray mip = nullptr;
    OK(cuMipmappedArrayCreate(&mip, &rgba, 2));  // site:array_mipmap
    const CUDA_ARRAY3D_DESCRIPTOR bytes = texels(1000, 1000, CU_AD_FORMAT_UNSIGNED_INT8, 1);
    OK(cuArray3DCreate(&small, &bytes));  // site:array_small
    const CUDA_ARRAY3D_DESCRIPTOR too_wide = texels(1 << 20, 0, CU_AD_FORMAT_FLOAT, 1);
    CHECK(cuArray3DCreate(&refused, &too_wide), CUDA_ERROR_INVALID_VALUE);
    if (step != nullptr) step(2);
    OK(cuDevicePrimaryCtxReset(0));  // site:array_reset
    init_primary_context();
    OK(cuArray3DCreate(&texture, &rgba));  // site:array_after_reset
    if (step != nullptr) step(3);
    std::printf("arrays: done\n");
    return 0;
}

// Graph memory: a graph built by hand with an allocation node and its free (as cuda-python's and CUTLASS's
// examples do), and a cuMemAllocAsync captured with no free (the allocation outlives each launch). Nothing is
// charged until the upload or launch; the memory stays the device's graph memory after the executable's end
// until cuDeviceGraphMemTrim gives it back (measured on the H200).
int graph_memory() {
    init_primary_context();
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    CUstream s = nullptr;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUgraph g = nullptr;
    OK(cuGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS p{};
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = 0;
    p.bytesize = 256 * kMiB;
    CUgraphNode alloc_node = nullptr, free_node = nullptr;
    OK(cuGraphAddMemAllocNode(&alloc_node, g, nullptr, 0, &p));  // site:graph_alloc_node
    OK(cuGraphAddMemFreeNode(&free_node, g, &alloc_node, 1, p.dptr));
    CUgraphExec exec = nullptr;
    OK(cuGraphInstantiate(&exec, g, 0));
    if (step != nullptr) step(1);
    OK(cuGraphUpload(exec, s));
    OK(cuStreamSynchronize(s));
    if (step != nullptr) step(2);
    OK(cuGraphExecDestroy(exec));
    OK(cuGraphDestroy(g));
    if (step != nullptr) step(3);
    OK(cuDeviceGraphMemTrim(0));  // site:graph_trim
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUdeviceptr kept = 0;
    OK(cuMemAllocAsync(&kept, 128 * kMiB, s));  // site:captured_alloc
    OK(cuStreamEndCapture(s, &g));
    OK(cuGraphInstantiate(&exec, g, 0));
    OK(cuGraphLaunch(exec, s));
    OK(cuStreamSynchronize(s));
    if (step != nullptr) step(4);
    CHECK(cuGraphLaunch(exec, s), CUDA_ERROR_INVALID_VALUE);  // its allocation was never freed (measured)
    OK(cuGraphExecDestroy(exec));
    OK(cuGraphDestroy(g));
    std::printf("graph_memory: done\n");
    return 0;
}

// One process driving two devices (JAX's layout, single-process NCCL): a context on each, memory on both,
// and device 1 runs out. Its out-of-memory record names only device 1's memory, whose parts add up to
// device 1's used memory; the 6 GiB on device 0 are in no part.
int two_devices() {
    OK(cuInit(0));
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    CUcontext ctx[2] = {};
    for (int d = 0; d < 2; ++d) OK(cuDevicePrimaryCtxRetain(&ctx[d], d));
    OK(cuCtxSetCurrent(ctx[0]));
    CUdeviceptr big = 0;
    OK(cuMemAlloc(&big, 6144 * kMiB));  // site:dev0_alloc
    OK(cuCtxSetCurrent(ctx[1]));
    CUdeviceptr work = 0;
    OK(cuMemAlloc(&work, 1024 * kMiB));  // site:dev1_alloc
    CUmemAllocationProp p = cumemaudit::program::device_prop(1, CU_MEM_HANDLE_TYPE_NONE);
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, 512 * kMiB, &p, 0));  // site:dev1_vmm
    CUdeviceptr va = 0;
    OK(cuMemAddressReserve(&va, 512 * kMiB, 0, 0, 0));
    OK(cuMemMap(va, 512 * kMiB, 0, h, 0));
    if (step != nullptr) step(1);
    CUdeviceptr refused = 0;
    CHECK(cuMemAlloc(&refused, free_bytes() + 1024 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);  // site:dev1_refused
    OK(cuMemUnmap(va, 512 * kMiB));
    OK(cuMemRelease(h));
    OK(cuMemAddressFree(va, 512 * kMiB));
    std::printf("two_devices: done\n");
    return 0;
}

int main(int argc, char** argv) {
    const std::string what = argc > 1 ? argv[1] : "";
    if (what == "misuse") return misuse();
    if (what == "reuse") return reuse();
    if (what == "open-export") return open_export();
    if (what == "held-export") return held_export();
    if (what == "capture-free") return capture_free();
    if (what == "threads") return threads();
    if (what == "fork") return fork_child();
    if (what == "exit") return exit_with(argc > 2 ? std::atoi(argv[2]) : 0);
    if (what == "wait") return wait_for_signal();
    if (what == "classic") return classic();
    if (what == "deepbind" && argc > 2) return deepbind(argv[2]);
    if (what == "checkpoint") return checkpoint_then_vanish();
    if (what == "async-growth") return async_growth();
    if (what == "map-array") return map_array();
    if (what == "nccl-host") return nccl_host();
    if (what == "host-register") return host_register();
    if (what == "context-reset") return context_reset();
    if (what == "pool-idle") return pool_idle();
    if (what == "graph-memory") return graph_memory();
    if (what == "two-devices") return two_devices();
    if (what == "arrays") return arrays();
    if (what == "pool-ipc") return pool_ipc();
    if (what == "external-memory") return external_memory();
    if (what == "ipc-dmabuf") return ipc_dmabuf();
    if (what == "none") return 0;
    std::fprintf(stderr, "usage: audit_scenarios misuse|reuse|open-export|held-export|capture-free|threads|fork|exit N|wait|classic|deepbind LIB|checkpoint|async-growth|map-array|nccl-host|host-register|context-reset|ipc-dmabuf|pool-idle|graph-memory|two-devices|arrays|pool-ipc|external-memory|none\n");
    return 2;
}
