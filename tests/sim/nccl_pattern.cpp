// nccl_pattern: NCCL 2.28's cuMem path (docs/DRIVER.md): entry points through cuGetProcAddress, buffers
// allocated as granularity -> create -> reserve -> map -> set access keeping the creation reference,
// freed as retain -> release -> get address range -> unmap -> release -> address free, and peer buffers
// imported (import -> map -> release at once). Balanced: free memory must come back to where it started.
#include "scenario.hpp"
#include "support/program.hpp"

#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

using scenario::expect_eq;
using scenario::ok;

namespace {

struct Nccl {
    PFN_cuInit_v2000 init;
    PFN_cuDeviceGet_v2000 device_get;
    PFN_cuDevicePrimaryCtxRetain_v7000 ctx_retain;
    PFN_cuCtxSetCurrent_v4000 ctx_set;
    PFN_cuMemGetInfo_v3020 get_info;
    PFN_cuMemGetAllocationGranularity_v10020 granularity;
    PFN_cuMemCreate_v10020 create;
    PFN_cuMemRelease_v10020 release;
    PFN_cuMemAddressReserve_v10020 reserve;
    PFN_cuMemAddressFree_v10020 address_free;
    PFN_cuMemMap_v10020 map;
    PFN_cuMemUnmap_v10020 unmap;
    PFN_cuMemSetAccess_v10020 set_access;
    PFN_cuMemRetainAllocationHandle_v11000 retain;
    PFN_cuMemGetAddressRange_v3020 address_range;
    PFN_cuMemExportToShareableHandle_v10020 export_handle;
    PFN_cuMemImportFromShareableHandle_v10020 import_handle;
};

template <typename T>
void load(PFN_cuGetProcAddress_v12000 gpa, const char* name, int version, T& out) {
    CUdriverProcAddressQueryResult st{};
    ok(gpa(name, reinterpret_cast<void**>(&out), version, 0, &st), name);
}

Nccl load_all() {
    void* lib = ::dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == nullptr) scenario::fail("dlopen libcuda.so.1");
    auto gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(::dlsym(lib, "cuGetProcAddress_v2"));
    if (gpa == nullptr) scenario::fail("dlsym cuGetProcAddress_v2");
    Nccl n{};
    load(gpa, "cuInit", 2000, n.init);
    load(gpa, "cuDeviceGet", 2000, n.device_get);
    load(gpa, "cuDevicePrimaryCtxRetain", 7000, n.ctx_retain);
    load(gpa, "cuCtxSetCurrent", 4000, n.ctx_set);
    load(gpa, "cuMemGetInfo", 3020, n.get_info);
    load(gpa, "cuMemGetAllocationGranularity", 10020, n.granularity);
    load(gpa, "cuMemCreate", 10020, n.create);
    load(gpa, "cuMemRelease", 10020, n.release);
    load(gpa, "cuMemAddressReserve", 10020, n.reserve);
    load(gpa, "cuMemAddressFree", 10020, n.address_free);
    load(gpa, "cuMemMap", 10020, n.map);
    load(gpa, "cuMemUnmap", 10020, n.unmap);
    load(gpa, "cuMemSetAccess", 10020, n.set_access);
    load(gpa, "cuMemRetainAllocationHandle", 11000, n.retain);
    load(gpa, "cuMemGetAddressRange", 3020, n.address_range);
    load(gpa, "cuMemExportToShareableHandle", 10020, n.export_handle);
    load(gpa, "cuMemImportFromShareableHandle", 10020, n.import_handle);
    return n;
}

CUmemAllocationProp prop() { return cumemaudit::program::device_prop(0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR); }

CUdeviceptr map_and_access(const Nccl& n, CUmemGenericAllocationHandle h, std::size_t size) {
    CUdeviceptr ptr = 0;
    ok(n.reserve(&ptr, size, 0, 0, 0), "cuMemAddressReserve");
    ok(n.map(ptr, size, 0, h, 0), "cuMemMap");
    const CUmemAccessDesc a = cumemaudit::program::read_write(0);
    ok(n.set_access(ptr, size, &a, 1), "cuMemSetAccess");
    return ptr;
}

// ncclCuMemAlloc: keeps the creation reference.
CUdeviceptr nccl_alloc(const Nccl& n, std::size_t size, std::size_t gran) {
    size = (size + gran - 1) / gran * gran;
    const CUmemAllocationProp p = prop();
    CUmemGenericAllocationHandle h = 0;
    ok(n.create(&h, size, &p, 0), "cuMemCreate");
    return map_and_access(n, h, size);
}

// ncclCuMemFree: the retained handle names the allocation; two releases drop retain and creation (or import).
void nccl_free(const Nccl& n, CUdeviceptr ptr) {
    CUmemGenericAllocationHandle h = 0;
    ok(n.retain(&h, reinterpret_cast<void*>(ptr)), "cuMemRetainAllocationHandle");
    ok(n.release(h), "cuMemRelease (retain)");
    CUdeviceptr base = 0;
    std::size_t size = 0;
    ok(n.address_range(&base, &size, ptr), "cuMemGetAddressRange");
    ok(n.unmap(base, size), "cuMemUnmap");
    ok(n.release(h), "cuMemRelease (creation)");
    ok(n.address_free(base, size), "cuMemAddressFree");
}

}  // namespace

int main() {
    scenario::g_program = "nccl_pattern";
    const Nccl n = load_all();
    ok(n.init(0), "cuInit");
    CUdevice dev = 0;
    CUcontext ctx = nullptr;
    ok(n.device_get(&dev, 0), "cuDeviceGet");
    ok(n.ctx_retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    ok(n.ctx_set(ctx), "cuCtxSetCurrent");
    auto free_now = [&] {
        std::size_t f = 0, t = 0;
        ok(n.get_info(&f, &t), "cuMemGetInfo");
        return static_cast<long long>(f);
    };
    const CUmemAllocationProp p = prop();
    std::size_t gran = 0;
    ok(n.granularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity");
    expect_eq(static_cast<long long>(gran), 2 << 20, "granularity");

    const long long start = free_now();
    // Buffers of a communicator: sizes NCCL rounds up to the granularity (1 MiB -> 2 MiB).
    const std::size_t sizes[] = {1 << 20, 4 << 20, 6 << 20, 32 << 20, 2 << 20};
    std::vector<CUdeviceptr> bufs;
    for (std::size_t s : sizes) bufs.push_back(nccl_alloc(n, s, gran));
    const long long held = (2 + 4 + 6 + 32 + 2) << 20;
    expect_eq(start - free_now(), held, "free drop after allocating the buffers");

    // A peer's buffer through a POSIX fd (here: our own first buffer): import -> map -> release at once.
    CUmemGenericAllocationHandle mine = 0;
    ok(n.retain(&mine, reinterpret_cast<void*>(bufs[0])), "cuMemRetainAllocationHandle (export)");
    int fd = -1;
    ok(n.export_handle(&fd, mine, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "cuMemExportToShareableHandle");
    ok(n.release(mine), "cuMemRelease (export retain)");
    CUmemGenericAllocationHandle imported = 0;
    ok(n.import_handle(&imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), "cuMemImportFromShareableHandle");
    ::close(fd);
    const CUdeviceptr peer = map_and_access(n, imported, 2 << 20);
    ok(n.release(imported), "cuMemRelease (import)");
    expect_eq(start - free_now(), held, "free drop with the peer buffer mapped (same allocation)");

    // Unmapping the peer view: the mapping was its only hold on the import.
    CUdeviceptr base = 0;
    std::size_t size = 0;
    ok(n.address_range(&base, &size, peer), "cuMemGetAddressRange (peer)");
    ok(n.unmap(base, size), "cuMemUnmap (peer)");
    ok(n.address_free(base, size), "cuMemAddressFree (peer)");

    for (CUdeviceptr b : bufs) nccl_free(n, b);
    expect_eq(free_now(), start, "free memory after every buffer is freed");
    std::printf("nccl_pattern: %zu buffers and one peer import allocated and freed; free back to %lld bytes\n",
                bufs.size(), start);
    return 0;
}
