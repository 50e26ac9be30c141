// A leak whose out-of-memory step is known: each step makes 1 GiB of VMM memory, maps and unmaps it, and never
// releases it (DeepEP's buffer left behind at each resize), on the simulated 80 GiB device, which is full at
// step 80. Forty steps are marked; the forecast must say step 80 from the eighth on. With 1536 MiB a step, the
// device is full at step 54 (53⅓ steps of it).
#include "scenarios.hpp"

namespace {

using StepFn = void (*)(uint64_t);

// ARG: the MiB leaked a step (default 1024).
int forecast_leak(int argc, char** argv) {
    init_primary_context();
    const auto step = reinterpret_cast<StepFn>(dlsym(RTLD_DEFAULT, "cumemaudit_step"));
    const size_t size = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024) * kMiB;
    CUmemAllocationProp p = props();
    for (int s = 1; s <= 40; ++s) {
        CUdeviceptr va = 0;
        CUmemGenericAllocationHandle h = 0;
        OK(cuMemAddressReserve(&va, size, 0, 0, 0));
        OK(cuMemCreate(&h, size, &p, 0));  // site:leak_create
        OK(cuMemMap(va, size, 0, h, 0));
        OK(cuMemUnmap(va, size));
        OK(cuMemAddressFree(va, size));
        step(static_cast<uint64_t>(s));
    }
    return 0;
}

}  // namespace

AUDIT_SCENARIO("forecast-leak", forecast_leak);
