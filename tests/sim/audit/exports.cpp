// Exported POSIX fds: one left open after every reference is gone, one beside a reference never released.
// Run as `audit_scenarios open-export | held-export`; checked by exports_test.py, which finds
// each site by its `// site:NAME` marker.
#include "scenarios.hpp"

namespace {

// An exported POSIX fd left open pins memory after every reference is gone.
int open_export() {
    init_primary_context();
    CUmemAllocationProp p = props(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, 2 * kGran, &p, 0));
    int fd = -1;
    OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));  // site:export
    OK(cuMemRelease(h));
    int closed_fd = -1;
    CUmemGenericAllocationHandle h2 = 0;
    OK(cuMemCreate(&h2, kGran, &p, 0));
    OK(cuMemExportToShareableHandle(&closed_fd, h2, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    OK(cuMemRelease(h2));
    close(closed_fd);  // this one is closed: its memory is free again
    std::printf("open_export: fd=%d\n", fd);
    return 0;
}

// An allocation pinned twice: its creation reference is never released and its exported fd stays open. The
// reference alone would hold it (nothing can release it), so it is unreachable, not open-export.
int held_export() {
    init_primary_context();
    CUmemAllocationProp p = props(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemCreate(&h, 3 * kGran, &p, 0));  // site:held_create
    int fd = -1;
    OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CUdeviceptr va = 0;
    OK(cuMemAddressReserve(&va, 3 * kGran, 0, 0, 0));
    OK(cuMemMap(va, 3 * kGran, 0, h, 0));
    OK(cuMemUnmap(va, 3 * kGran));
    OK(cuMemAddressFree(va, 3 * kGran));
    std::printf("held_export: fd=%d\n", fd);
    return 0;
}

}  // namespace

AUDIT_SCENARIO("open-export", [](int, char**) { return open_export(); });
AUDIT_SCENARIO("held-export", [](int, char**) { return held_export(); });
