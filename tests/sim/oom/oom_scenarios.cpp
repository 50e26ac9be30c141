// Out-of-memory scenarios for the `oom` record, one subcommand each, run under `cumemaudit run --sim` with a
// small CUMEMAUDIT_SIM_MEMORY. Each drives the device into a refusal the way real programs meet one, checks
// the driver's answers, and prints `used=` (cuMemGetInfo at the refusal) and `request=` for the test to
// compare with the report. Sites the tests look for are marked `// site:NAME`.
#include "support/driver_checks.hpp"
#include "support/heap_fifo_ptx.hpp"
#include "support/kernels_ptx.hpp"

#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

using cumemaudit::program::init_primary_context;

constexpr size_t kMiB = 1 << 20;

size_t used_bytes() {
    size_t free = 0, total = 0;
    OK(cuMemGetInfo(&free, &total));
    return total - free;
}

void step(unsigned long long n) {
    auto fn = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    if (fn != nullptr) fn(n);
}

CUmemAllocationProp device_prop() {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return prop;
}

// DeepEP's buffer, as docs/DRIVER.md lists its calls: allocate = create → reserve → map → set access,
// get_handle = retain → export, free = retain → unmap → address free → release (its own retain only).
struct Buffer {
    CUdeviceptr va = 0;
    size_t size = 0;
};

__attribute__((noinline)) CUresult create_buffer(CUmemGenericAllocationHandle* h, size_t size) {
    const CUmemAllocationProp prop = device_prop();
    return cuMemCreate(h, size, &prop, 0);  // site:deepep_create
}

CUresult allocate(Buffer& b, size_t size) {
    CUmemGenericAllocationHandle h;
    if (CUresult r = create_buffer(&h, size); r != CUDA_SUCCESS) return r;
    OK(cuMemAddressReserve(&b.va, size, 0, 0, 0));
    OK(cuMemMap(b.va, size, 0, h, 0));
    CUmemAccessDesc access{};
    access.location = device_prop().location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    OK(cuMemSetAccess(b.va, size, &access, 1));
    CUmemGenericAllocationHandle retained;
    OK(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(b.va)));  // get_handle's retain
    int fd = -1;
    OK(cuMemExportToShareableHandle(&fd, retained, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    close(fd);
    b.size = size;
    return CUDA_SUCCESS;
}

void free_buffer(Buffer& b) {
    CUmemGenericAllocationHandle h;
    OK(cuMemRetainAllocationHandle(&h, reinterpret_cast<void*>(b.va)));
    OK(cuMemUnmap(b.va, b.size));
    OK(cuMemAddressFree(b.va, b.size));
    OK(cuMemRelease(h));  // the creation and get_handle references stay: the leak
}

// The buffer grows by 64 MiB on every step, freed the DeepEP way, until cuMemCreate is refused; a 32 MiB
// classic allocation of the program lives beside it. Killed right after the refusal (SIGKILL, which no
// handler sees): the report written at the refusal is all that is left.
int deepep_leak() {
    init_primary_context();
    CUdeviceptr side;
    OK(cuMemAlloc(&side, 32 * kMiB));  // site:side_alloc
    Buffer b;
    for (unsigned long long s = 1;; ++s) {
        const size_t size = 64 * kMiB * s;
        if (b.size != 0) free_buffer(b);
        const size_t used = used_bytes();
        const CUresult r = allocate(b, size);
        if (r == CUDA_ERROR_OUT_OF_MEMORY) {
            std::printf("step=%llu request=%zu used=%zu\n", s, size, used);
            std::fflush(stdout);
            raise(SIGKILL);
        }
        OK(r);
        step(s);
    }
}

// PyTorch's way with a refusal: free what is cached, retry the same request, which now succeeds.
int alloc_recover() {
    init_primary_context();
    CUdeviceptr cached, big;
    OK(cuMemAlloc(&cached, 160 * kMiB));  // site:cached_alloc
    step(1);
    const size_t used = used_bytes();
    CHECK(cuMemAlloc(&big, 128 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);  // site:refused_alloc
    std::printf("request=%zu used=%zu\n", 128 * kMiB, used);
    OK(cuMemFree(cached));
    OK(cuMemAlloc(&big, 128 * kMiB));  // site:retried_alloc
    OK(cuMemFree(big));
    return 0;
}

// vLLM's capture loop: batch sizes largest first, each graph allocating during capture (the first most,
// the later ones only what the pool lacks), each instantiated; an instantiation is refused for memory.
int graph_loop() {
    init_primary_context();
    CUstream stream;
    OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    const size_t during_capture[] = {96 * kMiB, 32 * kMiB, 16 * kMiB};
    std::vector<CUdeviceptr> kept;
    for (size_t i = 0; i < 3; ++i) {
        OK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED));
        CUdeviceptr p;
        OK(cuMemAlloc(&p, during_capture[i]));  // site:captured_alloc
        kept.push_back(p);
        CUgraph graph;
        OK(cuStreamEndCapture(stream, &graph));
        const size_t used = used_bytes();
        CUgraphExec exec;
        const CUresult r = cuGraphInstantiate(&exec, graph, 0);  // site:instantiate
        if (r == CUDA_ERROR_OUT_OF_MEMORY) {
            std::printf("graph=%zu request=0 used=%zu\n", i + 1, used);
            return 0;
        }
        OK(r);
        std::printf("graph=%zu instantiated used=%zu\n", i + 1, used_bytes());
    }
    std::printf("no refusal\n");
    return 1;
}

// The same request refused `n` times in a row, then SIGKILL: the report on disk is the last one written.
int storm(int n) {
    init_primary_context();
    CUdeviceptr hog, p;
    OK(cuMemAlloc(&hog, 200 * kMiB));
    for (int i = 0; i < n; ++i) CHECK(cuMemAlloc(&p, 100 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);
    std::printf("refused=%d used=%zu\n", n, used_bytes());
    std::fflush(stdout);
    raise(SIGKILL);
    return 0;
}

// What contexts reserve besides allocations, and a launch refused for want of stack. Run on a GPU, or with
// CUMEMAUDIT_SIM_CONTEXT=256MiB and CUMEMAUDIT_SIM_SMS=4 (8192 threads: 8 MiB of stack per KiB per thread):
// the primary context, a second one made as a CUDA 12-built caller makes it (cuCtxCreate at version 3020), a
// stack limit set, a kernel with 32 KiB of local memory launched (the stack grows to it and stays), a mark,
// then a kernel with 64 KiB refused (the driver gives the stack back), room made and the first launched again
// (it takes the stack back), a mark.
int launch_stack() {
    init_primary_context();
    CUcontext primary;
    OK(cuCtxGetCurrent(&primary));
    void* create = nullptr;
    CUdriverProcAddressQueryResult found{};
    OK(cuGetProcAddress("cuCtxCreate", &create, 3020, CU_GET_PROC_ADDRESS_DEFAULT, &found));
    CUcontext second;
    OK(reinterpret_cast<CUresult (*)(CUcontext*, unsigned, CUdevice)>(create)(&second, 0, 0));  // site:second_context
    OK(cuCtxSetCurrent(primary));
    CUdeviceptr buffer;
    OK(cuMemAlloc(&buffer, 64 * kMiB));  // site:buffer
    CUmodule module;
    OK(cuModuleLoadData(&module, cumemaudit::program::kLocalMemoryPtx));
    CUfunction heavy, huge;
    OK(cuModuleGetFunction(&heavy, module, "local_heavy"));
    OK(cuModuleGetFunction(&huge, module, "local_huge"));
    OK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 4096));  // site:set_limit
    int n = 64;
    void* args[] = {&buffer, &n};
    OK(cuLaunchKernel(heavy, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
    step(1);
    std::printf("marked=%zu\n", used_bytes());
    CUdeviceptr more;
    size_t free = 0, total = 0;
    OK(cuMemGetInfo(&free, &total));
    OK(cuMemAlloc(&more, free - 34 * kMiB));  // site:more (150 MiB on the simulated 1 GiB device)
    const size_t used = used_bytes();
    CHECK(cuLaunchKernel(huge, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr), CUDA_ERROR_OUT_OF_MEMORY);  // site:refused_launch
    int sms = 0, per_sm = 0;
    OK(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
    OK(cuDeviceGetAttribute(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 0));
    std::printf("request=%zu used=%zu after=%zu threads=%d\n", (65536 - 32768) * size_t(sms) * size_t(per_sm), used,
                used_bytes(), sms * per_sm);
    // Room again: the next launch takes the stack back.
    OK(cuMemFree(more));
    OK(cuLaunchKernel(heavy, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
    step(2);
    std::printf("again=%zu\n", used_bytes());
    return 0;
}

// A launch refused for its device heap (malloc in a kernel). Run on a GPU, or with CUMEMAUDIT_SIM_CONTEXT=256MiB,
// CUMEMAUDIT_SIM_SMS=4 and CUMEMAUDIT_SIM_HEAP_CODE=138MiB: the kernel that calls malloc loaded, its context's
// heap limit set to 1 GiB (the driver accepts it whatever is free), the device filled to leave 512 MiB, then
// the kernel's first launch, which the driver refuses with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (measured).
int launch_heap() {
    init_primary_context();
    CUmodule module;
    OK(cuModuleLoadData(&module, cumemaudit::program::kHeapUserPtx));
    CUfunction heap_user;
    OK(cuModuleGetFunction(&heap_user, module, "heap_user"));
    constexpr size_t kHeap = 1024 * kMiB;
    OK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, kHeap));  // site:heap_limit
    CUdeviceptr out;
    OK(cuMemAlloc(&out, 4096));
    size_t free = 0, total = 0;
    OK(cuMemGetInfo(&free, &total));
    CUdeviceptr filler;
    OK(cuMemAlloc(&filler, free - 512 * kMiB));  // site:filler
    int n = 1024;
    void* args[] = {&out, &n};
    const size_t used = used_bytes();
    CHECK(cuLaunchKernel(heap_user, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr), CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);  // site:heap_launch
    std::printf("request=%zu used=%zu after=%zu filler=%zu\n", kHeap + 2 * kMiB, used, used_bytes(), free - 512 * kMiB);
    // Room again: the same launch reserves the heap.
    OK(cuMemFree(filler));
    OK(cuLaunchKernel(heap_user, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
    OK(cuCtxSynchronize());
    std::printf("again=%zu\n", used_bytes());
    return 0;
}

// A green context: 8 of the device's multiprocessors over the primary context, a buffer allocated in it, a
// mark, its destroy (the driver keeps what its creation took and the buffer: measured), a mark, then an
// allocation refused.
// Run on a GPU, or with CUMEMAUDIT_SIM_CONTEXT=256MiB, CUMEMAUDIT_SIM_SMS=16 (32 MiB of stack at 1 KiB per
// thread) and CUMEMAUDIT_SIM_GREEN_CONTEXT=6MiB.
int green_context() {
    init_primary_context();
    CUdevResource sm{};
    OK(cuDeviceGetDevResource(0, &sm, CU_DEV_RESOURCE_TYPE_SM));
    CUdevResource group{}, rest{};
    unsigned groups = 1;
    OK(cuDevSmResourceSplitByCount(&group, &groups, &sm, &rest, 0, 8));
    CUdevResourceDesc desc = nullptr;
    OK(cuDevResourceGenerateDesc(&desc, &group, 1));
    CUgreenCtx green = nullptr;
    OK(cuGreenCtxCreate(&green, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM));  // site:green_create
    CUcontext ctx = nullptr;
    OK(cuCtxFromGreenCtx(&ctx, green));
    OK(cuCtxPushCurrent(ctx));
    CUdeviceptr buffer;
    OK(cuMemAlloc(&buffer, 64 * kMiB));  // site:green_buffer
    CUcontext popped = nullptr;
    OK(cuCtxPopCurrent(&popped));
    step(1);
    std::printf("marked=%zu\n", used_bytes());
    OK(cuGreenCtxDestroy(green));  // site:green_destroy
    step(2);
    std::printf("destroyed=%zu\n", used_bytes());
    size_t free = 0, total = 0;
    OK(cuMemGetInfo(&free, &total));
    CUdeviceptr more;
    CHECK(cuMemAlloc(&more, free + kMiB), CUDA_ERROR_OUT_OF_MEMORY);  // site:refused_after_green
    std::printf("used=%zu request=%zu\n", used_bytes(), free + kMiB);
    return 0;
}

// A context the device has no room for (CUMEMAUDIT_SIM_CONTEXT=256MiB, CUMEMAUDIT_SIM_SMS=4): the primary
// context, an allocation that leaves 100 MiB, then a second context refused; the current one stays the primary.
int context_refused() {
    init_primary_context();
    size_t free = 0, total = 0;
    OK(cuMemGetInfo(&free, &total));
    CUdeviceptr buffer;
    OK(cuMemAlloc(&buffer, free - 100 * kMiB));  // site:buffer_before_context
    CUcontext second = nullptr;
    CHECK(cuCtxCreate(&second, nullptr, 0, 0), CUDA_ERROR_OUT_OF_MEMORY);  // site:refused_context
    std::printf("used=%zu buffer=%zu\n", used_bytes(), free - 100 * kMiB);
    OK(cuMemFree(buffer));
    return 0;
}

// A process's first context refused (CUMEMAUDIT_SIM_CONTEXT larger than the device): no context is current.
int first_context_refused() {
    OK(cuInit(0));
    CUdevice dev = 0;
    OK(cuDeviceGet(&dev, 0));
    CUcontext ctx = nullptr;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_ERROR_OUT_OF_MEMORY);  // site:refused_primary
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const char* cmd = argc > 1 ? argv[1] : "";
    if (!std::strcmp(cmd, "deepep-leak")) return deepep_leak();
    if (!std::strcmp(cmd, "alloc-recover")) return alloc_recover();
    if (!std::strcmp(cmd, "graph-loop")) return graph_loop();
    if (!std::strcmp(cmd, "storm") && argc > 2) return storm(std::atoi(argv[2]));
    if (!std::strcmp(cmd, "launch-stack")) return launch_stack();
    if (!std::strcmp(cmd, "launch-heap")) return launch_heap();
    if (!std::strcmp(cmd, "green-context")) return green_context();
    if (!std::strcmp(cmd, "context-refused")) return context_refused();
    if (!std::strcmp(cmd, "first-context-refused")) return first_context_refused();
    std::fprintf(stderr, "usage: oom_scenarios deepep-leak|alloc-recover|graph-loop|launch-stack|launch-heap|green-context|context-refused|first-context-refused|storm N\n");
    return 2;
}
