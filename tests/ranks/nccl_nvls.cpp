// nccl_nvls: one local rank of NCCL 2.28's NVLS buffer set-up and teardown (src/transport/nvls.cc,
// nvlsAllocateMem and ncclNvlsFree), its driver calls made in NCCL's order through cuGetProcAddress, as
// NCCL's CUPFN table does:
//   granularity of the multicast object (recommended) -> local rank 0 creates it and exports a POSIX fd;
//   the others import that fd -> every rank adds its device -> granularity of the memory -> reserve ->
//   create -> map -> set access -> barrier -> bind the memory to the object -> reserve -> map the object ->
//   set access; and at a clean ncclCommDestroy: unbind -> unmap, free and release the memory -> unmap,
//   free and release the object.
// NCCL's proxy hands the fd to the other ranks over a Unix socket; here they open the creator's fd through
// /proc, which gives the same open pipe. Only the simulated driver runs this: multicast objects must not
// be created on the shared GPU machine.
//   --no-destroy        the process ends without ncclCommDestroy (everything stays mapped)
//   --keep-object R     rank R skips the object's cuMemRelease (the leak a user would look for)
//
//   RANK=r WORLD_SIZE=n LOCAL_RANK=l nccl_nvls --dir DIR [--size-mib M] [--no-destroy] [--keep-object R]
#include "rank_job.hpp"
#include "support/program.hpp"

#include <CLI/CLI.hpp>
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace {

using cumemaudit::program::die;

struct Driver {
    PFN_cuGetErrorName_v6000 error_name;
    PFN_cuInit_v2000 init;
    PFN_cuDevicePrimaryCtxRetain_v7000 ctx_retain;
    PFN_cuCtxSetCurrent_v4000 ctx_set;
    PFN_cuMemGetInfo_v3020 get_info;
    PFN_cuMulticastGetGranularity_v12010 mc_granularity;
    PFN_cuMulticastCreate_v12010 mc_create;
    PFN_cuMulticastAddDevice_v12010 mc_add_device;
    PFN_cuMulticastBindMem_v12010 mc_bind_mem;
    PFN_cuMulticastUnbind_v12010 mc_unbind;
    PFN_cuMemGetAllocationGranularity_v10020 granularity;
    PFN_cuMemCreate_v10020 create;
    PFN_cuMemRelease_v10020 release;
    PFN_cuMemAddressReserve_v10020 reserve;
    PFN_cuMemAddressFree_v10020 address_free;
    PFN_cuMemMap_v10020 map;
    PFN_cuMemUnmap_v10020 unmap;
    PFN_cuMemSetAccess_v10020 set_access;
    PFN_cuMemExportToShareableHandle_v10020 export_handle;
    PFN_cuMemImportFromShareableHandle_v10020 import_handle;
};
Driver d;

template <typename T>
void load(PFN_cuGetProcAddress_v12000 gpa, const char* name, int version, T& out) {
    CUdriverProcAddressQueryResult status{};
    if (gpa(name, reinterpret_cast<void**>(&out), version, 0, &status) != CUDA_SUCCESS || out == nullptr)
        die(std::string("cuGetProcAddress ") + name);
}

void load_all() {
    void* lib = ::dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == nullptr) die("dlopen libcuda.so.1");
    auto gpa = reinterpret_cast<PFN_cuGetProcAddress_v12000>(::dlsym(lib, "cuGetProcAddress_v2"));
    if (gpa == nullptr) die("dlsym cuGetProcAddress_v2");
    load(gpa, "cuGetErrorName", 6000, d.error_name);
    load(gpa, "cuInit", 2000, d.init);
    load(gpa, "cuDevicePrimaryCtxRetain", 7000, d.ctx_retain);
    load(gpa, "cuCtxSetCurrent", 4000, d.ctx_set);
    load(gpa, "cuMemGetInfo", 3020, d.get_info);
    load(gpa, "cuMulticastGetGranularity", 12010, d.mc_granularity);
    load(gpa, "cuMulticastCreate", 12010, d.mc_create);
    load(gpa, "cuMulticastAddDevice", 12010, d.mc_add_device);
    load(gpa, "cuMulticastBindMem", 12010, d.mc_bind_mem);
    load(gpa, "cuMulticastUnbind", 12010, d.mc_unbind);
    load(gpa, "cuMemGetAllocationGranularity", 10020, d.granularity);
    load(gpa, "cuMemCreate", 10020, d.create);
    load(gpa, "cuMemRelease", 10020, d.release);
    load(gpa, "cuMemAddressReserve", 10020, d.reserve);
    load(gpa, "cuMemAddressFree", 10020, d.address_free);
    load(gpa, "cuMemMap", 10020, d.map);
    load(gpa, "cuMemUnmap", 10020, d.unmap);
    load(gpa, "cuMemSetAccess", 10020, d.set_access);
    load(gpa, "cuMemExportToShareableHandle", 10020, d.export_handle);
    load(gpa, "cuMemImportFromShareableHandle", 10020, d.import_handle);
}

void check(CUresult r, const char* what) {
    if (r == CUDA_SUCCESS) return;
    const char* name = nullptr;
    d.error_name(r, &name);
    die(std::string(what) + " failed: " + (name ? name : std::to_string(r)));
}

using rank_job::barrier;
using rank_job::Job;

std::size_t align_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

struct Nvls {
    CUmemGenericAllocationHandle uc = 0, mc = 0;
    CUdeviceptr ucptr = 0, mcptr = 0;
    std::size_t ucsize = 0, mcsize = 0;
};

// ncclNvlsGroupCreate on local rank 0, ncclNvlsGroupConnect on the others.
// The creator's exported fd, closed once every rank imported it (NCCL's proxy closes its copy once sent).
int g_exported_fd = -1;

__attribute__((noinline)) CUmemGenericAllocationHandle create_group(const Job& j, const CUmulticastObjectProp& prop) {
    CUmemGenericAllocationHandle mc = 0;
    const std::string path = j.dir + "/mc.fd";
    if (j.local == 0) {
        check(d.mc_create(&mc, &prop), "cuMulticastCreate");  // site:nvls_create
        int fd = -1;
        check(d.export_handle(&fd, mc, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), "cuMemExportToShareableHandle");
        std::ofstream(path + ".tmp") << ::getpid() << " " << fd << "\n";
        std::rename((path + ".tmp").c_str(), path.c_str());
        g_exported_fd = fd;
        return mc;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    while (::access(path.c_str(), F_OK) != 0) {
        if (std::chrono::steady_clock::now() > deadline) die("local rank 0 never exported the multicast object");
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    long pid = 0;
    int theirs = -1;
    std::ifstream(path) >> pid >> theirs;
    const std::string proc = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(theirs);
    const int fd = ::open(proc.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) die("cannot open " + proc);
    void* os_handle = reinterpret_cast<void*>(static_cast<std::intptr_t>(fd));
    const CUresult r = d.import_handle(&mc, os_handle, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);  // site:nvls_import
    check(r, "cuMemImportFromShareableHandle");
    ::close(fd);
    return mc;
}

// nvlsAllocateMem.
Nvls allocate(const Job& j, std::size_t size) {
    Nvls n;
    CUmulticastObjectProp mcprop{};
    mcprop.numDevices = static_cast<unsigned>(j.world);
    mcprop.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    mcprop.size = size;
    std::size_t mcgran = 0, ucgran = 0;
    check(d.mc_granularity(&mcgran, &mcprop, CU_MULTICAST_GRANULARITY_RECOMMENDED), "cuMulticastGetGranularity");
    n.mcsize = align_up(size, mcgran);
    mcprop.size = n.mcsize;
    n.mc = create_group(j, mcprop);
    check(d.mc_add_device(n.mc, j.local), "cuMulticastAddDevice");

    CUmemAllocationProp ucprop{};
    ucprop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    ucprop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ucprop.location.id = j.local;
    ucprop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    check(d.granularity(&ucgran, &ucprop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity");
    n.ucsize = align_up(size, ucgran);
    check(d.reserve(&n.ucptr, n.ucsize, ucgran, 0, 0), "cuMemAddressReserve");
    check(d.create(&n.uc, n.ucsize, &ucprop, 0), "cuMemCreate");  // site:nvls_uc_create
    check(d.map(n.ucptr, n.ucsize, 0, n.uc, 0), "cuMemMap");
    CUmemAccessDesc desc{};
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.location.id = j.local;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    check(d.set_access(n.ucptr, n.ucsize, &desc, 1), "cuMemSetAccess");
    barrier(j, "before-bind");  // every rank imported the object by now
    if (g_exported_fd >= 0) ::close(g_exported_fd);
    check(d.mc_bind_mem(n.mc, 0, n.uc, 0, n.ucsize, 0), "cuMulticastBindMem");
    check(d.reserve(&n.mcptr, n.mcsize, mcgran, 0, 0), "cuMemAddressReserve (multicast)");
    check(d.map(n.mcptr, n.mcsize, 0, n.mc, 0), "cuMemMap (multicast)");
    check(d.set_access(n.mcptr, n.mcsize, &desc, 1), "cuMemSetAccess (multicast)");
    return n;
}

// ncclNvlsFree: nvlsGroupUnbind, then nvlsGroupUnmapMem.
void free_nvls(const Job& j, const Nvls& n, bool keep_object) {
    check(d.mc_unbind(n.mc, j.local, 0, n.ucsize), "cuMulticastUnbind");
    check(d.unmap(n.ucptr, n.ucsize), "cuMemUnmap");
    check(d.address_free(n.ucptr, n.ucsize), "cuMemAddressFree");
    check(d.release(n.uc), "cuMemRelease");
    check(d.unmap(n.mcptr, n.mcsize), "cuMemUnmap (multicast)");
    check(d.address_free(n.mcptr, n.mcsize), "cuMemAddressFree (multicast)");
    if (!keep_object) check(d.release(n.mc), "cuMemRelease (multicast)");
}

long long free_here() {
    std::size_t f = 0, t = 0;
    check(d.get_info(&f, &t), "cuMemGetInfo");
    return static_cast<long long>(f);
}

}  // namespace

int main(int argc, char** argv) {
    Job job = rank_job::from_environment();
    std::size_t size_mib = 6;
    bool no_destroy = false;
    int keep_object = -1;
    CLI::App app{"One local rank of NCCL's NVLS buffer set-up and teardown", "nccl_nvls"};
    app.add_option("--dir", job.dir, "exchange directory shared by the ranks")->required();
    app.add_option("--size-mib", size_mib, "NVLS buffer size before alignment, in MiB")->check(CLI::Range(1, 1 << 16));
    app.add_flag("--no-destroy", no_destroy, "end without tearing down");
    app.add_option("--keep-object", keep_object, "this rank skips the object's release");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    load_all();
    check(d.init(0), "cuInit");
    CUcontext ctx = nullptr;
    check(d.ctx_retain(&ctx, job.local), "cuDevicePrimaryCtxRetain");
    check(d.ctx_set(ctx), "cuCtxSetCurrent");

    barrier(job, "start");
    const long long before = free_here();
    const Nvls n = allocate(job, size_mib << 20);
    barrier(job, "set-up");
    std::printf("rank %d: uc %zu MiB, mc %zu MiB, used %lld MiB\n", job.rank, n.ucsize >> 20, n.mcsize >> 20,
                (before - free_here()) >> 20);
    if (no_destroy) return 0;
    free_nvls(job, n, keep_object == job.rank);
    barrier(job, "torn-down");
    std::printf("rank %d: drop=%lld\n", job.rank, before - free_here());
    return 0;
}
