// What the driver does at the edges of the memory surface the ledger models: context teardown, legacy IPC
// and dma-buf fds. One fact per forked child (CUDA is initialised in the child, never in the parent), each
// printed as one line "fact <name> key=value ...", values being CUresult names or MiB of the device's used
// memory (cuMemGetInfo) moved since the fact began. Run on the H200 and on the simulated driver; docs/DRIVER.md
// keeps the real answers and tests/gpu/test_surface.py holds the simulated driver to them.
//   surface_probe [FACT...]   (all facts without arguments)
#include <cuda.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

constexpr size_t kMiB = size_t{1} << 20;
const char* g_fact = "";

#define MUST(call)                                                                  \
    do {                                                                            \
        if ((call) != CUDA_SUCCESS) {                                               \
            std::printf("fact %s setup-failed-at-line-%d\n", g_fact, __LINE__);     \
            std::fflush(stdout);                                                    \
            _exit(1);                                                               \
        }                                                                           \
    } while (0)

std::string name_of(CUresult r) {
    const char* n = nullptr;
    cuGetErrorName(r, &n);
    return n != nullptr ? n : "CUresult-" + std::to_string(static_cast<int>(r));
}

long long used_mib() {
    size_t free = 0, total = 0;
    MUST(cuMemGetInfo(&free, &total));
    return static_cast<long long>((total - free) / kMiB);
}

// What the driver says of a pointer: the answer to a context query.
std::string pointer_answer(CUdeviceptr p) {
    CUcontext ctx = nullptr;
    return name_of(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, p));
}

CUcontext primary(CUdevice dev) {
    CUcontext ctx = nullptr;
    MUST(cuDevicePrimaryCtxRetain(&ctx, dev));
    MUST(cuCtxSetCurrent(ctx));
    return ctx;
}

struct Fact {
    const char* name;
    std::function<void()> run;
};

std::string out;
void put(const char* key, const std::string& value) { out += std::string(" ") + key + "=" + value; }
void put(const char* key, long long value) { put(key, std::to_string(value)); }

const std::vector<Fact>& facts() {
    static const std::vector<Fact> all = {
        // cudaDeviceReset: which allocations of the context the reset frees, and what their pointers answer.
        {"primary_reset", [] {
             primary(0);
             const long long base = used_mib();
             CUdeviceptr dev_mem = 0, managed = 0, async = 0;
             void* host = nullptr;
             MUST(cuMemAlloc(&dev_mem, 256 * kMiB));
             MUST(cuMemAllocHost(&host, 64 * kMiB));
             MUST(cuMemAllocManaged(&managed, 64 * kMiB, CU_MEM_ATTACH_GLOBAL));
             MUST(cuMemAllocAsync(&async, 256 * kMiB, nullptr));
             MUST(cuStreamSynchronize(nullptr));
             static char registered[1 << 20];
             MUST(cuMemHostRegister(registered, sizeof registered, 0));
             put("before", used_mib() - base);
             MUST(cuDevicePrimaryCtxReset(0));
             unsigned flags = 0;
             int active = -1;
             MUST(cuDevicePrimaryCtxGetState(0, &flags, &active));
             put("active", active);
             CUcontext current = nullptr;
             MUST(cuCtxGetCurrent(&current));
             put("current_kept", current != nullptr ? "yes" : "no");
             put("device_ptr", pointer_answer(dev_mem));
             put("host_ptr", pointer_answer(reinterpret_cast<CUdeviceptr>(host)));
             put("managed_ptr", pointer_answer(managed));
             put("async_ptr", pointer_answer(async));
             put("registered_ptr", pointer_answer(reinterpret_cast<CUdeviceptr>(registered)));
             primary(0);
             put("after", used_mib() - base);
             put("free_stale", name_of(cuMemFree(dev_mem)));
             put("unregister_stale", name_of(cuMemHostUnregister(registered)));
         }},
        // The last cuDevicePrimaryCtxRelease resets the context as cudaDeviceReset does.
        {"primary_last_release", [] {
             primary(0);
             const long long base = used_mib();
             CUdeviceptr dev_mem = 0;
             MUST(cuMemAlloc(&dev_mem, 256 * kMiB));
             put("before", used_mib() - base);
             MUST(cuDevicePrimaryCtxRelease(0));
             unsigned flags = 0;
             int active = -1;
             MUST(cuDevicePrimaryCtxGetState(0, &flags, &active));
             put("active", active);
             put("device_ptr", pointer_answer(dev_mem));
             primary(0);
             put("after", used_mib() - base);
         }},
        // A context of its own: cuCtxDestroy frees what was allocated in it, not what the primary holds.
        {"ctx_destroy", [] {
             primary(0);
             const long long base = used_mib();
             CUdeviceptr in_primary = 0, in_own = 0;
             MUST(cuMemAlloc(&in_primary, 128 * kMiB));
             CUcontext own = nullptr;
             MUST(cuCtxCreate(&own, nullptr, 0, 0));
             const long long with_context = used_mib();  // a context costs device memory of its own
             MUST(cuMemAlloc(&in_own, 256 * kMiB));
             put("before", used_mib() - with_context);
             MUST(cuCtxDestroy(own));
             CUcontext current = nullptr;
             MUST(cuCtxGetCurrent(&current));
             put("current_after", current == nullptr ? "none" : "other");
             put("own_ptr_no_ctx", pointer_answer(in_own));
             primary(0);
             put("own_ptr", pointer_answer(in_own));
             put("primary_ptr", pointer_answer(in_primary));
             put("after", used_mib() - base);
         }},
        // Legacy IPC: the importer's size, and whose memory an import keeps after the exporter's free.
        {"ipc_import", [] {
             int to_child[2], to_parent[2];
             MUST(pipe(to_child) == 0 ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN);
             MUST(pipe(to_parent) == 0 ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN);
             std::fflush(stdout);
             const pid_t importer = fork();
             if (importer == 0) {
                 MUST(cuInit(0));
                 primary(0);
                 char step = 0;
                 if (write(to_parent[1], "r", 1) != 1) _exit(1);  // its context exists: the exporter's baseline
                 CUipcMemHandle h;
                 if (read(to_child[0], &h, sizeof h) != sizeof h) _exit(1);
                 CUdeviceptr p = 0;
                 std::string line = " importer_open=" + name_of(cuIpcOpenMemHandle(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
                 CUdeviceptr base = 0;
                 size_t size = 0;
                 line += " importer_range=" + name_of(cuMemGetAddressRange(&base, &size, p)) +
                         " importer_size=" + std::to_string(size) + " importer_base=" + (base == 0 ? "0" : base == p ? "ptr" : "other");
                 size_t range = 0;
                 line += " importer_range_size_attr=" +
                         name_of(cuPointerGetAttribute(&range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p)) + ":" + std::to_string(range);
                 if (write(to_parent[1], line.c_str(), line.size() + 1) < 0) _exit(1);
                 if (read(to_child[0], &step, 1) != 1) _exit(1);  // the exporter freed its memory
                 const std::string closed = name_of(cuIpcCloseMemHandle(p));
                 if (write(to_parent[1], closed.c_str(), closed.size() + 1) < 0) _exit(1);
                 if (read(to_child[0], &step, 1) != 1) _exit(1);  // measured: it may exit
                 _exit(0);
             }
             MUST(cuInit(0));
             primary(0);
             char ready = 0;
             if (read(to_parent[0], &ready, 1) != 1) _exit(1);
             const long long base = used_mib();
             CUdeviceptr p = 0;
             MUST(cuMemAlloc(&p, 1024 * kMiB));
             CUipcMemHandle h, again;
             put("get", name_of(cuIpcGetMemHandle(&h, p)));
             MUST(cuIpcGetMemHandle(&again, p));
             put("same_handle", std::memcmp(&h, &again, sizeof h) == 0 ? "yes" : "no");
             CUdeviceptr inside = p + 64 * kMiB;
             CUipcMemHandle of_inside;
             put("get_inside", name_of(cuIpcGetMemHandle(&of_inside, inside)));
             put("same_for_inside", std::memcmp(&h, &of_inside, sizeof h) == 0 ? "yes" : "no");
             CUdeviceptr own = 0;
             put("open_own", name_of(cuIpcOpenMemHandle(&own, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)));
             if (write(to_child[1], &h, sizeof h) != sizeof h) _exit(1);
             char line[256] = {};
             if (read(to_parent[0], line, sizeof line) <= 0) _exit(1);
             out += line;
             MUST(cuMemFree(p));
             put("after_exporter_free", used_mib() - base);
             if (write(to_child[1], "x", 1) != 1) _exit(1);
             char closed[64] = {};
             if (read(to_parent[0], closed, sizeof closed) <= 0) _exit(1);
             put("importer_close", closed);
             put("after_importer_close", used_mib() - base);
             if (write(to_child[1], "x", 1) != 1) _exit(1);
             int status = 0;
             waitpid(importer, &status, 0);
             CUdeviceptr pool_ptr = 0;
             MUST(cuMemAllocAsync(&pool_ptr, 64 * kMiB, nullptr));
             MUST(cuStreamSynchronize(nullptr));
             put("get_of_async", name_of(cuIpcGetMemHandle(&h, pool_ptr)));
         }},
        // dma-buf: an fd for a range of classic memory, and what it keeps after the free.
        {"dmabuf_classic", [] {
             primary(0);
             const long long base = used_mib();
             CUdeviceptr p = 0;
             MUST(cuMemAlloc(&p, 1024 * kMiB));
             int fd = -1;
             put("get", name_of(cuMemGetHandleForAddressRange(&fd, p, 1024 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)));
             int part = -1;
             put("get_part", name_of(cuMemGetHandleForAddressRange(&part, p + 64 * kMiB, 64 * kMiB,
                                                                   CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)));
             int odd = -1;
             put("get_unaligned", name_of(cuMemGetHandleForAddressRange(&odd, p + 4096, 4096,
                                                                        CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)));
             if (part >= 0) close(part);
             if (odd >= 0) close(odd);
             MUST(cuMemFree(p));
             put("after_free", used_mib() - base);
             put("reuse_ptr", pointer_answer(p));
             close(fd);
             put("after_close", used_mib() - base);
         }},
        // dma-buf of part of an allocation: what it keeps after the free.
        {"dmabuf_part", [] {
             primary(0);
             const long long base = used_mib();
             CUdeviceptr p = 0;
             MUST(cuMemAlloc(&p, 1024 * kMiB));
             int fd = -1;
             MUST(cuMemGetHandleForAddressRange(&fd, p + 64 * kMiB, 64 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
             MUST(cuMemFree(p));
             put("after_free", used_mib() - base);
             close(fd);
             put("after_close", used_mib() - base);
         }},
        // dma-buf across a context reset: does the fd keep the memory the reset frees?
        {"dmabuf_reset", [] {
             primary(0);
             const long long base = used_mib();
             CUdeviceptr p = 0;
             MUST(cuMemAlloc(&p, 256 * kMiB));
             int fd = -1;
             MUST(cuMemGetHandleForAddressRange(&fd, p, 256 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
             MUST(cuDevicePrimaryCtxReset(0));
             primary(0);
             put("after_reset", used_mib() - base);
             close(fd);
             put("after_close", used_mib() - base);
         }},
        // dma-buf of VMM memory: the fd keeps the physical memory after unmap and release.
        {"dmabuf_vmm", [] {
             primary(0);
             const long long base = used_mib();
             CUmemAllocationProp prop{};
             prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
             prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
             prop.location.id = 0;
             prop.allocFlags.gpuDirectRDMACapable = 1;
             CUmemGenericAllocationHandle h = 0;
             MUST(cuMemCreate(&h, 1024 * kMiB, &prop, 0));
             CUdeviceptr va = 0;
             MUST(cuMemAddressReserve(&va, 1024 * kMiB, 0, 0, 0));
             MUST(cuMemMap(va, 1024 * kMiB, 0, h, 0));
             CUmemAccessDesc a{};
             a.location = prop.location;
             a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
             MUST(cuMemSetAccess(va, 1024 * kMiB, &a, 1));
             int fd = -1;
             put("get", name_of(cuMemGetHandleForAddressRange(&fd, va, 1024 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0)));
             MUST(cuMemUnmap(va, 1024 * kMiB));
             MUST(cuMemRelease(h));
             MUST(cuMemAddressFree(va, 1024 * kMiB));
             put("after_release", used_mib() - base);
             close(fd);
             put("after_close", used_mib() - base);
         }},
    };
    return all;
}

void run_in_child(const Fact& f) {
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        g_fact = f.name;
        if (std::strcmp(f.name, "ipc_import") != 0) MUST(cuInit(0));  // that one forks its importer first
        f.run();
        std::printf("fact %s%s\n", f.name, out.c_str());
        std::fflush(stdout);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) std::printf("fact %s crashed-%d\n", f.name, WTERMSIG(status));
}

}  // namespace

int main(int argc, char** argv) {
    for (const Fact& f : facts()) {
        bool wanted = argc == 1;
        for (int i = 1; i < argc; ++i) wanted |= std::strcmp(argv[i], f.name) == 0;
        if (wanted) run_in_child(f);
    }
    return 0;
}
