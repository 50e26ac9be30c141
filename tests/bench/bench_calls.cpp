// bench_calls: nanoseconds the shim adds to one intercepted call. The same binary runs as a child three
// ways — shim off (no LD_PRELOAD), on with default options, on with stack_depth=32 — always on the
// simulated driver, in interleaved rounds; each figure is the best of (rounds × repeats) timed loops, so
// drift on a shared machine hits every mode alike. Added ns = on − off, per call.
//
// Patterns (per iteration → calls):
//   alloc_free   cuMemAlloc_v2 + cuMemFree_v2, 4 KiB (door 1, the exported symbols)          2
//   async        cuMemAllocAsync + cuMemFreeAsync, 4 KiB, null stream                        2
//   table        cuMemAlloc/cuMemFree at 3020 through the pointers cudart gets: dlopen
//                libcuda.so.1, dlsym cuGetProcAddress_v2, ask it for "cuGetProcAddress" at
//                12000, look the two up through that (doors 2 and 3)                            2
//   vmm          cuMemCreate + cuMemMap + cuMemSetAccess + cuMemUnmap + cuMemRelease, 2 MiB,
//                into a range reserved once per thread                                          5
//   batch        cuMemAlloc_v2 4 KiB x2000, then cuMemFree_v2 x2000 (2000 live at once)          2
// Each with 1 and 2 threads (each thread its own loop; time from the common start to the last end).
//
// The loops run under --depth (40) frames of the program's own, so a 32-frame capture unwinds 32 real
// frames, as it would inside PyTorch; with the default stack_depth=1 the depth costs nothing.
//
// Cold caches (--cold): a real driver call walks megabytes of its own state, so the shim's lines are gone by
// its next call; the simulated and null drivers touch almost nothing and keep them hot. This mode writes one
// byte per cache line of an --evict-mib buffer (8) before every call and times that call alone, on both
// drivers, with three children side by side: off, on (default options) and the minimal recorder
// (tests/bench/floor: one open-addressing slot and a per-thread counter, the floor of any recorder). It
// prints hot and cold figures per iteration (a pair, or a VMM cycle) beside each other.
//
// A child alone (--child, as tests/gpu/cost.py and tests/bench/between.py run it) takes --patterns a,b (all),
// --threads 1,4,16 (1,2) and --pass-through (below) and prints "RESULT pattern threads ns-per-call" lines. With --ab [--blocks 7]
// it compares, inside one process, direct, passed-through and recorded calls (see ab_child).
//
// Usage: bench_calls [--markdown] [--iters N] [--iters32 N] [--repeats R] [--rounds K] [--depth D]
//        bench_calls --cold [--markdown] [--cold-iters N] [--evict-mib M] [--iters N] [--rounds K]
// Needs CUMEMAUDIT_SHIM and CUMEMAUDIT_SIM_DIR (meson's benchmark() and tests/bench/run set them).
#include "bench_common.hpp"
#include "support/kernels_ptx.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <unistd.h>
#include <x86intrin.h>

#include <atomic>
#include <csignal>
#include <map>
#include <thread>

namespace {

constexpr std::size_t kSmall = 4096;
constexpr std::size_t kVmm = 2u << 20;

#define OK(call)                                                                         \
    do {                                                                                 \
        if (CUresult r_ = (call); r_ != CUDA_SUCCESS) {                                  \
            std::fprintf(stderr, "bench_calls: %s returned %d\n", #call, static_cast<int>(r_)); \
            std::exit(3);                                                                \
        }                                                                                \
    } while (0)

CUcontext g_ctx = nullptr;
PFN_cuMemAlloc_v3020 g_table_alloc = nullptr;
PFN_cuMemFree_v3020 g_table_free = nullptr;
CUfunction g_empty = nullptr;  // a kernel that does nothing: the launch pattern's

// A process that uses CUDA runs the driver's own threads; the simulated driver starts none. Without a
// second thread glibc keeps its single-thread fast paths (malloc without atomics), so a plain run of the
// simulated driver would be cheaper than any real process's, and every preload that starts a thread (the
// shim's checkpoint thread) would seem to cost that difference. One idle thread, as the driver's, for
// every mode alike.
void start_driver_like_thread() {
    sigset_t all;
    sigfillset(&all);
    sigset_t old;
    pthread_sigmask(SIG_BLOCK, &all, &old);  // the thread inherits the mask: no signal is ever its
    std::thread([] {
        for (;;) pause();
    }).detach();
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

void init_driver() {
    start_driver_like_thread();
    OK(cuInit(0));
    CUdevice dev;
    OK(cuDeviceGet(&dev, 0));
    OK(cuDevicePrimaryCtxRetain(&g_ctx, dev));
    OK(cuCtxSetCurrent(g_ctx));
    // The table door, the way cudart gets its entry points.
    void* lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (lib == nullptr) bench::die("dlopen libcuda.so.1");
    auto gpa_v2 = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(lib, "cuGetProcAddress_v2"));
    if (gpa_v2 == nullptr) bench::die("dlsym cuGetProcAddress_v2");
    CUdriverProcAddressQueryResult st{};
    PFN_cuGetProcAddress_v12000 gpa = nullptr;
    OK(gpa_v2("cuGetProcAddress", reinterpret_cast<void**>(&gpa), 12000, 0, &st));
    OK(gpa("cuMemAlloc", reinterpret_cast<void**>(&g_table_alloc), 3020, 0, &st));
    OK(gpa("cuMemFree", reinterpret_cast<void**>(&g_table_free), 3020, 0, &st));
    CUmodule module;
    OK(cuModuleLoadData(&module, cumemaudit::program::kLocalMemoryPtx));
    OK(cuModuleGetFunction(&g_empty, module, "empty"));
}

// The entry points a loop calls: the program's own (what the dynamic linker bound: the shim's when it is
// preloaded) or, in --ab's direct blocks, the driver's, as the preloaded library forwards to them.
struct Api {
    PFN_cuMemAlloc_v3020 alloc = cuMemAlloc_v2;
    PFN_cuMemFree_v3020 free = cuMemFree_v2;
    PFN_cuMemAllocAsync_v11020 alloc_async = cuMemAllocAsync;
    PFN_cuMemFreeAsync_v11020 free_async = cuMemFreeAsync;
    PFN_cuMemCreate_v10020 create = cuMemCreate;
    PFN_cuMemMap_v10020 map = cuMemMap;
    PFN_cuMemSetAccess_v10020 set_access = cuMemSetAccess;
    PFN_cuMemUnmap_v10020 unmap = cuMemUnmap;
    PFN_cuMemRelease_v10020 release = cuMemRelease;
    PFN_cuLaunchKernel_v4000 launch = cuLaunchKernel;
};
const Api kLinked{};

enum class Pattern { alloc_free, async, table, vmm, batch, launch };
constexpr long kBatch = 2000;
struct PatternInfo {
    Pattern p;
    const char* name;
    int calls;
    const char* what;
};
constexpr PatternInfo kPatterns[] = {
    {Pattern::alloc_free, "alloc_free", 2, "cuMemAlloc_v2+cuMemFree_v2 4KiB"},
    {Pattern::async, "async", 2, "cuMemAllocAsync+cuMemFreeAsync 4KiB"},
    {Pattern::table, "table", 2, "cudaMalloc-style table call 4KiB"},
    {Pattern::vmm, "vmm", 5, "VMM create+map+access+unmap+release 2MiB"},
    {Pattern::batch, "batch", 2, "cuMemAlloc_v2 4KiB x2000 then cuMemFree_v2 x2000"},
    {Pattern::launch, "launch", 1, "cuLaunchKernel, a kernel with no local memory (watched: its handle looked up, one compare)"},
};

// Per-thread VMM state: a reserved range and the properties, set up before timing.
struct Vmm {
    CUdeviceptr va = 0;
    CUmemAllocationProp prop{};
    CUmemAccessDesc access{};
    void setup() {
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = 0;
        access.location = prop.location;
        access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        OK(cuMemAddressReserve(&va, kVmm, 0, 0, 0));
    }
    void teardown() { OK(cuMemAddressFree(va, kVmm)); }
};

// One iteration of a pattern other than the batch (its calls are in kPatterns' count), through `api`.
inline void iteration(Pattern p, const Api& api, Vmm& v) {
    CUdeviceptr d;
    switch (p) {
    case Pattern::alloc_free:
        OK(api.alloc(&d, kSmall));
        OK(api.free(d));
        break;
    case Pattern::async:
        OK(api.alloc_async(&d, kSmall, nullptr));
        OK(api.free_async(d, nullptr));
        break;
    case Pattern::table:  // cudart's pointers, whatever `api` is
        OK(g_table_alloc(&d, kSmall));
        OK(g_table_free(d));
        break;
    case Pattern::vmm: {
        CUmemGenericAllocationHandle h;
        OK(api.create(&h, kVmm, &v.prop, 0));
        OK(api.map(v.va, kVmm, 0, h, 0));
        OK(api.set_access(v.va, kVmm, &v.access, 1));
        OK(api.unmap(v.va, kVmm));
        OK(api.release(h));
        break;
    }
    case Pattern::batch:
        break;  // no single iteration: loop() and ab_loop() run it
    case Pattern::launch:
        OK(api.launch(g_empty, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr));
        break;
    }
}

__attribute__((noinline)) void loop(Pattern p, long iters, Vmm& v, const Api& api = kLinked) {
    if (p == Pattern::batch) {
        std::vector<CUdeviceptr> live(static_cast<std::size_t>(kBatch));
        for (long done = 0; done < iters; done += kBatch) {
            const long n = std::min(kBatch, iters - done);
            for (long i = 0; i < n; ++i) OK(api.alloc(&live[static_cast<std::size_t>(i)], kSmall));
            for (long i = 0; i < n; ++i) OK(api.free(live[static_cast<std::size_t>(i)]));
        }
        return;
    }
    for (long i = 0; i < iters; ++i) iteration(p, api, v);
}

// Writes one byte per cache line of a buffer larger than the caches a driver call would sweep.
class Evictor {
public:
    explicit Evictor(std::size_t bytes) : buf_(bytes, 0) {}
    void walk() {
        for (std::size_t i = 0; i < buf_.size(); i += 64) buf_[i] = static_cast<unsigned char>(buf_[i] + 1);
        asm volatile("" ::: "memory");
    }

private:
    std::vector<unsigned char> buf_;
};

// The same calls as loop(), each after an eviction and timed alone: returns ns per iteration (all its
// calls), the median over iterations — on a shared machine a preemption lands in some timed call, and a
// mean would carry it. A batch's iteration is one of its calls, times two (an allocation and a free).
__attribute__((noinline)) double cold_loop(Pattern p, long iters, Vmm& v, Evictor& ev) {
    std::vector<double> per_iteration;
    per_iteration.reserve(static_cast<std::size_t>(iters) * 2);
    double total = 0;
    auto timed = [&](auto&& call) {
        ev.walk();
        const double t0 = bench::now_ns();
        call();
        total += bench::now_ns() - t0;
    };
    auto median = [&] {
        std::sort(per_iteration.begin(), per_iteration.end());
        return per_iteration[per_iteration.size() / 2];
    };
    if (p == Pattern::batch) {
        std::vector<CUdeviceptr> live(static_cast<std::size_t>(kBatch));
        for (long done = 0; done < iters; done += kBatch) {
            const long n = std::min(kBatch, iters - done);
            for (long i = 0; i < n; ++i) {
                total = 0;
                timed([&] { OK(cuMemAlloc_v2(&live[static_cast<std::size_t>(i)], kSmall)); });
                per_iteration.push_back(2 * total);
            }
            for (long i = 0; i < n; ++i) {
                total = 0;
                timed([&] { OK(cuMemFree_v2(live[static_cast<std::size_t>(i)])); });
                per_iteration.push_back(2 * total);
            }
        }
        return median();
    }
    for (long i = 0; i < iters; ++i) {
        CUdeviceptr d = 0;
        CUmemGenericAllocationHandle h = 0;
        total = 0;
        switch (p) {
        case Pattern::alloc_free:
            timed([&] { OK(cuMemAlloc_v2(&d, kSmall)); });
            timed([&] { OK(cuMemFree_v2(d)); });
            break;
        case Pattern::async:
            timed([&] { OK(cuMemAllocAsync(&d, kSmall, nullptr)); });
            timed([&] { OK(cuMemFreeAsync(d, nullptr)); });
            break;
        case Pattern::table:
            timed([&] { OK(g_table_alloc(&d, kSmall)); });
            timed([&] { OK(g_table_free(d)); });
            break;
        case Pattern::vmm:
            timed([&] { OK(cuMemCreate(&h, kVmm, &v.prop, 0)); });
            timed([&] { OK(cuMemMap(v.va, kVmm, 0, h, 0)); });
            timed([&] { OK(cuMemSetAccess(v.va, kVmm, &v.access, 1)); });
            timed([&] { OK(cuMemUnmap(v.va, kVmm)); });
            timed([&] { OK(cuMemRelease(h)); });
            break;
        case Pattern::batch:
            break;  // above
        }
        per_iteration.push_back(total);
    }
    return median();
}

// `depth` frames of our own between the thread's start and the loop (not inlined, not tail calls).
__attribute__((noinline)) double deep(int depth, Pattern p, long iters, Vmm& v, const Api& api,
                                      const std::atomic<int>* go, std::atomic<int>* ready) {
    if (depth > 0) {
        const double r = deep(depth - 1, p, iters, v, api, go, ready);
        asm volatile("" ::: "memory");  // keeps this frame: no tail call
        return r;
    }
    loop(p, iters / 100 + 100, v, api);  // warm-up: first-call resolution, owner cache, hash tables sized
    ready->fetch_add(1);
    while (go->load(std::memory_order_acquire) == 0) {
    }
    loop(p, iters, v, api);
    return bench::now_ns();  // the end; the start is the common go, so a thread that waited for a core counts
}

// deep()'s twin for --ab: the same frames, then ab_loop.
struct Samples;
__attribute__((noinline)) void deep_ab(int depth, Pattern p, long iters, Vmm& v, const Api& direct, Samples& out,
                                       const std::atomic<int>* go, std::atomic<int>* ready);

// Starts `threads` threads, each with the context current and (for the VMM pattern) a range of its own,
// runs body(thread, range, go, ready) on each, lets them go together; returns the common start.
template <class Body>
double on_threads(const PatternInfo& pi, int threads, Body&& body) {
    std::atomic<int> go{0}, ready{0};
    auto run = [&](std::size_t t) {
        Vmm v;
        if (pi.p == Pattern::vmm) v.setup();
        body(t, v, &go, &ready);
        if (pi.p == Pattern::vmm) v.teardown();
    };
    if (threads == 1) {
        // One thread: the one that set the driver up, as in most programs (a fresh thread per loop would be
        // a stranger to the ledger's lock every time: src/ledger/spin_lock.hpp).
        go.store(1, std::memory_order_release);
        const double t0 = bench::now_ns();
        run(0);
        return t0;
    }
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            OK(cuCtxSetCurrent(g_ctx));
            run(static_cast<std::size_t>(t));
        });
    }
    while (ready.load() < threads) std::this_thread::yield();
    const double t0 = bench::now_ns();
    go.store(1, std::memory_order_release);
    for (auto& th : pool) th.join();
    return t0;
}

// Nanoseconds per call per thread: from the common start to the last thread's end, over one thread's calls.
double measure(const PatternInfo& pi, int threads, long iters, int depth, const Api& api = kLinked) {
    std::vector<double> elapsed(static_cast<std::size_t>(threads), 0);
    const double t0 = on_threads(pi, threads, [&](std::size_t t, Vmm& v, const std::atomic<int>* go, std::atomic<int>* ready) {
        elapsed[t] = deep(depth, pi.p, iters, v, api, go, ready);
    });
    double last = t0;
    for (double e : elapsed) last = std::max(last, e);
    return (last - t0) / static_cast<double>(iters * pi.calls);
}

// "a,b,c" as a list of numbers, or of names ("all": every pattern).
std::vector<int> numbers(const char* list) {
    std::vector<int> out;
    for (const char* p = list; *p != '\0';) {
        out.push_back(std::atoi(p));
        while (*p != '\0' && *p != ',') ++p;
        if (*p == ',') ++p;
    }
    return out;
}

bool listed(const char* list, const char* name) {
    if (std::strcmp(list, "all") == 0) return true;
    const std::string l = std::string(",") + list + ",";
    return l.find(std::string(",") + name + ",") != std::string::npos;
}

// --cold children: per pattern, one thread, the hot figure ("RESULT", ns per call) and the cold one
// ("COLD", ns per iteration), best of `repeats`.
int cold_child(long iters, long cold_iters, int repeats, std::size_t evict_bytes, const char* patterns) {
    init_driver();
    Evictor ev(evict_bytes);
    for (const PatternInfo& pi : kPatterns) {
        if (!listed(patterns, pi.name)) continue;
        Vmm v;
        if (pi.p == Pattern::vmm) v.setup();
        loop(pi.p, iters / 100 + 100, v);  // warm-up, as deep() does
        double hot = 1e300, cold = 1e300;
        for (int r = 0; r < repeats; ++r) {
            const double t0 = bench::now_ns();
            loop(pi.p, iters, v);
            hot = std::min(hot, (bench::now_ns() - t0) / static_cast<double>(iters * pi.calls));
            cold = std::min(cold, cold_loop(pi.p, cold_iters, v, ev));
        }
        if (pi.p == Pattern::vmm) v.teardown();
        std::printf("RESULT %s 1 %.2f\nCOLD %s %.2f\n", pi.name, hot, pi.name, cold);
        std::fflush(stdout);
    }
    return 0;
}

// Prints the best of the repeats, or their median (--median: on a GPU, where the driver's own time varies
// and the best would flatter whichever mode got a lucky repeat).
// --pass-through: the preloaded library's wrappers forward without recording, from the first timed call on (the
// shim loaded, its doors crossed, its ledger idle): what interposing alone costs, apart from recording.
int child(long iters, int repeats, int depth, const char* patterns, const std::vector<int>& thread_counts, bool median,
          bool pass_through) {
    init_driver();
    if (pass_through) {
        using PassThrough = int (*)(int);
        auto set = reinterpret_cast<PassThrough>(dlsym(RTLD_DEFAULT, "cumemaudit_bench_pass_through"));
        if (set == nullptr || set(1) != 0) bench::die("--pass-through needs the shim preloaded and recording");
    }
    for (const PatternInfo& pi : kPatterns) {
        if (!listed(patterns, pi.name)) continue;
        for (int threads : thread_counts) {
            std::vector<double> seen;
            for (int r = 0; r < repeats; ++r) seen.push_back(measure(pi, threads, iters, depth));
            std::sort(seen.begin(), seen.end());
            const double figure = median ? seen[seen.size() / 2] : seen.front();
            std::printf("RESULT %s %d %.2f\n", pi.name, threads, figure);
            std::fflush(stdout);
        }
    }
    return 0;
}

// --ab: inside one process, each thread alternates call by call between the driver's own entry points
// (those the preloaded library forwards to: no shim code at all) and the program's (the preloaded
// library's), timing every iteration with the TSC. Both kinds see the same memory, driver state, core and
// moment, so their medians carry none of the tens of percent by which two processes, or two blocks of
// milliseconds, differ on a GPU host. Blocks alternate with recording on ("recorded") and paused through
// cumemaudit_bench_pass_through ("passing": the wrappers' forwarding alone); each block's figure is the
// ratio of the two kinds' means below their 99th percentiles. A recorded call follows a driver call, so it finds its lines as cold as a
// real program's would. Needs the preloaded library's measurement entry points (the shim's c_api.cpp, or
// the minimal recorder's). First prints RESULT, the median of `blocks` plain recorded loops (as --child),
// for the between-process comparison, then per pattern and thread count:
//   AB pattern threads direct passing recorded (ns per call, medians over blocks)  added% passing% (medians over
//   blocks of the per-block ratio to direct)  min% max% (of the recorded blocks')
struct Samples {
    std::vector<std::uint64_t> of[2];  // [0] direct, [1] the program's entry points; ticks per iteration
    void reserve(long n) {
        for (auto& v : of) v.reserve(static_cast<std::size_t>(n));
    }
};

__attribute__((noinline)) void ab_loop(Pattern p, long iters, Vmm& v, const Api& direct, Samples& out) {
    const Api* apis[2] = {&direct, &kLinked};
    // Iterations go in pairs, one of each kind, in an order a coin decides per pair: each kind follows each
    // equally often, and nothing periodic in the driver (a pool trimmed every n calls) lands on one kind.
    std::uint64_t coin = 0x9E3779B97F4A7C15ull ^ static_cast<std::uint64_t>(iters);
    int first = 0;
    auto kind_of = [&](long i) {
        if ((i & 1) == 0) {
            coin ^= coin << 13, coin ^= coin >> 7, coin ^= coin << 17;  // xorshift64
            first = static_cast<int>(coin >> 63);
        }
        return first ^ static_cast<int>(i & 1);
    };
    auto timed_as = [&](int k, auto&& body) {
        const std::uint64_t t0 = __rdtsc();
        body(*apis[k]);
        out.of[k].push_back(__rdtsc() - t0);
    };
    auto timed = [&](long i, auto&& body) { timed_as(kind_of(i), body); };
    if (p != Pattern::batch) {
        for (long i = 0; i < iters; ++i) timed(i, [&](const Api& api) { iteration(p, api, v); });
        return;
    }
    std::vector<CUdeviceptr> live(static_cast<std::size_t>(kBatch));
    std::vector<int> way(static_cast<std::size_t>(kBatch));
    for (long done = 0; done < iters; done += kBatch) {
        const long n = std::min(kBatch, iters - done);
        for (long i = 0; i < n; ++i) {
            const auto at = static_cast<std::size_t>(i);
            way[at] = kind_of(i);
            timed_as(way[at], [&](const Api& api) { OK(api.alloc(&live[at], kSmall)); });
        }
        for (long i = 0; i < n; ++i) {
            const auto at = static_cast<std::size_t>(i);
            timed_as(way[at], [&](const Api& api) { OK(api.free(live[at])); });
        }
    }
    for (auto& kind : out.of)
        for (auto& t : kind) t *= 2;  // each call timed alone: a pair's worth, as the other patterns
}

// One block: every thread runs ab_loop under `depth` frames from a common start; all samples pooled.
Samples measure_ab(const PatternInfo& pi, int threads, long iters, int depth, const Api& direct) {
    std::vector<Samples> per_thread(static_cast<std::size_t>(threads));
    on_threads(pi, threads, [&](std::size_t t, Vmm& v, const std::atomic<int>* go, std::atomic<int>* ready) {
        per_thread[t].reserve(iters);
        deep_ab(depth, pi.p, iters, v, direct, per_thread[t], go, ready);
    });
    Samples all;
    for (auto& s : per_thread)
        for (int k = 0; k < 2; ++k) all.of[k].insert(all.of[k].end(), s.of[k].begin(), s.of[k].end());
    return all;
}

void deep_ab(int depth, Pattern p, long iters, Vmm& v, const Api& direct, Samples& out,
             const std::atomic<int>* go, std::atomic<int>* ready) {
    if (depth > 0) {
        deep_ab(depth - 1, p, iters, v, direct, out, go, ready);
        asm volatile("" ::: "memory");  // keeps this frame: no tail call
        return;
    }
    Samples warm;
    ab_loop(p, iters / 100 + 100, v, direct, warm);
    ready->fetch_add(1);
    while (go->load(std::memory_order_acquire) == 0) {
    }
    ab_loop(p, iters, v, direct, out);
}

double median_of(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}
// The mean below the 99th percentile: a preempted iteration says nothing about either kind, and a mean
// (unlike a median) stays exact where the clock ticks coarsely (a VM's TSC can tick every 10 ns).
double typical_of(std::vector<std::uint64_t>& v) {
    const std::size_t keep = v.size() - v.size() / 100;
    std::nth_element(v.begin(), v.begin() + static_cast<long>(keep - 1), v.end());
    double sum = 0;
    for (std::size_t i = 0; i < keep; ++i) sum += static_cast<double>(v[i]);
    return sum / static_cast<double>(keep);
}

int ab_child(long iters, int blocks, int depth, const char* patterns, const std::vector<int>& thread_counts) {
    using Real = void* (*)(const char*);
    using PassThrough = int (*)(int);
    auto real = reinterpret_cast<Real>(dlsym(RTLD_DEFAULT, "cumemaudit_bench_real"));
    auto pass_through = reinterpret_cast<PassThrough>(dlsym(RTLD_DEFAULT, "cumemaudit_bench_pass_through"));
    if (real == nullptr || pass_through == nullptr)
        bench::die("--ab needs a preloaded library with cumemaudit_bench_real and cumemaudit_bench_pass_through");
    init_driver();
    Api direct;
    auto take = [&](auto& slot, const char* name) {
        void* p = real(name);
        if (p == nullptr) bench::die((std::string("--ab: no driver entry point for ") + name).c_str());
        slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(p);
    };
    take(direct.alloc, "cuMemAlloc_v2");
    take(direct.free, "cuMemFree_v2");
    take(direct.alloc_async, "cuMemAllocAsync");
    take(direct.free_async, "cuMemFreeAsync");
    take(direct.create, "cuMemCreate");
    take(direct.map, "cuMemMap");
    take(direct.set_access, "cuMemSetAccess");
    take(direct.unmap, "cuMemUnmap");
    take(direct.release, "cuMemRelease");
    take(direct.launch, "cuLaunchKernel");
    // TSC ticks to ns, over the whole child.
    const double ns0 = bench::now_ns();
    const std::uint64_t tick0 = __rdtsc();
    for (const PatternInfo& pi : kPatterns) {
        if (!listed(patterns, pi.name) || pi.p == Pattern::table) continue;
        for (int threads : thread_counts) {
            std::vector<double> plain;
            for (int r = 0; r < blocks; ++r) plain.push_back(measure(pi, threads, iters, depth));
            std::vector<double> added, passing, direct_ticks, kind_ticks[2];
            for (int b = 0; b < 2 * blocks; ++b) {
                const int paused = b & 1;
                if (pass_through(paused) != 0) bench::die("--ab: the recorder did not start");
                Samples s = measure_ab(pi, threads, iters, depth, direct);
                const double d = typical_of(s.of[0]), l = typical_of(s.of[1]);
                (paused ? passing : added).push_back((l / d - 1) * 100);
                direct_ticks.push_back(d);
                kind_ticks[paused].push_back(l);
            }
            pass_through(0);
            const double ns_per_tick = (bench::now_ns() - ns0) / static_cast<double>(__rdtsc() - tick0);
            const double per_call = ns_per_tick / pi.calls;
            std::printf("RESULT %s %d %.2f\n", pi.name, threads, median_of(plain));
            std::printf("AB %s %d %.2f %.2f %.2f %.2f %.2f %.2f %.2f\n", pi.name, threads,
                        median_of(direct_ticks) * per_call, median_of(kind_ticks[1]) * per_call,
                        median_of(kind_ticks[0]) * per_call, median_of(added), median_of(passing),
                        *std::min_element(added.begin(), added.end()), *std::max_element(added.begin(), added.end()));
            std::fflush(stdout);
        }
    }
    return 0;
}

// --cold: off, on and the floor on both drivers, interleaved; hot and cold figures per iteration.
int cold_main(int argc, char** argv, bool md) {
    const long iters = std::atol(bench::flag_value(argc, argv, "--iters", "100000"));
    const long cold_iters = std::atol(bench::flag_value(argc, argv, "--cold-iters", "400"));
    const int rounds = std::atoi(bench::flag_value(argc, argv, "--rounds", "3"));
    const int evict_mib = std::atoi(bench::flag_value(argc, argv, "--evict-mib", "8"));
    const bench::Paths paths = bench::paths_from_env();
    if (paths.null_dir.empty() || paths.floor.empty())
        bench::die("--cold needs CUMEMAUDIT_NULL_DIR (tests/bench/nulldrv) and CUMEMAUDIT_FLOOR (libminrec.so)");
    // CUMEMAUDIT_BASELINE_SHIM: another build of the shim (an earlier commit's), measured in the same rounds.
    const std::string baseline = bench::env_or("CUMEMAUDIT_BASELINE_SHIM", "");
    std::vector<bench::Mode> modes;
    for (bool null : {false, true}) {
        const std::string d = null ? "null" : "sim";
        modes.push_back({d + " off", false, "", null, ""});
        modes.push_back({d + " on", true, "summary=0:fail_on=none", null, ""});
        modes.push_back({d + " floor", false, "", null, paths.floor});
        if (!baseline.empty()) modes.push_back({d + " baseline", true, "summary=0:fail_on=none", null, baseline});
    }
    const std::vector<std::string> args = {argv[0], "--child-cold", "--iters=" + std::to_string(iters),
                                           "--cold-iters=" + std::to_string(cold_iters), "--repeats=2",
                                           "--evict-mib=" + std::to_string(evict_mib)};
    std::map<std::string, std::map<std::string, double>> hot, cold;  // [mode][pattern], best of rounds
    auto keep = [](double& b, double v) { b = b == 0 ? v : std::min(b, v); };
    for (int round = 0; round < rounds; ++round) {
        for (std::size_t k = 0; k < modes.size(); ++k) {
            const bench::Mode& m = modes[(k + static_cast<std::size_t>(round)) % modes.size()];
            const bench::ChildResult r = bench::run_child(paths, m, args);
            for (const auto& f : bench::records(r.out, "RESULT"))
                if (f.size() == 3) keep(hot[m.name][f[0]], std::stod(f[2]));
            for (const auto& f : bench::records(r.out, "COLD"))
                if (f.size() == 2) keep(cold[m.name][f[0]], std::stod(f[1]));
        }
    }
    bench::remove_tree(paths.report_dir);
    std::printf("bench_calls --cold: ns per iteration (a pair; the VMM cycle is 5 calls), one thread, best of %d "
                "rounds x 2 repeats; hot: %ld iterations back to back; cold: %ld iterations, %d MiB written "
                "before every call, each call timed alone, median over iterations; added = mode - off; floor = the minimal recorder "
                "(tests/bench/floor, it records no VMM map/unmap/access and does not see the table door)%s\n\n",
                rounds, iters, cold_iters, evict_mib,
                baseline.empty() ? "" : ("; baseline = the shim at " + baseline).c_str());
    std::vector<std::string> header = {"pattern", "driver", "hot off", "hot +on", "hot +floor", "cold off", "cold +on",
                                       "cold +floor", "cold on/floor"};
    if (!baseline.empty()) {
        header.insert(header.begin() + 4, "hot +baseline");
        header.push_back("cold +baseline");
    }
    bench::Table t(header);
    for (const char* d : {"sim", "null"}) {
        const std::string off = std::string(d) + " off", on = std::string(d) + " on", fl = std::string(d) + " floor";
        for (const PatternInfo& pi : kPatterns) {
            const double c = pi.calls;  // hot figures are per call
            const double ho = hot[off][pi.name] * c, hn = hot[on][pi.name] * c, hf = hot[fl][pi.name] * c;
            const double co = cold[off][pi.name], cn = cold[on][pi.name], cf = cold[fl][pi.name];
            const double fl_added = cf - co;
            std::vector<std::string> row = {pi.name, d, bench::fmt("%.0f", ho), bench::fmt("%+.0f", hn - ho),
                                            bench::fmt("%+.0f", hf - ho), bench::fmt("%.0f", co),
                                            bench::fmt("%+.0f", cn - co), bench::fmt("%+.0f", fl_added),
                                            fl_added > 20 ? bench::fmt("%.1fx", (cn - co) / fl_added) : "-"};
            if (!baseline.empty()) {
                const std::string bl = std::string(d) + " baseline";
                row.insert(row.begin() + 4, bench::fmt("%+.0f", hot[bl][pi.name] * c - ho));
                row.push_back(bench::fmt("%+.0f", cold[bl][pi.name] - co));
            }
            t.add(row);
        }
    }
    t.print(md);
    return 0;
}

std::string verdict(double added, double target) {
    if (added <= target) return "meets";
    return "misses by " + bench::fmt("%.0f", added - target) + " ns";
}

}  // namespace

int main(int argc, char** argv) {
    const long iters = std::atol(bench::flag_value(argc, argv, "--iters", "200000"));
    const int repeats = std::atoi(bench::flag_value(argc, argv, "--repeats", "2"));
    const int rounds = std::atoi(bench::flag_value(argc, argv, "--rounds", "3"));
    const int depth = std::atoi(bench::flag_value(argc, argv, "--depth", "40"));
    // A 32-frame capture costs microseconds per call: a tenth of the iterations measures it as well.
    const long iters32 = std::atol(bench::flag_value(argc, argv, "--iters32", std::to_string(iters / 10).c_str()));
    if (bench::has_flag(argc, argv, "--child") && bench::has_flag(argc, argv, "--ab"))
        return ab_child(iters, std::atoi(bench::flag_value(argc, argv, "--blocks", "7")), depth,
                        bench::flag_value(argc, argv, "--patterns", "all"), numbers(bench::flag_value(argc, argv, "--threads", "1,2")));
    if (bench::has_flag(argc, argv, "--child"))
        return child(iters, repeats, depth, bench::flag_value(argc, argv, "--patterns", "all"),
                     numbers(bench::flag_value(argc, argv, "--threads", "1,2")), bench::has_flag(argc, argv, "--median"),
                     bench::has_flag(argc, argv, "--pass-through"));
    if (bench::has_flag(argc, argv, "--child-cold"))
        return cold_child(iters, std::atol(bench::flag_value(argc, argv, "--cold-iters", "400")), repeats,
                          std::size_t(std::atoi(bench::flag_value(argc, argv, "--evict-mib", "8"))) << 20,
                          bench::flag_value(argc, argv, "--patterns", "all"));
    const bool md = bench::has_flag(argc, argv, "--markdown");
    if (bench::has_flag(argc, argv, "--cold")) return cold_main(argc, argv, md);

    const bench::Paths paths = bench::paths_from_env();
    // summary=0 and fail_on=none: the exit summary and the gate touch no call (report_dir: a temporary
    // directory). The gate is off so that a wrong verdict of the ledger (below) does not end the run.
    std::vector<bench::Mode> modes = {{"off", false, "", false, ""},
                                      {"on", true, "summary=0:fail_on=none", false, ""},
                                      {"on32", true, "summary=0:fail_on=none:stack_depth=32", false, ""}};
    // The same three on the lock-free null driver, for the two-thread comparison (see nulldrv/).
    const bool with_null = !paths.null_dir.empty();
    if (with_null)
        for (std::size_t i = 0, n = modes.size(); i < n; ++i)
            modes.push_back({"null-" + modes[i].name, modes[i].shim, modes[i].options, true, ""});
    // Every loop frees what it allocates: the exit report of an "on" child must list no leak at all.
    long long worst_leaks = 0;
    std::string worst_mode;
    const std::vector<std::string> args = {argv[0],
                                           "--child",
                                           "--iters=" + std::to_string(iters),
                                           "--repeats=" + std::to_string(repeats),
                                           "--depth=" + std::to_string(depth)};
    // best[mode][pattern][threads]
    std::map<std::string, std::map<std::string, std::map<int, double>>> best;
    for (int round = 0; round < rounds; ++round) {
        for (std::size_t k = 0; k < modes.size(); ++k) {
            const bench::Mode& m = modes[(k + static_cast<std::size_t>(round)) % modes.size()];  // rotate order
            std::vector<std::string> a = args;
            a[2] = "--iters=" + std::to_string(m.name.ends_with("on32") ? iters32 : iters);
            const bench::ChildResult r = bench::run_child(paths, m, a);
            if (m.shim) {
                const long long leaks = bench::report_summary(paths, r.pid, "leaked_allocations");
                if (leaks != 0 && (worst_mode.empty() || leaks > worst_leaks)) {
                    worst_leaks = leaks;
                    worst_mode = m.name;
                }
            }
            for (const auto& f : bench::records(r.out, "RESULT")) {
                if (f.size() != 3) continue;
                double& b = best[m.name][f[0]][std::stoi(f[1])];
                const double v = std::stod(f[2]);
                b = b == 0 ? v : std::min(b, v);
            }
        }
    }
    bench::remove_tree(paths.report_dir);

    std::printf("bench_calls: ns per intercepted call, simulated driver, best of %d rounds x %d repeats x %ld "
                "iterations (%ld with stack_depth=32) per pattern and thread, loop %d frames deep\n\n",
                rounds, repeats, iters, iters32, depth);
    bench::Table t({"pattern", "threads", "options", "off ns", "on ns", "added ns", "target", "verdict"});
    for (const PatternInfo& pi : kPatterns) {
        for (int threads : {1, 2}) {
            const double off = best["off"][pi.name][threads];
            for (const auto& [mode, opt, target] :
                 {std::tuple{"on", "default", 60.0}, std::tuple{"on32", "stack_depth=32", 600.0}}) {
                const double on = best[mode][pi.name][threads];
                const double added = on - off;
                t.add({pi.name, std::to_string(threads), opt, bench::fmt("%.1f", off), bench::fmt("%.1f", on),
                       bench::fmt("%.1f", added), "≤ " + bench::fmt("%.0f", target), verdict(added, target)});
            }
        }
    }
    t.print(md);

    // Two threads against one: per-call figures of each and their ratio. The simulated driver serializes
    // every call on one mutex, so two threads there mostly measure that mutex (and the shim's time outside
    // it eases the contention). The comparison is therefore made on the null driver, which has no lock: the
    // shim must add no more per call at two threads than at one (no global lock of its own).
    if (with_null) {
        std::printf("\nthreads: per-call ns with 1 and 2 threads on the lock-free null driver (tests/bench/nulldrv); "
                    "ratio 2T/1T; added = on - off\n\n");
        bench::Table s({"pattern", "options", "off 1T", "off 2T", "on 1T", "on 2T", "on 2T/1T", "added 1T",
                        "added 2T", "verdict"});
        for (const PatternInfo& pi : kPatterns) {
            for (const auto& [mode, opt] : {std::pair{"null-on", "default"}, std::pair{"null-on32", "stack_depth=32"}}) {
                const double off1 = best["null-off"][pi.name][1], off2 = best["null-off"][pi.name][2];
                const double on1 = best[mode][pi.name][1], on2 = best[mode][pi.name][2];
                const double a1 = on1 - off1, a2 = on2 - off2;
                // Noise band: 15% of the one-thread figure or 10 ns, whichever is larger.
                const double band = std::max(10.0, 0.15 * on1);
                std::string v = a2 <= a1 + band ? "scales" : "2T adds " + bench::fmt("%.0f", a2 - a1) + " ns more";
                // Without the shim two threads on the null driver run as fast as one, given two free cores;
                // when they do not, the machine had no second core to give and nothing can be concluded.
                if (off2 / off1 > 1.3) v = "inconclusive: no free 2nd core (off 2T/1T " + bench::fmt("%.2f", off2 / off1) + ")";
                s.add({pi.name, opt, bench::fmt("%.1f", off1), bench::fmt("%.1f", off2), bench::fmt("%.1f", on1),
                       bench::fmt("%.1f", on2), bench::fmt("%.2f", on2 / on1), bench::fmt("%.1f", a1),
                       bench::fmt("%.1f", a2), v});
            }
        }
        s.print(md);
    }

    // Not a time: whether the ledger agreed that the balanced loops leaked nothing.
    std::printf("\nledger check: every loop frees what it allocates (simulated driver: handles and addresses are "
                "reused, as a real driver's are); ");
    if (worst_mode.empty())
        std::printf("the exit reports of all \"on\" runs list 0 leaked allocations\n");
    else if (worst_leaks < 0)
        std::printf("an \"on\" run (%s) left no readable report\n", worst_mode.c_str());
    else
        std::printf("WRONG: an exit report (%s) lists %lld leaked allocations (unreachable) that the program "
                    "released\n", worst_mode.c_str(), worst_leaks);
    return 0;
}
