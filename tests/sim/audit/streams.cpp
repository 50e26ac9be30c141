// Streams take a share of their context's device memory at their creation, which the driver keeps after a
// destroy and reuses for the next stream (docs/DRIVER.md, "Streams"). Run as `audit_scenarios streams`; checked
// by streams_test.py. Nothing here is simulated-only: the real driver answers the same calls.
#include "scenarios.hpp"

#include <vector>

namespace {

using StepFn = void (*)(uint64_t);

__attribute__((noinline)) CUstream make_stream(int priority) {
    CUstream s = nullptr;
    OK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, priority));  // site:pool_stream
    return s;
}

// A stream pool as PyTorch makes one at its first torch.cuda.Stream() (8 streams of the lowest priority and 8
// of a higher one here; PyTorch makes 32 of each of several); 8 of them destroyed and 8 more made (the room is
// reused); then a stream leak: two streams a step, never destroyed.
int streams(int, char**) {
    init_primary_context();
    const auto step = reinterpret_cast<StepFn>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    CUdeviceptr out = 0;
    OK(cuMemAlloc(&out, 4096));
    step(0);
    std::vector<CUstream> pool;
    for (int i = 0; i < 16; ++i) pool.push_back(make_stream(i < 8 ? 0 : -1));
    step(1);
    for (int i = 0; i < 8; ++i) OK(cuStreamDestroy(pool[i]));
    for (int i = 0; i < 8; ++i) OK(cuStreamCreate(&pool[i], CU_STREAM_NON_BLOCKING));
    step(2);
    std::vector<CUstream> leaked;
    for (uint64_t n = 3; n <= 6; ++n) {
        for (int i = 0; i < 2; ++i) {
            CUstream s = nullptr;
            OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));  // site:leaked_stream
            leaked.push_back(s);
        }
        step(n);
    }
    for (CUstream s : pool) OK(cuStreamDestroy(s));
    OK(cuMemFree(out));
    return 0;
}

}  // namespace

AUDIT_SCENARIO("streams", streams);
