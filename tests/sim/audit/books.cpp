// Memory booked once and where it lives, at steps: a multicast set-up (NCCL's NVLS order, bound by handle or
// by address), memory pinned by dma-buf fds after the program let go of it, pools off the device reached
// through CUDA 13's getters, managed memory the device holds once touched. nvls-step runs on the simulated driver only: multicast objects must never be
// created on the shared GPU machine (tests/gpu leaves it out of its list).
#include "scenarios.hpp"

namespace {

using StepFn = void (*)(uint64_t);

StepFn step_api() { return reinterpret_cast<StepFn>(dlsym(RTLD_DEFAULT, "cumemaudit_step")); }

// One rank of ncclNvlsInit/nvlsAllocateMem with 64 MiB: the object, the memory bound to it, both mapped.
int nvls_step(int argc, char** argv) {
    const bool by_address = argc > 2 && std::strcmp(argv[2], "by-address") == 0;
    init_primary_context();
    const StepFn step = step_api();
    const size_t size = 64 * kMiB;
    step(1);
    CUmulticastObjectProp mp{};
    mp.numDevices = 1;
    mp.size = size;
    mp.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CUmemGenericAllocationHandle mc = 0, uc = 0;
    OK(cuMulticastCreate(&mc, &mp));  // site:mc_create
    OK(cuMulticastAddDevice(mc, 0));
    CUmemAllocationProp p = props(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUdeviceptr ucptr = 0, mcptr = 0;
    OK(cuMemAddressReserve(&ucptr, size, 0, 0, 0));
    OK(cuMemCreate(&uc, size, &p, 0));  // site:uc_create
    OK(cuMemMap(ucptr, size, 0, uc, 0));
    const CUmemAccessDesc rw = cumemaudit::program::read_write(0);
    OK(cuMemSetAccess(ucptr, size, &rw, 1));
    if (by_address) OK(cuMulticastBindAddr(mc, 0, ucptr, size, 0));
    else OK(cuMulticastBindMem(mc, 0, uc, 0, size, 0));
    OK(cuMemAddressReserve(&mcptr, size, 0, 0, 0));
    OK(cuMemMap(mcptr, size, 0, mc, 0));
    OK(cuMemSetAccess(mcptr, size, &rw, 1));
    step(2);
    std::printf("nvls_step: used %zu MiB\n", (size_t{80} << 30) - free_bytes());
    OK(cuMulticastUnbind(mc, 0, 0, size));
    OK(cuMemUnmap(ucptr, size));
    OK(cuMemAddressFree(ucptr, size));
    OK(cuMemRelease(uc));
    OK(cuMemUnmap(mcptr, size));
    OK(cuMemAddressFree(mcptr, size));
    OK(cuMemRelease(mc));
    step(3);
    return 0;
}

// NCCL's network plugins register dma-buf fds of their buffers; a plugin that never closes them keeps the
// memory after the program frees it: 1 GiB of classic memory and 1 GiB of VMM memory, both let go of; an
// allocation refused then.
int dmabuf_step(int, char**) {
    init_primary_context();
    const StepFn step = step_api();
    step(1);
    CUdeviceptr classic = 0;
    int fd = -1, vmm_fd = -1;
    OK(cuMemAlloc(&classic, 1024 * kMiB));
    OK(cuMemGetHandleForAddressRange(&fd, classic, 1024 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));  // site:dmabuf_classic
    OK(cuMemFree(classic));
    CUmemAllocationProp p = props();
    p.allocFlags.gpuDirectRDMACapable = 1;
    CUmemGenericAllocationHandle vmm = 0;
    CUdeviceptr va = 0;
    OK(cuMemCreate(&vmm, 1024 * kMiB, &p, 0));
    OK(cuMemAddressReserve(&va, 1024 * kMiB, 0, 0, 0));
    OK(cuMemMap(va, 1024 * kMiB, 0, vmm, 0));
    OK(cuMemGetHandleForAddressRange(&vmm_fd, va, 1024 * kMiB, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));  // site:dmabuf_vmm
    OK(cuMemUnmap(va, 1024 * kMiB));
    OK(cuMemRelease(vmm));
    OK(cuMemAddressFree(va, 1024 * kMiB));
    step(2);
    CUdeviceptr too_big = 0;
    const CUresult r = cuMemAlloc(&too_big, 79ull << 30);  // site:too_big
    std::printf("dmabuf_step: 79 GiB: %s\n", result_name(r));
    close(fd);
    close(vmm_fd);
    step(3);
    return 0;
}

// RMM's pinned and managed async resources and cuda.core's PinnedMemoryResource and ManagedMemoryResource
// reach their pools through CUDA 13's getters: the host's pinned default pool and the managed pool with no
// preferred location. Each step takes 512 MiB more from both, more than a growth alarm's threshold.
int pool_getters(int, char**) {
    init_primary_context();
    const StepFn step = step_api();
    CUmemLocation host{};
    host.type = CU_MEM_LOCATION_TYPE_HOST;
    CUmemLocation none{};
    none.type = CU_MEM_LOCATION_TYPE_NONE;
    CUmemoryPool pinned = nullptr, managed = nullptr;
    OK(cuMemGetDefaultMemPool(&pinned, &host, CU_MEM_ALLOCATION_TYPE_PINNED));  // site:pinned_pool
    OK(cuMemGetMemPool(&managed, &none, CU_MEM_ALLOCATION_TYPE_MANAGED));       // site:managed_pool
    CUdeviceptr kept[6] = {};
    for (int i = 0; i < 3; ++i) {
        OK(cuMemAllocFromPoolAsync(&kept[2 * i], 512 * kMiB, pinned, nullptr));      // site:pinned_alloc
        OK(cuMemAllocFromPoolAsync(&kept[2 * i + 1], 512 * kMiB, managed, nullptr));  // site:managed_alloc
        OK(cuStreamSynchronize(nullptr));
        step(static_cast<uint64_t>(i + 1));
    }
    std::printf("pool_getters: device used %zu MiB\n", ((size_t{80} << 30) - free_bytes()) >> 20);
    for (CUdeviceptr p : kept) OK(cuMemFreeAsync(p, nullptr));
    OK(cuStreamSynchronize(nullptr));
    return 0;
}

// Managed memory (cudaMallocManaged, as unified-memory codes and CPU offload use it): a first mark without it
// (step 0), 1 GiB allocated (step 1),
// touched on the device by a memset (step 2), prefetched back to the host (step 3: the device keeps it), an
// allocation refused then, and freed (step 4).
int managed_resident(int, char**) {
    init_primary_context();
    const StepFn step = step_api();
    step(0);  // no managed memory yet: the device's own uncharged rest is learnt here (0 on the simulated driver)
    CUdeviceptr m = 0;
    OK(cuMemAllocManaged(&m, 1024 * kMiB, CU_MEM_ATTACH_GLOBAL));  // site:managed_alloc
    step(1);
    OK(cuMemsetD8(m, 1, 1024 * kMiB));
    OK(cuCtxSynchronize());
    step(2);
    CUmemLocation host{};
    host.type = CU_MEM_LOCATION_TYPE_HOST;
    OK(cuMemPrefetchAsync(m, 1024 * kMiB, host, 0, nullptr));
    OK(cuCtxSynchronize());
    step(3);
    CUdeviceptr too_big = 0;
    std::printf("managed_resident: 79.5 GiB: %s\n", result_name(cuMemAlloc(&too_big, 79ull * 1024 * kMiB + 512 * kMiB)));
    OK(cuMemFree(m));
    step(4);
    return 0;
}

// Managed memory moved onto the device three ways, as CPU-offload codes do: 1 GiB of weights prefetched whole
// (CUDA 13's form), 512 MiB of activations touched by a memset (no call to name), and 256 MiB of which the
// upper half is prefetched through CUDA 12's form (what cudart 12 asks cuGetProcAddress for). An allocation
// refused then; the weights freed; refused again. Then the device reset (a test harness between cases) frees
// the rest without a call, and new managed memory touched by a memset only is refused a third time.
int managed_prefetch(int, char**) {
    init_primary_context();
    const StepFn step = step_api();
    step(0);  // the device's own uncharged rest, learnt with no managed memory held
    CUdeviceptr weights = 0, activations = 0, cache = 0;
    OK(cuMemAllocManaged(&weights, 1024 * kMiB, CU_MEM_ATTACH_GLOBAL));
    OK(cuMemAllocManaged(&activations, 512 * kMiB, CU_MEM_ATTACH_GLOBAL));
    OK(cuMemAllocManaged(&cache, 256 * kMiB, CU_MEM_ATTACH_GLOBAL));
    CUmemLocation device0{};
    device0.type = CU_MEM_LOCATION_TYPE_DEVICE;
    OK(cuMemPrefetchAsync(weights, 1024 * kMiB, device0, 0, nullptr));  // site:prefetch_weights
    OK(cuMemsetD8(activations, 0, 512 * kMiB));
    using PrefetchV1 = CUresult (*)(CUdeviceptr, size_t, CUdevice, CUstream);
    const auto prefetch_v1 = reinterpret_cast<PrefetchV1>(dlsym(RTLD_DEFAULT, "cuMemPrefetchAsync"));
    OK(prefetch_v1(cache + 128 * kMiB, 128 * kMiB, 0, nullptr));  // site:prefetch_cache
    OK(cuCtxSynchronize());
    step(1);
    CUdeviceptr too_big = 0;
    std::printf("managed_prefetch: %s\n", result_name(cuMemAlloc(&too_big, 79ull * 1024 * kMiB)));
    OK(cuMemFree(weights));
    std::printf("managed_prefetch: %s\n", result_name(cuMemAlloc(&too_big, 79ull * 1024 * kMiB + 512 * kMiB)));
    OK(cuDevicePrimaryCtxReset(0));
    init_primary_context();
    step(2);
    CUdeviceptr scratch = 0;
    OK(cuMemAllocManaged(&scratch, 256 * kMiB, CU_MEM_ATTACH_GLOBAL));
    OK(cuMemsetD8(scratch, 0, 256 * kMiB));
    std::printf("managed_prefetch: %s\n", result_name(cuMemAlloc(&too_big, 79ull * 1024 * kMiB + 896 * kMiB)));
    OK(cuMemFree(scratch));
    return 0;
}

}  // namespace

AUDIT_SCENARIO("managed-resident", managed_resident);
AUDIT_SCENARIO("managed-prefetch", managed_prefetch);
AUDIT_SCENARIO("pool-getters", pool_getters);
AUDIT_SCENARIO("nvls-step", nvls_step);
AUDIT_SCENARIO("dmabuf-step", dmabuf_step);
