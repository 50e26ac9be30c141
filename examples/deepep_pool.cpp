// deepep_pool: the DeepEP/HybridEP allocator sequence of deepep_fabric_leak.cpp ported onto the pool
// (include/cumemaudit/fabric_pool.hpp). The buffer grows over several steps, each a new tokens-per-rank
// high; on each, the new bytes are created and mapped at the end of the buffer's one reservation, exported,
// and imported and mapped by the peer (this same process, opening its own handles). Nothing is released
// and re-allocated, and every reference belongs to one object, so at the end cuMemGetInfo's free figure
// is back where it started: drop=0, on the simulated driver and on a GPU alike.
//
//   deepep_pool [--steps N] [--size-mib M] [--handle fabric|posix] [--va-gib G] [--expect-drop BYTES]
#include "cumemaudit/fabric_pool.hpp"

#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

namespace pool = cumemaudit::pool;

[[noreturn]] void die(const std::string& what) {
    std::fprintf(stderr, "deepep_pool: %s\n", what.c_str());
    std::exit(2);
}

struct Options {
    int steps = 3;
    std::size_t size_mib = 64;
    pool::HandleKind handle = pool::HandleKind::fabric;
    std::size_t va_gib = 64;
    long long expect_drop = 0;
};

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) die("missing value after " + a);
            return argv[++i];
        };
        if (a == "--steps") o.steps = std::atoi(value().c_str());
        else if (a == "--size-mib") o.size_mib = std::strtoull(value().c_str(), nullptr, 10);
        else if (a == "--va-gib") o.va_gib = std::strtoull(value().c_str(), nullptr, 10);
        else if (a == "--expect-drop") o.expect_drop = std::atoll(value().c_str());
        else if (a == "--handle") {
            const std::string h = value();
            if (h == "fabric") o.handle = pool::HandleKind::fabric;
            else if (h == "posix") o.handle = pool::HandleKind::posix_fd;
            else die("--handle takes fabric or posix, not '" + h + "'");
        } else {
            die("unknown option '" + a + "' (see the comment at the top of deepep_pool.cpp)");
        }
    }
    if (o.steps < 1 || o.size_mib < 1 || o.va_gib < 1) die("--steps, --size-mib and --va-gib must be at least 1");
    return o;
}

std::size_t free_now() {
    std::size_t f = 0, t = 0;
    if (cuMemGetInfo(&f, &t) != CUDA_SUCCESS) die("cuMemGetInfo failed");
    return f;
}

void run(const Options& o) {
    pool::PoolOptions po;
    po.kind = o.handle;
    po.va_capacity = o.va_gib << 30;
    pool::FabricPool fabric(po);
    const std::size_t total = o.size_mib << 20;  // step s wants (s + 1) * total, like deepep_fabric_leak
    pool::SymmetricBuffer sym(fabric, total, /*peers=*/1);
    const CUdeviceptr base = sym.local().ptr();
    for (int step = 0; step < o.steps; ++step) {
        sym.grow_to(total * static_cast<std::size_t>(step + 1));  // a new high: map only the new bytes
        std::vector<pool::ExportedHandle> handles = sym.export_new();  // what would go to every peer
        sym.open_peer(0, handles);  // the peer (this process) imports and maps them after its earlier ones
        if (sym.local().ptr() != base) die("the buffer moved");
        std::printf("step %d: buffer grows to %zu MiB in place: %zu new chunk(s) exported and opened by the peer; "
                    "free now %zu MiB\n", step, sym.local().size() >> 20, handles.size(), free_now() >> 20);
    }  // each step's exported handles are closed at the end of its iteration, as a peer does once imported
    sym.close();
    const std::size_t trimmed = fabric.trim();
    const pool::PoolStats s = fabric.stats();
    std::printf("teardown: peer views unmapped and imports released, buffer returned to the pool, trim released "
                "%zu MiB (peak %zu MiB)\n", trimmed >> 20, s.peak_bytes >> 20);
    std::printf("driver calls:");
    for (std::size_t i = 0; i < pool::kApiCount; ++i)
        std::printf(" %s=%llu", pool::api_name(static_cast<pool::Api>(i)), static_cast<unsigned long long>(s.calls.n[i]));
    std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    CUdevice dev = 0;
    CUcontext ctx = nullptr;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        die("no device 0 context");
    std::printf("DeepEP fabric allocator on the pool: %d steps, %s handles\n", o.steps,
                o.handle == pool::HandleKind::fabric ? "fabric" : "posix");
    const std::size_t start_free = free_now();
    try {
        run(o);
    } catch (const pool::PoolError& e) {
        die(e.what());
    }
    const std::size_t end_free = free_now();
    const long long drop = static_cast<long long>(start_free) - static_cast<long long>(end_free);
    std::printf("cuMemGetInfo: start_free=%zu end_free=%zu drop=%lld\n", start_free, end_free, drop);
    if (drop != o.expect_drop) {
        std::fprintf(stderr, "deepep_pool: expected a drop of %lld bytes, got %lld\n", o.expect_drop, drop);
        return 1;
    }
    return 0;
}
