// deepep_ranks: one rank of the DeepEP growth sequence on a (simulated) node, with fabric handles exchanged
// between ranks. Each rank allocates its buffer, exports it, writes the 64-byte handle to a file in a shared
// directory, imports and maps every peer's, and grows the buffer --growths times (release_buffer, then
// allocate_buffer) the way DeepEP does, which leaves the creation, retain and import references behind
// (docs/DRIVER.md, "The allocators the scenarios model"); --fixed adds the three missing releases.
// Rank 0 sums cuMemGetInfo over the node's devices before the first allocation and after every rank tore
// down (all ranks still alive, so nothing was dropped by an exit) and prints "node_drop=<bytes>".
// --hang-rank R: rank R stops after the last barrier and prints "hanging" (a test kills it there).
//
//   RANK=r WORLD_SIZE=n LOCAL_RANK=l deepep_ranks --dir DIR [--growths N] [--size-mib M] [--fixed] [--hang-rank R]
#include "rank_job.hpp"
#include "support/program.hpp"

#include <CLI/CLI.hpp>
#include <cuda.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using cumemaudit::program::die;

void check(CUresult r, const char* what) {
    if (r == CUDA_SUCCESS) return;
    const char* name = nullptr;
    cuGetErrorName(r, &name);
    die(std::string(what) + " failed: " + (name ? name : std::to_string(r)));
}

using rank_job::barrier;
using rank_job::Job;

std::string blob_path(const Job& j, int generation, int rank) {
    return j.dir + "/h." + std::to_string(generation) + "." + std::to_string(rank);
}

void write_blob(const std::string& path, const CUmemFabricHandle& h) {
    const std::string tmp = path + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr || std::fwrite(h.data, 1, sizeof h.data, f) != sizeof h.data || std::fclose(f) != 0 ||
        std::rename(tmp.c_str(), path.c_str()) != 0)
        die("cannot write " + path);
}

CUmemFabricHandle read_blob(const std::string& path) {
    CUmemFabricHandle h{};
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr || std::fread(h.data, 1, sizeof h.data, f) != sizeof h.data) die("cannot read " + path);
    std::fclose(f);
    return h;
}

// DeepEP's fabric allocator reduced to its driver calls (examples/deepep_fabric_leak.cpp has the same
// sequence for one process). The three leaking calls sit in non-inlined functions so sites name them.
class FabricAllocator {
public:
    FabricAllocator(int device, bool fixed) : device_(device), fixed_(fixed) {}

    __attribute__((noinline)) CUdeviceptr allocate(std::size_t size) {
        const CUmemAllocationProp p = prop();
        CUmemGenericAllocationHandle handle = 0;
        CUresult r = cuMemCreate(&handle, size, &p, 0);  // site:create
        check(r, "cuMemCreate");
        const CUdeviceptr ptr = map_new(handle, size);
        if (fixed_) check(cuMemRelease(handle), "cuMemRelease (after map)");
        return ptr;
    }

    __attribute__((noinline)) CUmemFabricHandle get_handle(CUdeviceptr ptr) {
        CUmemGenericAllocationHandle handle = 0;
        CUresult r = cuMemRetainAllocationHandle(&handle, reinterpret_cast<void*>(ptr));  // site:retain
        check(r, "cuMemRetainAllocationHandle");
        CUmemFabricHandle blob{};
        check(cuMemExportToShareableHandle(&blob, handle, CU_MEM_HANDLE_TYPE_FABRIC, 0), "cuMemExportToShareableHandle");
        if (fixed_) check(cuMemRelease(handle), "cuMemRelease (after export)");
        return blob;
    }

    __attribute__((noinline)) CUdeviceptr open_handle(CUmemFabricHandle& blob, std::size_t size) {
        CUmemGenericAllocationHandle handle = 0;
        CUresult r = cuMemImportFromShareableHandle(&handle, &blob, CU_MEM_HANDLE_TYPE_FABRIC);  // site:import
        check(r, "cuMemImportFromShareableHandle");
        const CUdeviceptr ptr = map_new(handle, size);
        if (fixed_) check(cuMemRelease(handle), "cuMemRelease (after import)");
        return ptr;
    }

    // retain -> unmap -> address free -> release (its own retain only), as DeepEP frees.
    void free(CUdeviceptr ptr, std::size_t size) {
        CUmemGenericAllocationHandle handle = 0;
        check(cuMemRetainAllocationHandle(&handle, reinterpret_cast<void*>(ptr)), "cuMemRetainAllocationHandle");
        check(cuMemUnmap(ptr, size), "cuMemUnmap");
        check(cuMemAddressFree(ptr, size), "cuMemAddressFree");
        check(cuMemRelease(handle), "cuMemRelease");
    }

    void close_handle(CUdeviceptr ptr, std::size_t size) {
        check(cuMemUnmap(ptr, size), "cuMemUnmap");
        check(cuMemAddressFree(ptr, size), "cuMemAddressFree");
    }

private:
    CUmemAllocationProp prop() const { return cumemaudit::program::device_prop(device_, CU_MEM_HANDLE_TYPE_FABRIC); }

    CUdeviceptr map_new(CUmemGenericAllocationHandle handle, std::size_t size) {
        CUdeviceptr ptr = 0;
        check(cuMemAddressReserve(&ptr, size, 0, 0, 0), "cuMemAddressReserve");
        check(cuMemMap(ptr, size, 0, handle, 0), "cuMemMap");
        const CUmemAccessDesc access = cumemaudit::program::read_write(device_);
        check(cuMemSetAccess(ptr, size, &access, 1), "cuMemSetAccess");
        return ptr;
    }

    int device_;
    bool fixed_;
};

// Free memory summed over every device of the node (switches the current context; restores it).
long long node_free() {
    int count = 0;
    check(cuDeviceGetCount(&count), "cuDeviceGetCount");
    CUcontext saved = nullptr;
    check(cuCtxGetCurrent(&saved), "cuCtxGetCurrent");
    long long sum = 0;
    for (int d = 0; d < count; ++d) {
        CUcontext ctx = nullptr;
        check(cuDevicePrimaryCtxRetain(&ctx, d), "cuDevicePrimaryCtxRetain");
        check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
        std::size_t f = 0, t = 0;
        check(cuMemGetInfo(&f, &t), "cuMemGetInfo");
        sum += static_cast<long long>(f);
        check(cuDevicePrimaryCtxRelease(d), "cuDevicePrimaryCtxRelease");
    }
    check(cuCtxSetCurrent(saved), "cuCtxSetCurrent");
    return sum;
}

}  // namespace

int main(int argc, char** argv) {
    Job job = rank_job::from_environment();
    int growths = 3, hang_rank = -1;
    std::size_t size_mib = 2;
    bool fixed = false;
    CLI::App app{"One rank of the DeepEP growth sequence on a simulated node", "deepep_ranks"};
    app.add_option("--dir", job.dir, "exchange directory shared by the ranks")->required();
    app.add_option("--growths", growths, "buffer growths")->check(CLI::Range(1, 1 << 20));
    app.add_option("--size-mib", size_mib, "bytes of the first buffer, in MiB")->check(CLI::Range(1, 1 << 20));
    app.add_flag("--fixed", fixed, "release every reference");
    app.add_option("--hang-rank", hang_rank, "this rank stops before finishing (to be killed)");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }

    check(cuInit(0), "cuInit");
    CUcontext ctx = nullptr;
    check(cuDevicePrimaryCtxRetain(&ctx, job.local), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    FabricAllocator alloc(job.local, fixed);

    barrier(job, "start");
    const long long start_free = job.rank == 0 ? node_free() : 0;
    barrier(job, "measured-start");

    CUdeviceptr local = 0;
    std::size_t size = 0;
    std::vector<CUdeviceptr> peers(static_cast<std::size_t>(job.world), 0);
    auto release_buffer = [&] {
        alloc.free(local, size);
        for (int p = 0; p < job.world; ++p)
            if (p != job.rank) alloc.close_handle(peers[static_cast<std::size_t>(p)], size);
    };
    for (int g = 0; g < growths; ++g) {
        if (local != 0) release_buffer();  // update_buffer on a new high: release, then allocate
        size = size_mib * (std::size_t{1} << 20) * static_cast<std::size_t>(g + 1);
        local = alloc.allocate(size);
        write_blob(blob_path(job, g, job.rank), alloc.get_handle(local));
        barrier(job, "exported." + std::to_string(g));
        for (int p = 0; p < job.world; ++p) {
            if (p == job.rank) continue;
            CUmemFabricHandle blob = read_blob(blob_path(job, g, p));
            peers[static_cast<std::size_t>(p)] = alloc.open_handle(blob, size);
        }
        barrier(job, "imported." + std::to_string(g));
        std::printf("rank %d: generation %d: %zu MiB buffer, %d peers mapped\n", job.rank, g, size >> 20, job.world - 1);
    }
    release_buffer();
    barrier(job, "torn-down");
    if (job.rank == 0) std::printf("node_drop=%lld\n", start_free - node_free());
    barrier(job, "measured-end");
    if (job.rank == hang_rank) {
        std::printf("hanging\n");
        std::fflush(stdout);
        for (;;) ::pause();
    }
    std::fflush(stdout);
    return 0;
}
