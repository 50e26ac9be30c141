#include "shim/services/nvml_query.hpp"

#include "shim/services/loader.hpp"
#include "shim/services/log.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include <mutex>
#include <vector>

namespace cumemaudit::shim {
namespace {

// NVML's ABI, declared here because the toolkit on a build machine need not ship nvml.h. These are the
// versioned entry points nvml.h maps its names to since CUDA 11 / 12 (stable ABI).
using NvmlReturn = int;
using NvmlDevice = void*;
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlInsufficientSize = 7;
constexpr unsigned long long kNvmlValueNotAvailable = ~0ull;

struct NvmlProcessInfo {  // nvmlProcessInfo_v2_t, what nvmlDeviceGetComputeRunningProcesses_v3 fills
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
};

struct Nvml {
    NvmlReturn (*init)() = nullptr;
    NvmlReturn (*by_bus_id)(const char*, NvmlDevice*) = nullptr;
    NvmlReturn (*processes)(NvmlDevice, unsigned int*, NvmlProcessInfo*) = nullptr;
    bool ready = false;
};

Nvml load() {
    Nvml n;
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        log_info("NVML not found (libnvidia-ml.so.1): steps carry no per-process figure");
        return n;
    }
    n.init = reinterpret_cast<decltype(n.init)>(dlsym(lib, "nvmlInit_v2"));
    n.by_bus_id = reinterpret_cast<decltype(n.by_bus_id)>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.processes = reinterpret_cast<decltype(n.processes)>(dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3"));
    if (n.init == nullptr || n.by_bus_id == nullptr || n.processes == nullptr) {
        log_info("NVML lacks nvmlDeviceGetComputeRunningProcesses_v3: steps carry no per-process figure");
        return n;
    }
    if (const NvmlReturn r = n.init(); r != kNvmlSuccess) {
        log_info("nvmlInit_v2 failed ({}): steps carry no per-process figure", r);
        return n;
    }
    n.ready = true;
    return n;
}

// A process's command name (/proc/PID/comm), "" when /proc does not show it (another pid namespace, gone).
std::string command_name(unsigned int pid) {
    char path[32];
    std::snprintf(path, sizeof path, "/proc/%u/comm", pid);
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    char buf[64];
    const ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    if (n <= 0) return {};
    std::string name(buf, static_cast<std::size_t>(n));
    while (!name.empty() && name.back() == '\n') name.pop_back();
    return name;
}

}  // namespace

// Called inside driver_memory()'s DriverScope: nothing asked here counts as the program's call.
DeviceProcesses nvml_processes(CUdevice device, bool names) {
    static std::once_flag once;
    static Nvml nvml;
    std::call_once(once, [] { nvml = load(); });
    DeviceProcesses out;
    if (!nvml.ready) return out;

    // CUDA ordinals and NVML indices differ under CUDA_VISIBLE_DEVICES; the PCI bus id names one device.
    const auto bus_id_of =
        driver_function<CUresult(CUDAAPI*)(char*, int, CUdevice)>("cuDeviceGetPCIBusId");
    char bus[64] = {};
    if (bus_id_of == nullptr || bus_id_of(bus, sizeof bus, device) != CUDA_SUCCESS) return out;
    NvmlDevice dev = nullptr;
    if (nvml.by_bus_id(bus, &dev) != kNvmlSuccess) return out;

    std::vector<NvmlProcessInfo> infos(16);
    for (int attempt = 0; attempt < 4; ++attempt) {
        auto count = static_cast<unsigned int>(infos.size());
        const NvmlReturn r = nvml.processes(dev, &count, infos.data());
        if (r == kNvmlInsufficientSize) {
            infos.resize(count + 16);  // processes came and went between the two questions
            continue;
        }
        if (r != kNvmlSuccess) return out;
        const auto self = static_cast<unsigned int>(::getpid());
        bool self_listed = false;  // with any figure: all of a process's memory may be NVML-uncharged (managed)
        for (unsigned int i = 0; i < count; ++i) {
            if (infos[i].usedGpuMemory == kNvmlValueNotAvailable) continue;
            if (infos[i].pid == self) {
                out.self = infos[i].usedGpuMemory;
                self_listed = true;
            } else {
                out.others.push_back({infos[i].pid, {}, infos[i].usedGpuMemory});
            }
        }
        // NVML's pids are the host's. Without this process among them a pid namespace lies between us and the
        // driver: any entry could be this process itself, or name another program here, so none is used.
        if (!self_listed) return {};
        if (names)
            for (history::OtherProcess& p : out.others) p.name = command_name(p.pid);
        out.listed = true;
        return out;
    }
    return out;
}

}  // namespace cumemaudit::shim
