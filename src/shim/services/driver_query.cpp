#include "shim/services/driver_query.hpp"

#include "shim/services/thread_state.hpp"

#include <atomic>
#include "shim/services/loader.hpp"
#include "shim/services/nvml_query.hpp"

namespace cumemaudit::shim {

CUcontext current_context() {
    // Asked before the program loaded the driver too (a mark made early): found once it is there.
    using GetCurrent = CUresult(CUDAAPI*)(CUcontext*);
    static std::atomic<GetCurrent> cached{nullptr};
    GetCurrent get = cached.load(std::memory_order_acquire);
    if (get == nullptr && (get = driver_function<GetCurrent>("cuCtxGetCurrent")) != nullptr) cached.store(get, std::memory_order_release);
    CUcontext ctx = nullptr;
    if (get == nullptr || get(&ctx) != CUDA_SUCCESS) return nullptr;
    return ctx;
}

int current_device() {
    DriverScope in_driver;
    static const auto device_of = driver_function<CUresult(CUDAAPI*)(CUdevice*)>("cuCtxGetDevice");
    CUdevice dev = -1;
    return device_of != nullptr && device_of(&dev) == CUDA_SUCCESS ? dev : -1;
}

bool driver_knows_pointer(std::uint64_t ptr) {
    DriverScope in_driver;
    static const auto attribute = driver_function<CUresult(CUDAAPI*)(void*, CUpointer_attribute, CUdeviceptr)>("cuPointerGetAttribute");
    CUcontext ctx = nullptr;
    return attribute == nullptr || attribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, ptr) != CUDA_ERROR_INVALID_VALUE;
}

bool primary_context_active(CUdevice dev) {
    DriverScope in_driver;
    // Looked up each time: asked at every primary context retain, which a program may make again after it
    // dlclosed libcuda and loaded it elsewhere.
    const auto state = driver_function<CUresult(CUDAAPI*)(CUdevice, unsigned*, int*)>("cuDevicePrimaryCtxGetState");
    unsigned flags = 0;
    int active = 1;
    return state == nullptr || state(dev, &flags, &active) != CUDA_SUCCESS || active != 0;
}

PoolFigures ask_pool(CUmemoryPool pool) {
    DriverScope in_driver;
    static const auto get = driver_function<CUresult(CUDAAPI*)(CUmemoryPool, CUmemPool_attribute, void*)>("cuMemPoolGetAttribute");
    PoolFigures f;
    cuuint64_t reserved = 0, used = 0, high = 0;
    if (get == nullptr || get(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) != CUDA_SUCCESS ||
        get(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) != CUDA_SUCCESS)
        return f;
    if (get(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &high) != CUDA_SUCCESS) high = reserved;
    f.known = true;
    f.reserved = reserved;
    f.used = used;
    f.peak_reserved = high;
    return f;
}

std::uint64_t graph_memory_reserved(int device) {
    DriverScope in_driver;
    static const auto device_of = driver_function<CUresult(CUDAAPI*)(CUdevice*)>("cuCtxGetDevice");
    static const auto attr = driver_function<CUresult(CUDAAPI*)(CUdevice, CUgraphMem_attribute, void*)>("cuDeviceGetGraphMemAttribute");
    CUdevice dev = device;
    if (dev < 0 && (device_of == nullptr || device_of(&dev) != CUDA_SUCCESS)) return 0;
    cuuint64_t v = 0;
    return attr != nullptr && attr(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v) == CUDA_SUCCESS ? v : 0;
}

std::vector<std::pair<int, CUmemoryPool>> default_pools() {
    DriverScope in_driver;
    static const auto count = driver_function<CUresult(CUDAAPI*)(int*)>("cuDeviceGetCount");
    static const auto get = driver_function<CUresult(CUDAAPI*)(CUmemoryPool*, CUdevice)>("cuDeviceGetDefaultMemPool");
    std::vector<std::pair<int, CUmemoryPool>> out;
    int n = 0;
    if (count == nullptr || get == nullptr || count(&n) != CUDA_SUCCESS) return out;
    for (int d = 0; d < n; ++d) {
        CUmemoryPool pool = nullptr;
        if (get(&pool, d) == CUDA_SUCCESS && pool != nullptr) out.emplace_back(d, pool);
    }
    return out;
}

DeviceUsed device_used_now() {
    DriverScope in_driver;
    DeviceUsed d;
    if (current_context() == nullptr) return d;
    static const auto info = driver_function<CUresult(CUDAAPI*)(size_t*, size_t*)>("cuMemGetInfo_v2");
    size_t free = 0, total = 0;
    d.device = current_device();
    if (info == nullptr || d.device < 0 || info(&free, &total) != CUDA_SUCCESS) return d;
    d.known = true;
    d.used = total - free;
    return d;
}

bool lazy_module_loading() {
    static const bool lazy = [] {
        DriverScope in_driver;
        const auto mode = driver_function<CUresult(CUDAAPI*)(CUmoduleLoadingMode*)>("cuModuleGetLoadingMode");
        CUmoduleLoadingMode m = CU_MODULE_LAZY_LOADING;
        // A driver that cannot say is one from before lazy loading: it loads at the load.
        return mode != nullptr && mode(&m) == CUDA_SUCCESS && m == CU_MODULE_LAZY_LOADING;
    }();
    return lazy;
}

CUlibrary library_of_kernel(CUkernel kernel) {
    DriverScope in_driver;
    static const auto get = driver_function<CUresult(CUDAAPI*)(CUlibrary*, CUkernel)>("cuKernelGetLibrary");
    CUlibrary lib = nullptr;
    return get != nullptr && get(&lib, kernel) == CUDA_SUCCESS ? lib : nullptr;
}

AddressRange allocation_holding(std::uint64_t ptr) {
    DriverScope in_driver;
    static const auto range = driver_function<CUresult(CUDAAPI*)(CUdeviceptr*, size_t*, CUdeviceptr)>("cuMemGetAddressRange_v2");
    CUdeviceptr base = 0;
    size_t size = 0;
    if (range == nullptr || range(&base, &size, ptr) != CUDA_SUCCESS) return {};
    return {base, size};
}

bool load_kernel_here(CUkernel kernel) {
    DriverScope in_driver;
    static const auto get = driver_function<CUresult(CUDAAPI*)(CUfunction*, CUkernel)>("cuKernelGetFunction");
    CUfunction f = nullptr;
    return get != nullptr && get(&f, kernel) == CUDA_SUCCESS;
}

DriverMemory driver_memory(CUcontext fallback, WithNvml nvml) {
    DriverScope in_driver;  // our own questions are not the program's calls
    DriverMemory m;
    if (current_context() == nullptr) {
        static const auto set = driver_function<CUresult(CUDAAPI*)(CUcontext)>("cuCtxSetCurrent");
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
    static const auto device_of = driver_function<CUresult(CUDAAPI*)(CUdevice*)>("cuCtxGetDevice");
    static const auto graph_attr =
        driver_function<CUresult(CUDAAPI*)(CUdevice, CUgraphMem_attribute, void*)>("cuDeviceGetGraphMemAttribute");
    CUdevice dev = 0;
    if (device_of == nullptr || device_of(&dev) != CUDA_SUCCESS) return m;
    m.device = dev;
    if (graph_attr != nullptr) {
        cuuint64_t v = 0;
        if (graph_attr(dev, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &v) == CUDA_SUCCESS) m.graph_used = v;
        if (graph_attr(dev, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT, &v) == CUDA_SUCCESS) m.graph_reserved = v;
    }
    if (nvml != WithNvml::no) {
        DeviceProcesses on_device = nvml_processes(dev, nvml == WithNvml::processes);
        m.processes_listed = on_device.listed;
        m.process_used = on_device.self;
        for (const history::OtherProcess& p : on_device.others) m.other_processes_bytes += p.bytes;
        if (nvml == WithNvml::processes) m.other_processes = std::move(on_device.others);
    }
    return m;
}

}  // namespace cumemaudit::shim
