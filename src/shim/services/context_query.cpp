#include "shim/services/context_query.hpp"

#include "shim/services/loader.hpp"
#include "shim/services/thread_state.hpp"

#include <array>
#include <atomic>

namespace cumemaudit::shim {

// Each question looks its entry points up anew (they are rare): a program may dlclose libcuda and load it
// again elsewhere.
std::uint64_t limit_of(CUcontext ctx, CUlimit which) {
    DriverScope in_driver;
    const auto get_current = driver_function<CUresult(CUDAAPI*)(CUcontext*)>("cuCtxGetCurrent");
    const auto set_current = driver_function<CUresult(CUDAAPI*)(CUcontext)>("cuCtxSetCurrent");
    const auto get = driver_function<CUresult(CUDAAPI*)(size_t*, CUlimit)>("cuCtxGetLimit");
    CUcontext mine = nullptr;
    if (ctx == nullptr || get_current == nullptr || set_current == nullptr || get == nullptr ||
        get_current(&mine) != CUDA_SUCCESS)
        return 0;
    // The limit is the current context's: `ctx` stands in for the thread's own for the question.
    if (mine != ctx && set_current(ctx) != CUDA_SUCCESS) return 0;
    size_t v = 0;
    if (get(&v, which) != CUDA_SUCCESS) v = 0;
    if (mine != ctx) set_current(mine);
    return v;
}

std::uint64_t device_threads(int device) {
    // A device's shape never changes: asked once per device (the first 64 ordinals).
    static std::array<std::atomic<std::uint64_t>, 64> known{};
    if (device < 0 || device >= static_cast<int>(known.size())) return 0;
    if (const std::uint64_t t = known[static_cast<std::size_t>(device)].load(std::memory_order_relaxed); t != 0) return t;
    DriverScope in_driver;
    const auto attr = driver_function<CUresult(CUDAAPI*)(int*, CUdevice_attribute, CUdevice)>("cuDeviceGetAttribute");
    int sms = 0, per_sm = 0;
    if (attr == nullptr || attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device) != CUDA_SUCCESS ||
        attr(&per_sm, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, device) != CUDA_SUCCESS || sms < 0 || per_sm < 0)
        return 0;
    const std::uint64_t t = static_cast<std::uint64_t>(sms) * static_cast<std::uint64_t>(per_sm);
    known[static_cast<std::size_t>(device)].store(t, std::memory_order_relaxed);
    return t;
}

KernelFacts kernel_facts(CUfunction f) {
    DriverScope in_driver;
    const auto attr = driver_function<CUresult(CUDAAPI*)(int*, CUfunction_attribute, CUfunction)>("cuFuncGetAttribute");
    const auto func_name = driver_function<CUresult(CUDAAPI*)(const char**, CUfunction)>("cuFuncGetName");
    const auto kernel_name = driver_function<CUresult(CUDAAPI*)(const char**, CUkernel)>("cuKernelGetName");
    const auto kernel_attr =
        driver_function<CUresult(CUDAAPI*)(int*, CUfunction_attribute, CUkernel, CUdevice)>("cuKernelGetAttribute");
    KernelFacts k;
    int local = 0, most = 0;
    if (attr != nullptr && attr(&most, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f) == CUDA_SUCCESS) k.max_threads_per_block = most;
    if (attr != nullptr && attr(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, f) == CUDA_SUCCESS) {
        k.local_bytes_per_thread = local;
    } else if (kernel_attr != nullptr) {
        CUdevice dev = 0;
        const auto device_of = driver_function<CUresult(CUDAAPI*)(CUdevice*)>("cuCtxGetDevice");
        if (device_of != nullptr && device_of(&dev) == CUDA_SUCCESS &&
            kernel_attr(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, reinterpret_cast<CUkernel>(f), dev) == CUDA_SUCCESS)
            k.local_bytes_per_thread = local;
    }
    const char* name = nullptr;
    if ((func_name != nullptr && func_name(&name, f) == CUDA_SUCCESS && name != nullptr) ||
        (kernel_name != nullptr && kernel_name(&name, reinterpret_cast<CUkernel>(f)) == CUDA_SUCCESS && name != nullptr))
        k.name = name;
    return k;
}

}  // namespace cumemaudit::shim
