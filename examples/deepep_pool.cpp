// deepep_pool: the DeepEP/HybridEP allocator sequence of deepep_fabric_leak.cpp ported onto the pool
// (include/cumemaudit/fabric_pool.hpp). The buffer grows over several steps, each a new tokens-per-rank
// high; on each, the new bytes are created and mapped at the end of the buffer's one reservation, exported,
// and imported and mapped by the peer (this same process, opening its own handles). Nothing is released
// and re-allocated, and every reference belongs to one object, so at the end cuMemGetInfo's free figure
// is back where it started: drop=0, on the simulated driver and on a GPU alike.
//
// --adapter runs DeepEP's own sequence instead (free and close_handle the old buffer set, then allocate,
// get_handle, open_handle a larger one) through PoolFabricAllocator (include/cumemaudit/deepep_adapter.hpp),
// the one-line switch for code written against DeepEP's allocator: the same drop=0.
//
//   deepep_pool [--steps N] [--size-mib M] [--handle fabric|posix] [--va-gib G] [--adapter] [--expect-drop BYTES]
#include "cumemaudit/deepep_adapter.hpp"
#include "cumemaudit/fabric_pool.hpp"

#include "example_args.hpp"

#include <CLI/CLI.hpp>
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

namespace pool = cumemaudit::pool;

using cumemaudit::example::die;

struct Options {
    int steps = 3;
    std::size_t size_mib = 64;
    pool::HandleKind handle = pool::HandleKind::fabric;
    std::size_t va_gib = 64;
    long long expect_drop = 0;
    bool adapter = false;
};

Options parse(int argc, char** argv) {
    Options o;
    CLI::App app{"The DeepEP allocator sequence on the pooled allocator (see the comment at the top)", "deepep_pool"};
    const std::map<std::string, pool::HandleKind> handles{{"fabric", pool::HandleKind::fabric},
                                                           {"posix", pool::HandleKind::posix_fd}};
    app.add_option("--steps", o.steps, "growth steps")->check(CLI::Range(1, 1 << 20));
    app.add_option("--size-mib", o.size_mib, "bytes of the first buffer, in MiB")->check(CLI::Range(1, 1 << 20));
    app.add_option("--va-gib", o.va_gib, "the buffer's one reservation, in GiB")->check(CLI::Range(1, 1 << 20));
    app.add_option("--expect-drop", o.expect_drop, "exit 1 unless free memory drops by exactly this");
    app.add_flag("--adapter", o.adapter, "DeepEP's release-and-reallocate sequence through PoolFabricAllocator");
    app.add_option("--handle", o.handle, "fabric or posix")->transform(CLI::CheckedTransformer(handles));
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        std::exit(app.exit(e) == 0 ? 0 : 2);
    }
    return o;
}

std::size_t free_now() {
    std::size_t f = 0, t = 0;
    if (cuMemGetInfo(&f, &t) != CUDA_SUCCESS) die("cuMemGetInfo failed");
    return f;
}

void print_calls(const pool::PoolStats& s) {
    std::printf("driver calls:");
    for (std::size_t i = 0; i < pool::kApiCount; ++i)
        std::printf(" %s=%llu", pool::api_name(static_cast<pool::Api>(i)), static_cast<unsigned long long>(s.calls.n[i]));
    std::printf("\n");
}

// DeepEP's update_buffer on each new high, method for method, on the adapter.
void run_adapter(const Options& o, pool::FabricPool& fabric) {
    pool::PoolFabricAllocator alloc(fabric);
    void* local = nullptr;
    void* peer = nullptr;
    for (int step = 0; step < o.steps; ++step) {
        if (local != nullptr) {
            alloc.free(local);
            alloc.close_handle(peer);
        }
        local = alloc.allocate((o.size_mib << 20) * static_cast<std::size_t>(step + 1));
        peer = alloc.open_handle(alloc.get_handle(local));  // the handles are closed once imported
        std::printf("step %d: allocate, get_handle, open_handle of %zu MiB through the adapter; free now %zu MiB\n",
                    step, (o.size_mib * static_cast<std::size_t>(step + 1)), free_now() >> 20);
    }
    alloc.free(local);
    alloc.close_handle(peer);
}

void run(const Options& o) {
    pool::PoolOptions po;
    po.kind = o.handle;
    po.va_capacity = o.va_gib << 30;
    pool::FabricPool fabric(po);
    if (o.adapter) {
        run_adapter(o, fabric);
        const std::size_t trimmed = fabric.trim();
        std::printf("teardown: free + close_handle of the last set, trim released %zu MiB (peak %zu MiB)\n",
                    trimmed >> 20, fabric.stats().peak_bytes >> 20);
        print_calls(fabric.stats());
        return;
    }
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
    print_calls(s);
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
