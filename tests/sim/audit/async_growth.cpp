// A stream-ordered pool growing over marked steps (the GPU suite runs it under the CUPTI backend).
// Run as `audit_scenarios async-growth`; checked by async_growth_test.py, which finds
// each site by its `// site:NAME` marker.
#include "scenarios.hpp"

namespace {

// The stream-ordered pool grows over four marked steps (each keeps 64 MiB more); the CUPTI backend's
// activity records show the pool's growth in the step records.
int async_growth() {
    init_primary_context();
    auto step = reinterpret_cast<void (*)(uint64_t)>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    CUstream s;
    OK(cuStreamCreate(&s, 0));
    for (uint64_t n = 1; n <= 4; ++n) {
        CUdeviceptr d;
        OK(cuMemAllocAsync(&d, 64 * kMiB, s));
        OK(cuStreamSynchronize(s));
        if (step != nullptr) step(n);
    }
    std::printf("async_growth: done\n");
    return 0;
}

}  // namespace

AUDIT_SCENARIO("async-growth", [](int, char**) { return async_growth(); });
