// A stand-in for a library that allocates device memory (built three times, as libc10_cuda.so,
// libnccl.so.2 and deep_ep_cpp.so): the auditor names an allocation's owner after the object that called
// the driver, so these prove the attribution rules without PyTorch, NCCL or DeepEP.
#include <cuda.h>

extern "C" {

__attribute__((visibility("default"))) CUdeviceptr standin_alloc(size_t bytes) {
    CUdeviceptr d = 0;
    return cuMemAlloc(&d, bytes) == CUDA_SUCCESS ? d : 0;  // site:standin_alloc
}

__attribute__((visibility("default"))) int standin_free(CUdeviceptr d) { return cuMemFree(d) == CUDA_SUCCESS ? 0 : 1; }

// A VMM buffer that is mapped, then unmapped and its range freed without the creation reference being
// released: DeepEP's leak in one call.
__attribute__((visibility("default"))) int standin_vmm_leak(size_t bytes) {
    CUmemAllocationProp p{};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h = 0;
    if (cuMemCreate(&h, bytes, &p, 0) != CUDA_SUCCESS) return 1;  // site:standin_vmm
    CUdeviceptr va = 0;
    if (cuMemAddressReserve(&va, bytes, 0, 0, 0) != CUDA_SUCCESS || cuMemMap(va, bytes, 0, h, 0) != CUDA_SUCCESS) return 1;
    return cuMemUnmap(va, bytes) == CUDA_SUCCESS && cuMemAddressFree(va, bytes) == CUDA_SUCCESS ? 0 : 1;
}

// NCCL's ncclMemAlloc and ncclMemFree (src/allocator.cc, NCCL 2.28), in their order: the current device,
// the recommended granularity of exportable device memory, a reservation, a creation, a map and read-write
// access; the free retains the handle behind the pointer and lets go of everything. Exported under NCCL's
// names from every stand-in; the tests call libnccl's.
__attribute__((visibility("default"))) int ncclMemAlloc(void** ptr, size_t size) {
    CUdevice dev = 0;
    if (cuCtxGetDevice(&dev) != CUDA_SUCCESS) return 1;
    CUmemAllocationProp p{};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = dev;
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t gran = 0;
    if (cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) != CUDA_SUCCESS) return 1;
    size = (size + gran - 1) / gran * gran;
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h = 0;
    if (cuMemAddressReserve(&va, size, gran, 0, 0) != CUDA_SUCCESS) return 1;
    if (cuMemCreate(&h, size, &p, 0) != CUDA_SUCCESS) return 1;  // site:standin_nccl_mem_alloc
    if (cuMemMap(va, size, 0, h, 0) != CUDA_SUCCESS) return 1;
    CUmemAccessDesc access{};
    access.location = p.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (cuMemSetAccess(va, size, &access, 1) != CUDA_SUCCESS) return 1;
    *ptr = reinterpret_cast<void*>(va);
    return 0;
}

__attribute__((visibility("default"))) int ncclMemFree(void* ptr) {
    const CUdeviceptr va = reinterpret_cast<CUdeviceptr>(ptr);
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr base = 0;
    size_t size = 0;
    if (cuMemRetainAllocationHandle(&h, ptr) != CUDA_SUCCESS || cuMemRelease(h) != CUDA_SUCCESS) return 1;
    if (cuMemGetAddressRange(&base, &size, va) != CUDA_SUCCESS || cuMemUnmap(base, size) != CUDA_SUCCESS) return 1;
    return cuMemRelease(h) == CUDA_SUCCESS && cuMemAddressFree(base, size) == CUDA_SUCCESS ? 0 : 1;
}

// An allocator that hands the allocation to a function it was given, as PyTorch's MemPool calls the
// pluggable allocator c10d gives it (ncclMemAlloc, for NCCL's user buffers and symmetric memory).
__attribute__((visibility("default"))) void* standin_alloc_through(int (*alloc)(void**, size_t), size_t bytes) {
    void* p = nullptr;
    return alloc(&p, bytes) == 0 ? p : nullptr;  // site:standin_alloc_through
}
}
