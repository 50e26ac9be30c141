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
}
