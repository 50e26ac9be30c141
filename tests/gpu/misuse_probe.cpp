// What the driver answers to each misuse the shim records, one case per forked child (a driver that
// crashes on a case loses that case only; CUDA is initialised in the child, never in the parent). Prints
// one line per case, "probe <case> <CUresult name>" or "probe <case> crashed-<signal>", so the real driver's
// answers can be laid beside the simulated driver's (docs/DRIVER.md; tests/gpu/test_probe.py).
//   misuse_probe [CASE...]   (all cases without arguments)
#include "support/program.hpp"

#include <cuda.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

constexpr size_t kGran = size_t{2} << 20;

// Set-up steps must succeed; the answer printed is the one of the misuse itself.
#define MUST(call)                                                                      \
    do {                                                                                \
        if ((call) != CUDA_SUCCESS) {                                                   \
            std::printf("probe %s setup-failed-at-line-%d\n", g_case, __LINE__);        \
            std::fflush(stdout);                                                        \
            _exit(1);                                                                   \
        }                                                                               \
    } while (0)

const char* g_case = "";

CUmemGenericAllocationHandle create(size_t size, CUmemAllocationHandleType type = CU_MEM_HANDLE_TYPE_NONE) {
    CUmemAllocationProp p = cumemaudit::program::device_prop(0, type);
    CUmemGenericAllocationHandle h = 0;
    MUST(cuMemCreate(&h, size, &p, 0));
    return h;
}

CUdeviceptr reserve(size_t size) {
    CUdeviceptr va = 0;
    MUST(cuMemAddressReserve(&va, size, 0, 0, 0));
    return va;
}

struct Case {
    const char* name;
    std::function<CUresult()> run;
};

const std::vector<Case>& cases() {
    static const std::vector<Case> all = {
        {"unmap_unmapped", [] {  // vLLM's free while asleep
             const CUdeviceptr va = reserve(kGran);
             const auto h = create(kGran);
             MUST(cuMemMap(va, kGran, 0, h, 0));
             MUST(cuMemUnmap(va, kGran));
             return cuMemUnmap(va, kGran);
         }},
        {"unmap_unreserved", [] {  // a range no reservation holds
             const CUdeviceptr va = reserve(2 * kGran);
             MUST(cuMemAddressFree(va, 2 * kGran));
             return cuMemUnmap(va, kGran);
         }},
        {"partial_unmap", [] {
             const CUdeviceptr va = reserve(2 * kGran);
             const auto h = create(2 * kGran);
             MUST(cuMemMap(va, 2 * kGran, 0, h, 0));
             return cuMemUnmap(va, kGran);
         }},
        {"map_onto_mapped", [] {
             const CUdeviceptr va = reserve(kGran);
             const auto h = create(kGran), h2 = create(kGran);
             MUST(cuMemMap(va, kGran, 0, h, 0));
             return cuMemMap(va, kGran, 0, h2, 0);
         }},
        {"release_released", [] {
             const auto h = create(kGran);
             MUST(cuMemRelease(h));
             return cuMemRelease(h);
         }},
        {"release_unknown", [] {  // a value never handed out: the handle of a fresh create, plus one
             const auto h = create(kGran);
             return cuMemRelease(h + 1);
         }},
        {"release_while_mapped", [] {  // accepted; the memory goes at the unmap (measured)
             const CUdeviceptr va = reserve(kGran);
             const auto h = create(kGran);
             MUST(cuMemMap(va, kGran, 0, h, 0));
             return cuMemRelease(h);
         }},
        {"address_free_mapped", [] {
             const CUdeviceptr va = reserve(kGran);
             const auto h = create(kGran);
             MUST(cuMemMap(va, kGran, 0, h, 0));
             return cuMemAddressFree(va, kGran);
         }},
        {"address_free_unknown", [] {  // a range freed already: no reservation there any more
             const CUdeviceptr va = reserve(kGran);
             MUST(cuMemAddressFree(va, kGran));
             return cuMemAddressFree(va, kGran);
         }},
        {"address_free_partial", [] {
             const CUdeviceptr va = reserve(2 * kGran);
             return cuMemAddressFree(va, kGran);
         }},
        {"import_closed_fd", [] {
             const auto h = create(kGran, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
             int fd = -1;
             MUST(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
             close(fd);
             CUmemGenericAllocationHandle imported = 0;
             return cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                                   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
         }},
        {"free_unknown", [] {  // cuMemFree of a pointer freed already
             CUdeviceptr d = 0;
             MUST(cuMemAlloc(&d, 4096));
             MUST(cuMemFree(d));
             return cuMemFree(d);
         }},
        {"free_during_capture", [] {  // cuBLAS's free under PyTorch graph capture
             CUdeviceptr d = 0;
             MUST(cuMemAlloc(&d, 4096));
             CUstream s;
             MUST(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
             MUST(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
             return cuMemFree(d);
         }},
        {"host_register_twice", [] {  // XLA's and UCX's registration caches guard against exactly this
             static char buffer[1 << 16];
             MUST(cuMemHostRegister(buffer, sizeof buffer, 0));
             return cuMemHostRegister(buffer, sizeof buffer, 0);
         }},
        {"host_unregister_unregistered", [] {
             static char buffer[1 << 16];
             MUST(cuMemHostRegister(buffer, sizeof buffer, 0));
             MUST(cuMemHostUnregister(buffer));
             return cuMemHostUnregister(buffer);
         }},
        {"io_register_plain_memory", [] {  // I/O memory is a device's BAR; what does ordinary host memory get?
             alignas(4096) static char buffer[1 << 16];
             const CUresult r = cuMemHostRegister(buffer, sizeof buffer, CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_DEVICEMAP);
             if (r == CUDA_SUCCESS) MUST(cuMemHostUnregister(buffer));
             return r;
         }},
    };
    return all;
}

// Multicast objects: run only on the simulated driver. Creating one on the shared GPU machine can put the
// host's GPUs out of service, so these answers are modelled on the driver API's documentation.
CUmemGenericAllocationHandle multicast() {
    CUmulticastObjectProp p{};
    p.numDevices = 1;
    p.size = kGran;
    CUmemGenericAllocationHandle mc = 0;
    MUST(cuMulticastCreate(&mc, &p));
    MUST(cuMulticastAddDevice(mc, 0));
    return mc;
}

const std::vector<Case>& simulated_only_cases() {
    static const std::vector<Case> all = {
        {"mc_release_while_bound", [] {  // the object ends, and its binds with it
             const auto mc = multicast();
             MUST(cuMulticastBindMem(mc, 0, create(kGran), 0, kGran, 0));
             return cuMemRelease(mc);
         }},
        {"mc_release_released", [] {
             const auto mc = multicast();
             MUST(cuMemRelease(mc));
             return cuMemRelease(mc);
         }},
        {"mc_unbind_unbound", [] { return cuMulticastUnbind(multicast(), 0, 0, kGran); }},
        {"mc_bind_released", [] {  // memory released (and never mapped) before its bind
             const auto mc = multicast();
             const auto h = create(kGran);
             MUST(cuMemRelease(h));
             return cuMulticastBindMem(mc, 0, h, 0, kGran, 0);
         }},
        {"mc_add_device_twice", [] { return cuMulticastAddDevice(multicast(), 0); }},
    };
    return all;
}

std::string name_of(CUresult r) {
    const char* n = nullptr;
    cuGetErrorName(r, &n);
    return n != nullptr ? n : "CUresult-" + std::to_string(static_cast<int>(r));
}

void run_in_child(const Case& c) {
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        g_case = c.name;
        CUdevice dev;
        CUcontext ctx;
        MUST(cuInit(0));
        MUST(cuDeviceGet(&dev, 0));
        MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
        MUST(cuCtxSetCurrent(ctx));
        std::printf("probe %s %s\n", c.name, name_of(c.run()).c_str());
        std::fflush(stdout);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) std::printf("probe %s crashed-%d\n", c.name, WTERMSIG(status));
}

}  // namespace

// What the device says of multicast, and the granularity it would use: queries, which create nothing.
void multicast_facts() {
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        g_case = "multicast_facts";
        CUdevice dev;
        MUST(cuInit(0));
        MUST(cuDeviceGet(&dev, 0));
        int supported = -1;
        MUST(cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED, dev));
        CUmulticastObjectProp p{};
        p.numDevices = 1;
        p.size = kGran;
        p.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        size_t minimum = 0, recommended = 0;
        const CUresult a = cuMulticastGetGranularity(&minimum, &p, CU_MULTICAST_GRANULARITY_MINIMUM);
        const CUresult b = cuMulticastGetGranularity(&recommended, &p, CU_MULTICAST_GRANULARITY_RECOMMENDED);
        std::printf("fact multicast supported=%d minimum=%s:%zu recommended=%s:%zu\n", supported, name_of(a).c_str(),
                    minimum, name_of(b).c_str(), recommended);
        std::fflush(stdout);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
}

int main(int argc, char** argv) {
    const bool simulated = dlsym(RTLD_DEFAULT, "cumemaudit_sim_driver_version") != nullptr;
    if (argc == 1) multicast_facts();
    for (const auto* list : {&cases(), &simulated_only_cases()}) {
        if (list == &simulated_only_cases() && !simulated) continue;
        for (const Case& c : *list) {
            bool wanted = argc == 1;
            for (int i = 1; i < argc; ++i) wanted |= std::strcmp(argv[i], c.name) == 0;
            if (wanted) run_in_child(c);
        }
    }
    return 0;
}
