// Eight threads churning allocations, each leaving a few at one planted site.
// Run as `audit_scenarios threads`; checked by threads_test.py, which finds
// each site by its `// site:NAME` marker.
#include "scenarios.hpp"
#include <thread>
#include <vector>

namespace {

__attribute__((noinline)) void planted_leak(CUdeviceptr* out) {
    OK(cuMemAlloc(out, 3 * 4096));  // site:planted
}

// 8 threads churn allocations; thread i leaks i+1 allocations of 12 KiB at one site.
int threads() {
    init_primary_context();
    CUcontext ctx;
    OK(cuCtxGetCurrent(&ctx));
    std::vector<std::thread> pool;
    for (int t = 0; t < 8; ++t) {
        pool.emplace_back([t, ctx] {
            OK(cuCtxSetCurrent(ctx));
            for (int i = 0; i < 2000; ++i) {
                CUdeviceptr d = 0;
                OK(cuMemAlloc(&d, 4096 + 512 * (i % 7)));
                CUmemAllocationProp p = props();
                CUmemGenericAllocationHandle h = 0;
                if (i % 100 == 0) {
                    OK(cuMemCreate(&h, kGran, &p, 0));
                    OK(cuMemRelease(h));
                }
                OK(cuMemFree(d));
            }
            for (int k = 0; k <= t; ++k) {
                CUdeviceptr d;
                planted_leak(&d);
            }
        });
    }
    for (auto& th : pool) th.join();
    std::printf("threads: planted=%d bytes=%d\n", 36, 36 * 3 * 4096);
    return 0;
}

}  // namespace

AUDIT_SCENARIO("threads", [](int, char**) { return threads(); });
