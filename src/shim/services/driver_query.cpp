#include "shim/services/driver_query.hpp"

#include "shim/services/thread_state.hpp"

#include <atomic>
#include "shim/services/loader.hpp"
#include "shim/services/nvml_query.hpp"

namespace cumemaudit::shim {
namespace {

template <typename Fn>
Fn driver_fn(const char* name) {
    return reinterpret_cast<Fn>(driver_symbol(name));
}

}  // namespace

CUcontext current_context() {
    // Asked before the program loaded the driver too (a mark made early): found once it is there.
    using GetCurrent = CUresult(CUDAAPI*)(CUcontext*);
    static std::atomic<GetCurrent> cached{nullptr};
    GetCurrent get = cached.load(std::memory_order_acquire);
    if (get == nullptr && (get = driver_fn<GetCurrent>("cuCtxGetCurrent")) != nullptr) cached.store(get, std::memory_order_release);
    CUcontext ctx = nullptr;
    if (get == nullptr || get(&ctx) != CUDA_SUCCESS) return nullptr;
    return ctx;
}

bool driver_knows_pointer(std::uint64_t ptr) {
    DriverScope in_driver;
    static const auto attribute = driver_fn<CUresult(CUDAAPI*)(void*, CUpointer_attribute, CUdeviceptr)>("cuPointerGetAttribute");
    CUcontext ctx = nullptr;
    return attribute == nullptr || attribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, ptr) != CUDA_ERROR_INVALID_VALUE;
}

bool primary_context_active(CUdevice dev) {
    DriverScope in_driver;
    static const auto state = driver_fn<CUresult(CUDAAPI*)(CUdevice, unsigned*, int*)>("cuDevicePrimaryCtxGetState");
    unsigned flags = 0;
    int active = 1;
    return state == nullptr || state(dev, &flags, &active) != CUDA_SUCCESS || active != 0;
}

DriverMemory driver_memory(CUcontext fallback, WithNvml nvml) {
    DriverScope in_driver;  // our own questions are not the program's calls
    DriverMemory m;
    if (current_context() == nullptr) {
        static const auto set = driver_fn<CUresult(CUDAAPI*)(CUcontext)>("cuCtxSetCurrent");
        if (fallback == nullptr || set == nullptr || set(fallback) != CUDA_SUCCESS) return m;
    }
    using MemGetInfo = CUresult(CUDAAPI*)(size_t*, size_t*);
    // Looked up each time (marks are rare): a program may dlclose libcuda and load it again elsewhere.
    const auto info = reinterpret_cast<MemGetInfo>(driver_entry("cuMemGetInfo_v2"));
    size_t free = 0, total = 0;
    if (info == nullptr || info(&free, &total) != CUDA_SUCCESS) return m;
    m.known = true;
    m.used = total - free;
    m.total = total;
    static const auto device_of = driver_fn<CUresult(CUDAAPI*)(CUdevice*)>("cuCtxGetDevice");
    static const auto graph_attr =
        driver_fn<CUresult(CUDAAPI*)(CUdevice, CUgraphMem_attribute, void*)>("cuDeviceGetGraphMemAttribute");
    CUdevice dev = 0;
    if (device_of == nullptr || device_of(&dev) != CUDA_SUCCESS) return m;
    if (graph_attr != nullptr) {
        cuuint64_t v = 0;
        if (graph_attr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v) == CUDA_SUCCESS) m.graph_used = v;
        if (graph_attr(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v) == CUDA_SUCCESS) m.graph_reserved = v;
    }
    if (nvml == WithNvml::yes) m.process_used = nvml_process_used(dev);
    return m;
}

}  // namespace cumemaudit::shim
