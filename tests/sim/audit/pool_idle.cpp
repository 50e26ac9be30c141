// A stream-ordered pool holding idle memory, trimmed, and taken back by the driver before a refusal.
// Run as `audit_scenarios pool-idle`; checked by pool_idle_test.py, which finds
// each site by its `// site:NAME` marker.
#include "scenarios.hpp"

// RMM's cuda_async_memory_resource (rmm/mr/device/cuda_async_memory_resource.hpp): a pool of its own with the
// release threshold at the device's total, primed with an allocation of half the free memory freed at once,
// so the pool holds it idle. The job then allocates from the pool, trims it (PyTorch's empty_cache does so on
// its cudaMallocAsync backend), and a library's cuMemAlloc finds too little left: the driver takes the pool's
// idle memory back before it refuses. A pinned host pool (cuda.core's) holds host memory, never the device's.
int pool_idle() {
    init_primary_context();
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    CUmemPoolProps pp{};
    pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    pp.location.id = 0;
    CUmemoryPool pool = nullptr;
    OK(cuMemPoolCreate(&pool, &pp));  // site:pool_create
    size_t free = 0, total = 0;
    OK(cuMemGetInfo(&free, &total));
    cuuint64_t threshold = total;
    OK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    CUdeviceptr prime = 0;
    OK(cuMemAllocFromPoolAsync(&prime, free / 2, pool, nullptr));
    OK(cuMemFreeAsync(prime, nullptr));
    OK(cuStreamSynchronize(nullptr));
    if (step != nullptr) step(1);
    CUdeviceptr work = 0;
    OK(cuMemAllocFromPoolAsync(&work, 256 * kMiB, pool, nullptr));  // site:pool_alloc
    if (step != nullptr) step(2);
    OK(cuMemPoolTrimTo(pool, 1024 * kMiB));  // site:pool_trim
    if (step != nullptr) step(3);
    CUmemPoolProps hp{};
    hp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    hp.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    hp.location.id = 0;
    CUmemoryPool host = nullptr;
    OK(cuMemPoolCreate(&host, &hp));
    CUdeviceptr staging = 0;
    OK(cuMemAllocFromPoolAsync(&staging, 64 * kMiB, host, nullptr));  // site:host_pool_alloc
    OK(cuMemGetInfo(&free, &total));
    CUdeviceptr big = 0;
    CHECK(cuMemAlloc(&big, free + 1024 * kMiB), CUDA_ERROR_OUT_OF_MEMORY);  // site:pool_refused
    std::printf("pool_idle: free=%zu\n", free);
    return 0;
}

AUDIT_SCENARIO("pool-idle", [](int, char**) { return pool_idle(); });
