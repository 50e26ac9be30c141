// bench_pool_growth: DeepEP's buffer growth two ways, side by side. "pool" grows one SymmetricBuffer in
// place (new chunks mapped at the end, only they exported and imported); "release+reallocate" is the
// fixed DeepEP pattern (deepep_fabric_leak --fixed): on each new high, tear the whole buffer set down and
// build it again at the new size, one allocation per buffer. Both use the pool's RAII types, so the same
// counters see every driver call. Reports driver calls, bytes created, peak bytes used (max of
// cuMemGetInfo's used figure over the run) and time per step. Prints figures only; asserts nothing timed.
//
//   bench_pool_growth [--steps N] [--size-mib M] [--handle fabric|posix] [--reps R]
#include "cumemaudit/fabric_pool.hpp"

#include "support/program.hpp"

#include <CLI/CLI.hpp>
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace pool = cumemaudit::pool;
using Clock = std::chrono::steady_clock;

using cumemaudit::program::die;

struct Options {
    int steps = 8;
    std::size_t size_mib = 256;
    pool::HandleKind handle = pool::HandleKind::fabric;
    int reps = 5;
};

std::size_t used_now() {
    std::size_t f = 0, t = 0;
    if (cuMemGetInfo(&f, &t) != CUDA_SUCCESS) die("cuMemGetInfo failed");
    return t - f;
}

struct Result {
    pool::CallCounts calls;       // of one repetition
    std::size_t created = 0;      // bytes of cuMemCreate over one repetition
    std::size_t peak = 0;         // max used above the starting figure
    double step_us = 0;           // median over repetitions of (run time / steps)
    bool stable_address = true;
};

struct Tracker {
    std::size_t base_used = used_now();
    std::size_t peak = 0;
    void sample() { peak = std::max(peak, used_now() - base_used); }
};

// One repetition of the pool pattern; returns its wall time.
double run_pool(const Options& o, Result& r, bool record) {
    pool::PoolOptions po;
    po.kind = o.handle;
    po.va_capacity = std::max<std::size_t>(std::size_t{64} << 30, (o.size_mib * o.steps) << 20);
    pool::FabricPool fabric(po);
    Tracker tr;
    const auto t0 = Clock::now();
    {
        const std::size_t unit = o.size_mib << 20;
        pool::SymmetricBuffer sym(fabric, unit, 1);
        const CUdeviceptr base = sym.local().ptr();
        for (int step = 0; step < o.steps; ++step) {
            sym.grow_to(unit * static_cast<std::size_t>(step + 1));
            std::vector<pool::ExportedHandle> h = sym.export_new();
            sym.open_peer(0, h);
            if (sym.local().ptr() != base) r.stable_address = false;
            if (record) tr.sample();
        }
    }
    fabric.trim();
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (record) {
        const pool::PoolStats s = fabric.stats();
        r.calls = s.calls;
        r.peak = tr.peak;
        r.created = (o.size_mib * static_cast<std::size_t>(o.steps)) << 20;
    }
    return us;
}

// One buffer set of DeepEP's (fixed) allocator: own allocation mapped, exported, imported by the peer.
// Held in a std::optional and replaced with reset()/emplace(), never by assignment: a defaulted member-wise
// move assignment would free `va` (declared first) while `map` still maps it, which the driver refuses.
struct BufferSet {
    pool::Reservation va;
    pool::PhysicalChunk chunk;
    pool::Mapping map;
    pool::Reservation peer_va;
    pool::ImportedHandle peer;
    pool::Mapping peer_map;
};

double run_realloc(const Options& o, Result& r, bool record) {
    pool::CallCounter counter;
    Tracker tr;
    const auto t0 = Clock::now();
    std::size_t created = 0;
    CUdeviceptr first = 0;
    {
        std::optional<BufferSet> set;
        for (int step = 0; step < o.steps; ++step) {
            const std::size_t size = (o.size_mib << 20) * static_cast<std::size_t>(step + 1);
            set.reset();                     // release_buffer: mappings, then references, then ranges
            BufferSet& next = set.emplace();  // allocate_buffer at the new size
            next.va = pool::Reservation::create(size, 0, &counter);
            next.chunk = pool::PhysicalChunk::create(0, size, o.handle, &counter);
            next.map = pool::Mapping::create(next.va, 0, next.chunk, {}, &counter);
            {
                pool::ExportedHandle h = next.chunk.export_handle();
                next.peer_va = pool::Reservation::create(size, 0, &counter);
                next.peer = pool::ImportedHandle::open(h, &counter);
                next.peer_map = pool::Mapping::create(next.peer_va, 0, next.peer, {}, &counter);
            }
            created += size;
            if (step == 0) first = next.va.base();
            else if (next.va.base() != first) r.stable_address = false;
            if (record) tr.sample();
        }
    }
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (record) {
        r.calls = counter.snapshot();
        r.created = created;
        r.peak = tr.peak;
    }
    return us;
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

template <class F>
Result measure(const Options& o, F run) {
    Result r;
    std::vector<double> times;
    for (int i = 0; i < o.reps; ++i) times.push_back(run(o, r, i == 0) / o.steps);
    r.step_us = median(times);
    return r;
}

Options parse(int argc, char** argv) {
    Options o;
    CLI::App app{"Pool growth against release-and-reallocate", "bench_pool_growth"};
    const std::map<std::string, pool::HandleKind> handles{{"fabric", pool::HandleKind::fabric},
                                                           {"posix", pool::HandleKind::posix_fd}};
    app.add_option("--steps", o.steps, "growth steps")->check(CLI::Range(1, 1 << 20));
    app.add_option("--size-mib", o.size_mib, "growth per step in MiB, a multiple of 2")
        ->check(CLI::Range(1, 1 << 20) & CLI::Validator([](std::string& v) {
            return std::stoull(v) % 2 == 0 ? std::string() : std::string("not a multiple of 2");
        }, "EVEN"));
    app.add_option("--reps", o.reps, "repetitions; the median is printed")->check(CLI::Range(1, 1 << 20));
    app.add_option("--handle", o.handle, "fabric or posix")->transform(CLI::CheckedTransformer(handles));
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        std::exit(app.exit(e) == 0 ? 0 : 2);
    }
    return o;
}

}  // namespace

int main(int argc, char** argv) {
    const Options o = parse(argc, argv);
    CUdevice dev = 0;
    CUcontext ctx = nullptr;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        die("no device 0 context");
    char name[256] = {};
    cuDeviceGetName(name, sizeof name - 1, dev);
    Result p, q;
    try {
        p = measure(o, run_pool);
        q = measure(o, run_realloc);
    } catch (const pool::PoolError& e) {
        die(e.what());
    }
    if (pool::release_error_count() != 0) die("the driver refused a release: the patterns above are wrong");
    std::printf("growth: %d steps of +%zu MiB to %zu MiB, %s handles, one peer (this process), %s; median of %d runs\n",
                o.steps, o.size_mib, o.size_mib * static_cast<std::size_t>(o.steps),
                o.handle == pool::HandleKind::fabric ? "fabric" : "posix", name, o.reps);
    std::printf("%-34s %14s %20s\n", "", "pool", "release+reallocate");
    std::printf("%-34s %14llu %20llu\n", "driver calls, total", static_cast<unsigned long long>(p.calls.total()),
                static_cast<unsigned long long>(q.calls.total()));
    for (std::size_t i = 0; i < pool::kApiCount; ++i) {
        const auto a = static_cast<pool::Api>(i);
        if (p.calls[a] == 0 && q.calls[a] == 0) continue;
        std::printf("  %-32s %14llu %20llu\n", pool::api_name(a), static_cast<unsigned long long>(p.calls[a]),
                    static_cast<unsigned long long>(q.calls[a]));
    }
    std::printf("%-34s %14zu %20zu\n", "bytes created (MiB)", p.created >> 20, q.created >> 20);
    std::printf("%-34s %14zu %20zu\n", "peak used (MiB, cuMemGetInfo)", p.peak >> 20, q.peak >> 20);
    std::printf("%-34s %14.1f %20.1f\n", "time per step (us)", p.step_us, q.step_us);
    // Not a figure but the point: the pool's address never changed (checked), so the bytes already written
    // stay; release+reallocate loses them and re-exchanges every handle with every peer on each growth.
    if (!p.stable_address) die("the pool's buffer moved");
    return 0;
}
