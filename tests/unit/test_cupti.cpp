// The CUPTI backend's translation: callback data as CUPTI delivers it (parameter structs of
// generated_cuda_meta.h, recorded by hand here) reaches the same ledger events as the wrappers do. The
// simulated driver cannot host CUPTI, so the backend itself runs only on a GPU (tests/gpu).
#include "shim/record/call.hpp"
#include "shim/boundary/cupti_backend.hpp"
#include "shim/record/recorder.hpp"

#include <catch2/catch.hpp>
#include <cupti.h>

using namespace cumemaudit;

namespace {

// Delivers one driver-API exit callback for `cbid` with `params` and result `r` into `rec`.
template <typename Params>
void deliver(shim::Recorder& rec, CUpti_CallbackId cbid, Params& params, CUresult r, const char* name) {
    CUpti_CallbackData data{};
    data.callbackSite = CUPTI_API_EXIT;
    data.functionName = name;
    data.functionParams = &params;
    data.functionReturnValue = &r;
    shim::dispatch_cupti(&rec, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
}

ledger::Snapshot now(shim::Recorder& rec) {
    return rec.ledger().snapshot(ledger::Moment::checkpoint, [](int, const ledger::ExportKey&) { return false; });
}

std::uint64_t unreachable_bytes(shim::Recorder& rec) { return now(rec).summary.leaked_bytes; }

// Each test records into a Recorder of its own, as the process's would: exact figures, no deltas.
struct Fresh {
    shim::Recorder rec{options::Options{}, 1};
};

}  // namespace

TEST_CASE_METHOD(Fresh, "create, map, unmap, release through CUPTI callbacks balance in the ledger; a lost reference leaks") {
    CUmemGenericAllocationHandle h = 0x1234;
    CUmemAllocationProp prop{};
    cuMemCreate_params create{&h, 4u << 20, &prop, 0};
    deliver(rec, CUPTI_DRIVER_TRACE_CBID_cuMemCreate, create, CUDA_SUCCESS, "cuMemCreate");
    CHECK(unreachable_bytes(rec) == (4u << 20));  // held and never mapped: unreachable at a checkpoint

    CUdeviceptr va = 0x7000000000;
    cuMemMap_params map{va, 4u << 20, 0, h, 0};
    deliver(rec, CUPTI_DRIVER_TRACE_CBID_cuMemMap, map, CUDA_SUCCESS, "cuMemMap");
    CHECK(unreachable_bytes(rec) == 0);  // mapped: in use
    cuMemUnmap_params unmap{va, 4u << 20};
    deliver(rec, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, unmap, CUDA_SUCCESS, "cuMemUnmap");
    CHECK(unreachable_bytes(rec) == (4u << 20));
    cuMemRelease_params release{h};
    deliver(rec, CUPTI_DRIVER_TRACE_CBID_cuMemRelease, release, CUDA_SUCCESS, "cuMemRelease");
    CHECK(unreachable_bytes(rec) == 0);
}

TEST_CASE_METHOD(Fresh, "a failed release the driver refused is misuse, with the driver's result") {
    cuMemRelease_params release{0xdead};
    deliver(rec, CUPTI_DRIVER_TRACE_CBID_cuMemRelease, release, CUDA_ERROR_INVALID_VALUE, "cuMemRelease");
    const auto snap = now(rec);
    CHECK(snap.summary.misuse_events == 1);
    REQUIRE(snap.misuse.size() == 1);
    CHECK(std::string(snap.misuse[0].site.api) == "cuMemRelease");
    CHECK(std::string(snap.misuse[0].result) == "CUDA_ERROR_INVALID_VALUE");
}

TEST_CASE_METHOD(Fresh, "classic allocations and frees through callbacks; a call the wrappers already saw is not counted twice") {
    CUdeviceptr d = 0x7100000000;
    cuMemAlloc_v2_params alloc{&d, 1u << 20};
    deliver(rec, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, alloc, CUDA_SUCCESS, "cuMemAlloc_v2");
    CHECK(now(rec).summary.live_bytes == (1u << 20));
    {
        shim::DriverScope inside_a_wrapper;  // backend=both: the wrapper of this very call records it
        CUdeviceptr d2 = 0x7200000000;
        cuMemAlloc_v2_params again{&d2, 1u << 20};
        deliver(rec, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, again, CUDA_SUCCESS, "cuMemAlloc_v2");
    }
    CHECK(now(rec).summary.live_bytes == (1u << 20));
    cuMemFree_v2_params free_params{d};
    deliver(rec, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, free_params, CUDA_SUCCESS, "cuMemFree_v2");
    CHECK(now(rec).summary.live_bytes == 0);
}

