// cudart_door: the way cudart 13 reaches the driver (docs/DRIVER.md): dlopen libcuda.so.1, dlsym only
// cuGetProcAddress_v2, ask it for "cuGetProcAddress" (11030 and 12000), then look every entry point up by
// base name and version through the pointer obtained at 12000 — the versions cudart asks for — and use
// the memory ones. Checks the resolution and that memory comes back.
#include "scenario.hpp"

#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstring>

using scenario::expect_eq;
using scenario::ok;

namespace {

PFN_cuGetProcAddress_v12000 g_gpa = nullptr;

void* lookup(const char* name, int version, cuuint64_t flags = 0) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult st{};
    ok(g_gpa(name, &fn, version, flags, &st), name);
    expect_eq(st, CU_GET_PROC_ADDRESS_SUCCESS, name);
    if (fn == nullptr) scenario::fail(name);
    return fn;
}

template <typename T>
T as(void* fn) { return reinterpret_cast<T>(fn); }

}  // namespace

int main() {
    scenario::g_program = "cudart_door";
    void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == nullptr) scenario::fail("dlopen libcuda.so.1");
    auto gpa2 = reinterpret_cast<PFN_cuGetProcAddress_v12000>(::dlsym(lib, "cuGetProcAddress_v2"));
    if (gpa2 == nullptr) scenario::fail("dlsym cuGetProcAddress_v2");
    CUdriverProcAddressQueryResult st{};
    void* v1 = nullptr;
    void* v2 = nullptr;
    ok(gpa2("cuGetProcAddress", &v1, 11030, 0, &st), "cuGetProcAddress at 11030");
    ok(gpa2("cuGetProcAddress", &v2, 12000, 0, &st), "cuGetProcAddress at 12000");
    if (v1 == nullptr || v2 == nullptr || v1 == v2) scenario::fail("\"cuGetProcAddress\" at 11030 and 12000 must be two entry points");
    g_gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(v2);  // cudart uses only this from now on

    // The look-ups cudart makes (and a few it needs to set up a context).
    const auto init = as<PFN_cuInit_v2000>(lookup("cuInit", 2000));
    const auto ctx_retain = as<PFN_cuDevicePrimaryCtxRetain_v7000>(lookup("cuDevicePrimaryCtxRetain", 7000));
    const auto ctx_set = as<PFN_cuCtxSetCurrent_v4000>(lookup("cuCtxSetCurrent", 4000));
    const auto get_info = as<PFN_cuMemGetInfo_v3020>(lookup("cuMemGetInfo", 3020));
    const auto mem_alloc = as<PFN_cuMemAlloc_v3020>(lookup("cuMemAlloc", 3020));
    const auto mem_free = as<PFN_cuMemFree_v3020>(lookup("cuMemFree", 3020));
    const auto alloc_async = as<PFN_cuMemAllocAsync_v11020>(lookup("cuMemAllocAsync", 11020, 0));
    const auto alloc_async_ptsz = as<PFN_cuMemAllocAsync_v11020_ptsz>(
        lookup("cuMemAllocAsync", 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM));
    const auto free_async = as<PFN_cuMemFreeAsync_v11020>(lookup("cuMemFreeAsync", 11020));
    const auto stream_sync = as<PFN_cuStreamSynchronize_v2000>(lookup("cuStreamSynchronize", 2000));
    lookup("cuMemAllocFromPoolAsync", 11020);
    const auto host_alloc = as<PFN_cuMemHostAlloc_v2020>(lookup("cuMemHostAlloc", 2020));
    const auto free_host = as<PFN_cuMemFreeHost_v2000>(lookup("cuMemFreeHost", 2000));
    const auto managed = as<PFN_cuMemAllocManaged_v6000>(lookup("cuMemAllocManaged", 6000));
    lookup("cuGraphInstantiateWithFlags", 11040);
    const void* ipc_v1 = lookup("cuIpcOpenMemHandle", 4010);
    const void* ipc_v2 = lookup("cuIpcOpenMemHandle", 11000);
    if (reinterpret_cast<void*>(alloc_async) == reinterpret_cast<void*>(alloc_async_ptsz))
        scenario::fail("cuMemAllocAsync with flags 0 and 2 must be the legacy and per-thread variants");
    if (ipc_v1 == nullptr || ipc_v2 == nullptr) scenario::fail("cuIpcOpenMemHandle");
    void* missing = &st;
    if (g_gpa("cuNoSuchEntryPoint", &missing, 12000, 0, &st) != CUDA_ERROR_NOT_FOUND || missing != nullptr ||
        st != CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND)
        scenario::fail("an unknown symbol must be CUDA_ERROR_NOT_FOUND / CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND");

    ok(init(0), "cuInit");
    CUcontext ctx = nullptr;
    ok(ctx_retain(&ctx, 0), "cuDevicePrimaryCtxRetain");
    ok(ctx_set(ctx), "cuCtxSetCurrent");
    auto free_now = [&] {
        std::size_t f = 0, t = 0;
        ok(get_info(&f, &t), "cuMemGetInfo");
        return static_cast<long long>(f);
    };
    const long long start = free_now();
    CUdeviceptr d = 0, a = 0, b = 0, m = 0;
    ok(mem_alloc(&d, 8 << 20), "cuMemAlloc_v2");
    expect_eq(start - free_now(), 8 << 20, "free drop after cuMemAlloc of 8 MiB");
    ok(alloc_async(&a, 4 << 20, nullptr), "cuMemAllocAsync");
    ok(alloc_async_ptsz(&b, 4 << 20, nullptr), "cuMemAllocAsync_ptsz");
    // Both come from the device's default pool, which reserves 32 MiB at a time (measured on the H200).
    expect_eq(start - free_now(), (8 << 20) + (32 << 20), "free drop after two async allocations of 4 MiB");
    void* host = nullptr;
    ok(host_alloc(&host, 1 << 20, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
    std::memset(host, 0x5a, 1 << 20);
    ok(managed(&m, 1 << 20, CU_MEM_ATTACH_GLOBAL), "cuMemAllocManaged");
    std::memset(reinterpret_cast<void*>(m), 0x5a, 1 << 20);  // managed memory is host-accessible
    ok(free_async(a, nullptr), "cuMemFreeAsync");
    ok(free_async(b, nullptr), "cuMemFreeAsync");
    ok(stream_sync(nullptr), "cuStreamSynchronize");  // the pool gives its idle memory back here
    ok(mem_free(d), "cuMemFree_v2");
    ok(mem_free(m), "cuMemFree_v2 (managed)");
    ok(free_host(host), "cuMemFreeHost");
    expect_eq(free_now(), start, "free memory after freeing everything");
    std::printf("cudart_door: every look-up resolved through the returned cuGetProcAddress; memory balanced\n");
    return 0;
}
