// fence_program: a CUDA program whose every answer is printed — each call's return code and the
// out-parameters it filled — so that runs with and without the shim can be compared byte for byte. When
// failing_malloc is preloaded, it is armed for one round of calls on the main thread (new sites to intern,
// the VMM model's records, misuse rows: the shim must allocate for each) and one on a fresh thread (whose
// first call must also register the thread), so all of that bookkeeping fails; the program must not
// notice. Results go to a fixed buffer while armed (printing could allocate).
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <thread>

namespace {

char g_out[8192];
std::size_t g_len = 0;
CUdeviceptr g_base = 0;  // the first address of the run: the simulated driver places its range anew each run

// Called after the call it reports returned (the out-parameter is read then).
void put(const char* what, CUresult r, unsigned long long value) {
    g_len += static_cast<std::size_t>(std::snprintf(g_out + g_len, sizeof g_out - g_len, "%s rc=%d value=%#llx\n",
                                                    what, static_cast<int>(r), value));
}
// A device address, as its offset from the run's first one.
void put_address(const char* what, CUresult r, CUdeviceptr p) {
    g_len += static_cast<std::size_t>(std::snprintf(g_out + g_len, sizeof g_out - g_len, "%s rc=%d address=base%+lld\n",
                                                    what, static_cast<int>(r), static_cast<long long>(p - g_base)));
}

void calls(CUcontext ctx) {
    cuCtxSetCurrent(ctx);
    constexpr size_t kGran = 2u << 20;
    CUdeviceptr d = 0, a = 0;
    { const CUresult r = cuMemAlloc(&d, 4096); put_address("cuMemAlloc", r, d); }
    { const CUresult r = cuMemAllocAsync(&a, 8192, nullptr); put_address("cuMemAllocAsync", r, a); }
    { const CUresult r = cuMemFreeAsync(a, nullptr); put("cuMemFreeAsync", r, 0); }
    { const CUresult r = cuMemFree(d); put("cuMemFree", r, 0); }
    { const CUresult r = cuMemFree(d); put("cuMemFree again", r, 0); }  // the driver refuses: misuse the shim would record
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va = 0;
    { const CUresult r = cuMemCreate(&h, kGran, &prop, 0); put("cuMemCreate", r, h); }
    { const CUresult r = cuMemAddressReserve(&va, kGran, 0, 0, 0); put_address("cuMemAddressReserve", r, va); }
    { const CUresult r = cuMemMap(va, kGran, 0, h, 0); put("cuMemMap", r, 0); }
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    { const CUresult r = cuMemSetAccess(va, kGran, &access, 1); put("cuMemSetAccess", r, 0); }
    CUmemGenericAllocationHandle again = 0;
    { const CUresult r = cuMemRetainAllocationHandle(&again, reinterpret_cast<void*>(va)); put("cuMemRetainAllocationHandle", r, again); }
    { const CUresult r = cuMemRelease(again); put("cuMemRelease retained", r, 0); }
    { const CUresult r = cuMemUnmap(va, kGran); put("cuMemUnmap", r, 0); }
    { const CUresult r = cuMemAddressFree(va, kGran); put("cuMemAddressFree", r, 0); }
    { const CUresult r = cuMemRelease(h); put("cuMemRelease", r, 0); }
    { const CUresult r = cuMemRelease(h); put("cuMemRelease again", r, 0); }  // refused
    size_t free_b = 0, total_b = 0;
    { const CUresult r = cuMemGetInfo(&free_b, &total_b); put("cuMemGetInfo", r, free_b); }
}

}  // namespace

int main() {
    CUdevice dev = 0;
    CUcontext ctx = nullptr;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        std::fprintf(stderr, "fence_program: no device\n");
        return 3;
    }
    // One allocation first, unarmed: the auditor starts as it would in any program.
    CUdeviceptr warm = 0;
    { const CUresult r = cuMemAlloc(&warm, 512); g_base = warm; put_address("warm-up cuMemAlloc", r, warm); }
    { const CUresult r = cuMemFree(warm); put("warm-up cuMemFree", r, 0); }

    using Arm = int (*)(int);
    auto arm = reinterpret_cast<Arm>(dlsym(RTLD_DEFAULT, "failing_malloc_arm"));
    const bool armed = arm != nullptr && arm(1) == 1;
    put("main thread", CUDA_SUCCESS, 0);
    calls(ctx);
    put("fresh thread", CUDA_SUCCESS, 0);
    std::thread t(calls, ctx);  // the thread's own allocations are the program's (libstdc++.so, not the shim)
    t.join();
    if (armed) arm(0);
    std::fputs(g_out, stdout);
    using Refused = long (*)();
    if (auto refused = reinterpret_cast<Refused>(dlsym(RTLD_DEFAULT, "failing_malloc_refused")))
        std::fprintf(stderr, "fence_program: armed=%d, shim allocations refused: %ld\n", armed ? 1 : 0, refused());
    return 0;
}
