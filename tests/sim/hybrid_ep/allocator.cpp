// HybridEP's fabric allocator (DeepEP's hybrid-ep branch, csrc/hybrid_ep/allocator/allocator.cu: the
// ExtendedMemoryAllocator, linked with -lcuda) in the order its methods reach the driver, written anew
// here. Built as hybrid_ep_cpp.cpython-312-x86_64-linux-gnu.so, the real module's name, so the owner rules
// see what they see in a real job. `fixed` adds the releases the fix adds (after map, after export).
//   construct     granularity(MINIMUM) → a 128-byte test create + release → allocate + get_handle of
//                 a test buffer
//   allocate      create → reserve → map → set access                       (creation reference kept)
//   get_handle    address range → retain → export                           (retained reference kept)
//   free          retain → address range → unmap → address free → release   (its own retain released)
#include "hybrid_ep.hpp"

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace {

void check(CUresult r, const char* what) {
    if (r == CUDA_SUCCESS) return;
    const char* name = nullptr;
    cuGetErrorName(r, &name);
    std::fprintf(stderr, "hybrid_ep: %s failed: %s\n", what, name != nullptr ? name : "?");
    std::exit(3);
}

size_t align_up(size_t raw, size_t granularity) {
    const size_t size = (raw + granularity - 1) & ~(granularity - 1);
    return size == 0 ? granularity : size;
}

}  // namespace

HybridAllocator::HybridAllocator(CUmemAllocationHandleType type, bool fixed) : type_(type), fixed_(fixed) {
    CUdevice dev = 0;
    check(cuCtxGetDevice(&dev), "cuCtxGetDevice");
    prop_.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop_.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop_.location.id = dev;
    prop_.requestedHandleTypes = type_;
    check(cuMemGetAllocationGranularity(&granularity_, &prop_, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "granularity");
    access_.location = prop_.location;
    access_.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUmemGenericAllocationHandle probe = 0;  // "can fabric be used at all": create and release at once
    check(cuMemCreate(&probe, align_up(128, granularity_), &prop_, 0), "cuMemCreate (probe)");
    check(cuMemRelease(probe), "cuMemRelease (probe)");
    test_memory_ = allocate(128 * sizeof(int));
    test_handle_ = get_handle(test_memory_);
}

HybridAllocator::~HybridAllocator() { free(test_memory_); }

CUdeviceptr HybridAllocator::allocate(size_t raw) {
    const size_t size = align_up(raw, granularity_);
    CUmemGenericAllocationHandle handle = 0;
    check(cuMemCreate(&handle, size, &prop_, 0), "cuMemCreate");  // site:hep_create
    CUdeviceptr ptr = 0;
    check(cuMemAddressReserve(&ptr, size, granularity_, 0, 0), "cuMemAddressReserve");
    check(cuMemMap(ptr, size, 0, handle, 0), "cuMemMap");
    check(cuMemSetAccess(ptr, size, &access_, 1), "cuMemSetAccess");
    if (fixed_) check(cuMemRelease(handle), "cuMemRelease (after map)");
    return ptr;
}

void HybridAllocator::free(CUdeviceptr ptr) {
    if (ptr == 0) return;
    CUmemGenericAllocationHandle handle = 0;
    check(cuMemRetainAllocationHandle(&handle, reinterpret_cast<void*>(ptr)), "cuMemRetainAllocationHandle (free)");
    size_t size = 0;
    check(cuMemGetAddressRange(nullptr, &size, ptr), "cuMemGetAddressRange");
    check(cuMemUnmap(ptr, size), "cuMemUnmap");
    check(cuMemAddressFree(ptr, size), "cuMemAddressFree");
    check(cuMemRelease(handle), "cuMemRelease (free)");  // after the range free: must never be reclaimed
}

Shareable HybridAllocator::get_handle(CUdeviceptr ptr) {
    Shareable s{};
    check(cuMemGetAddressRange(nullptr, &s.size, ptr), "cuMemGetAddressRange");
    CUmemGenericAllocationHandle handle = 0;
    check(cuMemRetainAllocationHandle(&handle, reinterpret_cast<void*>(ptr)), "cuMemRetainAllocationHandle");  // site:hep_retain
    void* out = type_ == CU_MEM_HANDLE_TYPE_FABRIC ? static_cast<void*>(&s.fabric) : static_cast<void*>(&s.fd);
    check(cuMemExportToShareableHandle(out, handle, type_, 0), "cuMemExportToShareableHandle");
    if (fixed_) check(cuMemRelease(handle), "cuMemRelease (after export)");
    return s;
}

void HybridAllocator::close_export(Shareable& s) {
    // A POSIX fd pins the memory until closed; HybridEP's fabric handles have none. Closing it keeps the
    // figures the same for both handle types (the GPU run uses POSIX fds: no IMEX channel there).
    if (type_ == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR && s.fd >= 0) close(s.fd);
    s.fd = -1;
}
