// The job reduction (`cumemaudit merge` and every view of a directory): rank reports built by hand, the job's
// figures checked exactly — leaks each counted once across ranks, sites across ranks, who pins whom, each
// rank's steps and the steps summed, and the problems of a job.
#include "report/job_reduce.hpp"

#include <catch2/catch.hpp>

#include <limits>

using namespace cumemaudit::report;

namespace {

constexpr std::uint64_t MiB = 1 << 20;

Report rank_report(std::int64_t rank, std::int64_t world_size) {
    Report r;
    r.process.rank = rank;
    r.process.world_size = world_size;
    r.process.pid = 1000 + rank;
    r.process.host = "node0";
    r.process.exit_code = 0;
    return r;
}

Site at(const std::string& api, const std::string& function) {
    Site s;
    s.api = api;
    s.frames.push_back({0x1000, 0x10, "/bin/job", function, "/src/job.cpp", 7, ""});
    return s;
}

Leak row(const std::string& cls, const Site& site, std::uint64_t bytes, std::uint64_t allocations, std::uint64_t references) {
    Leak l;
    l.cls = cls;
    l.bytes = bytes;
    l.allocations = allocations;
    l.references = references;
    l.handle_type = "fabric";
    l.owner = "app";
    l.kind = "vmm_physical";
    l.site = site;
    return l;
}

// A leak of the rank's own, in its summary and its leak rows.
void leak_own(Report& r, const Site& site, std::uint64_t bytes, std::uint64_t allocations) {
    r.leaks.push_back(row("unreachable", site, bytes, allocations, allocations));
    r.summary.leaked_bytes += bytes;
    r.summary.leaked_allocations += allocations;
    r.summary.leaked_references += allocations;
}

// An import the rank neither released nor mapped: a leak of its own, at the import site, as a report has it.
void leak_import(Report& r, const std::string& key, std::uint64_t bytes) {
    const Site site = at("cuMemImportFromShareableHandle", "share");
    r.imports.push_back({key, "fabric", bytes, false, false, site});
    r.leaks.push_back(row("unreachable", site, bytes, 1, 1));
    r.summary.leaked_bytes += bytes;
    r.summary.leaked_allocations += 1;
    r.summary.leaked_references += 1;
}

void exports(Report& r, const std::string& key, std::uint64_t bytes, bool released) {
    r.exports.push_back({key, "fabric", bytes, at("cuMemExportToShareableHandle", "share"), r.process.pid, released});
}

Step numbered(std::uint64_t n, std::uint64_t live, std::uint64_t leaked) {
    Step s;
    s.step = n;
    s.time_ns = 100 * n;
    s.by_owner = {{"app", live}};
    s.driver_used_bytes = live + MiB;
    s.leaked_bytes = leaked;
    return s;
}

JobReport reduce(std::vector<Report> reports) {
    JobReduce job;
    for (std::size_t i = 0; i < reports.size(); ++i) job.add("/r/rank" + std::to_string(i) + ".json", std::move(reports[i]));
    return job.finish();
}

const JobRank& rank_of(const JobReport& j, std::int64_t rank) {
    for (const JobRank& r : j.ranks)
        if (r.rank == rank) return r;
    FAIL("no rank " << rank);
    return j.ranks.front();
}

}  // namespace

TEST_CASE("ranks that leak their own memory: the job adds them up, site by site") {
    const Site create = at("cuMemCreate", "grow"), other = at("cuMemCreate", "scratch");
    Report r0 = rank_report(0, 3), r1 = rank_report(1, 3), r2 = rank_report(2, 3);
    leak_own(r0, create, 4 * MiB, 2);
    leak_own(r1, create, 1 * MiB, 1);
    leak_own(r1, other, 2 * MiB, 1);
    r0.summary.misuse_events = 2;
    r2.summary.misuse_events = 1;
    const JobReport j = reduce({std::move(r2), std::move(r1), std::move(r0)});

    CHECK(j.summary.process.leaked_bytes == 7 * MiB);
    CHECK(j.summary.process.leaked_allocations == 4);
    CHECK(j.summary.process.leaked_references == 4);
    CHECK(j.summary.process.misuse_events == 3);
    CHECK(j.summary.pinned_by_peers_bytes == 0);
    CHECK(j.world_size == 3);
    CHECK(j.reports == 3);
    CHECK(j.problems.empty());
    // By rank whatever the order read; the worst first, ranks that leak nothing left out.
    REQUIRE(j.ranks.size() == 3);
    CHECK(j.ranks[0].rank == 0);
    CHECK(j.ranks[1].rank == 1);
    CHECK(j.ranks[2].rank == 2);
    CHECK(j.worst_ranks == std::vector<std::int64_t>{0, 1});
    CHECK(j.ranks[0].leaked_bytes == 4 * MiB);
    CHECK(j.ranks[0].own_leaked_bytes == 4 * MiB);
    CHECK(j.ranks[0].leaked_allocations == 2);
    CHECK(j.ranks[1].own_leaked_bytes == 3 * MiB);
    CHECK(j.ranks[2].leaked_bytes == 0);
    CHECK(j.ranks[0].file == "/r/rank2.json");

    // The same site on two ranks is one row; rows largest first.
    REQUIRE(j.sites.size() == 2);
    CHECK(j.sites[0].leak.site.frames[0].symbol == "grow");
    CHECK(j.sites[0].leak.bytes == 5 * MiB);
    CHECK(j.sites[0].leak.allocations == 3);
    CHECK(j.sites[0].leak.references == 3);
    CHECK(j.sites[0].ranks == 2);
    CHECK(j.sites[0].rank_list == std::vector<std::int64_t>{0, 1});
    CHECK(j.sites[1].leak.site.frames[0].symbol == "scratch");
    CHECK(j.sites[1].leak.bytes == 2 * MiB);
    CHECK(j.sites[1].rank_list == std::vector<std::int64_t>{1});
    // A rank's top site is its largest row, as a position in the job's sites.
    CHECK(j.ranks[0].top_site == 0);
    CHECK(j.ranks[1].top_site == 1);
    CHECK(j.ranks[2].top_site == -1);
}

TEST_CASE("worst ranks: at most five, largest first") {
    std::vector<Report> reports;
    for (std::int64_t r = 0; r < 7; ++r) {
        reports.push_back(rank_report(r, 7));
        leak_own(reports.back(), at("cuMemCreate", "grow"), static_cast<std::uint64_t>(r + 1) * MiB, 1);
    }
    const JobReport j = reduce(std::move(reports));
    CHECK(j.worst_ranks == std::vector<std::int64_t>{6, 5, 4, 3, 2});
    CHECK(j.summary.process.leaked_bytes == 28 * MiB);
    CHECK(j.sites.size() == 1);
    CHECK(j.sites[0].ranks == 7);
}

TEST_CASE("an allocation three ranks leaked by import is counted once, by its export key") {
    // Rank 0 exported 4 MiB and let go of it; ranks 1-3 imported it and never released the import.
    Report r0 = rank_report(0, 4);
    exports(r0, "k1", 4 * MiB, true);
    std::vector<Report> reports;
    reports.push_back(std::move(r0));
    for (std::int64_t r = 1; r <= 3; ++r) {
        reports.push_back(rank_report(r, 4));
        leak_import(reports.back(), "k1", 4 * MiB);
    }
    const JobReport j = reduce(std::move(reports));

    CHECK(j.summary.process.leaked_bytes == 4 * MiB);
    CHECK(j.summary.process.leaked_allocations == 1);
    CHECK(j.summary.process.leaked_references == 3);
    REQUIRE(j.sites.size() == 1);
    CHECK(j.sites[0].leak.site.api == "cuMemImportFromShareableHandle");
    CHECK(j.sites[0].leak.bytes == 4 * MiB);
    CHECK(j.sites[0].leak.allocations == 1);
    CHECK(j.sites[0].leak.references == 3);
    CHECK(j.sites[0].rank_list == std::vector<std::int64_t>{1, 2, 3});
    for (std::int64_t r = 1; r <= 3; ++r) {
        CHECK(rank_of(j, r).leaked_bytes == 4 * MiB);
        CHECK(rank_of(j, r).imported_leaked_bytes == 4 * MiB);
        CHECK(rank_of(j, r).own_leaked_bytes == 0);
        CHECK(rank_of(j, r).top_site == 0);
    }
    CHECK(j.worst_ranks == std::vector<std::int64_t>{1, 2, 3});
}

TEST_CASE("a leaked import the exporter still holds is counted in the exporter's report, not again") {
    // Each of two ranks leaks an 8 MiB buffer it exported, and the peer's import of it: 16 MiB on the node.
    Report r0 = rank_report(0, 2), r1 = rank_report(1, 2);
    leak_own(r0, at("cuMemCreate", "grow"), 8 * MiB, 1);
    exports(r0, "k0", 8 * MiB, false);
    leak_own(r1, at("cuMemCreate", "grow"), 8 * MiB, 1);
    exports(r1, "k1", 8 * MiB, false);
    leak_import(r0, "k1", 8 * MiB);
    leak_import(r1, "k0", 8 * MiB);
    const JobReport j = reduce({std::move(r0), std::move(r1)});

    CHECK(rank_of(j, 0).leaked_bytes == 16 * MiB);
    CHECK(rank_of(j, 0).own_leaked_bytes == 8 * MiB);
    CHECK(j.summary.process.leaked_bytes == 16 * MiB);
    CHECK(j.summary.process.leaked_allocations == 2);
    REQUIRE(j.sites.size() == 2);
    CHECK(j.sites[0].leak.bytes == 16 * MiB);  // cuMemCreate, first seen: first of equal rows
    CHECK(j.sites[0].leak.site.api == "cuMemCreate");
    CHECK(j.sites[1].leak.bytes == 16 * MiB);
    CHECK(j.sites[1].leak.allocations == 2);
    // Each rank's import pins the other's buffer.
    CHECK(j.summary.pinned_by_peers_bytes == 16 * MiB);
    CHECK(j.pinning_pairs == 2);
    for (std::int64_t r = 0; r < 2; ++r) {
        CHECK(rank_of(j, r).pins_peers_bytes == 8 * MiB);
        CHECK(rank_of(j, r).pinned_by_peers_bytes == 8 * MiB);
    }
}

TEST_CASE("an import of unknown size counts what its exporter allocated") {
    // A legacy IPC open learns no size: the importer's row and import say 0 bytes.
    Report r0 = rank_report(0, 2), r1 = rank_report(1, 2);
    exports(r0, "ipc", 2 * MiB, true);
    leak_import(r1, "ipc", 0);
    const JobReport j = reduce({std::move(r0), std::move(r1)});
    CHECK(j.summary.process.leaked_bytes == 2 * MiB);
    CHECK(j.summary.process.leaked_allocations == 1);
    REQUIRE(j.sites.size() == 1);
    CHECK(j.sites[0].leak.bytes == 2 * MiB);
    REQUIRE(j.pinning.size() == 1);
    CHECK(j.pinning[0].bytes == 2 * MiB);
    CHECK(rank_of(j, 1).pins_peers_bytes == 2 * MiB);
}

TEST_CASE("an import whose exporter is not in the job is the importer's, counted once by key") {
    Report r0 = rank_report(0, 2), r1 = rank_report(1, 2);
    leak_import(r0, "far", 3 * MiB);
    leak_import(r1, "far", 3 * MiB);
    const JobReport j = reduce({std::move(r0), std::move(r1)});
    CHECK(j.summary.process.leaked_bytes == 3 * MiB);
    CHECK(j.summary.process.leaked_allocations == 1);
    CHECK(j.pinning.empty());
    CHECK(j.pinning_pairs == 0);
    CHECK(j.summary.pinned_by_peers_bytes == 0);
}

TEST_CASE("pinning between ranks: pairs largest first, each pinned allocation once for its exporter") {
    // Rank 0 exports a 1 MiB and a 6 MiB buffer, still held; rank 1 maps both, rank 2 maps the large one.
    Report r0 = rank_report(0, 3), r1 = rank_report(1, 3), r2 = rank_report(2, 3);
    exports(r0, "small", 1 * MiB, false);
    exports(r0, "large", 6 * MiB, false);
    const Site imp = at("cuMemImportFromShareableHandle", "share");
    r1.imports.push_back({"small", "fabric", 1 * MiB, false, true, imp});
    r1.imports.push_back({"large", "fabric", 6 * MiB, false, true, imp});
    r2.imports.push_back({"large", "fabric", 6 * MiB, false, true, imp});
    r2.imports.push_back({"gone", "fabric", 5 * MiB, true, false, imp});  // released: pins nothing
    const JobReport j = reduce({std::move(r0), std::move(r1), std::move(r2)});

    // Mapped imports are in use, not leaks.
    CHECK(j.summary.process.leaked_bytes == 0);
    CHECK(j.sites.empty());
    CHECK(j.pinning_pairs == 2);
    REQUIRE(j.pinning.size() == 2);
    CHECK(j.pinning[0].importer_rank == 1);
    CHECK(j.pinning[0].exporter_rank == 0);
    CHECK(j.pinning[0].bytes == 7 * MiB);
    CHECK(j.pinning[0].imports == 2);
    CHECK(j.pinning[1].importer_rank == 2);
    CHECK(j.pinning[1].bytes == 6 * MiB);
    CHECK(j.pinning[1].imports == 1);
    CHECK(j.summary.pinned_by_peers_bytes == 7 * MiB);
    CHECK(rank_of(j, 0).pinned_by_peers_bytes == 7 * MiB);
    CHECK(rank_of(j, 1).pins_peers_bytes == 7 * MiB);
    CHECK(rank_of(j, 2).pins_peers_bytes == 6 * MiB);
    CHECK(rank_of(j, 0).pins_peers_bytes == 0);
}

TEST_CASE("memory held at exit is summed as held, never a leak of the job") {
    Report r0 = rank_report(0, 1);
    r0.leaks.push_back(row("unfreed", at("cuMemAlloc", "cache"), 1 * MiB, 1, 1));
    r0.leaks.push_back(row("mapped-at-exit", at("cuMemCreate", "pool"), 2 * MiB, 1, 1));
    r0.summary.unfreed_bytes = 1 * MiB;
    r0.summary.unfreed_allocations = 1;
    r0.summary.mapped_at_exit_bytes = 2 * MiB;
    const JobReport j = reduce({std::move(r0)});
    CHECK(j.sites.empty());
    CHECK(j.summary.process.leaked_bytes == 0);
    CHECK(j.summary.process.leaked_allocations == 0);
    CHECK(j.summary.process.unfreed_bytes == 1 * MiB);
    CHECK(j.summary.process.mapped_at_exit_bytes == 2 * MiB);
    CHECK(j.ranks[0].held_at_exit_bytes == 3 * MiB);
    CHECK(j.ranks[0].top_site == -1);
    CHECK(j.worst_ranks.empty());
}

TEST_CASE("each rank's steps: every numbered one, oldest first, and the first that leaked") {
    Report r0 = rank_report(0, 2), r1 = rank_report(1, 2);
    StepWindow folded;
    folded.steps = {numbered(0, 1 * MiB, 0), numbered(1, 2 * MiB, 0)};
    r0.step_history.push_back(folded);
    Step phase;
    phase.label = "warmup";
    phase.step = 1;
    phase.by_owner = {{"app", 9 * MiB}};
    r0.steps = {phase, numbered(2, 3 * MiB, 1 * MiB), numbered(3, 5 * MiB, 2 * MiB)};
    r1.steps = {numbered(2, 4 * MiB, 0), numbered(3, 4 * MiB, 0)};
    const JobReport j = reduce({std::move(r0), std::move(r1)});

    const JobRank& a = rank_of(j, 0);
    CHECK(a.first_leak_step == 2);
    REQUIRE(a.steps.size() == 4);
    CHECK(a.steps[0].step == 0);
    CHECK(a.steps[1].live_bytes == 2 * MiB);
    CHECK(a.steps[2].step == 2);
    CHECK(a.steps[2].time_ns == 200);
    CHECK(a.steps[2].leaked_bytes == 1 * MiB);
    CHECK(a.steps[3].live_bytes == 5 * MiB);
    CHECK(rank_of(j, 1).first_leak_step == -1);
    CHECK(rank_of(j, 1).steps.size() == 2);

    // The job's steps: the recent numbered steps summed by number (a folded window has no driver figure).
    REQUIRE(j.steps.size() == 2);
    CHECK(j.steps[0].step == 2);
    CHECK(j.steps[0].ranks == 2);
    CHECK(j.steps[0].live_bytes == 7 * MiB);
    CHECK(j.steps[0].driver_used_bytes == 9 * MiB);
    CHECK(j.steps[0].growth_bytes == 0);
    CHECK(j.steps[0].leaked_bytes == 1 * MiB);
    CHECK(j.steps[1].live_bytes == 9 * MiB);
    CHECK(j.steps[1].growth_bytes == static_cast<std::int64_t>(2 * MiB));
    CHECK(j.steps[1].leaked_bytes == 2 * MiB);
}

TEST_CASE("a long rank's steps are sampled evenly, its first leak kept") {
    // 100 steps: 63 evenly spread, which pass over step 37; a rank that leaks from step 37 keeps it too.
    Report leaking = rank_report(0, 2), clean = rank_report(1, 2);
    for (std::uint64_t n = 0; n < 100; ++n) {
        leaking.steps.push_back(numbered(n, MiB, n >= 37 ? MiB : 0));
        clean.steps.push_back(numbered(n, MiB, 0));
    }
    const JobReport j = reduce({std::move(leaking), std::move(clean)});
    const auto around = [](const JobRank& r) {
        std::vector<std::uint64_t> v;
        for (const JobRankStep& s : r.steps)
            if (s.step >= 35 && s.step <= 39) v.push_back(s.step);
        return v;
    };
    const JobRank& a = rank_of(j, 0);
    CHECK(a.first_leak_step == 37);
    REQUIRE(a.steps.size() == kJobRankSteps);
    CHECK(a.steps.front().step == 0);
    CHECK(a.steps.back().step == 99);
    CHECK(around(a) == std::vector<std::uint64_t>{35, 36, 37, 38, 39});
    const JobRank& b = rank_of(j, 1);
    CHECK(b.steps.size() == kJobRankSteps - 1);
    CHECK(around(b) == std::vector<std::uint64_t>{35, 36, 38, 39});
    // Every step still reaches the job's sums.
    REQUIRE(j.steps.size() == 100);
    CHECK(j.steps[37].leaked_bytes == MiB);
    CHECK(j.steps[37].ranks == 2);
}

TEST_CASE("the problems of a job: a duplicate rank, a world size that differs, a checkpoint, a missing rank") {
    Report r0 = rank_report(0, 4), again = rank_report(0, 4), r1 = rank_report(1, 2), r2 = rank_report(2, 4);
    leak_own(again, at("cuMemCreate", "grow"), MiB, 1);
    r2.process.exit_code = std::nullopt;
    JobReduce job;
    job.problem("/r/empty", -1, "no cumemaudit.*.json reports in this directory");
    job.add("/r/a.json", std::move(r0));
    job.add("/r/b.json", std::move(again));
    job.add("/r/c.json", std::move(r1));
    job.add("/r/d.json", std::move(r2));
    const JobReport j = job.finish();

    CHECK(j.reports == 3);
    CHECK(j.world_size == 4);
    CHECK(j.summary.process.leaked_bytes == 0);  // the duplicate is not merged
    REQUIRE(j.problems.size() == 5);
    CHECK(j.problems[0].file == "/r/empty");
    CHECK_FALSE(j.problems[0].rank);
    CHECK(j.problems[1].what == "duplicate rank 0 (also in /r/a.json): not merged");
    CHECK(j.problems[1].file == "/r/b.json");
    CHECK(j.problems[1].rank == 0);
    CHECK(j.problems[2].what == "world_size 2 differs from the job's 4");
    CHECK(j.problems[3].what == "only a checkpoint: the process did not exit (killed, or still running)");
    CHECK(j.problems[3].rank == 2);
    CHECK(j.problems[4].what == "rank 3 of 4: no report");
    CHECK(j.problems[4].file.empty());
    CHECK(j.problems[4].rank == 3);
    CHECK(rank_of(j, 2).checkpoint);
    CHECK_FALSE(rank_of(j, 1).checkpoint);
}

TEST_CASE("leaked bytes that would wrap round add up to the largest count, never to zero") {
    // Two reports claiming 2^63 bytes each (corrupt or hostile): a job total of 0 would pass any gate.
    Report r0 = rank_report(0, 2), r1 = rank_report(1, 2);
    leak_own(r0, at("cuMemCreate", "grow"), 1ull << 63, 1);
    leak_own(r1, at("cuMemCreate", "grow"), 1ull << 63, 1);
    const JobReport j = reduce({r0, r1});
    CHECK(j.summary.process.leaked_bytes == std::numeric_limits<std::uint64_t>::max());
}

TEST_CASE("missing ranks in a run are one problem: a world of 2^20 ranks makes no million rows") {
    Report r0 = rank_report(0, 1 << 20), r5 = rank_report(5, 1 << 20);
    const JobReport j = reduce({r0, r5});
    REQUIRE(j.problems.size() == 2);
    CHECK(j.problems[0].what == "ranks 1 to 4 of 1048576: no report");
    CHECK(j.problems[0].rank == 1);
    CHECK(j.problems[1].what == "ranks 6 to 1048575 of 1048576: no report");
}
