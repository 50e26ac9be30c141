// A HybridEP job in miniature: the allocator is constructed (its test buffer exported), the dispatch
// buffer grows --buffers times by --size-mib (update_buffer: free the old buffer, allocate and export the
// new one), the test handle is checked for access, and everything is freed. Prints cuMemGetInfo's drop.
//   hybrid_ep_job [--fixed] [--handle fabric|posix] [--buffers N] [--size-mib M]
#include "hybrid_ep.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
    bool fixed = false;
    CUmemAllocationHandleType type = CU_MEM_HANDLE_TYPE_FABRIC;
    int buffers = 3;
    size_t size_mib = 8;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--fixed") fixed = true;
        else if (a == "--handle" && i + 1 < argc) type = std::strcmp(argv[++i], "posix") == 0 ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_FABRIC;
        else if (a == "--buffers" && i + 1 < argc) buffers = std::atoi(argv[++i]);
        else if (a == "--size-mib" && i + 1 < argc) size_mib = std::strtoull(argv[++i], nullptr, 10);
        else {
            std::fprintf(stderr, "usage: hybrid_ep_job [--fixed] [--handle fabric|posix] [--buffers N] [--size-mib M]\n");
            return 2;
        }
    }
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        std::fprintf(stderr, "hybrid_ep_job: no device\n");
        return 1;
    }
    size_t start = 0, end = 0, total = 0;
    cuMemGetInfo(&start, &total);
    {
        HybridAllocator alloc(type, fixed);
        alloc.close_export(alloc.test_handle());
        CUdeviceptr buffer = 0;
        for (int n = 1; n <= buffers; ++n) {
            alloc.free(buffer);  // update_buffer on a new high: the old buffer goes first
            buffer = alloc.allocate(size_mib * n << 20);
            Shareable s = alloc.get_handle(buffer);
            alloc.close_export(s);
        }
        alloc.free(buffer);
    }
    cuMemGetInfo(&end, &total);
    std::printf("hybrid_ep_job: %s, %d buffers: drop=%zu\n", fixed ? "fixed" : "as shipped", buffers, start - end);
    return 0;
}
