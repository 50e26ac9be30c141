// The simulated NVML, libnvidia-ml.so.1: the few calls that read per-process and device memory, answered from
// the simulated driver's node (so processes of one CUMEMAUDIT_SIM_NODE see each other, as nvidia-smi
// lists every process on a GPU). Loaded beside the simulated libcuda.so.1; the real NVML's ABI: versioned
// names, nvmlProcessInfo_v2_t, NVML_ERROR_* codes.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace {

enum : int {
    kSuccess = 0,
    kUninitialized = 1,
    kInvalidArgument = 2,
    kNotFound = 6,
    kInsufficientSize = 7,
    kLibraryNotFound = 12,
    kArgumentVersionMismatch = 25,
    kUnknown = 999,
};

struct Memory {  // nvmlMemory_t
    unsigned long long total, free, used;
};
struct MemoryV2 {  // nvmlMemory_v2_t
    unsigned int version;
    unsigned long long total, reserved, free, used;
};
constexpr unsigned int kMemoryV2 = sizeof(MemoryV2) | (2u << 24);  // nvmlMemory_v2, as NVML_STRUCT_VERSION makes it

struct ProcessInfo {  // nvmlProcessInfo_v2_t
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
};

constexpr int kMaxDevices = 64;
constexpr int kFirstPciBus = 0x18;  // the simulated driver's cuDeviceGetPCIBusId: bus 0x18 + ordinal
struct Device {
    int index;
};
Device g_devices[kMaxDevices];

using Processes = int (*)(int, unsigned int*, int*, unsigned long long*);
using MemoryOf = int (*)(int, unsigned long long*, unsigned long long*);
// The simulated driver, borrowed for one call and given back: the real NVML does not keep libcuda.so.1 loaded,
// so neither may this one (a program that dlcloses the driver unloads it).
struct Borrowed {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    Processes processes = lib != nullptr ? reinterpret_cast<Processes>(dlsym(lib, "cumemaudit_sim_processes")) : nullptr;
    MemoryOf memory = lib != nullptr ? reinterpret_cast<MemoryOf>(dlsym(lib, "cumemaudit_sim_memory")) : nullptr;
    int (*init)(unsigned) = lib != nullptr ? reinterpret_cast<int (*)(unsigned)>(dlsym(lib, "cuInit")) : nullptr;
    int (*count)(int*) = lib != nullptr ? reinterpret_cast<int (*)(int*)>(dlsym(lib, "cuDeviceGetCount")) : nullptr;
    Borrowed() = default;
    Borrowed(const Borrowed&) = delete;
    Borrowed& operator=(const Borrowed&) = delete;
    ~Borrowed() {
        if (lib != nullptr) dlclose(lib);
    }
    // kSuccess when it is the simulated driver and it starts (idempotent where the program started it).
    int ready() const {
        if (lib == nullptr) return kLibraryNotFound;
        if (processes == nullptr || memory == nullptr || init == nullptr || count == nullptr)
            return kLibraryNotFound;  // not the simulated one
        return init(0) == 0 ? kSuccess : kUnknown;
    }
};
std::mutex g_mu;
int g_devices_seen = 0;
int g_inits = 0;

int load_driver() {
    Borrowed driver;
    if (const int r = driver.ready(); r != kSuccess) return r;
    int n = 0;
    if (driver.count(&n) != 0) return kUnknown;
    g_devices_seen = n < kMaxDevices ? n : kMaxDevices;
    for (int i = 0; i < kMaxDevices; ++i) g_devices[i].index = i;
    return kSuccess;
}

Device* device_of(void* handle) {
    auto* d = static_cast<Device*>(handle);
    return d >= g_devices && d < g_devices + g_devices_seen ? d : nullptr;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int nvmlInit_v2() {
    // CUMEMAUDIT_SIM_NVML=0: a machine whose NVML cannot start (a container that mounts the library but not
    // the driver's), so the driver's figures come without NVML's per-process list.
    if (const char* on = std::getenv("CUMEMAUDIT_SIM_NVML"); on != nullptr && std::strcmp(on, "0") == 0)
        return kLibraryNotFound;
    std::lock_guard lock(g_mu);
    if (g_inits == 0) {
        if (const int r = load_driver(); r != kSuccess) return r;
    }
    ++g_inits;
    return kSuccess;
}

__attribute__((visibility("default"))) int nvmlShutdown() {
    std::lock_guard lock(g_mu);
    if (g_inits == 0) return kUninitialized;
    --g_inits;
    return kSuccess;
}

__attribute__((visibility("default"))) const char* nvmlErrorString(int r) {
    switch (r) {
        case kSuccess: return "Success";
        case kUninitialized: return "Uninitialized";
        case kInvalidArgument: return "Invalid Argument";
        case kNotFound: return "Not Found";
        case kInsufficientSize: return "Insufficient Size";
        case kLibraryNotFound: return "NVML Shared Library Not Found";
        default: return "Unknown Error";
    }
}

__attribute__((visibility("default"))) int nvmlDeviceGetCount_v2(unsigned int* count) {
    std::lock_guard lock(g_mu);
    if (g_inits == 0) return kUninitialized;
    if (count == nullptr) return kInvalidArgument;
    *count = static_cast<unsigned int>(g_devices_seen);
    return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
    std::lock_guard lock(g_mu);
    if (g_inits == 0) return kUninitialized;
    if (device == nullptr || index >= static_cast<unsigned int>(g_devices_seen)) return kInvalidArgument;
    *device = &g_devices[index];
    return kSuccess;
}

// Accepts "0000:19:00.0" and NVML's own "00000000:19:00.0".
__attribute__((visibility("default"))) int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, void** device) {
    std::lock_guard lock(g_mu);
    if (g_inits == 0) return kUninitialized;
    unsigned domain = 0, bus = 0, dev = 0, fn = 0;
    if (bus_id == nullptr || device == nullptr || std::sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4)
        return kInvalidArgument;
    const int index = static_cast<int>(bus) - kFirstPciBus;
    if (domain != 0 || dev != 0 || fn != 0 || index < 0 || index >= g_devices_seen) return kNotFound;
    *device = &g_devices[index];
    return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned int* count,
                                                                                    ProcessInfo* infos) {
    Device* d = nullptr;
    {
        std::lock_guard lock(g_mu);
        if (g_inits == 0) return kUninitialized;
        d = device_of(device);
    }
    if (d == nullptr || count == nullptr) return kInvalidArgument;
    Borrowed driver;
    if (const int r = driver.ready(); r != kSuccess) return r;
    int pids[256];
    unsigned long long bytes[256];
    unsigned int n = 256;
    if (const int r = driver.processes(d->index, &n, pids, bytes); r != kSuccess) return r;
    const unsigned int room = *count;
    *count = n;
    if (n > room) return kInsufficientSize;
    if (n != 0 && infos == nullptr) return kInvalidArgument;
    for (unsigned int i = 0; i < n; ++i)
        infos[i] = ProcessInfo{static_cast<unsigned int>(pids[i]), bytes[i], ~0u, ~0u};
    return kSuccess;
}

// The device's memory as cuMemGetInfo sees it (used: every process's allocations and contexts on the node);
// the real NVML's "reserved" part of v2, memory the driver keeps from every process, is not modelled (0).
namespace {
int memory_of(void* device, unsigned long long* total, unsigned long long* used) {
    Device* d = nullptr;
    {
        std::lock_guard lock(g_mu);
        if (g_inits == 0) return kUninitialized;
        d = device_of(device);
    }
    if (d == nullptr) return kInvalidArgument;
    Borrowed driver;
    if (const int r = driver.ready(); r != kSuccess) return r;
    return driver.memory(d->index, total, used);
}
}  // namespace

__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void* device, Memory* out) {
    if (out == nullptr) return kInvalidArgument;
    unsigned long long total = 0, used = 0;
    if (const int r = memory_of(device, &total, &used); r != kSuccess) return r;
    *out = Memory{total, total - used, used};
    return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo_v2(void* device, MemoryV2* out) {
    if (out == nullptr) return kInvalidArgument;
    if (out->version != kMemoryV2) return kArgumentVersionMismatch;
    unsigned long long total = 0, used = 0;
    if (const int r = memory_of(device, &total, &used); r != kSuccess) return r;
    *out = MemoryV2{kMemoryV2, total, 0, total - used, used};
    return kSuccess;
}

}  // extern "C"
