// What the simulated NVML (libnvidia-ml.so.1, nvml/) asks this driver: the processes using a device and
// their bytes, with NVML's calling convention (return 0, or 7 "insufficient size" with the count needed), and
// the device's capacity and used bytes.
#include "state.hpp"

#include <algorithm>

extern "C" {

__attribute__((visibility("default"))) int cumemaudit_sim_processes(int device, unsigned int* count, int* pids,
                                                                     unsigned long long* bytes) {
    try {
        if (count == nullptr) return 2;  // NVML_ERROR_INVALID_ARGUMENT
        const auto list = cumemaudit::sim::SimState::get().processes(device);
        const unsigned int room = *count;
        *count = static_cast<unsigned int>(list.size());
        if (list.size() > room) return 7;  // NVML_ERROR_INSUFFICIENT_SIZE
        if (!list.empty() && (pids == nullptr || bytes == nullptr)) return 2;
        for (std::size_t i = 0; i < list.size(); ++i) {
            pids[i] = list[i].pid;
            bytes[i] = list[i].bytes;
        }
        return 0;
    } catch (...) {
        return 999;  // NVML_ERROR_UNKNOWN
    }
}

// Used as cuMemGetInfo counts it, node-wide: every process's allocations and contexts.
__attribute__((visibility("default"))) int cumemaudit_sim_memory(int device, unsigned long long* total,
                                                                  unsigned long long* used) {
    try {
        if (total == nullptr || used == nullptr) return 2;  // NVML_ERROR_INVALID_ARGUMENT
        std::uint64_t t = 0, u = 0;
        if (!cumemaudit::sim::SimState::get().device_memory(device, &t, &u)) return 2;
        *total = t;
        *used = u;
        return 0;
    } catch (...) {
        return 999;  // NVML_ERROR_UNKNOWN
    }
}

}  // extern "C"
