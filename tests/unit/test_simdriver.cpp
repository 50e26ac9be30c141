// The simulated driver against docs/DRIVER.md: one TEST_CASE per measured or documented rule, then the
// capacity, configuration, lookup and classic-memory behaviour the scenario programs rely on. The test
// links libcuda.so.1 (simulated) directly. Figures are exact; since all cases share one process (and the
// leak case leaks on purpose), they compare free memory before and after rather than absolute values.
#include "support/program.hpp"

#include "common/cuda_catalog.hpp"

#include <catch2/catch.hpp>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#undef cuGetProcAddress
extern "C" std::remove_pointer_t<PFN_cuGetProcAddress_v11030> cuGetProcAddress;
extern "C" std::remove_pointer_t<PFN_cuMemAllocAsync_v11020_ptsz> cuMemAllocAsync_ptsz;
extern "C" std::remove_pointer_t<PFN_cuLaunchKernel_v7000_ptsz> cuLaunchKernel_ptsz;
extern "C" std::remove_pointer_t<PFN_cuLaunchKernelEx_v11060_ptsz> cuLaunchKernelEx_ptsz;
extern "C" std::remove_pointer_t<PFN_cuLaunchCooperativeKernel_v9000_ptsz> cuLaunchCooperativeKernel_ptsz;
extern "C" const char* const cumemaudit_sim_driver_version;

namespace {

constexpr std::size_t MiB = 1ull << 20;
constexpr std::size_t GiB = 1ull << 30;
constexpr std::size_t kGran = 2 * MiB;

// Every case starts here: driver initialised, device 0's primary context current on this thread.
void setup() {
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    CUcontext ctx = nullptr;
    REQUIRE(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS);
    REQUIRE(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
}

std::size_t free_bytes() {
    std::size_t f = 0, t = 0;
    REQUIRE(cuMemGetInfo(&f, &t) == CUDA_SUCCESS);
    return f;
}

CUmemAllocationProp prop(unsigned types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC) {
    return cumemaudit::program::device_prop(0, types);
}

CUmemGenericAllocationHandle create(std::size_t size) {
    const auto p = prop();
    CUmemGenericAllocationHandle h = 0;
    REQUIRE(cuMemCreate(&h, size, &p, 0) == CUDA_SUCCESS);
    return h;
}

CUdeviceptr reserve(std::size_t size) {
    CUdeviceptr va = 0;
    REQUIRE(cuMemAddressReserve(&va, size, 0, 0, 0) == CUDA_SUCCESS);
    return va;
}

// reserve + map + set access, as every VMM allocator does.
CUdeviceptr map_new(CUmemGenericAllocationHandle h, std::size_t size) {
    const CUdeviceptr va = reserve(size);
    REQUIRE(cuMemMap(va, size, 0, h, 0) == CUDA_SUCCESS);
    const CUmemAccessDesc d = cumemaudit::program::read_write(0);
    REQUIRE(cuMemSetAccess(va, size, &d, 1) == CUDA_SUCCESS);
    return va;
}

void unmap_free(CUdeviceptr va, std::size_t size) {
    REQUIRE(cuMemUnmap(va, size) == CUDA_SUCCESS);
    REQUIRE(cuMemAddressFree(va, size) == CUDA_SUCCESS);
}

int export_fd(CUmemGenericAllocationHandle h) {
    int fd = -1;
    REQUIRE(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS);
    REQUIRE(fd >= 0);
    return fd;
}

CUmemGenericAllocationHandle import_fd(int fd) {
    CUmemGenericAllocationHandle h = 0;
    REQUIRE(cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                           CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == CUDA_SUCCESS);
    return h;
}

struct ChildResult {
    int status = -1;
    std::string err;
};

// Runs one hidden test case of this binary in a fresh process (the driver's state is per process, so
// "before cuInit" and a bad environment need one), with `env` added; returns its exit code and stderr.
ChildResult run_child(const char* test_name, std::vector<std::string> env) {
    int pipefd[2];
    REQUIRE(::pipe(pipefd) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        ::dup2(pipefd[1], 2);
        const int devnull = ::open("/dev/null", O_WRONLY);
        ::dup2(devnull, 1);
        for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
        ::execl("/proc/self/exe", "test_simdriver", test_name, static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(pipefd[1]);
    ChildResult r;
    char buf[512];
    for (ssize_t n; (n = ::read(pipefd[0], buf, sizeof buf)) > 0;) r.err.append(buf, static_cast<std::size_t>(n));
    ::close(pipefd[0]);
    int st = 0;
    ::waitpid(pid, &st, 0);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

}  // namespace

// ---------------- the real driver's rules (docs/DRIVER.md), one case per rule ----------------

TEST_CASE("allocation granularity is 2 MiB, minimum and recommended") {
    setup();
    const auto p = prop();
    std::size_t g = 0;
    REQUIRE(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS);
    CHECK(g == 2 * MiB);
    REQUIRE(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) == CUDA_SUCCESS);
    CHECK(g == 2 * MiB);
}

TEST_CASE("memory returns only when references, mappings and exported fds are all gone") {
    setup();
    const std::size_t start = free_bytes();
    const auto h = create(64 * MiB);
    CHECK(start - free_bytes() == 64 * MiB);
    const CUdeviceptr va = map_new(h, 64 * MiB);
    const int fd = export_fd(h);
    REQUIRE(cuMemRelease(h) == CUDA_SUCCESS);
    CHECK(start - free_bytes() == 64 * MiB);  // still mapped
    unmap_free(va, 64 * MiB);
    CHECK(start - free_bytes() == 64 * MiB);  // the exported fd is still open
    ::close(fd);
    CHECK(free_bytes() == start);
}

TEST_CASE("create/map/retain/export/import then unmap and address free without release leaks every time") {
    setup();
    const std::size_t start = free_bytes();
    for (int round = 0; round < 3; ++round) {
        const auto h = create(1 * GiB);
        const CUdeviceptr va = map_new(h, 1 * GiB);
        CUmemGenericAllocationHandle retained = 0;
        REQUIRE(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(va)) == CUDA_SUCCESS);
        const int fd = export_fd(retained);
        const auto imported = import_fd(fd);
        ::close(fd);
        const CUdeviceptr peer = map_new(imported, 1 * GiB);
        unmap_free(peer, 1 * GiB);
        unmap_free(va, 1 * GiB);
    }
    CHECK(start - free_bytes() == 3072 * MiB);
    CHECK(start - free_bytes() == 3072 * MiB);  // and it stays down
}

TEST_CASE("cuMemRetainAllocationHandle returns the value cuMemCreate returned, with one more reference") {
    setup();
    const std::size_t start = free_bytes();
    const auto h = create(4 * MiB);
    const CUdeviceptr va = map_new(h, 4 * MiB);
    CUmemGenericAllocationHandle r = 0;
    REQUIRE(cuMemRetainAllocationHandle(&r, reinterpret_cast<void*>(va + 3 * MiB)) == CUDA_SUCCESS);
    CHECK(r == h);
    REQUIRE(cuMemRelease(h) == CUDA_SUCCESS);
    REQUIRE(cuMemRelease(r) == CUDA_SUCCESS);  // two references: both releases succeed
    CHECK(cuMemRelease(h) == CUDA_ERROR_INVALID_VALUE);
    unmap_free(va, 4 * MiB);
    CHECK(free_bytes() == start);
}

TEST_CASE("cuMemImportFromShareableHandle returns a new value, even in the exporting process") {
    setup();
    const std::size_t start = free_bytes();
    const auto h = create(2 * MiB);
    const int fd = export_fd(h);
    const auto a = import_fd(fd);
    const auto b = import_fd(fd);
    CHECK(a != h);
    CHECK(b != h);
    CHECK(a != b);
    ::close(fd);
    CUmemFabricHandle fab{};
    REQUIRE(cuMemExportToShareableHandle(&fab, h, CU_MEM_HANDLE_TYPE_FABRIC, 0) == CUDA_SUCCESS);
    CUmemGenericAllocationHandle f = 0;
    REQUIRE(cuMemImportFromShareableHandle(&f, &fab, CU_MEM_HANDLE_TYPE_FABRIC) == CUDA_SUCCESS);
    CHECK(f != h);
    CHECK(f != a);
    CHECK(start - free_bytes() == 2 * MiB);  // four values, one allocation
    CUmemAllocationProp p{};
    REQUIRE(cuMemGetAllocationPropertiesFromHandle(&p, f) == CUDA_SUCCESS);
    CHECK(p.requestedHandleTypes == (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC));
    for (auto v : {h, a, b}) REQUIRE(cuMemRelease(v) == CUDA_SUCCESS);
    CHECK(start - free_bytes() == 2 * MiB);  // the fabric import still holds it
    REQUIRE(cuMemRelease(f) == CUDA_SUCCESS);
    CHECK(free_bytes() == start);
    // A fabric handle pins nothing: the allocation is gone, so importing it again fails.
    CHECK(cuMemImportFromShareableHandle(&f, &fab, CU_MEM_HANDLE_TYPE_FABRIC) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("handle values are reused: create, release, create again gives the same value") {
    setup();
    const auto h1 = create(2 * MiB);
    REQUIRE(cuMemRelease(h1) == CUDA_SUCCESS);
    const auto h2 = create(2 * MiB);
    CHECK(h2 == h1);
    // A value stays taken while its allocation lives, even with no reference left (mapped).
    const CUdeviceptr va = map_new(h2, 2 * MiB);
    REQUIRE(cuMemRelease(h2) == CUDA_SUCCESS);
    const auto h3 = create(2 * MiB);
    CHECK(h3 != h2);
    REQUIRE(cuMemRelease(h3) == CUDA_SUCCESS);
    unmap_free(va, 2 * MiB);
}

TEST_CASE("a second cuMemRelease of a handle is CUDA_ERROR_INVALID_VALUE") {
    setup();
    const auto h = create(2 * MiB);
    REQUIRE(cuMemRelease(h) == CUDA_SUCCESS);
    CHECK(cuMemRelease(h) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemRelease(0xdeadbeef) == CUDA_ERROR_INVALID_VALUE);  // never a handle
}

TEST_CASE("cuMemAddressFree of a range still mapped is CUDA_ERROR_INVALID_VALUE") {
    setup();
    const std::size_t start = free_bytes();
    const auto h = create(2 * MiB);
    const CUdeviceptr va = map_new(h, 2 * MiB);
    CHECK(cuMemAddressFree(va, 2 * MiB) == CUDA_ERROR_INVALID_VALUE);
    REQUIRE(cuMemRelease(h) == CUDA_SUCCESS);
    unmap_free(va, 2 * MiB);  // the failed free left the reservation in place
    CHECK(free_bytes() == start);
}

TEST_CASE("cuMemRelease while mapped succeeds and the memory is freed at the unmap") {
    setup();
    const std::size_t start = free_bytes();
    const auto h = create(32 * MiB);
    const CUdeviceptr va = map_new(h, 32 * MiB);
    REQUIRE(cuMemRelease(h) == CUDA_SUCCESS);
    CHECK(start - free_bytes() == 32 * MiB);
    REQUIRE(cuMemUnmap(va, 32 * MiB) == CUDA_SUCCESS);
    CHECK(free_bytes() == start);
    REQUIRE(cuMemAddressFree(va, 32 * MiB) == CUDA_SUCCESS);
}

TEST_CASE("documented map, unmap and reserve rules") {
    setup();
    const std::size_t start = free_bytes();
    const auto p = prop();
    CUmemGenericAllocationHandle bad = 0;
    CHECK(cuMemCreate(&bad, 3 * MiB, &p, 0) == CUDA_ERROR_INVALID_VALUE);  // not a granularity multiple
    CUdeviceptr va = 0;
    CHECK(cuMemAddressReserve(&va, 3 * MiB, 0, 0, 0) == CUDA_ERROR_INVALID_VALUE);

    const auto h = create(4 * MiB);
    va = reserve(8 * MiB);
    CHECK(cuMemMap(va, 4 * MiB, 2 * MiB, h, 0) == CUDA_ERROR_INVALID_VALUE);  // offset must be 0
    CHECK(cuMemMap(va, 3 * MiB, 0, h, 0) == CUDA_ERROR_INVALID_VALUE);        // size multiple
    CHECK(cuMemMap(va + 1 * MiB, 2 * MiB, 0, h, 0) == CUDA_ERROR_INVALID_VALUE);  // address alignment
    CHECK(cuMemMap(va + 6 * MiB, 4 * MiB, 0, h, 0) == CUDA_ERROR_INVALID_VALUE);  // past the reservation
    CHECK(cuMemMap(va, 4 * MiB, 0, 0xdeadbeef, 0) == CUDA_ERROR_INVALID_VALUE);   // unknown handle
    REQUIRE(cuMemMap(va, 4 * MiB, 0, h, 0) == CUDA_SUCCESS);
    CHECK(cuMemMap(va + 2 * MiB, 2 * MiB, 0, h, 0) == CUDA_ERROR_INVALID_VALUE);  // onto a mapped range
    REQUIRE(cuMemMap(va + 4 * MiB, 4 * MiB, 0, h, 0) == CUDA_SUCCESS);            // one allocation, twice

    CHECK(cuMemUnmap(va, 2 * MiB) == CUDA_ERROR_INVALID_VALUE);  // half a mapped range
    CHECK(cuMemAddressFree(va, 4 * MiB) == CUDA_ERROR_INVALID_VALUE);  // not the reservation
    CUdeviceptr base = 0;
    std::size_t size = 0;
    REQUIRE(cuMemGetAddressRange(&base, &size, va + 5 * MiB) == CUDA_SUCCESS);
    CHECK(base == va + 4 * MiB);
    CHECK(size == 4 * MiB);
    unsigned long long flags = 99;
    CUmemLocation loc{CU_MEM_LOCATION_TYPE_DEVICE, 0};
    REQUIRE(cuMemGetAccess(&flags, &loc, va + 5 * MiB) == CUDA_SUCCESS);
    CHECK(flags == CU_MEM_ACCESS_FLAGS_PROT_NONE);  // access was never set on this one
    REQUIRE(cuMemRelease(h) == CUDA_SUCCESS);
    REQUIRE(cuMemUnmap(va, 8 * MiB) == CUDA_SUCCESS);  // two whole ranges in one call
    CHECK(cuMemUnmap(va, 4 * MiB) == CUDA_SUCCESS);  // nothing mapped any more: the H200 accepts it (docs/DRIVER.md)
    CHECK(cuMemUnmap(va + 16 * MiB, 4 * MiB) == CUDA_ERROR_INVALID_VALUE);  // outside the reservation
    REQUIRE(cuMemAddressFree(va, 8 * MiB) == CUDA_SUCCESS);
    CHECK(cuMemAddressFree(va, 8 * MiB) == CUDA_ERROR_INVALID_VALUE);
    CHECK(free_bytes() == start);
}

// ---------------- beyond the measured rules ----------------

TEST_CASE("an exported POSIX fd pins the memory until every copy is closed") {
    setup();
    const std::size_t start = free_bytes();
    const auto h = create(16 * MiB);
    const int fd = export_fd(h);
    const int copy = ::dup(fd);
    REQUIRE(cuMemRelease(h) == CUDA_SUCCESS);
    CHECK(start - free_bytes() == 16 * MiB);
    ::close(fd);
    CHECK(start - free_bytes() == 16 * MiB);  // the dup is still open
    ::close(copy);
    CHECK(free_bytes() == start);
    CUmemGenericAllocationHandle x = 0;
    const int other = ::open("/dev/null", O_RDONLY);
    CHECK(cuMemImportFromShareableHandle(&x, reinterpret_cast<void*>(static_cast<std::intptr_t>(other)),
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == CUDA_ERROR_INVALID_VALUE);
    ::close(other);
}

TEST_CASE("capacity: cuMemCreate and cuMemAlloc fail with CUDA_ERROR_OUT_OF_MEMORY when exhausted") {
    setup();
    std::size_t free0 = 0, total = 0;
    REQUIRE(cuMemGetInfo(&free0, &total) == CUDA_SUCCESS);
    CHECK(total == 80 * GiB);  // the default
    std::size_t dev_total = 0;
    REQUIRE(cuDeviceTotalMem(&dev_total, 0) == CUDA_SUCCESS);
    CHECK(dev_total == 80 * GiB);
    const std::size_t all = free0 / kGran * kGran;
    const auto big = create(all);
    CHECK(free_bytes() == free0 - all);
    const auto p = prop();
    CUmemGenericAllocationHandle h = 0;
    CHECK(cuMemCreate(&h, kGran, &p, 0) == CUDA_ERROR_OUT_OF_MEMORY);
    CUdeviceptr d = 0;
    if (free0 - all < 512) CHECK(cuMemAlloc(&d, 512) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(cuMemAlloc(&d, kGran) == CUDA_ERROR_OUT_OF_MEMORY);
    // Device 1 has its own capacity.
    auto p1 = prop();
    p1.location.id = 1;
    REQUIRE(cuMemCreate(&h, kGran, &p1, 0) == CUDA_SUCCESS);
    REQUIRE(cuMemRelease(h) == CUDA_SUCCESS);
    REQUIRE(cuMemRelease(big) == CUDA_SUCCESS);
    CHECK(free_bytes() == free0);
}

TEST_CASE("classic allocations are charged in 512-byte units; host and managed memory is not charged") {
    setup();
    const std::size_t start = free_bytes();
    CUdeviceptr d = 0;
    REQUIRE(cuMemAlloc(&d, 1000) == CUDA_SUCCESS);
    CHECK(start - free_bytes() == 1024);
    CUdeviceptr base = 0;
    std::size_t size = 0;
    REQUIRE(cuMemGetAddressRange(&base, &size, d + 10) == CUDA_SUCCESS);
    CHECK(base == d);
    CHECK(size == 1000);
    CUdeviceptr pitched = 0;
    std::size_t pitch = 0;
    REQUIRE(cuMemAllocPitch(&pitched, &pitch, 1000, 3, 4) == CUDA_SUCCESS);
    CHECK(pitch == 1024);
    CHECK(start - free_bytes() == 1024 + 3072);
    CUdeviceptr managed = 0;
    REQUIRE(cuMemAllocManaged(&managed, 1 << 20, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
    std::memset(reinterpret_cast<void*>(managed), 7, 1 << 20);  // real host memory
    void* host = nullptr;
    REQUIRE(cuMemHostAlloc(&host, 4096, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS);
    std::memset(host, 1, 4096);
    void* host2 = nullptr;
    REQUIRE(cuMemAllocHost(&host2, 100) == CUDA_SUCCESS);
    CHECK(start - free_bytes() == 1024 + 3072);
    CUstream s = nullptr;
    REQUIRE(cuStreamCreate(&s, 0) == CUDA_SUCCESS);
    CUdeviceptr a = 0;
    REQUIRE(cuMemAllocAsync(&a, 100, s) == CUDA_SUCCESS);
    CHECK(start - free_bytes() == 1024 + 3072 + (32 << 20));  // the device's pool reserves 32 MiB at a time
    REQUIRE(cuMemFreeAsync(a, s) == CUDA_SUCCESS);
    CHECK(start - free_bytes() == 1024 + 3072 + (32 << 20));  // idle in the pool until a synchronisation
    REQUIRE(cuStreamSynchronize(s) == CUDA_SUCCESS);
    REQUIRE(cuStreamDestroy(s) == CUDA_SUCCESS);
    REQUIRE(cuMemFree(d) == CUDA_SUCCESS);
    REQUIRE(cuMemFree(pitched) == CUDA_SUCCESS);
    REQUIRE(cuMemFree(managed) == CUDA_SUCCESS);
    REQUIRE(cuMemFreeHost(host) == CUDA_SUCCESS);
    REQUIRE(cuMemFreeHost(host2) == CUDA_SUCCESS);
    CHECK(cuMemFree(d) == CUDA_ERROR_INVALID_VALUE);
    CHECK(free_bytes() == start);
}

TEST_CASE("device addresses are unique and are not host memory") {
    setup();
    CUdeviceptr a = 0, b = 0;
    REQUIRE(cuMemAlloc(&a, 4096) == CUDA_SUCCESS);
    const CUdeviceptr r = reserve(4 * MiB);
    REQUIRE(cuMemAlloc(&b, 4096) == CUDA_SUCCESS);
    CHECK(a != b);
    CHECK((r + 4 * MiB <= a || a + 4096 <= r));
    CHECK((r + 4 * MiB <= b || b + 4096 <= r));
    // The host allocator never returns anything inside a device range.
    std::vector<void*> blocks;
    for (int i = 0; i < 64; ++i) blocks.push_back(std::malloc(1 << 20));
    for (void* p : blocks) {
        const auto h = reinterpret_cast<CUdeviceptr>(p);
        CHECK((h + (1 << 20) <= r || h >= r + 4 * MiB));
        std::free(p);
    }
    REQUIRE(cuMemFree(a) == CUDA_SUCCESS);
    REQUIRE(cuMemFree(b) == CUDA_SUCCESS);
    REQUIRE(cuMemAddressFree(r, 4 * MiB) == CUDA_SUCCESS);
}

TEST_CASE("no current context: classic allocations fail with CUDA_ERROR_INVALID_CONTEXT") {
    setup();
    CUresult alloc = CUDA_SUCCESS, info = CUDA_SUCCESS, vmm = CUDA_ERROR_UNKNOWN;
    std::thread t([&] {  // a new thread has no current context
        CUdeviceptr d = 0;
        alloc = cuMemAlloc(&d, 4096);
        std::size_t f = 0, tot = 0;
        info = cuMemGetInfo(&f, &tot);
        const auto p = prop();
        CUmemGenericAllocationHandle h = 0;
        vmm = cuMemCreate(&h, kGran, &p, 0);  // VMM names its device: no context needed
        if (vmm == CUDA_SUCCESS) cuMemRelease(h);
    });
    t.join();
    CHECK(alloc == CUDA_ERROR_INVALID_CONTEXT);
    CHECK(info == CUDA_ERROR_INVALID_CONTEXT);
    CHECK(vmm == CUDA_SUCCESS);
}

TEST_CASE("cuCtxPushCurrent and cuCtxPopCurrent keep a stack of contexts per thread") {
    setup();
    CUcontext before = nullptr, own = nullptr, popped = nullptr, now = nullptr;
    REQUIRE(cuCtxGetCurrent(&before) == CUDA_SUCCESS);
    REQUIRE(cuCtxCreate(&own, nullptr, 0, 0) == CUDA_SUCCESS);  // pushed
    REQUIRE(cuCtxPopCurrent(&popped) == CUDA_SUCCESS);
    CHECK(popped == own);
    REQUIRE(cuCtxGetCurrent(&now) == CUDA_SUCCESS);
    CHECK(now == before);
    REQUIRE(cuCtxPushCurrent(own) == CUDA_SUCCESS);
    REQUIRE(cuCtxGetCurrent(&now) == CUDA_SUCCESS);
    CHECK(now == own);
    CHECK(cuCtxPushCurrent(nullptr) == CUDA_ERROR_INVALID_CONTEXT);
    CHECK(cuCtxPushCurrent(reinterpret_cast<CUcontext>(&now)) == CUDA_ERROR_INVALID_CONTEXT);  // not a context
    REQUIRE(cuCtxDestroy(own) == CUDA_SUCCESS);  // destroying the current one makes the one below current
    REQUIRE(cuCtxGetCurrent(&now) == CUDA_SUCCESS);
    CHECK(now == before);
    CUresult empty = CUDA_SUCCESS;
    std::thread t([&] { empty = cuCtxPopCurrent(nullptr); });  // a new thread's stack is empty
    t.join();
    CHECK(empty == CUDA_ERROR_INVALID_CONTEXT);
}

TEST_CASE("child: calls before cuInit", "[.]") {
    std::size_t f = 0, t = 0;
    CHECK(cuMemGetInfo(&f, &t) == CUDA_ERROR_NOT_INITIALIZED);
    const auto p = prop();
    CUmemGenericAllocationHandle h = 0;
    CHECK(cuMemCreate(&h, kGran, &p, 0) == CUDA_ERROR_NOT_INITIALIZED);
    CUdeviceptr d = 0;
    CHECK(cuMemAlloc(&d, 4096) == CUDA_ERROR_NOT_INITIALIZED);
    int count = -1;
    CHECK(cuDeviceGetCount(&count) == CUDA_ERROR_NOT_INITIALIZED);
    int v = 0;
    CHECK(cuDriverGetVersion(&v) == CUDA_SUCCESS);  // these two work before cuInit
    void* fn = nullptr;
    CHECK(cuGetProcAddress_v2("cuInit", &fn, 2000, 0, nullptr) == CUDA_SUCCESS);
}

TEST_CASE("before cuInit every call but version and lookup is CUDA_ERROR_NOT_INITIALIZED") {
    const auto r = run_child("child: calls before cuInit", {});
    CHECK(r.status == 0);
    CHECK(r.err.empty());
}

TEST_CASE("child: cuInit with the environment given", "[.]") {
    CHECK(cuInit(0) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuInit(0) == CUDA_ERROR_INVALID_VALUE);  // still refused, message printed once
}

TEST_CASE("child: small memory", "[.]") {
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    int n = 0;
    REQUIRE(cuDeviceGetCount(&n) == CUDA_SUCCESS);
    CHECK(n == 2);
    std::size_t total = 0;
    REQUIRE(cuDeviceTotalMem(&total, 1) == CUDA_SUCCESS);
    CHECK(total == 1536 * MiB);
}

TEST_CASE("CUMEMAUDIT_SIM_MEMORY and CUMEMAUDIT_SIM_DEVICES: values, and one clear error for bad ones") {
    auto bad = run_child("child: cuInit with the environment given", {"CUMEMAUDIT_SIM_MEMORY=12QB"});
    CHECK(bad.status == 0);
    CHECK(bad.err ==
          "cumemaudit-sim: CUMEMAUDIT_SIM_MEMORY='12QB' is not a size (expected e.g. 96GiB, 512MiB or a byte count, "
          "at most 1PiB)\n");
    bad = run_child("child: cuInit with the environment given", {"CUMEMAUDIT_SIM_DEVICES=zero"});
    CHECK(bad.status == 0);
    CHECK(bad.err ==
          "cumemaudit-sim: CUMEMAUDIT_SIM_DEVICES='zero' is not a device count (expected an integer from 1 to 64)\n");
    const auto ok = run_child("child: small memory", {"CUMEMAUDIT_SIM_MEMORY=1.5GiB", "CUMEMAUDIT_SIM_DEVICES=2"});
    CHECK(ok.status == 0);
    CHECK(ok.err.empty());
}

TEST_CASE("cuGetProcAddress resolves base name, version and flags as the real driver does") {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult st{};
    REQUIRE(cuGetProcAddress_v2("cuMemAlloc", &fn, 3020, 0, &st) == CUDA_SUCCESS);
    CHECK(fn == reinterpret_cast<void*>(&cuMemAlloc_v2));
    CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS);
    REQUIRE(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st) ==
            CUDA_SUCCESS);
    CHECK(fn == reinterpret_cast<void*>(&cuMemAllocAsync_ptsz));
    REQUIRE(cuGetProcAddress_v2("cuMemAllocAsync", &fn, 11020, 0, &st) == CUDA_SUCCESS);
    CHECK(fn == reinterpret_cast<void*>(&cuMemAllocAsync));
    REQUIRE(cuGetProcAddress_v2("cuGetProcAddress", &fn, 12000, 0, &st) == CUDA_SUCCESS);
    CHECK(fn == reinterpret_cast<void*>(&cuGetProcAddress_v2));
    REQUIRE(cuGetProcAddress_v2("cuGetProcAddress", &fn, 11030, 0, &st) == CUDA_SUCCESS);
    CHECK(fn == reinterpret_cast<void*>(&cuGetProcAddress));
    // v1 through itself
    REQUIRE(cuGetProcAddress("cuMemCreate", &fn, 10020, 0) == CUDA_SUCCESS);
    CHECK(fn == reinterpret_cast<void*>(&cuMemCreate));
    fn = &st;
    CHECK(cuGetProcAddress_v2("cuNoSuchEntry", &fn, 13000, 0, &st) == CUDA_ERROR_NOT_FOUND);
    CHECK(fn == nullptr);
    CHECK(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CHECK(cuGetProcAddress_v2("cuMemCreate", &fn, 10010, 0, &st) == CUDA_ERROR_NOT_FOUND);
    CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}

TEST_CASE("the loaders of NCCL and PyTorch find every entry point they require") {
    setup();
    // NCCL's cudawrap.cc gives up without these (versions as it asks); PyTorch's DriverAPI (c10/cuda/
    // driver_api.h) and its expandable segments take these through cudaGetDriverEntryPoint, at 12000.
    const std::vector<std::pair<const char*, int>> wanted = {
        {"cuGetErrorString", 6000}, {"cuGetErrorName", 6000}, {"cuDeviceGet", 2000}, {"cuDeviceGetAttribute", 2000},
        {"cuDeviceGetUuid", 9020}, {"cuDeviceGetCount", 2000}, {"cuInit", 2000}, {"cuMemGetAddressRange", 3020},
        {"cuCtxGetCurrent", 4000}, {"cuCtxSetCurrent", 4000}, {"cuCtxGetDevice", 2000},
        {"cuDevicePrimaryCtxRetain", 7000}, {"cuDevicePrimaryCtxRelease", 11000}, {"cuMemAddressReserve", 12000},
        {"cuMemAddressFree", 12000}, {"cuMemCreate", 12000}, {"cuMemRelease", 12000}, {"cuMemMap", 12000},
        {"cuMemUnmap", 12000}, {"cuMemSetAccess", 12000}, {"cuMemGetAllocationGranularity", 12000},
        {"cuMemExportToShareableHandle", 12000}, {"cuMemImportFromShareableHandle", 12000},
        {"cuMemRetainAllocationHandle", 12000}, {"cuMemGetAllocationPropertiesFromHandle", 12000},
        {"cuGetErrorString", 12000}, {"cuDeviceGetUuid", 12000}};
    for (const auto& [name, version] : wanted) {
        void* fn = nullptr;
        CUdriverProcAddressQueryResult st{};
        INFO(name << " at " << version);
        CHECK(cuGetProcAddress_v2(name, &fn, version, 0, &st) == CUDA_SUCCESS);
        CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS);
        CHECK(fn != nullptr);
    }
}

TEST_CASE("every catalog row is exported and cuGetProcAddress hands out exactly the exported symbol") {
    void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(lib != nullptr);
    int rows = 0;
    for (const auto& e : cumemaudit::catalog::entries()) {
        const std::string sym(e.symbol);
        void* exported = ::dlsym(lib, sym.c_str());
        CHECK(exported != nullptr);
        void* fn = nullptr;
        REQUIRE(cuGetProcAddress_v2(std::string(e.base).c_str(), &fn, e.version, 0, nullptr) == CUDA_SUCCESS);
        CHECK(fn == exported);
        if (!e.per_thread.empty()) {
            REQUIRE(cuGetProcAddress_v2(std::string(e.base).c_str(), &fn, e.version, 2, nullptr) == CUDA_SUCCESS);
            CHECK(fn == ::dlsym(lib, std::string(e.per_thread).c_str()));
            CHECK(fn != nullptr);
        }
        ++rows;
    }
    CHECK(rows == 143);
    // The executable holds a copy of the data symbol (copy relocation); compare the strings it points to.
    auto* exported_version = static_cast<const char* const*>(::dlsym(lib, "cumemaudit_sim_driver_version"));
    REQUIRE(exported_version != nullptr);
    CHECK(std::string(*exported_version) == cumemaudit_sim_driver_version);
    CHECK(std::string(cumemaudit_sim_driver_version).rfind("cumemaudit-sim", 0) == 0);
    CHECK(::dlsym(lib, "_ZN10cumemaudit3sim8SimState3getEv") == nullptr);  // internals stay hidden
    ::dlclose(lib);
}

TEST_CASE("devices, contexts, streams, capture and graphs") {
    setup();
    int n = 0, v = 0, attr = 0;
    REQUIRE(cuDeviceGetCount(&n) == CUDA_SUCCESS);
    CHECK(n == 8);
    REQUIRE(cuDriverGetVersion(&v) == CUDA_SUCCESS);
    CHECK(v == 13000);
    for (auto a : {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                   CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                   CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED}) {
        REQUIRE(cuDeviceGetAttribute(&attr, a, 7) == CUDA_SUCCESS);
        CHECK(attr == 1);
    }
    CHECK(cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 8) == CUDA_ERROR_INVALID_DEVICE);
    char name[64];
    REQUIRE(cuDeviceGetName(name, sizeof name, 0) == CUDA_SUCCESS);
    CHECK(std::string(name) == "NVIDIA H200 (cumemaudit-sim)");
    CUdevice dev = -1;
    REQUIRE(cuCtxGetDevice(&dev) == CUDA_SUCCESS);
    CHECK(dev == 0);
    REQUIRE(cuCtxSynchronize() == CUDA_SUCCESS);

    CUstream s = nullptr;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    CUstreamCaptureStatus cs{};
    REQUIRE(cuStreamIsCapturing(s, &cs) == CUDA_SUCCESS);
    CHECK(cs == CU_STREAM_CAPTURE_STATUS_NONE);
    REQUIRE(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    REQUIRE(cuStreamIsCapturing(s, &cs) == CUDA_SUCCESS);
    CHECK(cs == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CHECK(cuStreamBeginCapture(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CUgraph g = nullptr;
    REQUIRE(cuStreamEndCapture(s, &g) == CUDA_SUCCESS);
    CHECK(g != nullptr);
    CHECK(cuStreamEndCapture(s, &g) == CUDA_ERROR_ILLEGAL_STATE);
    CUgraphExec e = nullptr;
    REQUIRE(cuGraphInstantiateWithFlags(&e, g, 0) == CUDA_SUCCESS);
    REQUIRE(cuGraphExecDestroy(e) == CUDA_SUCCESS);
    REQUIRE(cuGraphDestroy(g) == CUDA_SUCCESS);
    CHECK(cuGraphDestroy(g) == CUDA_ERROR_INVALID_VALUE);
    REQUIRE(cuStreamSynchronize(s) == CUDA_SUCCESS);
    REQUIRE(cuStreamDestroy(s) == CUDA_SUCCESS);
    CHECK(cuStreamDestroy(s) == CUDA_ERROR_INVALID_HANDLE);
    REQUIRE(cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS);
}

TEST_CASE("cuGetErrorName and cuGetErrorString use the real names") {
    const char* s = nullptr;
    REQUIRE(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s) == CUDA_SUCCESS);
    CHECK(std::string(s) == "CUDA_ERROR_INVALID_VALUE");
    REQUIRE(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s) == CUDA_SUCCESS);
    CHECK(std::string(s) == "CUDA_ERROR_OUT_OF_MEMORY");
    REQUIRE(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s) == CUDA_SUCCESS);
    CHECK(std::string(s) == "out of memory");
    REQUIRE(cuGetErrorName(CUDA_ERROR_NOT_PERMITTED, &s) == CUDA_SUCCESS);
    CHECK(std::string(s) == "CUDA_ERROR_NOT_PERMITTED");
    CHECK(cuGetErrorName(static_cast<CUresult>(123456), &s) == CUDA_ERROR_INVALID_VALUE);
    CHECK(s == nullptr);
}

TEST_CASE("concurrent create/map/unmap/release from several threads balances exactly") {
    setup();
    const std::size_t start = free_bytes();
    CUcontext ctx = nullptr;
    REQUIRE(cuCtxGetCurrent(&ctx) == CUDA_SUCCESS);
    std::vector<std::thread> threads;
    std::vector<int> failures(4, 0);
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            cuCtxSetCurrent(ctx);
            const auto p = prop();
            for (int i = 0; i < 200; ++i) {
                CUmemGenericAllocationHandle h = 0;
                CUdeviceptr va = 0, d = 0;
                int bad = 0;
                bad += cuMemCreate(&h, kGran, &p, 0) != CUDA_SUCCESS;
                bad += cuMemAddressReserve(&va, kGran, 0, 0, 0) != CUDA_SUCCESS;
                bad += cuMemMap(va, kGran, 0, h, 0) != CUDA_SUCCESS;
                bad += cuMemAlloc(&d, 700) != CUDA_SUCCESS;
                bad += cuMemRelease(h) != CUDA_SUCCESS;
                bad += cuMemUnmap(va, kGran) != CUDA_SUCCESS;
                bad += cuMemAddressFree(va, kGran) != CUDA_SUCCESS;
                bad += cuMemFree(d) != CUDA_SUCCESS;
                failures[static_cast<std::size_t>(t)] += bad;
            }
        });
    }
    for (auto& th : threads) th.join();
    CHECK(failures == std::vector<int>{0, 0, 0, 0});
    CHECK(free_bytes() == start);
}

TEST_CASE("the simulated NVML charges this process what it holds, found by the device's PCI bus id") {
    setup();
    char bus[32] = {};
    REQUIRE(cuDeviceGetPCIBusId(bus, sizeof bus, 0) == CUDA_SUCCESS);
    CHECK(std::string(bus) == "0000:18:00.0");
    CHECK(cuDeviceGetPCIBusId(bus, sizeof bus, 99) == CUDA_ERROR_INVALID_DEVICE);
    CUuuid uuid{}, uuid2{};
    REQUIRE(cuDeviceGetUuid(&uuid, 0) == CUDA_SUCCESS);  // NCCL's loader needs it (docs/DRIVER.md)
    CHECK(std::string(uuid.bytes, 15) == "cumemaudit-sim-");
    CHECK(uuid.bytes[15] == 0);
    REQUIRE(cuDeviceGetUuid_v2(&uuid2, 1) == CUDA_SUCCESS);
    CHECK(uuid2.bytes[15] == 1);
    CHECK(cuDeviceGetUuid(&uuid, 99) == CUDA_ERROR_INVALID_DEVICE);

    void* nvml = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);  // beside libcuda.so.1 on the path
    REQUIRE(nvml != nullptr);
    struct Info {
        unsigned int pid;
        unsigned long long used;
        unsigned int gi, ci;
    };
    auto init = reinterpret_cast<int (*)()>(::dlsym(nvml, "nvmlInit_v2"));
    auto by_bus = reinterpret_cast<int (*)(const char*, void**)>(::dlsym(nvml, "nvmlDeviceGetHandleByPciBusId_v2"));
    auto procs = reinterpret_cast<int (*)(void*, unsigned int*, Info*)>(::dlsym(nvml, "nvmlDeviceGetComputeRunningProcesses_v3"));
    REQUIRE((init && by_bus && procs));
    void* dev = nullptr;
    unsigned int n = 0;
    CHECK(by_bus(bus, &dev) == 1);  // NVML_ERROR_UNINITIALIZED before nvmlInit
    REQUIRE(init() == 0);
    CHECK(by_bus("0000:77:00.0", &dev) == 6);  // NVML_ERROR_NOT_FOUND
    CHECK(by_bus("not a bus id", &dev) == 2);  // NVML_ERROR_INVALID_ARGUMENT
    REQUIRE(by_bus("00000000:18:00.0", &dev) == 0);  // NVML's own 8-digit domain form

    CUdeviceptr p = 0;
    REQUIRE(cuMemAlloc(&p, 64 * MiB) == CUDA_SUCCESS);
    const std::size_t used = 80 * GiB - free_bytes();  // every byte of this process's device (a private node)
    CHECK(procs(dev, &n, nullptr) == 7);  // NVML_ERROR_INSUFFICIENT_SIZE, with the count needed
    CHECK(n == 1);
    Info info[4] = {};
    n = 4;
    REQUIRE(procs(dev, &n, info) == 0);
    REQUIRE(n == 1);
    CHECK(info[0].pid == static_cast<unsigned int>(::getpid()));
    CHECK(info[0].used == used);
    REQUIRE(cuMemFree(p) == CUDA_SUCCESS);
    n = 4;
    REQUIRE(procs(dev, &n, info) == 0);
    CHECK(info[0].used == used - 64 * MiB);
}

// Multicast objects, modelled on the driver API's documentation (never created on the GPU machine).
namespace {
CUmulticastObjectProp mc_prop(unsigned devices, std::size_t size, unsigned long long types = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) {
    CUmulticastObjectProp p{};
    p.numDevices = devices;
    p.size = size;
    p.handleTypes = types;
    return p;
}
}  // namespace

TEST_CASE("multicast: granularity, create's checks, a team of devices and the calls a team must be complete for") {
    setup();
    const auto one = mc_prop(1, 4 * MiB);
    std::size_t g = 0;
    REQUIRE(cuMulticastGetGranularity(&g, &one, CU_MULTICAST_GRANULARITY_MINIMUM) == CUDA_SUCCESS);
    CHECK(g == 2 * MiB);
    REQUIRE(cuMulticastGetGranularity(&g, &one, CU_MULTICAST_GRANULARITY_RECOMMENDED) == CUDA_SUCCESS);
    CHECK(g == 512 * MiB);
    CUmemGenericAllocationHandle mc = 0;
    const auto odd = mc_prop(1, 3 * MiB), none = mc_prop(0, 4 * MiB);
    CHECK(cuMulticastCreate(&mc, &odd) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMulticastCreate(&mc, &none) == CUDA_ERROR_INVALID_VALUE);
    const std::size_t before = free_bytes();
    REQUIRE(cuMulticastCreate(&mc, &one) == CUDA_SUCCESS);
    CHECK(free_bytes() == before);  // an object holds no device memory
    CUmemAllocationProp props{};
    CHECK(cuMemGetAllocationPropertiesFromHandle(&props, mc) == CUDA_ERROR_INVALID_VALUE);
    const CUmemGenericAllocationHandle mem = create(4 * MiB);
    CHECK(cuMulticastAddDevice(mem, 0) == CUDA_ERROR_INVALID_VALUE);  // memory, not an object
    REQUIRE(cuMulticastAddDevice(mc, 0) == CUDA_SUCCESS);
    CHECK(cuMulticastAddDevice(mc, 1) == CUDA_ERROR_INVALID_VALUE);  // the team of one is complete
    CHECK(cuMulticastBindMem(mc, 0, mem, 0, 6 * MiB, 0) == CUDA_ERROR_INVALID_VALUE);  // larger than the memory
    CHECK(cuMulticastBindMem(mc, 0, mem, 0, 4 * MiB, 1) == CUDA_ERROR_INVALID_VALUE);  // flags must be 0
    REQUIRE(cuMulticastBindMem(mc, 0, mem, 0, 4 * MiB, 0) == CUDA_SUCCESS);
    CHECK(cuMulticastBindMem(mc, 0, mem, 0, 4 * MiB, 0) == CUDA_ERROR_INVALID_VALUE);  // that range is bound
    const CUdeviceptr va = reserve(4 * MiB);
    REQUIRE(cuMemMap(va, 4 * MiB, 0, mc, 0) == CUDA_SUCCESS);
    REQUIRE(cuMemUnmap(va, 4 * MiB) == CUDA_SUCCESS);
    REQUIRE(cuMemAddressFree(va, 4 * MiB) == CUDA_SUCCESS);
    REQUIRE(cuMulticastUnbind(mc, 0, 0, 4 * MiB) == CUDA_SUCCESS);
    CHECK(cuMulticastUnbind(mc, 0, 0, 4 * MiB) == CUDA_SUCCESS);  // nothing bound there: not refused
    CHECK(cuMulticastUnbind(mc, 0, 0, 6 * MiB) == CUDA_ERROR_INVALID_VALUE);  // past the object's size
    const auto two = mc_prop(2, 4 * MiB);
    CUmemGenericAllocationHandle other = 0;
    REQUIRE(cuMulticastCreate(&other, &two) == CUDA_SUCCESS);
    REQUIRE(cuMulticastAddDevice(other, 1) == CUDA_SUCCESS);
    REQUIRE(cuMulticastAddDevice(other, 2) == CUDA_SUCCESS);
    CHECK(cuMulticastBindMem(other, 0, mem, 0, 4 * MiB, 0) == CUDA_ERROR_INVALID_DEVICE);  // memory of device 0
    REQUIRE(cuMemRelease(other) == CUDA_SUCCESS);
    REQUIRE(cuMemRelease(mem) == CUDA_SUCCESS);
    REQUIRE(cuMemRelease(mc) == CUDA_SUCCESS);
    CHECK(cuMulticastAddDevice(mc, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK(free_bytes() == before);
}

TEST_CASE("multicast: memory released while bound stays allocated until the unbind, or the object's end") {
    setup();
    const auto p = mc_prop(1, 4 * MiB);
    for (const bool unbind_first : {true, false}) {
        const std::size_t before = free_bytes();
        CUmemGenericAllocationHandle mc = 0;
        REQUIRE(cuMulticastCreate(&mc, &p) == CUDA_SUCCESS);
        REQUIRE(cuMulticastAddDevice(mc, 0) == CUDA_SUCCESS);
        const CUmemGenericAllocationHandle mem = create(4 * MiB);
        const CUdeviceptr va = reserve(4 * MiB);
        REQUIRE(cuMemMap(va, 4 * MiB, 0, mem, 0) == CUDA_SUCCESS);
        REQUIRE(cuMulticastBindAddr(mc, 0, va, 4 * MiB, 0) == CUDA_SUCCESS);
        REQUIRE(cuMemUnmap(va, 4 * MiB) == CUDA_SUCCESS);
        REQUIRE(cuMemAddressFree(va, 4 * MiB) == CUDA_SUCCESS);
        REQUIRE(cuMemRelease(mem) == CUDA_SUCCESS);
        CHECK(free_bytes() == before - 4 * MiB);  // the bind pins it
        if (unbind_first) REQUIRE(cuMulticastUnbind(mc, 0, 0, 4 * MiB) == CUDA_SUCCESS);
        REQUIRE(cuMemRelease(mc) == CUDA_SUCCESS);
        CHECK(free_bytes() == before);
    }
}

TEST_CASE("host-located physical memory (NCCL's host buffers) charges no device and takes host access") {
    setup();
    int numa = -1;
    REQUIRE(cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 0) == CUDA_SUCCESS);
    CHECK(numa == 0);
    for (const CUmemLocationType type : {CU_MEM_LOCATION_TYPE_HOST_NUMA, CU_MEM_LOCATION_TYPE_HOST,
                                         CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT}) {
        CUmemAllocationProp p = prop(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        p.location.type = type;
        p.location.id = 0;
        std::size_t g = 0;
        REQUIRE(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS);
        CHECK(g == kGran);
        const std::size_t before = free_bytes();
        CUmemGenericAllocationHandle h = 0;
        REQUIRE(cuMemCreate(&h, GiB, &p, 0) == CUDA_SUCCESS);
        CHECK(free_bytes() == before);
        const CUdeviceptr va = reserve(GiB);
        REQUIRE(cuMemMap(va, GiB, 0, h, 0) == CUDA_SUCCESS);
        CUmemAccessDesc access[2] = {};
        access[0].location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
        access[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        access[1].location = {CU_MEM_LOCATION_TYPE_HOST_NUMA, 0};
        access[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        REQUIRE(cuMemSetAccess(va, GiB, access, 2) == CUDA_SUCCESS);
        unsigned long long flags = 0;
        REQUIRE(cuMemGetAccess(&flags, &access[1].location, va) == CUDA_SUCCESS);
        CHECK(flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        REQUIRE(cuMemUnmap(va, GiB) == CUDA_SUCCESS);
        REQUIRE(cuMemAddressFree(va, GiB) == CUDA_SUCCESS);
        REQUIRE(cuMemRelease(h) == CUDA_SUCCESS);
    }
    CUmemAllocationProp p = prop();
    p.location = {CU_MEM_LOCATION_TYPE_HOST_NUMA, 1};  // no such node
    CUmemGenericAllocationHandle h = 0;
    CHECK(cuMemCreate(&h, kGran, &p, 0) == CUDA_ERROR_INVALID_VALUE);
}

// ---------------- contexts' reservations, limits, modules and launches (docs/DRIVER.md, "Contexts, kernel
// stacks and launches") ----------------
namespace {

// Two kernels in the form nvcc writes them: one with 32 KiB of local memory per thread (two .local
// declarations, one of them a vector), one with none; a third commented out.
constexpr const char* kPtx = R"PTX(//
// Generated by hand, in nvcc's form
//
.version 9.0
.target sm_90
.address_size 64
// .visible .entry commented_out( .param .u64 p ) { .local .b8 depot[99]; ret; }
.visible .entry heavy(
	.param .u64 heavy_param_0
)
.maxntid 256, 1, 1
{
	.local .align 16 .b8 	__local_depot0[32752];
	.local .align 16 .v4 .b32 	spill[1];
	.reg .b64 	%SPL;
	mov.u64 	%SPL, __local_depot0;
	st.local.u32 	[%SPL], 1;
	{
	.reg .b32 %inner;
	}
	ret;
}
/* .entry also_commented() { ret; } */
.visible .entry plain()
{
	ret;
}
)PTX";

struct Loaded {
    CUmodule module = nullptr;
    CUfunction heavy = nullptr, plain = nullptr;
};

Loaded load_kernels() {
    Loaded k;
    REQUIRE(cuModuleLoadData(&k.module, kPtx) == CUDA_SUCCESS);
    REQUIRE(cuModuleGetFunction(&k.heavy, k.module, "heavy") == CUDA_SUCCESS);
    REQUIRE(cuModuleGetFunction(&k.plain, k.module, "plain") == CUDA_SUCCESS);
    return k;
}

CUresult launch(CUfunction f, unsigned threads = 32, CUstream s = nullptr) {
    return cuLaunchKernel(f, 1, 1, 1, threads, 1, 1, 0, s, nullptr, nullptr);
}

std::size_t stack_limit() {
    std::size_t v = 0;
    REQUIRE(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE) == CUDA_SUCCESS);
    return v;
}

}  // namespace

TEST_CASE("limits: the H200's defaults, the stack rounded up to 16, the documented refusals") {
    setup();
    std::size_t v = 0;
    CHECK(stack_limit() == 1024);
    REQUIRE(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE) == CUDA_SUCCESS);
    CHECK(v == 8388608);
    REQUIRE(cuCtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE) == CUDA_SUCCESS);
    CHECK(v == 8650752);
    REQUIRE(cuCtxGetLimit(&v, CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT) == CUDA_SUCCESS);
    CHECK(v == 2048);
    REQUIRE(cuCtxGetLimit(&v, CU_LIMIT_PERSISTING_L2_CACHE_SIZE) == CUDA_SUCCESS);
    CHECK(v == 0);
    const std::size_t before = free_bytes();
    REQUIRE(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1000) == CUDA_SUCCESS);
    CHECK(stack_limit() == 1008);
    REQUIRE(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 64 * MiB) == CUDA_SUCCESS);
    REQUIRE(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE) == CUDA_SUCCESS);
    CHECK(v == 64 * MiB);
    CHECK(free_bytes() == before);  // no multiprocessors configured: no stack reserved; the heap never is
    REQUIRE(cuCtxSetLimit(CU_LIMIT_MAX_L2_FETCH_GRANULARITY, 4096) == CUDA_SUCCESS);
    REQUIRE(cuCtxGetLimit(&v, CU_LIMIT_MAX_L2_FETCH_GRANULARITY) == CUDA_SUCCESS);
    CHECK(v == 128);
    CHECK(cuCtxSetLimit(CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH, 4) == CUDA_ERROR_UNSUPPORTED_LIMIT);  // compute capability 9.0
    CHECK(cuCtxGetLimit(&v, CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH) == CUDA_ERROR_UNSUPPORTED_LIMIT);
    CHECK(cuCtxSetLimit(CU_LIMIT_CIG_ENABLED, 1) == CUDA_ERROR_UNSUPPORTED_LIMIT);  // read only
    REQUIRE(cuCtxGetLimit(&v, CU_LIMIT_CIG_ENABLED) == CUDA_SUCCESS);
    CHECK(v == 0);
    CHECK(cuCtxGetLimit(&v, CU_LIMIT_MAX) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuCtxSetLimit(CU_LIMIT_MAX, 1) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuCtxGetLimit(nullptr, CU_LIMIT_STACK_SIZE) == CUDA_ERROR_INVALID_VALUE);
    CUresult get = CUDA_SUCCESS, set = CUDA_SUCCESS;
    std::thread([&] {  // no context current on a new thread
        get = cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE);
        set = cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 2048);
    }).join();
    CHECK(get == CUDA_ERROR_INVALID_CONTEXT);
    CHECK(set == CUDA_ERROR_INVALID_CONTEXT);
    REQUIRE(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024) == CUDA_SUCCESS);
    REQUIRE(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 8388608) == CUDA_SUCCESS);
    int sms = 0, threads = 0;
    REQUIRE(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0) == CUDA_SUCCESS);
    REQUIRE(cuDeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 0) == CUDA_SUCCESS);
    CHECK(sms == 0);  // no stack is reserved with CUMEMAUDIT_SIM_SMS unset: the product must say so
    CHECK(threads == 2048);
}

TEST_CASE("modules: PTX read for its kernels and their local memory; anything else is not an image") {
    setup();
    Loaded k = load_kernels();
    int local = -1, max_threads = 0, regs = -1;
    REQUIRE(cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k.heavy) == CUDA_SUCCESS);
    CHECK(local == 32752 + 16);
    REQUIRE(cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k.plain) == CUDA_SUCCESS);
    CHECK(local == 0);
    REQUIRE(cuFuncGetAttribute(&max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k.heavy) == CUDA_SUCCESS);
    CHECK(max_threads == 1024);
    REQUIRE(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, k.heavy) == CUDA_SUCCESS);
    CHECK(regs == 0);
    CHECK(cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_MAX, k.heavy) == CUDA_ERROR_INVALID_VALUE);
    const char* name = nullptr;
    REQUIRE(cuFuncGetName(&name, k.heavy) == CUDA_SUCCESS);
    CHECK(std::string(name) == "heavy");
    CUfunction f = nullptr;
    CHECK(cuModuleGetFunction(&f, k.module, "commented_out") == CUDA_ERROR_NOT_FOUND);
    CHECK(cuModuleGetFunction(&f, k.module, "also_commented") == CUDA_ERROR_NOT_FOUND);
    CHECK(cuModuleGetFunction(&f, k.module, "nothing") == CUDA_ERROR_NOT_FOUND);
    CHECK(cuModuleGetFunction(&f, nullptr, "heavy") == CUDA_ERROR_INVALID_HANDLE);

    CUmodule m = nullptr;
    const char elf[] = "\x7f" "ELF\x02\x01\x01";
    CHECK(cuModuleLoadData(&m, elf) == CUDA_ERROR_INVALID_IMAGE);
    CHECK(cuModuleLoadData(&m, "just some text") == CUDA_ERROR_INVALID_IMAGE);
    CHECK(cuModuleLoadData(&m, ".version 9.0\n.visible .entry broken( .param .u64 p ) { ret;") == CUDA_ERROR_INVALID_PTX);
    CHECK(cuModuleLoadData(&m, nullptr) == CUDA_ERROR_INVALID_VALUE);
    char log[64] = "stale", error_log[64] = "stale";
    CUjit_option options[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_ERROR_LOG_BUFFER,
                              CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[] = {log, reinterpret_cast<void*>(std::uintptr_t{sizeof log}), error_log,
                      reinterpret_cast<void*>(std::uintptr_t{sizeof error_log})};
    REQUIRE(cuModuleLoadDataEx(&m, kPtx, 4, options, values) == CUDA_SUCCESS);
    CHECK(std::string(log).empty());
    CHECK(std::string(error_log).empty());
    CHECK(values[1] == nullptr);  // no log written
    REQUIRE(cuModuleUnload(m) == CUDA_SUCCESS);
    CHECK(cuModuleUnload(m) == CUDA_ERROR_INVALID_HANDLE);

    REQUIRE(cuModuleUnload(k.module) == CUDA_SUCCESS);
    CHECK(cuFuncGetName(&name, k.heavy) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(launch(k.plain) == CUDA_ERROR_INVALID_HANDLE);
}

TEST_CASE("launches: the function, stream and shape checked; a kernel beyond the stack limit raises it") {
    setup();
    Loaded k = load_kernels();
    REQUIRE(launch(k.plain) == CUDA_SUCCESS);
    CHECK(stack_limit() == 1024);
    CHECK(launch(nullptr) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(launch(k.plain, 2048) == CUDA_ERROR_INVALID_VALUE);  // more threads than a block holds
    CHECK(cuLaunchKernel(k.plain, 0, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr) == CUDA_ERROR_INVALID_VALUE);
    CHECK(launch(k.plain, 32, reinterpret_cast<CUstream>(0x1234)) == CUDA_ERROR_INVALID_HANDLE);
    REQUIRE(launch(k.heavy, 32, CU_STREAM_PER_THREAD) == CUDA_SUCCESS);
    CHECK(stack_limit() == 32768);  // 32,768 bytes of local memory, rounded up to 16
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = config.blockDimY = config.blockDimZ = 1;
    CHECK(cuLaunchKernelEx(&config, k.heavy, nullptr, nullptr) == CUDA_SUCCESS);
    CHECK(cuLaunchKernelEx_ptsz(&config, k.plain, nullptr, nullptr) == CUDA_SUCCESS);
    CHECK(cuLaunchKernelEx(nullptr, k.plain, nullptr, nullptr) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuLaunchCooperativeKernel(k.plain, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr) == CUDA_SUCCESS);
    CHECK(cuLaunchCooperativeKernel_ptsz(k.plain, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr) == CUDA_SUCCESS);
    CHECK(cuLaunchKernel_ptsz(k.plain, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr) == CUDA_SUCCESS);

    // A context of its own has its own limits, and its kernels are its own.
    void* fn = nullptr;
    REQUIRE(cuGetProcAddress_v2("cuCtxCreate", &fn, 3020, 0, nullptr) == CUDA_SUCCESS);
    CUcontext own = nullptr;
    REQUIRE(reinterpret_cast<PFN_cuCtxCreate_v3020>(fn)(&own, 0, 0) == CUDA_SUCCESS);
    CHECK(stack_limit() == 1024);
    CHECK(launch(k.plain) == CUDA_ERROR_INVALID_HANDLE);  // the primary context's module
    REQUIRE(cuCtxDestroy(own) == CUDA_SUCCESS);
    CHECK(stack_limit() == 32768);  // the primary context again
    REQUIRE(cuGetProcAddress_v2("cuCtxCreate", &fn, 11040, 0, nullptr) == CUDA_SUCCESS);
    REQUIRE(reinterpret_cast<PFN_cuCtxCreate_v11040>(fn)(&own, nullptr, 0, 0, 0) == CUDA_SUCCESS);
    REQUIRE(cuCtxDestroy(own) == CUDA_SUCCESS);

    // Captured, a launch runs nothing: the limit stays.
    REQUIRE(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024) == CUDA_SUCCESS);
    CUstream s = nullptr;
    REQUIRE(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    REQUIRE(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL) == CUDA_SUCCESS);
    REQUIRE(launch(k.heavy, 32, s) == CUDA_SUCCESS);
    CUgraph g = nullptr;
    REQUIRE(cuStreamEndCapture(s, &g) == CUDA_SUCCESS);
    CHECK(stack_limit() == 1024);
    REQUIRE(cuGraphDestroy(g) == CUDA_SUCCESS);
    REQUIRE(cuStreamDestroy(s) == CUDA_SUCCESS);
    REQUIRE(cuModuleUnload(k.module) == CUDA_SUCCESS);
}

// CUMEMAUDIT_SIM_CONTEXT=100MiB CUMEMAUDIT_SIM_SMS=4 CUMEMAUDIT_SIM_MEMORY=1GiB: a context reserves 100 MiB and
// 1024 x 4 x 2048 bytes (8 MiB) of stack; 1 KiB more stack per thread is 8 MiB more.
TEST_CASE("child: reservations", "[.]") {
    constexpr std::size_t kStackMiB = 8;  // per KiB of stack limit
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    int sms = 0;
    REQUIRE(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0) == CUDA_SUCCESS);
    CHECK(sms == 4);
    CUcontext primary = nullptr;
    REQUIRE(cuDevicePrimaryCtxRetain(&primary, 0) == CUDA_SUCCESS);
    REQUIRE(cuCtxSetCurrent(primary) == CUDA_SUCCESS);
    CHECK(free_bytes() == GiB - 108 * MiB);
    REQUIRE(cuDevicePrimaryCtxRetain(&primary, 0) == CUDA_SUCCESS);  // retained again: nothing more
    CHECK(free_bytes() == GiB - 108 * MiB);

    // The simulated NVML sees the device's used memory and charges this process its context.
    void* nvml = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    REQUIRE(nvml != nullptr);
    struct Memory {
        unsigned long long total, free, used;
    } memory{};
    struct Info {
        unsigned int pid;
        unsigned long long used;
        unsigned int gi, ci;
    } info[4]{};
    auto init = reinterpret_cast<int (*)()>(::dlsym(nvml, "nvmlInit_v2"));
    auto by_index = reinterpret_cast<int (*)(unsigned, void**)>(::dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2"));
    auto memory_info = reinterpret_cast<int (*)(void*, Memory*)>(::dlsym(nvml, "nvmlDeviceGetMemoryInfo"));
    auto procs = reinterpret_cast<int (*)(void*, unsigned int*, Info*)>(::dlsym(nvml, "nvmlDeviceGetComputeRunningProcesses_v3"));
    REQUIRE((init && by_index && memory_info && procs));
    void* dev = nullptr;
    REQUIRE(init() == 0);
    REQUIRE(by_index(0, &dev) == 0);
    REQUIRE(memory_info(dev, &memory) == 0);
    CHECK(memory.total == GiB);
    CHECK(memory.used == 108 * MiB);
    CHECK(memory.free == GiB - 108 * MiB);
    unsigned int n = 4;
    REQUIRE(procs(dev, &n, info) == 0);
    REQUIRE(n == 1);
    CHECK(info[0].used == 108 * MiB);

    // The stack: a launch beyond the limit reserves the difference and keeps it; cuCtxSetLimit moves it at once.
    Loaded k = load_kernels();
    // The kernels' code fits the first chunk of the context's code heap, which holds the driver's own code.
    CHECK(free_bytes() == GiB - 108 * MiB);
    REQUIRE(launch(k.heavy) == CUDA_SUCCESS);
    CHECK(stack_limit() == 32768);
    CHECK(free_bytes() == GiB - 100 * MiB - 32 * kStackMiB * MiB);
    REQUIRE(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024) == CUDA_SUCCESS);
    CHECK(free_bytes() == GiB - 108 * MiB);
    REQUIRE(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1000) == CUDA_SUCCESS);  // 1008: 16 bytes x 8192 threads less
    CHECK(free_bytes() == GiB - 108 * MiB + 16 * 8192);
    REQUIRE(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 1024) == CUDA_SUCCESS);

    // Refused for want of memory (as the H200, run k12): the whole stack is given back, the limit reads the same,
    // a larger limit is refused, and the next launch takes the stack again.
    CUdeviceptr hog = 0;
    REQUIRE(cuMemAlloc(&hog, free_bytes() - 64 * MiB) == CUDA_SUCCESS);
    CHECK(launch(k.heavy) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(stack_limit() == 1024);
    CHECK(free_bytes() == 64 * MiB + kStackMiB * MiB);
    CHECK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 32768) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(stack_limit() == 1024);
    CHECK(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, ~std::size_t{0}) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(free_bytes() == 64 * MiB + kStackMiB * MiB);
    CHECK(launch(k.plain) == CUDA_SUCCESS);
    CHECK(free_bytes() == 64 * MiB);
    CUcontext own = nullptr;
    CHECK(cuCtxCreate(&own, nullptr, 0, 0) == CUDA_ERROR_OUT_OF_MEMORY);  // 108 MiB do not fit in 64
    CUcontext current = nullptr;
    REQUIRE(cuCtxGetCurrent(&current) == CUDA_SUCCESS);
    CHECK(current == primary);
    REQUIRE(cuMemFree(hog) == CUDA_SUCCESS);

    // A context of its own reserves as much, keeps its own limits and gives it all back at its end.
    REQUIRE(launch(k.heavy) == CUDA_SUCCESS);
    const std::size_t with_primary = free_bytes();
    REQUIRE(cuCtxCreate(&own, nullptr, 0, 0) == CUDA_SUCCESS);
    CHECK(free_bytes() == with_primary - 108 * MiB);
    CHECK(stack_limit() == 1024);
    REQUIRE(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 2048) == CUDA_SUCCESS);
    CHECK(free_bytes() == with_primary - 108 * MiB - kStackMiB * MiB);
    REQUIRE(cuCtxDestroy(own) == CUDA_SUCCESS);
    CHECK(free_bytes() == with_primary);
    CHECK(stack_limit() == 32768);

    // A reset gives the primary context's reservation back, modules and limits with it; the next retain
    // reserves again, at the default limit.
    REQUIRE(cuDevicePrimaryCtxReset(0) == CUDA_SUCCESS);
    REQUIRE(memory_info(dev, &memory) == 0);
    CHECK(memory.used == 0);
    const char* name = nullptr;
    CHECK(cuFuncGetName(&name, k.heavy) == CUDA_ERROR_INVALID_HANDLE);  // its module went with it
    REQUIRE(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 2048) == CUDA_SUCCESS);  // still current, used before a retain
    CHECK(free_bytes() == GiB - kStackMiB * MiB);
    REQUIRE(cuDevicePrimaryCtxRetain(&primary, 0) == CUDA_SUCCESS);
    CHECK(stack_limit() == 1024);
    CHECK(free_bytes() == GiB - 108 * MiB);  // what it held since the reset is in the new reservation
    // The last release does the same.
    for (int i = 0; i < 3; ++i) REQUIRE(cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS);
    REQUIRE(memory_info(dev, &memory) == 0);
    CHECK(memory.used == 0);
}

// CUMEMAUDIT_SIM_CONTEXT=2GiB CUMEMAUDIT_SIM_MEMORY=1GiB: no context fits.
TEST_CASE("child: no room for a context", "[.]") {
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    CUcontext ctx = nullptr;
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_ERROR_OUT_OF_MEMORY);
    unsigned flags = 0;
    int active = -1;
    REQUIRE(cuDevicePrimaryCtxGetState(0, &flags, &active) == CUDA_SUCCESS);
    CHECK(active == 0);
    CHECK(cuDevicePrimaryCtxRelease(0) == CUDA_ERROR_INVALID_CONTEXT);  // never retained
    CHECK(cuCtxCreate(&ctx, nullptr, 0, 0) == CUDA_ERROR_OUT_OF_MEMORY);
    REQUIRE(cuCtxGetCurrent(&ctx) == CUDA_SUCCESS);
    CHECK(ctx == nullptr);
}

TEST_CASE("CUMEMAUDIT_SIM_CONTEXT and CUMEMAUDIT_SIM_SMS: contexts and kernel stacks reserve, bad values are one error") {
    auto bad = run_child("child: cuInit with the environment given", {"CUMEMAUDIT_SIM_CONTEXT=lots"});
    CHECK(bad.status == 0);
    CHECK(bad.err == "cumemaudit-sim: CUMEMAUDIT_SIM_CONTEXT='lots' is not a size (expected e.g. 2MiB, 0 or a byte count)\n");
    bad = run_child("child: cuInit with the environment given", {"CUMEMAUDIT_SIM_HEAP_CODE=lots"});
    CHECK(bad.status == 0);
    CHECK(bad.err == "cumemaudit-sim: CUMEMAUDIT_SIM_HEAP_CODE='lots' is not a size (expected e.g. 2MiB, 0 or a byte count)\n");
    bad = run_child("child: cuInit with the environment given", {"CUMEMAUDIT_SIM_STREAM_CHUNK=2MB2"});
    CHECK(bad.status == 0);
    CHECK(bad.err == "cumemaudit-sim: CUMEMAUDIT_SIM_STREAM_CHUNK='2MB2' is not a size (expected e.g. 2MiB, 0 or a byte count)\n");
    bad = run_child("child: cuInit with the environment given", {"CUMEMAUDIT_SIM_SMS=-1"});
    CHECK(bad.status == 0);
    CHECK(bad.err ==
          "cumemaudit-sim: CUMEMAUDIT_SIM_SMS='-1' is not a multiprocessor count (expected an integer from 0 to 1024)\n");
    bad = run_child("child: cuInit with the environment given", {"CUMEMAUDIT_SIM_SMS=132x"});
    CHECK(bad.status == 0);
    CHECK(bad.err ==
          "cumemaudit-sim: CUMEMAUDIT_SIM_SMS='132x' is not a multiprocessor count (expected an integer from 0 to 1024)\n");
    auto ok = run_child("child: reservations",
                        {"CUMEMAUDIT_SIM_CONTEXT=100MiB", "CUMEMAUDIT_SIM_SMS=4", "CUMEMAUDIT_SIM_MEMORY=1GiB"});
    CHECK(ok.status == 0);
    CHECK(ok.err.empty());
    ok = run_child("child: no room for a context", {"CUMEMAUDIT_SIM_CONTEXT=2GiB", "CUMEMAUDIT_SIM_MEMORY=1GiB"});
    CHECK(ok.status == 0);
    CHECK(ok.err.empty());
}

// ---------------- module code and globals (docs/DRIVER.md, "Module code and globals") ----------------
namespace {

// The module of reservation_probe's module_code fact: kernels code_a and code_b of `statements` multiply-adds
// and five instructions more each, and a 32 MiB global.
std::string code_ptx(int statements) {
    std::string ptx = ".version 7.0\n.target sm_52\n.address_size 64\n.visible .global .align 4 .b8 big[33554432];\n";
    for (const char* name : {"code_a", "code_b"}) {
        ptx += std::string(".visible .entry ") + name +
               "(.param .u64 out, .param .u32 m)\n{\n.reg .u32 %r<3>;\n.reg .u64 %p;\n"
               "ld.param.u64 %p, [out];\nld.param.u32 %r1, [m];\nmov.u32 %r2, %r1;\n";
        for (int i = 0; i < statements; ++i) ptx += "mad.lo.u32 %r2, %r2, %r1, " + std::to_string(i) + ";\n";
        ptx += "st.global.u32 [%p], %r2;\nret;\n}\n";
    }
    return ptx;
}

// MiB of device memory taken since the meter's last reading (negative: given back).
struct Meter {
    std::size_t last = free_bytes();
    long long operator()() {
        const std::size_t now = free_bytes();
        const long long moved = (static_cast<long long>(last) - static_cast<long long>(now)) / static_cast<long long>(MiB);
        last = now;
        return moved;
    }
};

CUresult load_library(CUlibrary* lib, const std::string& ptx) {
    return cuLibraryLoadData(lib, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0);
}

}  // namespace

// Under lazy loading, as the H200 answered reservation_probe's module_code fact (run k22), then what that fact
// does not reach: a kernel launched by its CUkernel, handles of an unloaded library, no room, a context's end,
// what counts as an instruction and as a global.
TEST_CASE("child: module code under lazy loading", "[.]") {
    setup();
    CUmoduleLoadingMode mode{};
    REQUIRE(cuModuleGetLoadingMode(&mode) == CUDA_SUCCESS);
    CHECK(mode == CU_MODULE_LAZY_LOADING);
    const std::string ptx = code_ptx(40000);  // 643,072 bytes of code a kernel: three fit a 2 MiB chunk
    Meter moved;
    CUmodule m = nullptr;
    REQUIRE(cuModuleLoadData(&m, ptx.c_str()) == CUDA_SUCCESS);
    CHECK(moved() == 32);
    CUfunction a = nullptr, b = nullptr;
    REQUIRE(cuModuleGetFunction(&a, m, "code_a") == CUDA_SUCCESS);
    CHECK(moved() == 2);
    REQUIRE(cuModuleGetFunction(&a, m, "code_a") == CUDA_SUCCESS);
    REQUIRE(launch(a) == CUDA_SUCCESS);
    REQUIRE(cuModuleGetFunction(&b, m, "code_b") == CUDA_SUCCESS);
    CHECK(moved() == 0);

    CUlibrary lib = nullptr, of = nullptr;
    REQUIRE(load_library(&lib, ptx) == CUDA_SUCCESS);
    CUkernel ka = nullptr, kb = nullptr, again = nullptr;
    REQUIRE(cuLibraryGetKernel(&ka, lib, "code_a") == CUDA_SUCCESS);
    REQUIRE(cuLibraryGetKernel(&again, lib, "code_a") == CUDA_SUCCESS);
    CHECK(again == ka);
    REQUIRE(cuLibraryGetKernel(&kb, lib, "code_b") == CUDA_SUCCESS);
    CHECK(kb != ka);
    CHECK(cuLibraryGetKernel(&again, lib, "code_c") == CUDA_ERROR_NOT_FOUND);
    CHECK(cuLibraryGetKernel(nullptr, lib, "code_a") == CUDA_ERROR_INVALID_VALUE);
    REQUIRE(cuKernelGetLibrary(&of, kb) == CUDA_SUCCESS);
    CHECK(of == lib);
    CHECK(moved() == 0);
    CUfunction la = nullptr, la_again = nullptr, la_of_module = nullptr;
    REQUIRE(cuKernelGetFunction(&la, ka) == CUDA_SUCCESS);
    CHECK(moved() == 32);  // the library module's globals; its code_a still fits the first code chunk
    REQUIRE(cuKernelGetFunction(&la_again, ka) == CUDA_SUCCESS);
    CHECK(la_again == la);
    CUmodule lm = nullptr;
    REQUIRE(cuLibraryGetModule(&lm, lib) == CUDA_SUCCESS);
    REQUIRE(cuModuleGetFunction(&la_of_module, lm, "code_a") == CUDA_SUCCESS);
    CHECK(la_of_module == la);
    REQUIRE(launch(la) == CUDA_SUCCESS);
    CHECK(moved() == 0);
    REQUIRE(launch(reinterpret_cast<CUfunction>(kb)) == CUDA_SUCCESS);  // cuda.h: a CUkernel may be launched
    CHECK(moved() == 2);  // its code loaded by the launch, across into a second chunk
    REQUIRE(cuModuleUnload(m) == CUDA_SUCCESS);
    CHECK(moved() == -32);  // the first code chunk still holds the library's code_a
    REQUIRE(cuLibraryUnload(lib) == CUDA_SUCCESS);
    CHECK(moved() == -36);
    CHECK(cuLibraryGetKernel(&again, lib, "code_a") == CUDA_ERROR_INVALID_HANDLE);
    CHECK(cuKernelGetFunction(&la, ka) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(cuKernelGetLibrary(&of, ka) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(launch(reinterpret_cast<CUfunction>(ka)) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(launch(la) == CUDA_ERROR_INVALID_HANDLE);

    // No room: a module's globals or a function's code refused, nothing taken.
    CUdeviceptr hog = 0;
    REQUIRE(cuMemAlloc(&hog, free_bytes() - MiB) == CUDA_SUCCESS);
    moved();
    CHECK(cuModuleLoadData(&m, ptx.c_str()) == CUDA_ERROR_OUT_OF_MEMORY);
    CUmodule small = nullptr;
    REQUIRE(cuModuleLoadData(&small, kPtx) == CUDA_SUCCESS);  // no globals
    CHECK(cuModuleGetFunction(&a, small, "plain") == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(moved() == 0);
    REQUIRE(cuMemFree(hog) == CUDA_SUCCESS);
    moved();
    REQUIRE(cuModuleGetFunction(&a, small, "plain") == CUDA_SUCCESS);
    CHECK(moved() == 2);
    REQUIRE(cuModuleUnload(small) == CUDA_SUCCESS);
    CHECK(moved() == -2);

    // A context's end gives back what its modules hold; a new context's heaps start empty.
    CUcontext own = nullptr;
    REQUIRE(cuCtxCreate(&own, nullptr, 0, 0) == CUDA_SUCCESS);
    REQUIRE(cuModuleLoadData(&m, ptx.c_str()) == CUDA_SUCCESS);
    REQUIRE(cuModuleGetFunction(&a, m, "code_a") == CUDA_SUCCESS);
    CHECK(moved() == 34);
    REQUIRE(cuCtxDestroy(own) == CUDA_SUCCESS);
    CHECK(moved() == -34);

    // 16 bytes of code an instruction, rounded up to 4 KiB; directives, labels and braces are not instructions.
    // A fresh context's code begins after the driver's 1,675,264 bytes in the first chunk: 157,440 instructions
    // (2,519,040 bytes) end exactly at the second chunk's end; the same and one more spill into a third and a fourth.
    std::string edge = ".version 9.0\n.target sm_90\n.address_size 64\n";
    for (const auto& [name, n] : {std::pair{"fills", 157440}, std::pair{"spills", 157441}}) {
        edge += std::string(".visible .entry ") + name + "()\n{\n\t.reg .b32 \t%r<2>;\n\t.local .align 4 .b8 \tdepot[16];\n"
                "\t{\n\t.reg .b32 %inner;\n\t}\n$L_top:\n\t.pragma \"nounroll\";\n";
        for (int i = 1; i < n; ++i) edge += "\tadd.s32 \t%r1, %r1, 1;\n";
        edge += "$L_end:\n\tret;\n}\n";
    }
    REQUIRE(cuCtxCreate(&own, nullptr, 0, 0) == CUDA_SUCCESS);
    REQUIRE(cuModuleLoadData(&m, edge.c_str()) == CUDA_SUCCESS);
    REQUIRE(cuModuleGetFunction(&a, m, "fills") == CUDA_SUCCESS);
    CHECK(moved() == 2);
    REQUIRE(cuModuleGetFunction(&b, m, "spills") == CUDA_SUCCESS);
    CHECK(moved() == 4);
    REQUIRE(cuCtxDestroy(own) == CUDA_SUCCESS);
    CHECK(moved() == -6);

    // Globals: the module's own .global definitions, initialised or not, rounded up to 4 KiB; another
    // module's (.extern), a kernel's state spaces and comments take nothing. 4 KiB + 2 MiB - 4 KiB: one chunk.
    const char* globals = R"PTX(.version 9.0
.target sm_90
.address_size 64
.global .align 4 .u32 table[1024] = {1, 2, 3};
.visible .global .align 8 .b8 rest[2093056];
.extern .global .align 4 .b8 elsewhere[4194304];
// .global .b8 commented[4194304];
.visible .entry uses(.param .u64 p)
{
	.reg .b64 %rd<2>;
	.local .align 4 .b8 depot[4194304];
	ld.global.u64 %rd1, [rest];
	ret;
}
)PTX";
    REQUIRE(cuCtxCreate(&own, nullptr, 0, 0) == CUDA_SUCCESS);
    REQUIRE(cuModuleLoadData(&m, globals) == CUDA_SUCCESS);
    CHECK(moved() == 2);
    REQUIRE(cuCtxDestroy(own) == CUDA_SUCCESS);
    CHECK(moved() == -2);
}

// Under eager loading, as the H200 answered the same fact, then what a context begun with a library loaded
// holds, and a load or a context refused for want of room.
TEST_CASE("child: module code under eager loading", "[.]") {
    setup();
    CUmoduleLoadingMode mode{};
    REQUIRE(cuModuleGetLoadingMode(&mode) == CUDA_SUCCESS);
    CHECK(mode == CU_MODULE_EAGER_LOADING);
    const std::string ptx = code_ptx(40000);
    Meter moved;
    CUmodule m = nullptr;
    REQUIRE(cuModuleLoadData(&m, ptx.c_str()) == CUDA_SUCCESS);
    CHECK(moved() == 34);
    CUfunction a = nullptr;
    REQUIRE(cuModuleGetFunction(&a, m, "code_a") == CUDA_SUCCESS);
    REQUIRE(launch(a) == CUDA_SUCCESS);
    CHECK(moved() == 0);
    CUlibrary lib = nullptr;
    REQUIRE(load_library(&lib, ptx) == CUDA_SUCCESS);
    CHECK(moved() == 34);  // its code crosses into a second chunk
    CUkernel k = nullptr;
    REQUIRE(cuLibraryGetKernel(&k, lib, "code_a") == CUDA_SUCCESS);
    REQUIRE(cuKernelGetFunction(&a, k) == CUDA_SUCCESS);
    REQUIRE(launch(a) == CUDA_SUCCESS);
    CHECK(moved() == 0);
    REQUIRE(cuModuleUnload(m) == CUDA_SUCCESS);
    CHECK(moved() == -32);

    CUcontext own = nullptr;
    REQUIRE(cuCtxCreate(&own, nullptr, 0, 0) == CUDA_SUCCESS);
    CHECK(moved() == 34);  // the library's module, made at the context's beginning
    REQUIRE(cuKernelGetFunction(&a, k) == CUDA_SUCCESS);
    CHECK(moved() == 0);
    REQUIRE(cuCtxDestroy(own) == CUDA_SUCCESS);
    CHECK(moved() == -34);

    // No room: the library's module refused with the context, or with the load; nothing taken.
    CUdeviceptr hog = 0;
    REQUIRE(cuMemAlloc(&hog, free_bytes() - 16 * MiB) == CUDA_SUCCESS);
    moved();
    own = nullptr;
    CHECK(cuCtxCreate(&own, nullptr, 0, 0) == CUDA_ERROR_OUT_OF_MEMORY);
    CUcontext current = nullptr;
    REQUIRE(cuCtxGetCurrent(&current) == CUDA_SUCCESS);
    CHECK(current != nullptr);
    CHECK(current != own);
    CUlibrary refused = nullptr;
    CHECK(load_library(&refused, ptx) == CUDA_ERROR_OUT_OF_MEMORY);
    CHECK(moved() == 0);
    REQUIRE(cuMemFree(hog) == CUDA_SUCCESS);
    moved();
    REQUIRE(cuLibraryUnload(lib) == CUDA_SUCCESS);
    CHECK(moved() == -36);
}

TEST_CASE("module code and globals: charged in 2 MiB chunks of a context's code and globals, lazily or eagerly") {
    for (const char* mode : {"LAZY", "EAGER"}) {
        const std::string lower = std::string(mode) == "LAZY" ? "lazy" : "eager";
        const auto r = run_child(("child: module code under " + lower + " loading").c_str(),
                                 {std::string("CUDA_MODULE_LOADING=") + mode});
        INFO(mode << ": " << r.err);
        CHECK(r.status == 0);
    }
    // Anything but EAGER is the driver's default, lazy.
    CHECK(run_child("child: module code under lazy loading", {"CUDA_MODULE_LOADING=eager"}).status == 0);
}
