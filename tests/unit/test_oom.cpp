// The out-of-memory record's pieces without a driver: the breakdown of driver-used memory over a ledger
// built by hand (exact parts, largest first, adding up), the rate limit and retry matching of OomLog, and
// the record's JSON form read back field for field.
#include "report/report.hpp"
#include "shim/record/oom_log.hpp"
#include "shim/record/oom_watch.hpp"

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include <numeric>

using namespace cumemaudit;

namespace {

constexpr std::uint64_t MiB = 1ull << 20;

ledger::Site site(const char* api, ledger::TraceId trace, ledger::OwnerId owner) { return {api, trace, owner}; }

std::uint64_t sum(const std::vector<report::OomPart>& parts) {
    return std::accumulate(parts.begin(), parts.end(), std::uint64_t{0},
                           [](std::uint64_t s, const report::OomPart& p) { return s + p.bytes; });
}

report::OomInput record(const char* api, std::uint64_t bytes) {
    report::OomInput in;
    in.oom.api = api;
    in.oom.requested_bytes = bytes;
    return in;
}

}  // namespace

TEST_CASE("the breakdown splits driver-used memory into leaked, live, graphs, idle pools and the rest") {
    ledger::Ledger l;
    const auto deepep = l.owner_id("deepep"), torch = l.owner_id("pytorch");
    // A DeepEP buffer freed without its releases: unreachable, 256 MiB, created at trace 1.
    l.created(0x10, 256 * MiB, ledger::HandleType::fabric, site("cuMemCreate", 1, deepep));
    l.reserved(0x7f0000000000, 256 * MiB, site("cuMemAddressReserve", 2, deepep));
    l.mapped(0x7f0000000000, 256 * MiB, 0x10, true, "CUDA_SUCCESS", site("cuMemMap", 3, deepep));
    l.unmapped(0x7f0000000000, 256 * MiB, true, "CUDA_SUCCESS", site("cuMemUnmap", 4, deepep));
    // A mapped, live VMM buffer of the same owner, and PyTorch's classic and pinned host memory.
    l.created(0x20, 64 * MiB, ledger::HandleType::none, site("cuMemCreate", 5, deepep));
    l.mapped(0x7f1000000000, 64 * MiB, 0x20, true, "CUDA_SUCCESS", site("cuMemMap", 6, deepep));
    l.allocated(0x1000, 100 * MiB, ledger::Kind::classic, site("cuMemAlloc", 7, torch));
    l.allocated(0x2000, 8 * MiB, ledger::Kind::host_pinned, site("cuMemHostAlloc", 8, torch));
    std::vector<report::Graph> graphs(2);
    graphs[0].id = 1;
    graphs[0].held_instantiate_bytes = 4 * MiB;
    graphs[1].id = 2;  // destroyed: holds nothing any more
    graphs[1].instantiate_cost_bytes = 4 * MiB;

    const std::uint64_t used = 256 * MiB + 64 * MiB + 100 * MiB + 4 * MiB + 16 * MiB + 500 * MiB;
    const report::OomInput in = shim::oom_breakdown(l, graphs, used, 48 * MiB, 32 * MiB);
    std::vector<std::tuple<std::string, std::string, std::string, std::uint64_t>> got;
    for (const report::OomPart& p : in.oom.parts) got.emplace_back(p.what, p.owner, p.kind, p.bytes);
    CHECK(got == decltype(got){{"unattributed", "", "", 500 * MiB},
                               {"leaked", "deepep", "vmm_physical", 256 * MiB},
                               {"live", "pytorch", "classic", 100 * MiB},
                               {"live", "deepep", "vmm_physical", 64 * MiB},
                               {"async_pool_idle", "", "", 16 * MiB},
                               {"graph", "", "", 4 * MiB}});
    CHECK(sum(in.oom.parts) == used);
    CHECK(in.oom.leaked_bytes == 256 * MiB);
    CHECK(in.oom.unattributed_bytes == 500 * MiB);
    REQUIRE(in.part_sites.size() == in.oom.parts.size());
    CHECK(in.part_sites[1].trace == 1);  // the leak is named by the call that created it
    CHECK(in.part_sites[1].api == std::string("cuMemCreate"));
    CHECK(in.oom.parts[5].graph == 1);

    SECTION("named parts above driver-used memory leave nothing unattributed, and are not cut") {
        const report::OomInput over = shim::oom_breakdown(l, {}, 300 * MiB, 0, 0);
        CHECK(over.oom.unattributed_bytes == 0);
        CHECK(sum(over.oom.parts) == 256 * MiB + 100 * MiB + 64 * MiB);
    }
}

TEST_CASE("an allocation leaked with two references counts once, under its creating site") {
    ledger::Ledger l;
    const auto owner = l.owner_id("deepep");
    l.created(0x10, 128 * MiB, ledger::HandleType::fabric, site("cuMemCreate", 1, owner));
    l.mapped(0x7f0000000000, 128 * MiB, 0x10, true, "CUDA_SUCCESS", site("cuMemMap", 2, owner));
    l.retained(0x10, 0x7f0000000000, site("cuMemRetainAllocationHandle", 3, owner));
    l.unmapped(0x7f0000000000, 128 * MiB, true, "CUDA_SUCCESS", site("cuMemUnmap", 4, owner));
    const report::OomInput in = shim::oom_breakdown(l, {}, 128 * MiB, 0, 0);
    REQUIRE(in.oom.parts.size() == 1);
    CHECK(in.oom.parts[0].what == "leaked");
    CHECK(in.oom.parts[0].bytes == 128 * MiB);
    CHECK(in.part_sites[0].trace == 1);
}

TEST_CASE("the OOM log writes the first refusal, then one per interval, and matches retries exactly") {
    std::atomic<int> waiting{0};  // the Recorder's hot counter, here the test's own
    shim::OomLog log(waiting);
    CHECK(log.refused(record("cuMemAlloc", 64 * MiB), 3600));
    CHECK_FALSE(log.refused(record("cuMemAlloc", 64 * MiB), 3600));
    CHECK_FALSE(log.refused(record("cuMemCreate", 2 * MiB), 3600));
    CHECK(log.refused(record("cuMemCreate", 2 * MiB), 0));  // interval 0: every one
    CHECK(log.events() == 4);
    CHECK(log.pending());
    CHECK(waiting == 4);

    log.succeeded("cuMemAlloc", 32 * MiB, 5);  // another size: not a retry
    log.succeeded("cuMemCreate", 64 * MiB, 6);  // another API: not a retry
    log.succeeded("cuMemAlloc", 64 * MiB, 7);
    const auto rows = log.records();
    REQUIRE(rows.size() == 4);
    CHECK((rows[0].oom.recovered && rows[1].oom.recovered));
    CHECK(rows[0].oom.recovered_time_ns == 7);
    CHECK((!rows[2].oom.recovered && !rows[3].oom.recovered));
    log.succeeded("cuMemCreate", 2 * MiB, 8);
    CHECK_FALSE(log.pending());
    CHECK(waiting == 0);

    SECTION("PyTorch's view joins the latest record once, and is written the first time") {
        log.stage_pool({"default", 10, 30, 20});
        CHECK(log.torch_oom(2 * MiB, record("torch", 0)));
        CHECK(log.records().back().oom.pytorch_pools.size() == 1);
        CHECK(log.records().size() == 4);
        // The latest record has PyTorch's view already: this refusal was PyTorch's alone.
        CHECK_FALSE(log.torch_oom(6 * MiB, record("torch", 0)));
        CHECK(log.records().size() == 5);
        CHECK(log.records().back().oom.api == "torch");
        CHECK(log.records().back().oom.requested_bytes == 6 * MiB);
    }
}

TEST_CASE("an oom record and per-pool step figures survive the JSON form") {
    report::Report r;
    report::Oom o;
    o.time_ns = 11;
    o.step = 3;
    o.api = "cuMemCreate";
    o.result = "CUDA_ERROR_OUT_OF_MEMORY";
    o.requested_bytes = 2 * MiB;
    o.owner = "deepep";
    o.site.api = "cuMemCreate";
    o.driver_free_bytes = 1;
    o.driver_total_bytes = 3;
    o.driver_used_bytes = 2;
    o.leaked_bytes = 1;
    o.parts = {{"leaked", "deepep", "vmm_physical", 0, 1, {"cuMemCreate", {}}}, {"graph", "", "", 4, 1, {}}};
    o.recovered = true;
    o.recovered_time_ns = 12;
    o.pytorch_pools = {{"graph (1, 2)", 5, 9, 4}};
    r.oom.push_back(o);
    r.summary.oom_events = 7;
    report::Step s;
    s.pytorch_pools = {{"default", 1, 2, 1}};
    r.steps.push_back(s);
    const report::Report back = report::from_json(report::to_json(r));
    REQUIRE(back.oom.size() == 1);
    const report::Oom& b = back.oom[0];
    CHECK(report::to_json(back) == report::to_json(r));
    CHECK(b.parts[1].graph == 4);
    CHECK(b.pytorch_pools[0].fragmentation_bytes == 4);
    CHECK(back.summary.oom_events == 7);
    CHECK(report::to_json(r)["oom"][0]["parts"][0]["what"] == "leaked");
}
