// What the driver reserves on its own, with no allocation call behind it: a context's fixed cost, the kernel
// stack reservation (CU_LIMIT_STACK_SIZE × the threads the device can hold) and how a launch and
// cuCtxSetLimit move it, a launch refused for want of stack, the other limits' defaults. One fact per forked
// child, printed as "fact <name> key=value ...", values being CUresult names, bytes, or MiB of the device's
// used memory (cuMemGetInfo; NVML's device figure where no context exists yet) moved since the fact began.
// Run on the H200 and on the simulated driver; docs/DRIVER.md keeps the real answers and
// tests/gpu/test_reservations.py holds the simulated driver to them.
//   reservation_probe [FACT...]   (all facts without arguments)
#include "support/heap_fifo_ptx.hpp"
#include "support/kernels_ptx.hpp"
#include "support/module_code_ptx.hpp"

#include "support/probe_facts.hpp"

#include <cuda.h>

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

using cumemaudit::program::g_fact;
using cumemaudit::program::kFifoUserPtx;
using cumemaudit::program::kHeapUserPtx;
using cumemaudit::program::name_of;
using cumemaudit::program::used_mib;
constexpr size_t kMiB = cumemaudit::program::kProbeMiB;

const char* const kPtx = cumemaudit::program::kLocalMemoryPtx;

// NVML's device-wide used memory, for the moments before a context exists (-1: no NVML).
long long nvml_used_mib() {
    struct Memory { unsigned long long total, free, used; };
    static void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (lib == nullptr) return -1;
    using Init = int (*)();
    using ByIndex = int (*)(unsigned, void**);
    using Info = int (*)(void*, Memory*);
    auto init = reinterpret_cast<Init>(dlsym(lib, "nvmlInit_v2"));
    auto by_index = reinterpret_cast<ByIndex>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    auto info = reinterpret_cast<Info>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
    void* dev = nullptr;
    Memory m{};
    if (init == nullptr || by_index == nullptr || info == nullptr || init() != 0 || by_index(0, &dev) != 0 || info(dev, &m) != 0)
        return -1;
    return static_cast<long long>(m.used / kMiB);
}

// NVML's figure for this process on device 0, in MiB (-1: NVML cannot say, or does not list it).
long long nvml_process_mib() {
    struct Process { unsigned pid; unsigned long long used; unsigned gi, ci; };
    static void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (lib == nullptr) return -1;
    using Init = int (*)();
    using ByIndex = int (*)(unsigned, void**);
    using List = int (*)(void*, unsigned*, Process*);
    auto init = reinterpret_cast<Init>(dlsym(lib, "nvmlInit_v2"));
    auto by_index = reinterpret_cast<ByIndex>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    auto list = reinterpret_cast<List>(dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3"));
    void* dev = nullptr;
    Process procs[64] = {};
    unsigned n = 64;
    if (init == nullptr || by_index == nullptr || list == nullptr || init() != 0 || by_index(0, &dev) != 0 ||
        list(dev, &n, procs) != 0)
        return -1;
    for (unsigned i = 0; i < n; ++i)
        if (procs[i].pid == static_cast<unsigned>(getpid())) return static_cast<long long>(procs[i].used / kMiB);
    return -1;
}

CUcontext primary() {
    CUcontext ctx = nullptr;
    MUST(cuDevicePrimaryCtxRetain(&ctx, 0));
    MUST(cuCtxSetCurrent(ctx));
    return ctx;
}

struct Kernels {
    CUmodule module = nullptr;
    CUfunction heavy = nullptr, plain = nullptr;
};
Kernels load() {
    Kernels k;
    MUST(cuModuleLoadData(&k.module, kPtx));
    MUST(cuModuleGetFunction(&k.heavy, k.module, "local_heavy"));
    MUST(cuModuleGetFunction(&k.plain, k.module, "plain"));
    return k;
}

CUresult launch(CUfunction f, CUdeviceptr out, int n) {
    void* args[] = {&out, &n};
    return cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr);
}

std::size_t limit(CUlimit which) {
    std::size_t v = 0;
    MUST(cuCtxGetLimit(&v, which));
    return v;
}

void fact_context_primary() {
    MUST(cuInit(0));
    const long long n0 = nvml_used_mib();
    CUcontext ctx = nullptr;
    MUST(cuDevicePrimaryCtxRetain(&ctx, 0));
    const long long n1 = nvml_used_mib();
    MUST(cuCtxSetCurrent(ctx));
    const long long u1 = used_mib();
    Kernels k = load();
    const long long u2 = used_mib();
    CUdeviceptr out = 0;
    MUST(cuMemAlloc(&out, 4096));
    MUST(launch(k.plain, out, 0));
    MUST(cuCtxSynchronize());
    const long long u3 = used_mib();
    int sms = 0, threads = 0;
    MUST(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
    MUST(cuDeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 0));
    std::printf("fact context_primary nvml_retain_mib=%lld load_mib=%lld launch_mib=%lld sms=%d threads_per_sm=%d "
                "stack=%zu malloc_heap=%zu printf_fifo=%zu\n",
                (n0 < 0 || n1 < 0) ? -1 : n1 - n0, u2 - u1, u3 - u2, sms, threads, limit(CU_LIMIT_STACK_SIZE),
                limit(CU_LIMIT_MALLOC_HEAP_SIZE), limit(CU_LIMIT_PRINTF_FIFO_SIZE));
}

// Each cuCtxCreate variant a caller can be given (cuGetProcAddress at the version CUDA 12 and 13 callers ask
// for): what a context costs, and what its destruction gives back.
void fact_context_create() {
    MUST(cuInit(0));
    primary();
    struct Variant { const char* name; int version; };
    std::string line = "fact context_create";
    for (Variant v : {Variant{"v2", 3020}, Variant{"v3", 11040}, Variant{"v4", 12050}}) {
        void* fn = nullptr;
        CUdriverProcAddressQueryResult found{};
        MUST(cuGetProcAddress("cuCtxCreate", &fn, v.version, CU_GET_PROC_ADDRESS_DEFAULT, &found));
        const long long u0 = used_mib();
        CUcontext ctx = nullptr;
        CUresult r = CUDA_ERROR_UNKNOWN;
        if (v.version == 3020) r = reinterpret_cast<CUresult (*)(CUcontext*, unsigned, CUdevice)>(fn)(&ctx, 0, 0);
        if (v.version == 11040)
            r = reinterpret_cast<CUresult (*)(CUcontext*, CUexecAffinityParam*, int, unsigned, CUdevice)>(fn)(&ctx, nullptr, 0, 0, 0);
        if (v.version == 12050)
            r = reinterpret_cast<CUresult (*)(CUcontext*, CUctxCreateParams*, unsigned, CUdevice)>(fn)(&ctx, nullptr, 0, 0);
        const long long u1 = used_mib();
        const std::size_t stack = r == CUDA_SUCCESS ? limit(CU_LIMIT_STACK_SIZE) : 0;
        const CUresult d = r == CUDA_SUCCESS ? cuCtxDestroy(ctx) : CUDA_ERROR_INVALID_CONTEXT;
        const long long u2 = used_mib();
        line += std::string(" ") + v.name + "=" + name_of(r) + " " + v.name + "_mib=" + std::to_string(u1 - u0) + " " +
                v.name + "_stack=" + std::to_string(stack) + " " + v.name + "_destroy=" + name_of(d) + " " + v.name +
                "_destroy_mib=" + std::to_string(u2 - u1);
    }
    std::printf("%s\n", line.c_str());
}

// The primary context current, the kernels loaded and a first launch made (what that costs is a fact of
// its own): what the stack facts start from.
Kernels warmed(CUdeviceptr* out) {
    MUST(cuInit(0));
    primary();
    Kernels k = load();
    MUST(cuMemAlloc(out, 4096));
    MUST(launch(k.plain, *out, 0));
    MUST(cuCtxSynchronize());
    return k;
}

// The stack reservation: raised at a launch that needs more, kept after it, lowered or raised at once by
// cuCtxSetLimit.
void fact_stack() {
    CUdeviceptr out = 0;
    const Kernels k = warmed(&out);
    int local = 0;
    MUST(cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k.heavy));
    const long long u0 = used_mib();
    const CUresult r = launch(k.heavy, out, 64);
    MUST(cuCtxSynchronize());
    const long long u1 = used_mib();
    const std::size_t after_launch = limit(CU_LIMIT_STACK_SIZE);
    const CUresult lower = cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024);
    const long long u2 = used_mib();
    const CUresult raise = cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 8192);
    const long long u3 = used_mib();
    const std::size_t after_set = limit(CU_LIMIT_STACK_SIZE);
    const CUresult odd = cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1000);
    const std::size_t after_odd = limit(CU_LIMIT_STACK_SIZE);
    const long long u4 = used_mib();
    std::printf("fact stack local_size=%d launch=%s launch_mib=%lld limit_after_launch=%zu lower=%s lower_mib=%lld "
                "raise=%s raise_mib=%lld limit_after_set=%zu set_1000=%s limit_after_1000=%zu set_1000_mib=%lld\n",
                local, name_of(r).c_str(), u1 - u0, after_launch, name_of(lower).c_str(), u2 - u1, name_of(raise).c_str(),
                u3 - u2, after_set, name_of(odd).c_str(), after_odd, u4 - u3);
}

// A launch that needs more stack than the device has free, and a limit that cannot be reserved.
void fact_stack_oom() {
    CUdeviceptr out = 0;
    const Kernels k = warmed(&out);
    size_t free = 0, total = 0;
    MUST(cuMemGetInfo(&free, &total));
    CUdeviceptr hog = 0;
    MUST(cuMemAlloc(&hog, free - 2048 * kMiB));  // 2 GiB left: the 32 KiB kernel needs about 8 GiB of stack
    const long long u0 = used_mib();
    const CUresult r = launch(k.heavy, out, 64);
    const CUresult sync = cuCtxSynchronize();
    const long long u1 = used_mib();
    const std::size_t after = limit(CU_LIMIT_STACK_SIZE);
    const CUresult set = cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 32768);
    const long long u2 = used_mib();
    const std::size_t after_set = limit(CU_LIMIT_STACK_SIZE);
    const CUresult again = launch(k.plain, out, 0);
    const CUresult sync2 = cuCtxSynchronize();
    const long long u3 = used_mib();  // whether the next launch takes the stack again
    std::printf("fact stack_oom launch=%s sync=%s launch_mib=%lld limit_after=%zu set_32768=%s set_mib=%lld "
                "limit_after_set=%zu plain_after=%s sync_after=%s plain_after_mib=%lld\n",
                name_of(r).c_str(), name_of(sync).c_str(), u1 - u0, after, name_of(set).c_str(), u2 - u1, after_set,
                name_of(again).c_str(), name_of(sync2).c_str(), u3 - u2);
}

CUfunction load_one(const char* ptx, const char* name, CUmodule* module) {
    CUfunction f = nullptr;
    MUST(cuModuleLoadData(module, ptx));
    MUST(cuModuleGetFunction(&f, *module, name));
    return f;
}

// What the device memory does as one kernel that uses a device system call (malloc, printf) is loaded, got
// and launched twice, and whether its limit can move after that use: "PREFIX_key=value" pairs.
std::string system_call_user(const char* prefix, const char* ptx, const char* name, CUlimit which, CUdeviceptr out,
                             int n) {
    CUmodule m = nullptr;
    const std::size_t before = limit(which);
    const long long u0 = used_mib();
    MUST(cuModuleLoadData(&m, ptx));
    const long long u1 = used_mib();
    CUfunction f = nullptr;
    MUST(cuModuleGetFunction(&f, m, name));
    const long long u2 = used_mib();
    const CUresult first = launch(f, out, n);
    MUST(cuCtxSynchronize());
    const long long u3 = used_mib();
    MUST(launch(f, out, n));
    MUST(cuCtxSynchronize());
    const long long u4 = used_mib();
    const CUresult set = cuCtxSetLimit(which, 64 * kMiB);
    const long long u5 = used_mib();
    const std::string p = std::string(" ") + prefix + "_";
    return p + "limit=" + std::to_string(before) + p + "load_mib=" + std::to_string(u1 - u0) + p + "get_mib=" +
           std::to_string(u2 - u1) + p + "launch=" + name_of(first) + p + "launch_mib=" + std::to_string(u3 - u2) + p +
           "again_mib=" + std::to_string(u4 - u3) + p + "set_after_use=" + name_of(set) + p + "set_mib=" +
           std::to_string(u5 - u4) + p + "after_set=" + std::to_string(limit(which));
}

// The device heap (malloc in a kernel) and the printf FIFO at their default limits: whether the driver
// reserves them at the module's load, at getting its kernel or at the kernel's first launch, and whether the
// limit can move once a kernel used them.
void fact_heap_fifo() {
    CUdeviceptr out = 0;
    warmed(&out);
    std::string line = "fact heap_fifo";
    line += system_call_user("heap", kHeapUserPtx, "heap_user", CU_LIMIT_MALLOC_HEAP_SIZE, out, 1024);
    line += system_call_user("fifo", kFifoUserPtx, "fifo_user", CU_LIMIT_PRINTF_FIFO_SIZE, out, 0);
    std::printf("%s\n", line.c_str());
}

// The same with both limits raised before any use: whether cuCtxSetLimit reserves, whether a kernel that uses
// neither does, and what the first kernel that uses each takes.
void fact_heap_fifo_raised() {
    CUdeviceptr out = 0;
    const Kernels k = warmed(&out);
    const long long u0 = used_mib();
    const CUresult hset = cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 256 * kMiB);
    const CUresult fset = cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 128 * kMiB);
    const long long u1 = used_mib();
    MUST(launch(k.plain, out, 0));
    MUST(cuCtxSynchronize());
    const long long u2 = used_mib();
    CUmodule hm = nullptr, fm = nullptr;
    CUfunction heap = load_one(kHeapUserPtx, "heap_user", &hm);
    const long long u3 = used_mib();
    const CUresult hl = launch(heap, out, 1024);
    MUST(cuCtxSynchronize());
    const long long u4 = used_mib();
    CUfunction fifo = load_one(kFifoUserPtx, "fifo_user", &fm);
    const long long u5 = used_mib();
    const CUresult fl = launch(fifo, out, 0);
    MUST(cuCtxSynchronize());
    const long long u6 = used_mib();
    const CUresult lower = cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8 * kMiB);
    const long long u7 = used_mib();
    std::printf("fact heap_fifo_raised set_heap=%s set_fifo=%s set_mib=%lld plain_launch_mib=%lld heap_load_get_mib=%lld "
                "heap_launch=%s heap_launch_mib=%lld fifo_load_get_mib=%lld fifo_launch=%s fifo_launch_mib=%lld "
                "heap_lower_after_use=%s heap_lower_mib=%lld heap_after_lower=%zu\n",
                name_of(hset).c_str(), name_of(fset).c_str(), u1 - u0, u2 - u1, u3 - u2, name_of(hl).c_str(), u4 - u3,
                u5 - u4, name_of(fl).c_str(), u6 - u5, name_of(lower).c_str(), u7 - u6, limit(CU_LIMIT_MALLOC_HEAP_SIZE));
}

// A heap larger than what is free: whether cuCtxSetLimit refuses it, or the first kernel's launch does.
void fact_heap_oom() {
    CUdeviceptr out = 0;
    warmed(&out);
    size_t free = 0, total = 0;
    MUST(cuMemGetInfo(&free, &total));
    CUdeviceptr hog = 0;
    MUST(cuMemAlloc(&hog, free - 1024 * kMiB));
    const long long u0 = used_mib();
    const CUresult set = cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 4096 * kMiB);
    const long long u1 = used_mib();
    CUmodule hm = nullptr;
    CUfunction heap = load_one(kHeapUserPtx, "heap_user", &hm);
    const CUresult hl = launch(heap, out, 1024);
    const CUresult sync = cuCtxSynchronize();
    const long long u2 = used_mib();
    std::printf("fact heap_oom set_4096=%s set_mib=%lld heap_after_set=%zu launch=%s sync=%s launch_mib=%lld\n",
                name_of(set).c_str(), u1 - u0, limit(CU_LIMIT_MALLOC_HEAP_SIZE), name_of(hl).c_str(), name_of(sync).c_str(),
                u2 - u1);
}

// Two modules that call malloc: whether the second one's load takes what the first one's took, whether
// unloads give it back, and whether setting the heap limit to the value it has is refused once it is used.
void fact_heap_modules() {
    CUdeviceptr out = 0;
    warmed(&out);
    const long long u0 = used_mib();
    CUmodule a = nullptr, b = nullptr;
    CUfunction fa = load_one(kHeapUserPtx, "heap_user", &a);
    MUST(launch(fa, out, 1024));
    MUST(cuCtxSynchronize());
    const long long u1 = used_mib();
    CUfunction fb = load_one(kHeapUserPtx, "heap_user", &b);
    const long long u2 = used_mib();
    MUST(launch(fb, out, 1024));
    MUST(cuCtxSynchronize());
    const long long u3 = used_mib();
    const CUresult same = cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, limit(CU_LIMIT_MALLOC_HEAP_SIZE));
    MUST(cuModuleUnload(b));
    const long long u4 = used_mib();
    MUST(cuModuleUnload(a));
    const long long u5 = used_mib();
    std::printf("fact heap_modules first_load_launch_mib=%lld second_load_get_mib=%lld second_launch_mib=%lld "
                "set_same_after_use=%s unload_second_mib=%lld unload_first_mib=%lld\n",
                u1 - u0, u2 - u1, u3 - u2, name_of(same).c_str(), u4 - u3, u5 - u4);
}

// A green context (a share of the device's multiprocessors): what its creation reserves, whether its
// CUcontext and a first launch in it reserve more, its stack limit, and what its destruction gives back.
void fact_green_ctx() {
    CUdeviceptr out = 0;
    warmed(&out);
    CUdevResource sm{};
    MUST(cuDeviceGetDevResource(0, &sm, CU_DEV_RESOURCE_TYPE_SM));
    CUdevResource groups[1]{}, rest{};
    unsigned n = 1;
    const CUresult split = cuDevSmResourceSplitByCount(groups, &n, &sm, &rest, 0, 16);
    CUdevResourceDesc desc = nullptr;
    MUST(cuDevResourceGenerateDesc(&desc, groups, 1));
    const long long u0 = used_mib();
    CUgreenCtx green = nullptr;
    const CUresult create = cuGreenCtxCreate(&green, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM);
    const long long u1 = used_mib();
    CUcontext ctx = nullptr;
    MUST(cuCtxFromGreenCtx(&ctx, green));
    const long long u2 = used_mib();
    MUST(cuCtxPushCurrent(ctx));
    const std::size_t stack = limit(CU_LIMIT_STACK_SIZE);
    const Kernels k = load();
    CUdeviceptr mine = 0;
    MUST(cuMemAlloc(&mine, 4096));
    const long long u3 = used_mib();
    const CUresult l = launch(k.plain, mine, 0);
    MUST(cuCtxSynchronize());
    const long long u4 = used_mib();
    MUST(cuMemFree(mine));
    MUST(cuModuleUnload(k.module));
    CUcontext popped = nullptr;
    MUST(cuCtxPopCurrent(&popped));
    const long long u5 = used_mib();
    const CUresult destroy = cuGreenCtxDestroy(green);
    const long long u6 = used_mib();
    std::printf("fact green_ctx split=%s groups=%u group_sms=%u rest_sms=%u create=%s create_mib=%lld from_green_mib=%lld "
                "stack=%zu load_alloc_mib=%lld launch=%s launch_mib=%lld destroy=%s destroy_mib=%lld\n",
                name_of(split).c_str(), n, groups[0].sm.smCount, rest.sm.smCount, name_of(create).c_str(), u1 - u0, u2 - u1,
                stack, u3 - u2, name_of(l).c_str(), u4 - u3, name_of(destroy).c_str(), u6 - u5);
}

// Modules: what a load costs, and whether an unload gives it back.
void fact_modules() {
    MUST(cuInit(0));
    primary();
    Kernels first = load();
    (void)first;
    const long long u0 = used_mib();
    std::vector<CUmodule> mods;
    for (int i = 0; i < 300; ++i) mods.push_back(load().module);
    const long long u1 = used_mib();
    for (CUmodule m : mods) MUST(cuModuleUnload(m));
    const long long u2 = used_mib();
    std::printf("fact modules load_300_mib=%lld unload_300_mib=%lld\n", u1 - u0, u2 - u1);
}

// Managed memory: what cuMemAllocManaged takes on the device, once a memset touched it there, once it was
// prefetched back to the host, and how much of it NVML charges this process.
void fact_managed() {
    MUST(cuInit(0));
    primary();
    const long long u0 = used_mib(), n0 = nvml_process_mib();
    CUdeviceptr m = 0;
    MUST(cuMemAllocManaged(&m, 1024 * kMiB, CU_MEM_ATTACH_GLOBAL));
    const long long u1 = used_mib(), n1 = nvml_process_mib();
    const CUresult set = cuMemsetD8(m, 1, 1024 * kMiB);
    MUST(cuCtxSynchronize());
    const long long u2 = used_mib(), n2 = nvml_process_mib();
    CUmemLocation host{};
    host.type = CU_MEM_LOCATION_TYPE_HOST;
    const CUresult back = cuMemPrefetchAsync(m, 1024 * kMiB, host, 0, nullptr);
    MUST(cuCtxSynchronize());
    const long long u3 = used_mib(), n3 = nvml_process_mib();
    MUST(cuMemFree(m));
    const long long u4 = used_mib(), n4 = nvml_process_mib();
    std::printf("fact managed alloc_mib=%lld alloc_nvml_mib=%lld memset=%s touched_mib=%lld touched_nvml_mib=%lld "
                "prefetch_host=%s host_mib=%lld host_nvml_mib=%lld free_mib=%lld free_nvml_mib=%lld\n",
                u1 - u0, n1 - n0, name_of(set).c_str(), u2 - u0, n2 - n0, name_of(back).c_str(), u3 - u0, n3 - n0,
                u4 - u0, n4 - n0);
}

// Module code and data: where the driver takes device memory for a module's kernels and globals, under the
// loading mode of this process (CUDA_MODULE_LOADING): at the load, at getting a function, or at its first
// launch (support/module_code_ptx.hpp: two long kernels and a 32 MiB global).
void fact_module_code() {
    MUST(cuInit(0));
    primary();
    CUdeviceptr out = 0;
    MUST(cuMemAlloc(&out, 4096));
    const std::string ptx = cumemaudit::program::module_code_ptx(40000);
    const long long u0 = used_mib();
    CUmodule m = nullptr;
    MUST(cuModuleLoadData(&m, ptx.c_str()));
    const long long u1 = used_mib();
    CUfunction f = nullptr;
    MUST(cuModuleGetFunction(&f, m, "code_a"));
    const long long u2 = used_mib();
    int k = 3;
    void* args[] = {&out, &k};
    MUST(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
    MUST(cuCtxSynchronize());
    const long long u3 = used_mib();
    MUST(cuModuleGetFunction(&f, m, "code_b"));
    MUST(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
    MUST(cuCtxSynchronize());
    const long long u4 = used_mib();
    CUlibrary lib = nullptr;
    MUST(cuLibraryLoadData(&lib, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    const long long u5 = used_mib();
    CUkernel kern = nullptr;
    MUST(cuLibraryGetKernel(&kern, lib, "code_a"));
    const long long u6 = used_mib();
    CUfunction kf = nullptr;
    MUST(cuKernelGetFunction(&kf, kern));
    const long long u7 = used_mib();
    MUST(cuLaunchKernel(kf, 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
    MUST(cuCtxSynchronize());
    const long long u8 = used_mib();
    MUST(cuModuleUnload(m));
    const long long u9 = used_mib();
    MUST(cuLibraryUnload(lib));
    const long long u10 = used_mib();
    CUmoduleLoadingMode mode{};
    MUST(cuModuleGetLoadingMode(&mode));
    std::printf("fact module_code lazy=%d module_load_mib=%lld get_function_mib=%lld first_launch_mib=%lld "
                "second_kernel_mib=%lld library_load_mib=%lld get_kernel_mib=%lld kernel_get_function_mib=%lld "
                "library_launch_mib=%lld module_unload_mib=%lld library_unload_mib=%lld\n",
                mode == CU_MODULE_LAZY_LOADING ? 1 : 0, u1 - u0, u2 - u1, u3 - u2, u4 - u3, u5 - u4, u6 - u5, u7 - u6,
                u8 - u7, u9 - u8, u10 - u9);
}

struct Fact {
    const char* name;
    void (*run)();
    // Run only when asked for: its answers depend on the process's CUDA_MODULE_LOADING, so each mode has a run
    // of its own (tests/gpu/runs/k22, held to by tests/gpu/test_reservations.py --facts).
    bool named_only = false;
};
const Fact kFacts[] = {
    {"context_primary", fact_context_primary},
    {"context_create", fact_context_create},
    {"stack", fact_stack},
    {"stack_oom", fact_stack_oom},
    {"modules", fact_modules},
    {"managed", fact_managed},
    {"module_code", fact_module_code, true},
    {"heap_fifo", fact_heap_fifo, true},
    {"heap_fifo_raised", fact_heap_fifo_raised, true},
    {"heap_oom", fact_heap_oom, true},
    {"green_ctx", fact_green_ctx, true},
    {"heap_modules", fact_heap_modules, true},
};

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> wanted(argv + 1, argv + argc);
    int failed = 0;
    for (const Fact& f : kFacts) {
        const bool asked = std::find(wanted.begin(), wanted.end(), f.name) != wanted.end();
        if (wanted.empty() ? f.named_only : !asked) continue;
        std::fflush(stdout);
        const pid_t pid = fork();
        if (pid == 0) {
            g_fact = f.name;
            f.run();
            std::fflush(stdout);
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            std::printf("fact %s child-failed status=%d\n", f.name, status);
            ++failed;
        }
    }
    return failed == 0 ? 0 : 1;
}
