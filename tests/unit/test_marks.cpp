// The history's marks on a bare ledger (no shim, no driver): a step's figures from the ledger and the
// driver's, growth and leak alarms with the owner and site that grew, their bounds and their log rate.
#include "history/marks.hpp"

#include <catch2/catch.hpp>

#include <chrono>

using namespace cumemaudit;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::uint64_t MiB = 1ull << 20;

history::MarkLimits limits() {
    history::MarkLimits l;
    l.steps_kept = 100;
    l.step_windows = 8;
    l.growth_alarm = 16 * MiB;
    l.max_alarms = 8;
    l.alarm_interval = std::chrono::seconds(60);
    return l;
}

history::MarkInput step(std::uint64_t n, std::uint64_t used = 0) {
    history::MarkInput m;
    m.step = n;
    m.time_ns = n * 1000;
    if (used != 0) m.driver = {.known = true, .device = 0, .used = used, .total = 1024 * MiB};
    return m;
}

// A VMM buffer created, mapped and unmapped again without its release: unreachable from then on.
void leak_vmm(ledger::Ledger& l, std::uint64_t handle, std::uint64_t bytes, ledger::Site create) {
    const std::uint64_t va = 0x7f0000000000 + handle * (1ull << 32);
    l.created(handle, bytes, ledger::HandleType::none, create);
    l.mapped(va, bytes, handle, true, "CUDA_SUCCESS", {"cuMemMap", 0, create.owner});
    const ledger::Site unmap{"cuMemUnmap", 0, create.owner};
    l.unmapped(va, bytes, true, "CUDA_SUCCESS", unmap);
}

}  // namespace

TEST_CASE("a step holds live bytes per owner and kind, the driver's figures and what nothing named") {
    ledger::Ledger l;
    const auto nccl = l.owner_id("nccl"), torch = l.owner_id("pytorch");
    l.allocated(0x1000, 40 * MiB, ledger::Kind::classic, {"cuMemAlloc_v2", 1, nccl});
    l.allocated(0x2000, 100 * MiB, ledger::Kind::classic, {"cuMemAlloc_v2", 2, torch});
    l.allocated(0x3000, 8 * MiB, ledger::Kind::host_pinned, {"cuMemHostAlloc", 3, torch});  // not device memory
    history::Marks marks(l, limits());
    history::MarkInput m = step(1, 700 * MiB);
    m.pool_reserved = 64 * MiB;
    m.pool_used = 16 * MiB;
    m.driver.graph_reserved = 32 * MiB;
    m.torch_allocated = 90 * MiB;
    marks.mark(m, Clock::now());
    history::History h;
    marks.copy_to(h);
    REQUIRE(h.steps.size() == 1);
    const history::Step& s = h.steps[0];
    CHECK(s.step == 1);
    CHECK(s.live_by_owner.at(nccl) == 40 * MiB);
    CHECK(s.live_by_owner.at(torch) == 108 * MiB);
    CHECK(s.live_by_kind[static_cast<int>(ledger::Kind::classic)] == 140 * MiB);
    CHECK(s.live_by_kind[static_cast<int>(ledger::Kind::host_pinned)] == 8 * MiB);
    // 700 used = 140 tracked on the device + 48 idle in pools + 32 graph memory + 480 unnamed.
    CHECK(s.unattributed_bytes == 480 * MiB);
    CHECK(s.driver.used == 700 * MiB);
    CHECK(s.torch_allocated == 90 * MiB);
    CHECK(s.peak_tracked_bytes == 148 * MiB);
    CHECK(h.steps_marked == 1);

    SECTION("memory other processes hold, as NVML listed it, is theirs, not unattributed") {
        history::MarkInput next = m;
        next.step = 2;
        next.driver.other_processes_bytes = 400 * MiB;
        marks.mark(next, Clock::now());
        history::History after;
        marks.copy_to(after);
        REQUIRE(after.steps.size() == 2);
        CHECK(after.steps[1].unattributed_bytes == 80 * MiB);
        CHECK(after.steps[1].driver.other_processes_bytes == 400 * MiB);
    }
}

TEST_CASE("without the driver's figures a step names nothing unattributed") {
    ledger::Ledger l;
    l.allocated(0x1000, 40 * MiB, ledger::Kind::classic, {"cuMemAlloc_v2", 1, l.owner_id("nccl")});
    history::Marks marks(l, limits());
    marks.mark(step(1), Clock::now());
    history::History h;
    marks.copy_to(h);
    CHECK_FALSE(h.steps[0].driver.known);
    CHECK(h.steps[0].unattributed_bytes == 0);
}

TEST_CASE("memory outside PyTorch that grows past the threshold raises one alarm per owner and site") {
    ledger::Ledger l;
    const auto nccl = l.owner_id("nccl"), torch = l.owner_id("pytorch");
    history::Marks marks(l, limits());
    const Clock::time_point t0{};
    CHECK(marks.mark(step(1), t0).empty());
    l.allocated(0x1000, 32 * MiB, ledger::Kind::classic, {"cuMemAlloc_v2", 7, nccl});
    l.allocated(0x9000, 512 * MiB, ledger::Kind::classic, {"cuMemAlloc_v2", 8, torch});  // PyTorch's own business
    l.allocated(0x5000, 8 * MiB, ledger::Kind::classic, {"cuMemAlloc_v2", 9, l.owner_id("cublas")});  // below 16 MiB
    auto raised = marks.mark(step(2), t0);
    REQUIRE(raised.size() == 1);
    CHECK(raised[0].alarm.what == history::AlarmKind::growth);
    CHECK(raised[0].alarm.owner == nccl);
    CHECK(raised[0].alarm.site.trace == 7);  // the site that grew
    CHECK(raised[0].step == 2);
    CHECK(raised[0].growth == 32 * MiB);
    CHECK(raised[0].now_bytes == 32 * MiB);
    CHECK(raised[0].alarm.count == 1);

    SECTION("a repeat is counted on the first; its line waits for the interval") {
        l.allocated(0x2000, 32 * MiB, ledger::Kind::classic, {"cuMemAlloc_v2", 7, nccl});
        CHECK(marks.mark(step(3), t0 + std::chrono::seconds(10)).empty());
        l.allocated(0x3000, 32 * MiB, ledger::Kind::classic, {"cuMemAlloc_v2", 7, nccl});
        raised = marks.mark(step(4), t0 + std::chrono::seconds(61));
        REQUIRE(raised.size() == 1);
        CHECK(raised[0].alarm.count == 3);
        CHECK(raised[0].alarm.step == 2);  // its first step
        CHECK(raised[0].step == 4);
        history::History h;
        marks.copy_to(h);
        REQUIRE(h.alarms.size() == 1);
        CHECK(h.alarms[0].bytes == 96 * MiB);
        CHECK(h.alarms[0].live_bytes == 96 * MiB);
        CHECK(h.alarms[0].last_step == 4);
    }
    SECTION("a named mark sits at the last numbered step") {
        history::MarkInput phase = step(0);
        phase.label = "eval";
        marks.mark(phase, t0);
        CHECK(marks.last_step() == 2);
        history::History h;
        marks.copy_to(h);
        CHECK(h.steps.back().step == 2);
        CHECK(h.steps.back().label == "eval");
    }
}

TEST_CASE("no growth alarm during the warm-up marks") {
    ledger::Ledger l;
    const auto nccl = l.owner_id("nccl");
    history::MarkLimits lim = limits();
    lim.warmup_steps = 2;
    history::Marks marks(l, lim);
    marks.mark(step(1), Clock::now());
    l.allocated(0x1000, 64 * MiB, ledger::Kind::classic, {"cuMemAlloc_v2", 7, nccl});
    CHECK(marks.mark(step(2), Clock::now()).empty());  // the second mark: still warming up
    l.allocated(0x2000, 64 * MiB, ledger::Kind::classic, {"cuMemAlloc_v2", 7, nccl});
    CHECK(marks.mark(step(3), Clock::now()).size() == 1);
}

TEST_CASE("unreachable VMM memory that grows at a quiet point is a leak alarm; a sample never calls one") {
    ledger::Ledger l;
    const auto deepep = l.owner_id("deepep");
    history::Marks marks(l, limits());
    const Clock::time_point t0{};
    marks.mark(step(1), t0);
    leak_vmm(l, 0x10, 2 * MiB, {"cuMemCreate", 5, deepep});
    history::MarkInput sample = step(0);
    sample.label = "sample";
    CHECK(marks.mark(sample, t0).empty());  // between two calls of any thread: not a quiet point
    auto raised = marks.mark(step(2), t0);
    REQUIRE(raised.size() == 1);
    CHECK(raised[0].alarm.what == history::AlarmKind::leak);
    CHECK(raised[0].alarm.owner == deepep);
    CHECK(raised[0].alarm.site.api == std::string("cuMemCreate"));
    CHECK(raised[0].growth == 2 * MiB);
    history::History h;
    marks.copy_to(h);
    REQUIRE(h.steps.size() == 3);
    CHECK(h.steps[1].leaked_bytes == 0);  // the sample carried the last quiet point's figure
    CHECK(h.steps[2].leaked_bytes == 2 * MiB);
    CHECK(h.steps[2].leaked_by_owner.at(deepep) == 2 * MiB);
    // A sample after it carries it on.
    marks.mark(sample, t0);
    marks.copy_to(h);
    CHECK(h.steps[3].leaked_bytes == 2 * MiB);
    CHECK(h.steps[3].leaked_by_owner.at(deepep) == 2 * MiB);
}

TEST_CASE("alarms of new sites past max_alarms are counted, not kept") {
    ledger::Ledger l;
    history::MarkLimits lim = limits();
    lim.max_alarms = 2;
    history::Marks marks(l, lim);
    marks.mark(step(1), Clock::now());
    for (int o = 0; o < 5; ++o)
        l.allocated(0x1000 * (o + 1), 32 * MiB, ledger::Kind::classic,
                    {"cuMemAlloc_v2", static_cast<ledger::TraceId>(o + 1), l.owner_id("lib" + std::to_string(o))});
    CHECK(marks.mark(step(2), Clock::now()).size() == 2);
    history::History h;
    marks.copy_to(h);
    CHECK(h.alarms.size() == 2);
    CHECK(h.alarms_dropped == 3);
}

TEST_CASE("a handle held and not yet mapped at a mark is held_unmapped_bytes, no leak and no alarm") {
    ledger::Ledger l;
    const auto deepep = l.owner_id("deepep");
    history::Marks marks(l, limits());
    const Clock::time_point t0{};
    const std::uint64_t va = 0x7f0000000000;
    l.created(0x10, 8 * MiB, ledger::HandleType::none, {"cuMemCreate", 5, deepep});  // mapped at step 2; below growth_alarm
    CHECK(marks.mark(step(0), t0).empty());
    CHECK(marks.mark(step(1), t0).empty());
    l.mapped(va, 8 * MiB, 0x10, true, "CUDA_SUCCESS", {"cuMemMap", 6, deepep});
    CHECK(marks.mark(step(2), t0).empty());
    const ledger::Site unmap{"cuMemUnmap", 7, deepep};
    l.unmapped(va, 8 * MiB, true, "CUDA_SUCCESS", unmap);
    l.released(0x10, true, "CUDA_SUCCESS", {"cuMemRelease", 8, deepep});
    CHECK(marks.mark(step(3), t0).empty());
    history::History h;
    marks.copy_to(h);
    REQUIRE(h.steps.size() == 4);
    const std::uint64_t held[] = {8 * MiB, 8 * MiB, 0, 0};
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(h.steps[i].held_unmapped_bytes == held[i]);
        CHECK(h.steps[i].leaked_bytes == 0);
        CHECK(h.steps[i].leaked_by_owner.empty());
    }
    CHECK(h.alarms.empty());
}

TEST_CASE("the leak alarm names the site whose leaked bytes grew, not the largest leak so far") {
    ledger::Ledger l;
    const auto deepep = l.owner_id("deepep"), nccl = l.owner_id("nccl");
    history::Marks marks(l, limits());
    const Clock::time_point t0{};
    leak_vmm(l, 0x10, 8 * MiB, {"cuMemCreate", 5, deepep});  // sizes below growth_alarm: leak alarms only
    auto raised = marks.mark(step(1), t0);
    REQUIRE(raised.size() == 1);
    CHECK(raised[0].alarm.site.trace == 5);
    leak_vmm(l, 0x20, 2 * MiB, {"cuMemCreate", 9, nccl});
    raised = marks.mark(step(2), t0);
    REQUIRE(raised.size() == 1);
    CHECK(raised[0].alarm.what == history::AlarmKind::leak);
    CHECK(raised[0].alarm.owner == nccl);
    CHECK(raised[0].alarm.site.trace == 9);
    CHECK(raised[0].alarm.step == 2);
    CHECK(raised[0].growth == 2 * MiB);
    CHECK(raised[0].now_bytes == 10 * MiB);
    // A handle made ahead of its map beside a real leak: only the leak counts, and only its site is named.
    l.created(0x30, 8 * MiB, ledger::HandleType::none, {"cuMemCreate", 11, deepep});
    leak_vmm(l, 0x40, 4 * MiB, {"cuMemCreate", 9, nccl});
    raised = marks.mark(step(3), t0 + std::chrono::minutes(2));  // past alarm_interval: logged again
    REQUIRE(raised.size() == 1);
    CHECK(raised[0].alarm.site.trace == 9);
    CHECK(raised[0].alarm.count == 2);
    CHECK(raised[0].growth == 4 * MiB);
    history::History h;
    marks.copy_to(h);
    REQUIRE(h.steps.size() == 3);
    CHECK(h.steps[2].leaked_bytes == 14 * MiB);
    CHECK(h.steps[2].leaked_by_owner.at(nccl) == 6 * MiB);
    CHECK(h.steps[2].held_unmapped_bytes == 8 * MiB);
    REQUIRE(h.alarms.size() == 2);
    CHECK(h.alarms[1].site.trace == 9);
    CHECK(h.alarms[1].step == 2);
    CHECK(h.alarms[1].last_step == 3);
    CHECK(h.alarms[1].bytes == 6 * MiB);
}
