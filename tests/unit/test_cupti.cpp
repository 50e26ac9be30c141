// The CUPTI backend's translation: callback data as CUPTI delivers it (parameter structs of
// generated_cuda_meta.h, recorded by hand here) reaches the same ledger events as the wrappers do. The
// simulated driver cannot host CUPTI, so the backend itself runs only on a GPU (tests/gpu).
#include "shim/auditor.hpp"
#include "shim/call.hpp"
#include "shim/cupti_backend.hpp"

#include <catch2/catch.hpp>
#include <cupti.h>

using namespace cumemaudit;

namespace {

// Delivers one driver-API exit callback for `cbid` with `params` and result `r`.
template <typename Params>
void deliver(CUpti_CallbackId cbid, Params& params, CUresult r, const char* name) {
    CUpti_CallbackData data{};
    data.callbackSite = CUPTI_API_EXIT;
    data.functionName = name;
    data.functionParams = &params;
    data.functionReturnValue = &r;
    shim::dispatch_cupti(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
}

ledger::Snapshot now() {
    return shim::Auditor::get().ledger().snapshot(ledger::Moment::checkpoint, [](int, const ledger::ExportKey&) { return false; });
}

std::uint64_t unreachable_bytes() { return now().summary.leaked_bytes; }

}  // namespace

TEST_CASE("create, map, unmap, release through CUPTI callbacks balance in the ledger; a lost reference leaks") {
    REQUIRE(shim::Auditor::enter());  // the backend records into the process's one auditor
    const std::uint64_t base = unreachable_bytes();
    CUmemGenericAllocationHandle h = 0x1234;
    CUmemAllocationProp prop{};
    cuMemCreate_params create{&h, 4u << 20, &prop, 0};
    deliver(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, create, CUDA_SUCCESS, "cuMemCreate");
    CHECK(unreachable_bytes() == base + (4u << 20));  // held and never mapped: unreachable at a checkpoint

    CUdeviceptr va = 0x7000000000;
    cuMemMap_params map{va, 4u << 20, 0, h, 0};
    deliver(CUPTI_DRIVER_TRACE_CBID_cuMemMap, map, CUDA_SUCCESS, "cuMemMap");
    CHECK(unreachable_bytes() == base);  // mapped: in use
    cuMemUnmap_params unmap{va, 4u << 20};
    deliver(CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, unmap, CUDA_SUCCESS, "cuMemUnmap");
    CHECK(unreachable_bytes() == base + (4u << 20));
    cuMemRelease_params release{h};
    deliver(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, release, CUDA_SUCCESS, "cuMemRelease");
    CHECK(unreachable_bytes() == base);
}

TEST_CASE("a failed release the driver refused is misuse, with the driver's result") {
    REQUIRE(shim::Auditor::enter());
    const auto misuse_before = now().summary.misuse_events;
    cuMemRelease_params release{0xdead};
    deliver(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, release, CUDA_ERROR_INVALID_VALUE, "cuMemRelease");
    const auto snap = now();
    CHECK(snap.summary.misuse_events == misuse_before + 1);
    bool found = false;
    for (const auto& m : snap.misuse) found |= std::string(m.site.api) == "cuMemRelease" && std::string(m.result) == "CUDA_ERROR_INVALID_VALUE";
    CHECK(found);
}

TEST_CASE("classic allocations and frees through callbacks; a call the wrappers already saw is not counted twice") {
    REQUIRE(shim::Auditor::enter());
    const std::uint64_t before = shim::Auditor::get().ledger().owners_now().empty() ? 0 : now().summary.live_bytes;
    CUdeviceptr d = 0x7100000000;
    cuMemAlloc_v2_params alloc{&d, 1u << 20};
    deliver(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, alloc, CUDA_SUCCESS, "cuMemAlloc_v2");
    CHECK(now().summary.live_bytes == before + (1u << 20));
    {
        shim::DriverScope inside_a_wrapper;  // backend=both: the wrapper of this very call records it
        CUdeviceptr d2 = 0x7200000000;
        cuMemAlloc_v2_params again{&d2, 1u << 20};
        deliver(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, again, CUDA_SUCCESS, "cuMemAlloc_v2");
    }
    CHECK(now().summary.live_bytes == before + (1u << 20));
    cuMemFree_v2_params free_params{d};
    deliver(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, free_params, CUDA_SUCCESS, "cuMemFree_v2");
    CHECK(now().summary.live_bytes == before);
}

TEST_CASE("pool activity records give each stream-ordered pool's latest reserved and used bytes") {
    const shim::PoolFigures before = shim::pool_figures();
    CUpti_ActivityMemory4 alloc{};
    alloc.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
    alloc.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    alloc.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
    alloc.memoryPoolConfig.address = 0x5000;
    alloc.memoryPoolConfig.pool.size = 32u << 20;
    alloc.memoryPoolConfig.utilizedSize = 4u << 20;
    shim::absorb_activity(reinterpret_cast<const CUpti_Activity*>(&alloc));
    CHECK(shim::pool_figures().reserved == before.reserved + (32u << 20));
    CHECK(shim::pool_figures().used == before.used + (4u << 20));

    alloc.memoryPoolConfig.pool.size = 64u << 20;  // the pool grew: its latest figure replaces the last
    alloc.memoryPoolConfig.utilizedSize = 40u << 20;
    shim::absorb_activity(reinterpret_cast<const CUpti_Activity*>(&alloc));
    CHECK(shim::pool_figures().reserved == before.reserved + (64u << 20));

    CUpti_ActivityMemoryPool3 trimmed{};
    trimmed.kind = CUPTI_ACTIVITY_KIND_MEMORY_POOL;
    trimmed.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED;
    trimmed.address = 0x5000;
    trimmed.size = 8u << 20;
    trimmed.utilizedSize = 0;
    shim::absorb_activity(reinterpret_cast<const CUpti_Activity*>(&trimmed));
    CHECK(shim::pool_figures().reserved == before.reserved + (8u << 20));
    trimmed.memoryPoolOperationType = CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED;
    shim::absorb_activity(reinterpret_cast<const CUpti_Activity*>(&trimmed));
    CHECK(shim::pool_figures().reserved == before.reserved);
}
