// Two processes on one GPU share memory the way PyTorch's expandable segments and NCCL do: the exporter
// creates a POSIX-fd allocation and passes the fd over a Unix socket (SCM_RIGHTS); the importer imports
// and maps it. The exporter then releases everything it holds; the importer unmaps but keeps its import
// reference (the leak), so the exporter's memory stays pinned by the importer until the importer exits.
// Each process runs under the auditor; `cumemaudit merge` joins their reports by the fd's identity.
//   fd_share [--gib N]   the exporter prints "pinned_drop=BYTES": free memory lost while nothing can use it.
#include "support/fd_passing.hpp"
#include "support/program.hpp"

#include <cuda.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

#define OK(call)                                                                                  \
    do {                                                                                          \
        CUresult r_ = (call);                                                                     \
        if (r_ != CUDA_SUCCESS) {                                                                 \
            std::fprintf(stderr, "fd_share[%d]: %s = %d at line %d\n", getpid(), #call, r_, __LINE__); \
            std::exit(99);                                                                        \
        }                                                                                         \
    } while (0)

void init() {
    OK(cuInit(0));
    CUdevice dev;
    CUcontext ctx;
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    OK(cuCtxSetCurrent(ctx));
}

size_t free_bytes() {
    size_t f = 0, t = 0;
    OK(cuMemGetInfo(&f, &t));
    return f;
}

using cumemaudit::program::receive_fd;
using cumemaudit::program::send_fd;

void wait_byte(int sock) {
    char b;
    if (read(sock, &b, 1) != 1) std::exit(96);
}

void say(int sock) {
    if (write(sock, "x", 1) != 1) std::exit(95);
}

CUmemAllocationProp props() { return cumemaudit::program::device_prop(0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR); }

__attribute__((noinline)) int exporter(int sock, size_t bytes) {
    init();
    wait_byte(sock);  // both contexts exist: what is free now is the baseline
    const size_t baseline = free_bytes();
    CUmemAllocationProp p = props();
    CUmemGenericAllocationHandle h;
    OK(cuMemCreate(&h, bytes, &p, 0));
    int fd = -1;
    OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    send_fd(sock, fd);
    wait_byte(sock);  // the importer has it mapped
    OK(cuMemRelease(h));
    close(fd);
    say(sock);        // the exporter holds nothing now
    wait_byte(sock);  // the importer unmapped and freed its range: nothing can use the memory
    const size_t now = free_bytes();
    std::printf("pinned_drop=%zu baseline_free=%zu now_free=%zu\n", baseline > now ? baseline - now : 0, baseline, now);
    std::fflush(stdout);
    say(sock);        // the importer may exit now
    return 0;
}

__attribute__((noinline)) int importer(int sock, size_t bytes) {
    init();
    say(sock);
    const int fd = receive_fd(sock);
    CUmemGenericAllocationHandle h;
    OK(cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));  // the leaked reference
    close(fd);
    CUdeviceptr va;
    OK(cuMemAddressReserve(&va, bytes, 0, 0, 0));
    OK(cuMemMap(va, bytes, 0, h, 0));
    const CUmemAccessDesc access = cumemaudit::program::read_write(0);
    OK(cuMemSetAccess(va, bytes, &access, 1));
    say(sock);
    wait_byte(sock);  // the exporter released everything
    OK(cuMemUnmap(va, bytes));
    OK(cuMemAddressFree(va, bytes));
    // Nothing in either process can use the memory now, yet it is still allocated: the import pins it.
    say(sock);
    wait_byte(sock);  // the exporter has measured
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    size_t gib = 1;
    if (argc == 3 && std::string(argv[1]) == "--gib") gib = std::strtoul(argv[2], nullptr, 10);
    const size_t bytes = gib << 30;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 94;
    // Fork before any CUDA call: a CUDA context does not survive fork.
    // Two ranks of one job, so `cumemaudit merge` names who pins whom.
    setenv("WORLD_SIZE", "2", 1);
    const pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        setenv("RANK", "1", 1);
        return importer(sv[1], bytes);
    }
    close(sv[1]);
    setenv("RANK", "0", 1);
    const int rc = exporter(sv[0], bytes);
    int status = 0;
    waitpid(pid, &status, 0);
    return rc != 0 ? rc : (WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}
