// The shape of DeepEP main's csrc/utils/lazy_driver.hpp: libcuda.so.1 dlopen'ed privately, each entry point
// looked up with dlsym on first use and called from a per-API wrapper function. Every allocation then
// passes through the one wrapper line, so only a deep stack names the code that leaked.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace {

void* driver() {
    static void* handle = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (handle == nullptr) std::abort();
    return handle;
}

template <typename Fn>
Fn entry(const char* name) {
    auto* fn = reinterpret_cast<Fn>(dlsym(driver(), name));
    if (fn == nullptr) std::abort();
    return fn;
}

// A wrapper that checks what the driver answered, so it is a frame of its own (not inlined, no tail call).
__attribute__((noinline)) void lazy_cuMemCreate(CUmemGenericAllocationHandle* h, size_t size,
                                                const CUmemAllocationProp* prop, unsigned long long flags) {
    static auto fn = entry<decltype(&cuMemCreate)>("cuMemCreate");
    const CUresult r = fn(h, size, prop, flags);  // WRAPPER LINE
    if (r != CUDA_SUCCESS) {
        std::fprintf(stderr, "cuMemCreate failed: %d\n", static_cast<int>(r));
        std::exit(1);
    }
}

void check(CUresult r, const char* what) {
    if (r != CUDA_SUCCESS) {
        std::fprintf(stderr, "%s failed: %d\n", what, static_cast<int>(r));
        std::exit(1);
    }
}

__attribute__((noinline)) CUmemGenericAllocationHandle allocate_buffer(size_t size) {
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    CUmemGenericAllocationHandle h = 0;
    lazy_cuMemCreate(&h, size, &prop, 0);  // CALLER LINE
    return h;
}

}  // namespace

int main() {
    auto init = entry<decltype(&cuInit)>("cuInit");
    auto device_get = entry<decltype(&cuDeviceGet)>("cuDeviceGet");
    auto retain = entry<decltype(&cuDevicePrimaryCtxRetain)>("cuDevicePrimaryCtxRetain");
    auto set_current = entry<decltype(&cuCtxSetCurrent)>("cuCtxSetCurrent");
    check(init(0), "cuInit");
    CUdevice dev = 0;
    check(device_get(&dev, 0), "cuDeviceGet");
    CUcontext ctx = nullptr;
    check(retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(set_current(ctx), "cuCtxSetCurrent");
    allocate_buffer(2u << 20);  // leaked: the creation reference is never released
    return 0;
}
