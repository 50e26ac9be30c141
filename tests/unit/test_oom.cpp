// The out-of-memory record's pieces on a bare ledger (no shim, no driver): the breakdown of driver-used
// memory over a ledger built by hand (exact parts, largest first, adding up), the rate limit and retry
// matching of the records, and the record's JSON form read back field for field.
#include "history/oom_breakdown.hpp"
#include "history/oom_records.hpp"
#include "report/report.hpp"

#include <nlohmann/json.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <numeric>
#include <tuple>

using namespace cumemaudit;

namespace {

constexpr std::uint64_t MiB = 1ull << 20;

ledger::Site site(const char* api, ledger::TraceId trace, ledger::OwnerId owner) { return {api, trace, owner}; }

std::uint64_t sum(const std::vector<history::OomPart>& parts) {
    return std::accumulate(parts.begin(), parts.end(), std::uint64_t{0},
                           [](std::uint64_t s, const history::OomPart& p) { return s + p.bytes; });
}

history::Oom record(const char* api, std::uint64_t bytes) {
    history::Oom oom;
    oom.api = api;
    oom.requested_bytes = bytes;
    return oom;
}

// A part as the report names it: what, owner and kind (the last two for live and leaked parts only).
std::tuple<std::string, std::string, std::string, std::uint64_t> named(const ledger::Ledger& l, const history::OomPart& p) {
    const bool owned = p.what == history::PartKind::live || p.what == history::PartKind::leaked;
    return {history::to_string(p.what), owned ? l.owner_name(p.owner) : "", owned ? ledger::to_string(p.kind) : "", p.bytes};
}

using Clock = std::chrono::steady_clock;

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
    std::vector<history::Graph> graphs(2);
    graphs[0].id = 1;
    graphs[0].held_instantiate_bytes = 4 * MiB;
    graphs[1].id = 2;  // destroyed: holds nothing any more
    graphs[1].instantiate_cost_bytes = 4 * MiB;

    const std::uint64_t used = 256 * MiB + 64 * MiB + 100 * MiB + 4 * MiB + 16 * MiB + 500 * MiB;
    const history::Oom in = history::oom_breakdown(l, graphs, {.driver_used = used, .pool_reserved = 48 * MiB, .pool_used = 32 * MiB, .other_processes = {}});
    std::vector<std::tuple<std::string, std::string, std::string, std::uint64_t>> got;
    for (const history::OomPart& p : in.parts) got.push_back(named(l, p));
    CHECK(got == decltype(got){{"unattributed", "", "", 500 * MiB},
                               {"leaked", "deepep", "vmm_physical", 256 * MiB},
                               {"live", "pytorch", "classic", 100 * MiB},
                               {"live", "deepep", "vmm_physical", 64 * MiB},
                               {"async_pool_idle", "", "", 16 * MiB},
                               {"graph", "", "", 4 * MiB}});
    CHECK(sum(in.parts) == used);
    CHECK(in.leaked_bytes == 256 * MiB);
    CHECK(in.unattributed_bytes == 500 * MiB);
    CHECK(in.parts[1].site.trace == 1);  // the leak is named by the call that created it
    CHECK(in.parts[1].site.api == std::string("cuMemCreate"));
    CHECK(in.parts[0].site.api == std::string(""));  // the rest has no site
    CHECK(in.parts[5].graph == 1);

    SECTION("named parts above driver-used memory leave nothing unattributed, and are not cut") {
        const history::Oom over = history::oom_breakdown(l, {}, {.driver_used = 300 * MiB, .other_processes = {}});
        CHECK(over.unattributed_bytes == 0);
        CHECK(sum(over.parts) == 256 * MiB + 100 * MiB + 64 * MiB);
    }
}

TEST_CASE("other processes on the device are parts of their own: the largest by pid and name, the rest together") {
    ledger::Ledger l;
    l.allocated(0x1000, 100 * MiB, ledger::Kind::classic, site("cuMemAlloc", 1, l.owner_id("cupy")));
    history::OomFigures at{.driver_used = 100 * MiB + 600 * MiB + 40 * MiB + 20 * MiB, .processes_listed = true,
                           .other_processes = {}};
    at.other_processes.push_back({4242, "python3", 600 * MiB});
    for (std::uint32_t i = 0; i < history::kOtherProcessesKept - 1; ++i)  // with 4242, eight named
        at.other_processes.push_back({100 + i, "worker", 5 * MiB});
    at.other_processes.push_back({200, "worker", 5 * MiB});  // the ninth: one part with any further ones
    at.other_processes.push_back({99, "", 0});  // NVML lists a process with no memory yet: no part
    const history::Oom in = history::oom_breakdown(l, {}, at);
    REQUIRE(in.parts.size() == 1 + 1 + 1 + 7 + 1);
    CHECK(in.parts[0].what == history::PartKind::other_process);
    CHECK((in.parts[0].process.pid == 4242 && in.parts[0].process.name == "python3" && in.parts[0].bytes == 600 * MiB));
    CHECK((in.parts[1].what == history::PartKind::live && in.parts[1].bytes == 100 * MiB));
    CHECK(in.parts[2].bytes == 20 * MiB);  // what nothing named: this process's context, modules, stacks
    CHECK(in.parts[2].what == history::PartKind::unattributed);
    for (std::size_t i = 3; i < 10; ++i)  // equal sizes keep NVML's order, the rest part last
        CHECK((in.parts[i].what == history::PartKind::other_process && in.parts[i].process.pid == 97 + i &&
               in.parts[i].process.name == "worker" && in.parts[i].bytes == 5 * MiB));
    CHECK((in.parts[10].what == history::PartKind::other_process && in.parts[10].process.pid == 0 &&
           in.parts[10].bytes == 5 * MiB));
    CHECK(sum(in.parts) == at.driver_used);
    CHECK(in.unattributed_bytes == 20 * MiB);
    CHECK(in.processes_listed);
}

TEST_CASE("VMM memory held and never mapped is a part of its own, neither leaked nor live") {
    ledger::Ledger l;
    const auto nvshmem = l.owner_id("nvshmem");
    // A heap chunk created ahead of its map (never mapped), a leaked buffer, a mapped one.
    l.created(0x10, 512 * MiB, ledger::HandleType::posix_fd, site("cuMemCreate", 1, nvshmem));
    l.created(0x20, 128 * MiB, ledger::HandleType::posix_fd, site("cuMemCreate", 2, nvshmem));
    l.mapped(0x7f0000000000, 128 * MiB, 0x20, true, "CUDA_SUCCESS", site("cuMemMap", 3, nvshmem));
    l.unmapped(0x7f0000000000, 128 * MiB, true, "CUDA_SUCCESS", site("cuMemUnmap", 4, nvshmem));
    l.created(0x30, 64 * MiB, ledger::HandleType::posix_fd, site("cuMemCreate", 5, nvshmem));
    l.mapped(0x7f1000000000, 64 * MiB, 0x30, true, "CUDA_SUCCESS", site("cuMemMap", 6, nvshmem));
    const history::Oom in = history::oom_breakdown(l, {}, {.driver_used = 704 * MiB, .other_processes = {}});
    REQUIRE(in.parts.size() == 3);
    CHECK((in.parts[0].what == history::PartKind::held_unmapped && in.parts[0].bytes == 512 * MiB && in.parts[0].site.trace == 1));
    CHECK((in.parts[1].what == history::PartKind::leaked && in.parts[1].bytes == 128 * MiB && in.parts[1].site.trace == 2));
    CHECK((in.parts[2].what == history::PartKind::live && in.parts[2].bytes == 64 * MiB));
    CHECK(in.leaked_bytes == 128 * MiB);
    CHECK(in.unattributed_bytes == 0);
}

TEST_CASE("an allocation leaked with two references counts once, under its creating site") {
    ledger::Ledger l;
    const auto owner = l.owner_id("deepep");
    l.created(0x10, 128 * MiB, ledger::HandleType::fabric, site("cuMemCreate", 1, owner));
    l.mapped(0x7f0000000000, 128 * MiB, 0x10, true, "CUDA_SUCCESS", site("cuMemMap", 2, owner));
    l.retained(0x10, 0x7f0000000000, site("cuMemRetainAllocationHandle", 3, owner));
    l.unmapped(0x7f0000000000, 128 * MiB, true, "CUDA_SUCCESS", site("cuMemUnmap", 4, owner));
    const history::Oom in = history::oom_breakdown(l, {}, {.driver_used = 128 * MiB, .other_processes = {}});
    REQUIRE(in.parts.size() == 1);
    CHECK(in.parts[0].what == history::PartKind::leaked);
    CHECK(in.parts[0].bytes == 128 * MiB);
    CHECK(in.parts[0].site.trace == 1);
}

TEST_CASE("the OOM records write the first refusal, then one per interval, and match retries exactly") {
    history::OomRecords log;
    const Clock::time_point t0{};
    const auto hour = std::chrono::seconds(3600);
    auto refused = [&](history::Oom o, std::chrono::seconds interval) {
        const auto r = log.refused(std::move(o), t0 + std::chrono::seconds(1), interval);
        CHECK(r.kept);
        return r.due;
    };
    CHECK(refused(record("cuMemAlloc", 64 * MiB), hour));
    CHECK_FALSE(refused(record("cuMemAlloc", 64 * MiB), hour));
    CHECK_FALSE(refused(record("cuMemCreate", 2 * MiB), hour));
    CHECK(refused(record("cuMemCreate", 2 * MiB), std::chrono::seconds(0)));  // interval 0: every one
    CHECK(log.events() == 4);

    CHECK(log.succeeded("cuMemAlloc", 32 * MiB, 5) == 0);  // another size: not a retry
    CHECK(log.succeeded("cuMemCreate", 64 * MiB, 6) == 0);  // another API: not a retry
    CHECK(log.succeeded("cuMemAlloc", 64 * MiB, 7) == 2);
    const auto& rows = log.records();
    REQUIRE(rows.size() == 4);
    CHECK((rows[0].recovered && rows[1].recovered));
    CHECK(rows[0].recovered_time_ns == 7);
    CHECK((!rows[2].recovered && !rows[3].recovered));
    CHECK(log.succeeded("cuMemCreate", 2 * MiB, 8) == 2);
    CHECK(log.succeeded("cuMemCreate", 2 * MiB, 9) == 0);  // recovered once

    SECTION("PyTorch's view joins the latest record once, and is written the first time") {
        CHECK(log.torch_oom(2 * MiB, {{"default", 10, 30}}, record("torch", 0), t0));
        CHECK(log.records().back().torch_pools.size() == 1);
        CHECK(log.records().size() == 4);
        // The latest record has PyTorch's view already: this refusal was PyTorch's alone.
        CHECK_FALSE(log.torch_oom(6 * MiB, {}, record("torch", 0), t0));
        CHECK(log.records().size() == 5);
        CHECK(log.records().back().api == "torch");
        CHECK(log.records().back().requested_bytes == 6 * MiB);
        CHECK(log.events() == 5);
    }
    SECTION("past kKept records, refusals are counted and not kept") {
        for (std::size_t i = log.records().size(); i < history::OomRecords::kKept; ++i) refused(record("cuMemAlloc", 1), hour);
        CHECK_FALSE(log.refused(record("cuMemAlloc", 1), t0, hour).kept);
        CHECK(log.records().size() == history::OomRecords::kKept);
        CHECK(log.events() == history::OomRecords::kKept + 1);
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
    o.parts = {{"leaked", "deepep", "vmm_physical", 0, 1, {"cuMemCreate", {}}, 0, ""}, {"graph", "", "", 4, 1, {}, 0, ""}};
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
