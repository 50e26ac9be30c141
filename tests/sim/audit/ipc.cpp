// Memory shared with another process: legacy IPC and dma-buf fds, and a stream-ordered pool's pointer.
// Run as `audit_scenarios ipc-dmabuf | pool-ipc`; checked by ipc_test.py, which finds
// each site by its `// site:NAME` marker.
#include "scenarios.hpp"
#include "support/fd_passing.hpp"

#include <sys/socket.h>
#include <sys/wait.h>

namespace {

// Memory shared outside its allocation, as vLLM's custom all-reduce and DeepEP's intranode buffers share
// cudaMalloc memory (legacy IPC) and NCCL's network plugins register dma-buf fds: the importer never closes
// its open, the exporter frees its buffer, and three dma-buf fds stay open past the free (of classic memory,
// of part of it, which keeps the whole allocation, and of a VMM mapping); a fourth is closed first and
// leaves nothing. Runs on a shared simulated node
// (CUMEMAUDIT_SIM_NODE): the importer is a forked process.
int ipc_dmabuf() {
    int to_child[2], to_parent[2];
    if (pipe(to_child) != 0 || pipe(to_parent) != 0) return 2;
    const pid_t importer = fork();
    if (importer == 0) {
        CUipcMemHandle h;
        if (read(to_child[0], &h, sizeof h) != sizeof h) _exit(2);
        init_primary_context();
        CUdeviceptr peer = 0;
        OK(cuIpcOpenMemHandle(&peer, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));  // site:ipc_open
        char step = 0;
        if (write(to_parent[1], "o", 1) != 1 || read(to_child[0], &step, 1) != 1) _exit(2);
        std::printf("ipc_dmabuf: importer done\n");
        std::exit(0);  // never closed: the exporter's memory stays until this process is gone
    }
    init_primary_context();
    CUdeviceptr buffer = 0;
    OK(cuMemAlloc(&buffer, 1024 * kMiB));
    CUipcMemHandle h;
    OK(cuIpcGetMemHandle(&h, buffer));  // site:ipc_get
    char step = 0;
    if (write(to_child[1], &h, sizeof h) != sizeof h || read(to_parent[0], &step, 1) != 1) return 2;
    OK(cuMemFree(buffer));
    CUdeviceptr registered = 0, closed_first = 0;
    int fd = -1, vmm_fd = -1, closed_fd = -1;
    OK(cuMemAlloc(&registered, 256 * kMiB));
    OK(cuMemGetHandleForAddressRange(&fd, registered, 256 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));  // site:dmabuf_get
    OK(cuMemFree(registered));
    CUdeviceptr partly = 0;
    int part_fd = -1;
    OK(cuMemAlloc(&partly, 128 * kMiB));       // site:dmabuf_part_buffer
    OK(cuMemGetHandleForAddressRange(&part_fd, partly + 64 * kMiB, 32 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));  // site:dmabuf_part_get
    OK(cuMemFree(partly));
    OK(cuMemAlloc(&closed_first, 32 * kMiB));
    OK(cuMemGetHandleForAddressRange(&closed_fd, closed_first, 32 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
    close(closed_fd);
    OK(cuMemFree(closed_first));
    CUmemAllocationProp p = props();
    p.allocFlags.gpuDirectRDMACapable = 1;  // what a dma-buf of VMM memory asks for (NCCL's ncclCuMemAlloc)
    CUmemGenericAllocationHandle vmm = 0;
    OK(cuMemCreate(&vmm, 64 * kMiB, &p, 0));
    CUdeviceptr va = 0;
    OK(cuMemAddressReserve(&va, 64 * kMiB, 0, 0, 0));
    OK(cuMemMap(va, 64 * kMiB, 0, vmm, 0));
    OK(cuMemGetHandleForAddressRange(&vmm_fd, va, 64 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));  // site:dmabuf_vmm_get
    OK(cuMemUnmap(va, 64 * kMiB));
    OK(cuMemRelease(vmm));
    OK(cuMemAddressFree(va, 64 * kMiB));
    size_t free_now = 0, total = 0;
    OK(cuMemGetInfo(&free_now, &total));
    std::printf("ipc_dmabuf: used %zu MiB\n", (total - free_now) >> 20);
    if (write(to_child[1], "x", 1) != 1) return 2;
    int status = 0;
    waitpid(importer, &status, 0);
    std::printf("ipc_dmabuf: importer %d\n", static_cast<int>(importer));
    return 0;
}

}  // namespace

// Pool IPC as nvbandwidth's multinode pool allocation and cuda.core's IPC buffers share stream-ordered memory:
// a pool made exportable (POSIX fds on one node), a buffer allocated from it and synchronised, the pool's fd
// and the pointer's export data sent to a peer, which imports both. The exporter frees its buffer while the
// peer holds it; the peer never frees its import. Runs on a shared simulated node (CUMEMAUDIT_SIM_NODE):
// the importer is a forked process.
int pool_ipc() {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 2;
    std::fflush(stdout);
    const pid_t importer = fork();
    if (importer == 0) {
        close(sv[0]);
        init_primary_context();
        const int fd = cumemaudit::program::receive_fd(sv[1]);
        CUmemPoolPtrExportData data;
        if (read(sv[1], &data, sizeof data) != sizeof data) _exit(2);
        CUmemoryPool pool = nullptr;
        void* shared = reinterpret_cast<void*>(static_cast<intptr_t>(fd));  // a POSIX fd travels as the pointer
        OK(cuMemPoolImportFromShareableHandle(&pool, shared, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));  // site:pool_import
        CUdeviceptr peer = 0;
        OK(cuMemPoolImportPointer(&peer, pool, &data));  // site:pool_import_ptr
        char step = 0;
        if (write(sv[1], "o", 1) != 1 || read(sv[1], &step, 1) != 1) _exit(2);
        std::printf("pool_ipc: importer done\n");
        std::exit(0);  // never freed: the exporter's pool keeps the memory until this process is gone
    }
    close(sv[1]);
    init_primary_context();
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    CUmemPoolProps pp{};
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = 0;
    CUmemoryPool pool = nullptr;
    OK(cuMemPoolCreate(&pool, &pp));
    CUdeviceptr buffer = 0;
    OK(cuMemAllocFromPoolAsync(&buffer, 256 * kMiB, pool, nullptr));
    OK(cuStreamSynchronize(nullptr));
    int fd = -1;
    OK(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CUmemPoolPtrExportData data{};
    OK(cuMemPoolExportPointer(&data, buffer));  // site:pool_export_ptr
    cumemaudit::program::send_fd(sv[0], fd);
    if (write(sv[0], &data, sizeof data) != sizeof data) return 2;
    char opened = 0;
    if (read(sv[0], &opened, 1) != 1) return 2;
    OK(cuMemFreeAsync(buffer, nullptr));
    OK(cuStreamSynchronize(nullptr));
    if (step != nullptr) step(1);
    if (write(sv[0], "x", 1) != 1) return 2;
    int status = 0;
    waitpid(importer, &status, 0);
    close(fd);
    std::printf("pool_ipc: importer %d\n", static_cast<int>(importer));
    return 0;
}

AUDIT_SCENARIO("ipc-dmabuf", [](int, char**) { return ipc_dmabuf(); });
AUDIT_SCENARIO("pool-ipc", [](int, char**) { return pool_ipc(); });
