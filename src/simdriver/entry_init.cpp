// Entry points for initialisation, devices and contexts. The simulated devices look like H200s
// (compute capability 9.0) that support VMM with POSIX-fd and fabric handles.
#include "entry_guard.hpp"
#include "config.hpp"
#include "state.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

using cumemaudit::sim::guarded;
using cumemaudit::sim::SimState;

namespace {

CUresult check_device(CUdevice dev) {
    SimState& s = SimState::get();
    if (!s.initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    return dev >= 0 && dev < s.device_count() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

// Values a program may ask about before allocating; anything else of the enum reads 0.
int attribute_value(CUdevice_attribute a, CUdevice dev) {
    // A caller sizing the kernel stack (limit x multiprocessors x threads each) gets what the driver reserves.
    if (a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) return SimState::get().multiprocessors();
    switch (a) {
        case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
        case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
        case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED:
        case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
        case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
        case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
        case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
        case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
        case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
        case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED:
        case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
        case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
        case CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED:  // an HGX node's devices sit on NVSwitches
            return 1;
        case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
            return CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
        case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
        case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return cumemaudit::sim::kThreadsPerSm;
        case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
        case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 48 * 1024;
        case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 227 * 1024;
        case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 60 * 1024 * 1024;
        case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
        case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
        case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 6144;
        case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return 0x18 + dev;
        case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID: return 0;  // one NUMA node (NCCL's host buffers ask it)
        default: return 0;
    }
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned int flags) {
    return guarded([&] { return flags != 0 ? CUDA_ERROR_INVALID_VALUE : SimState::get().init(); });
}

CUresult cuDriverGetVersion(int* version) {
    if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *version = 13000;  // works before cuInit, as on the real driver
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
    return guarded([&] {
        if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
        SimState& s = SimState::get();
        if (!s.initialized()) return CUDA_ERROR_NOT_INITIALIZED;
        *count = s.device_count();
        return CUDA_SUCCESS;
    });
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
    return guarded([&] {
        if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
        if (CUresult r = check_device(ordinal); r != CUDA_SUCCESS) return r;
        *device = ordinal;
        return CUDA_SUCCESS;
    });
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
    return guarded([&] {
        if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
        if (CUresult r = check_device(dev); r != CUDA_SUCCESS) return r;
        std::snprintf(name, static_cast<std::size_t>(len), "%s", "NVIDIA H200 (cumemaudit-sim)");
        return CUDA_SUCCESS;
    });
}

CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
    return guarded([&] {
        if (pi == nullptr || attrib < 1 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
        if (CUresult r = check_device(dev); r != CUDA_SUCCESS) return r;
        *pi = attribute_value(attrib, dev);
        return CUDA_SUCCESS;
    });
}

// Bus ids 0x18, 0x19, … as on an 8-GPU H200 board; the simulated NVML maps them back.
CUresult cuDeviceGetPCIBusId(char* bus_id, int len, CUdevice dev) {
    return guarded([&] {
        if (bus_id == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
        if (CUresult r = check_device(dev); r != CUDA_SUCCESS) return r;
        std::snprintf(bus_id, static_cast<std::size_t>(len), "0000:%02x:00.0", cumemaudit::sim::kSimFirstPciBus + dev);
        return CUDA_SUCCESS;
    });
}

// A fixed UUID per device, the same in every process (NCCL tells peers' GPUs apart by it). The v2 entry
// point differs only for MIG instances, which the simulated GPUs are not.
CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
    return guarded([&] {
        if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
        if (CUresult r = check_device(dev); r != CUDA_SUCCESS) return r;
        static constexpr char kStem[15] = {'c', 'u', 'm', 'e', 'm', 'a', 'u', 'd', 'i', 't', '-', 's', 'i', 'm', '-'};
        std::memcpy(uuid->bytes, kStem, sizeof kStem);
        uuid->bytes[15] = static_cast<char>(dev);
        return CUDA_SUCCESS;
    });
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) { return cuDeviceGetUuid(uuid, dev); }

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
    return guarded([&] {
        if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
        if (CUresult r = check_device(dev); r != CUDA_SUCCESS) return r;
        *bytes = SimState::get().capacity();
        return CUDA_SUCCESS;
    });
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
    return guarded([&] {
        return pctx == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().primary_ctx_retain(pctx, dev);
    });
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    return guarded([&] { return SimState::get().primary_ctx_release(dev); });
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
    return guarded([&] { return SimState::get().primary_ctx_reset(dev); });
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
    return guarded([&] {
        return flags == nullptr || active == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().primary_ctx_state(dev, flags, active);
    });
}

// Flags (scheduling, map-host) change nothing the simulated driver models; execution-affinity and CIG
// parameters are not modelled. (cuda.h 13 declares only this variant; v2 and v3 are what callers built against
// older headers get from cuGetProcAddress at 3020 and 11040, and they make the same context.)
CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int, CUdevice dev) {
    return guarded([&] {
        if (params != nullptr && (params->execAffinityParams != nullptr || params->cigParams != nullptr)) return CUDA_ERROR_NOT_SUPPORTED;
        return pctx == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().ctx_create(pctx, dev);
    });
}

CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) { return cuCtxCreate_v4(pctx, nullptr, flags, dev); }

CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams, unsigned int flags, CUdevice dev) {
    return guarded([&] {
        if (numParams < 0 || (numParams > 0 && paramsArray == nullptr)) return CUDA_ERROR_INVALID_VALUE;
        if (numParams > 0) return CUDA_ERROR_NOT_SUPPORTED;  // execution affinity, as for v4
        return cuCtxCreate_v4(pctx, nullptr, flags, dev);
    });
}

// Green contexts (docs/DRIVER.md, "Device heap, printf FIFO and green contexts"): a device's multiprocessors as
// one SM resource, split in groups of at least 8 and a multiple of 8 (cuda.h's rule for compute capability
// 9.0), a descriptor of some groups, and a green context made of it over the primary context.
namespace {
constexpr unsigned kSmGranularity = 8;
}

CUresult cuDeviceGetDevResource(CUdevice dev, CUdevResource* result, CUdevResourceType type) {
    return guarded([&] {
        if (CUresult r = check_device(dev); r != CUDA_SUCCESS) return r;
        if (result == nullptr) return CUDA_ERROR_INVALID_VALUE;
        if (type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
        *result = CUdevResource{};
        result->type = CU_DEV_RESOURCE_TYPE_SM;
        result->sm.smCount = static_cast<unsigned>(SimState::get().multiprocessors());
        result->sm.minSmPartitionSize = kSmGranularity;
        result->sm.smCoscheduledAlignment = kSmGranularity;
        return CUDA_SUCCESS;
    });
}

// Flags (coscheduling, cluster sizes) are not modelled: CUDA_ERROR_NOT_SUPPORTED.
CUresult cuDevSmResourceSplitByCount(CUdevResource* result, unsigned int* nbGroups, const CUdevResource* input,
                                     CUdevResource* remaining, unsigned int useFlags, unsigned int minCount) {
    return guarded([&] {
        if (!SimState::get().initialized()) return CUDA_ERROR_NOT_INITIALIZED;
        if (nbGroups == nullptr || input == nullptr) return CUDA_ERROR_INVALID_VALUE;
        if (input->type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
        if (useFlags != 0) return CUDA_ERROR_NOT_SUPPORTED;
        if (minCount > input->sm.smCount) return CUDA_ERROR_INVALID_VALUE;
        const unsigned each = std::max(kSmGranularity, (minCount + kSmGranularity - 1) / kSmGranularity * kSmGranularity);
        const unsigned possible = input->sm.smCount / each;
        if (result == nullptr) {
            *nbGroups = possible;
            return CUDA_SUCCESS;
        }
        const unsigned groups = std::min(*nbGroups, possible);
        for (unsigned i = 0; i < groups; ++i) {
            result[i] = *input;
            result[i].sm.smCount = each;
        }
        *nbGroups = groups;
        if (remaining != nullptr) {
            *remaining = *input;
            remaining->sm.smCount = input->sm.smCount - groups * each;
        }
        return CUDA_SUCCESS;
    });
}

CUresult cuDevResourceGenerateDesc(CUdevResourceDesc* phDesc, CUdevResource* resources, unsigned int nbResources) {
    return guarded([&] {
        if (phDesc == nullptr || resources == nullptr || nbResources == 0) return CUDA_ERROR_INVALID_VALUE;
        unsigned sms = 0;
        for (unsigned i = 0; i < nbResources; ++i) {
            if (resources[i].type != CU_DEV_RESOURCE_TYPE_SM) return CUDA_ERROR_INVALID_RESOURCE_TYPE;
            sms += resources[i].sm.smCount;
        }
        return SimState::get().resource_desc(phDesc, sms);
    });
}

// cuda.h: CU_GREEN_CTX_DEFAULT_STREAM is the only flag, and it is required.
CUresult cuGreenCtxCreate(CUgreenCtx* phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags) {
    return guarded([&] {
        if (phCtx == nullptr || desc == nullptr || flags != CU_GREEN_CTX_DEFAULT_STREAM) return CUDA_ERROR_INVALID_VALUE;
        return SimState::get().green_create(phCtx, desc, dev);
    });
}

CUresult cuGreenCtxDestroy(CUgreenCtx hCtx) {
    return guarded([&] { return SimState::get().green_destroy(hCtx); });
}

CUresult cuCtxFromGreenCtx(CUcontext* pContext, CUgreenCtx hCtx) {
    return guarded([&] { return pContext == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().green_context(pContext, hCtx); });
}

CUresult cuCtxGetLimit(size_t* pvalue, CUlimit limit) {
    return guarded([&] { return pvalue == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().ctx_get_limit(pvalue, limit); });
}

CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
    return guarded([&] { return SimState::get().ctx_set_limit(limit, value); });
}

CUresult cuCtxDestroy_v2(CUcontext ctx) {
    return guarded([&] { return SimState::get().ctx_destroy(ctx); });
}

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
    return guarded([&] { return data == nullptr ? CUDA_ERROR_INVALID_VALUE : SimState::get().pointer_attribute(data, attribute, ptr); });
}

CUresult cuCtxGetCurrent(CUcontext* pctx) {
    return guarded([&] {
        if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
        SimState& s = SimState::get();
        if (!s.initialized()) return CUDA_ERROR_NOT_INITIALIZED;
        *pctx = s.current_context();
        return CUDA_SUCCESS;
    });
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
    return guarded([&] { return SimState::get().set_current_context(ctx); });
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
    return guarded([&] { return SimState::get().push_context(ctx); });
}

CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
    return guarded([&] { return SimState::get().pop_context(pctx); });
}

CUresult cuCtxGetDevice(CUdevice* device) {
    return guarded([&] {
        if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
        int dev = 0;
        if (CUresult r = SimState::get().current_device(&dev); r != CUDA_SUCCESS) return r;
        *device = dev;
        return CUDA_SUCCESS;
    });
}

CUresult cuCtxSynchronize(void) {
    return guarded([&] {
        int dev = 0;
        if (CUresult r = SimState::get().current_device(&dev); r != CUDA_SUCCESS) return r;
        SimState::get().synchronized();  // nothing runs; pools give idle memory back past their threshold
        return CUDA_SUCCESS;
    });
}

}  // extern "C"
