// vLLM's sleep-mode allocator (csrc/cumem_allocator.cpp, a PyTorch pluggable allocator linked with -lcuda)
// in the order its calls reach the driver, written anew here. Its error checks keep one global error code
// that only the Python-facing entry points reset, so one refused call makes a later one stop half-way:
//   malloc A, malloc B            granularity → reserve → create → map → set access, each
//   sleep                         unmap → release, each (the reservations stay)
//   free A while asleep           unmap (nothing mapped any more) → release (released already) → address free
//   wake B                        create → (the stale error code) return before mapping: 128 MiB held
// Prints each driver answer of the free and the wake; exits 0 when the sequence ran as vLLM's does.
#include "support/program.hpp"

#include <cuda.h>

#include <cstdio>

namespace {

constexpr size_t kMiB = size_t{1} << 20;
CUresult g_error = CUDA_SUCCESS;  // vLLM's error_code: set by any failed call, reset only by its callers

CUresult checked(CUresult r) {
    if (r != CUDA_SUCCESS) g_error = r;
    return r;
}

const char* name(CUresult r) {
    const char* n = nullptr;
    cuGetErrorName(r, &n);
    return n != nullptr ? n : "?";
}

struct Buffer {
    CUdeviceptr va = 0;
    size_t size = 0;
    CUmemGenericAllocationHandle handle = 0;
};

CUmemAllocationProp props(unsigned handle_types = CU_MEM_HANDLE_TYPE_NONE) {
    return cumemaudit::program::device_prop(0, handle_types);
}

// create_and_map: stops at the first sign of the global error code.
void create_and_map(Buffer& b) {
    CUmemAllocationProp p = props();
    checked(cuMemCreate(&b.handle, b.size, &p, 0));  // site:vllm_create
    if (g_error != CUDA_SUCCESS) return;
    checked(cuMemMap(b.va, b.size, 0, b.handle, 0));
    if (g_error != CUDA_SUCCESS) return;
    CUmemAccessDesc access{};
    access.location = p.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    checked(cuMemSetAccess(b.va, b.size, &access, 1));
}

CUresult g_unmap = CUDA_SUCCESS, g_release = CUDA_SUCCESS;

void unmap_and_release(Buffer& b) {
    g_unmap = checked(cuMemUnmap(b.va, b.size));  // site:vllm_unmap
    if (g_error != CUDA_SUCCESS) return;
    g_release = checked(cuMemRelease(b.handle));  // site:vllm_release
}

Buffer my_malloc(size_t size) {
    CUmemAllocationProp p = props();
    size_t granularity = 0;
    checked(cuMemGetAllocationGranularity(&granularity, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    Buffer b;
    b.size = (size + granularity - 1) / granularity * granularity;
    checked(cuMemAddressReserve(&b.va, b.size, 0, 0, 0));
    create_and_map(b);
    return b;
}

void my_free(Buffer& b) {
    unmap_and_release(b);
    checked(cuMemAddressFree(b.va, b.size));
}

}  // namespace

int main() {
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        std::fprintf(stderr, "vllm_sleep: no device\n");
        return 1;
    }
    size_t free_start = 0, free_end = 0, total = 0;
    cuMemGetInfo(&free_start, &total);
    Buffer a = my_malloc(64 * kMiB), b = my_malloc(128 * kMiB);
    if (g_error != CUDA_SUCCESS) return 1;
    unmap_and_release(a);  // sleep: python_unmap_and_release, which resets the error code after each
    unmap_and_release(b);
    if (g_error != CUDA_SUCCESS) return 1;
    my_free(a);  // the tensor of A is freed while asleep
    std::printf("free while asleep: unmap=%s release=%s\n", name(g_unmap), name(g_release));
    const CUresult stale = g_error;
    create_and_map(b);  // wake: python_create_and_map, error code still set
    CUdeviceptr base = 0;
    size_t mapped = 0;
    const bool b_mapped = cuMemGetAddressRange(&base, &mapped, b.va) == CUDA_SUCCESS;
    cuMemGetInfo(&free_end, &total);
    std::printf("wake: stale=%s mapped=%d held=%zu\n", name(stale), b_mapped ? 1 : 0, free_start - free_end);
    return 0;
}
