// Host memory: NCCL's host buffers on a host NUMA node, and memory the program page-locks itself.
// Run as `audit_scenarios nccl-host | host-register`; checked by host_memory_test.py, which finds
// each site by its `// site:NAME` marker.
#include "scenarios.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

namespace {

// NCCL's host buffers (src/include/alloc.h: ncclCuMemHostAlloc, ncclCuMemHostFree): physical memory on
// the GPU's host NUMA node, mapped, and made accessible to the device and to the host. Three steps each
// add a 512 MiB buffer (host memory: no growth of device memory); then two are freed NCCL's way and the
// last one's range goes with its creation reference still held (a leak of host memory).
__attribute__((noinline)) CUdeviceptr nccl_host_alloc(size_t size, CUmemGenericAllocationHandle* out) {
    CUdevice dev = 0;
    OK(cuCtxGetDevice(&dev));
    int numa = -1;
    OK(cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev));
    if (numa < 0) numa = 0;
    CUmemAllocationProp p{};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location = {CU_MEM_LOCATION_TYPE_HOST_NUMA, numa};
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t gran = 0;
    OK(cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    size = (size + gran - 1) / gran * gran;
    OK(cuMemCreate(out, size, &p, 0));  // site:nccl_host_create
    CUdeviceptr ptr = 0;
    OK(cuMemAddressReserve(&ptr, size, gran, 0, 0));
    OK(cuMemMap(ptr, size, 0, *out, 0));
    CUmemAccessDesc access{};
    access.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    OK(cuMemSetAccess(ptr, size, &access, 1));
    access.location = {CU_MEM_LOCATION_TYPE_HOST_NUMA, numa};
    OK(cuMemSetAccess(ptr, size, &access, 1));
    return ptr;
}

void nccl_host_free(CUdeviceptr ptr, size_t size) {
    CUmemGenericAllocationHandle h = 0;
    OK(cuMemRetainAllocationHandle(&h, reinterpret_cast<void*>(ptr)));
    OK(cuMemRelease(h));
    OK(cuMemUnmap(ptr, size));
    OK(cuMemRelease(h));
    OK(cuMemAddressFree(ptr, size));
}

int nccl_host() {
    init_primary_context();
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    const size_t size = 512 * kMiB;
    std::vector<CUdeviceptr> buffers;
    const size_t free_before = free_bytes();
    for (uint64_t n = 1; n <= 3; ++n) {
        CUmemGenericAllocationHandle h = 0;
        buffers.push_back(nccl_host_alloc(size, &h));
        if (step != nullptr) step(n);
    }
    nccl_host_free(buffers[0], size);
    nccl_host_free(buffers[1], size);
    OK(cuMemUnmap(buffers[2], size));  // the range goes; the creation reference stays
    OK(cuMemAddressFree(buffers[2], size));
    std::printf("nccl_host: device_drop=%zu\n", free_before - free_bytes());
    return 0;
}

// Host memory page-locked by the program (XLA's and PyTorch's host allocators, NVSHMEM, UCX): 512 MiB
// registered and unregistered, a second registration of it refused, an unregister of memory no longer
// registered refused, and 64 MiB left registered at exit.
int host_register() {
    init_primary_context();
    const size_t big = 512 * kMiB, small = 64 * kMiB;
    void* a = std::aligned_alloc(4096, big);
    void* b = std::aligned_alloc(4096, small);
    OK(cuMemHostRegister(a, big, 0));
    CHECK(cuMemHostRegister(a, big, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);  // site:register_twice
    OK(cuMemHostUnregister(a));
    CHECK(cuMemHostUnregister(a), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);  // site:unregister_twice
    OK(cuMemHostRegister(b, small, CU_MEMHOSTREGISTER_PORTABLE));  // site:left_registered
    std::free(a);
    std::printf("host_register: done\n");
    return 0;
}

// A network plugin's GPU-initiated transport (aws-ofi-nccl's EFA path; NVSHMEM's GPU-initiated IB is
// alike): the card's send queue and both doorbells live in its BAR and are registered as I/O memory so
// kernels can write them; the receive queue is ordinary host memory. A step after the set-up, then a
// teardown that forgets the send doorbell. The driver takes only a device's mapped range as I/O memory (the
// H100 refused ordinary host memory); the simulated driver's stand-in for the card's BAR is a shared mapping
// of the file CUMEMAUDIT_SIM_BAR names.
int io_register() {
    init_primary_context();
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    const size_t sq_bytes = 1024 * 64, rq_bytes = 256 * 16, page = 4096, bar_bytes = sq_bytes + 2 * page;
    const char* bar_file = std::getenv("CUMEMAUDIT_SIM_BAR");
    const int fd = bar_file != nullptr ? ::open(bar_file, O_RDWR | O_CREAT | O_CLOEXEC, 0600) : -1;
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bar_bytes)) != 0) {
        std::fprintf(stderr, "io_register: no BAR to map: set CUMEMAUDIT_SIM_BAR to a file (simulated driver)\n");
        return 2;
    }
    void* mapped = ::mmap(nullptr, bar_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (mapped == MAP_FAILED) return 2;
    char* bar = static_cast<char*>(mapped);
    void* sq = bar;
    void* sq_doorbell = bar + sq_bytes;
    void* rq_doorbell = bar + sq_bytes + page;
    void* rq = std::aligned_alloc(page, rq_bytes);
    CHECK(cuMemHostRegister(rq, rq_bytes, CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_DEVICEMAP),
          CUDA_ERROR_INVALID_VALUE);  // ordinary memory is no device's
    const unsigned io = CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_DEVICEMAP;
    OK(cuMemHostRegister(sq, sq_bytes, io));
    OK(cuMemHostRegister(sq_doorbell, 4, io));  // site:sq_doorbell
    OK(cuMemHostRegister(rq, rq_bytes, CU_MEMHOSTREGISTER_DEVICEMAP));
    OK(cuMemHostRegister(rq_doorbell, 4, io));
    if (step != nullptr) step(1);
    OK(cuMemHostUnregister(sq));
    OK(cuMemHostUnregister(rq));
    OK(cuMemHostUnregister(rq_doorbell));
    std::printf("io_register: done\n");
    return 0;
}

}  // namespace

AUDIT_SCENARIO("nccl-host", [](int, char**) { return nccl_host(); });
AUDIT_SCENARIO("host-register", [](int, char**) { return host_register(); });
AUDIT_SCENARIO("io-register", [](int, char**) { return io_register(); });
