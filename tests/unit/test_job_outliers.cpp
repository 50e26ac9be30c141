// The ranks that stand out (job_outliers.hpp), on rank reports built by hand: the rule (median, MADs, floor),
// the site that explains an excess, the grid of steps a long job is compared on, and that the answer does not
// depend on the order the reports arrive in.
#include "report/job_reduce.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

using namespace cumemaudit::report;

namespace {

constexpr std::uint64_t MiB = 1 << 20, GiB = MiB << 10;

Site at(const std::string& function, std::uint32_t line) {
    Site s;
    s.api = "cuMemCreate";
    s.frames.push_back({0x1000, 0x10, "/lib/libnccl.so.2", function, "/src/nccl.cc", line, ""});
    return s;
}

// A rank whose owners hold `by_owner` at every step in `steps`, and whose owners' largest sites are `sites`.
Report rank(std::int64_t r, const std::vector<std::uint64_t>& steps, const std::map<std::string, std::uint64_t>& by_owner,
            const std::map<std::string, std::vector<LiveSite>>& sites = {}) {
    Report rep;
    rep.process.rank = r;
    rep.process.pid = 100 + r;
    rep.process.exit_code = 0;
    for (const std::uint64_t n : steps) {
        Step s;
        s.step = n;
        s.by_owner = by_owner;
        rep.steps.push_back(s);
    }
    for (const auto& [owner, bytes] : by_owner) {
        Owner o;
        o.owner = owner;
        o.live_bytes = bytes;
        if (auto it = sites.find(owner); it != sites.end()) o.live_sites = it->second;
        rep.owners.push_back(o);
    }
    return rep;
}

JobReport merge(std::vector<Report> reports, const OutlierRule& rule = {}) {
    JobReduce job(rule);
    for (Report& r : reports) job.add("r" + std::to_string(r.process.rank) + ".json", std::move(r));
    return job.finish();
}

std::vector<std::uint64_t> range(std::uint64_t first, std::uint64_t last) {
    std::vector<std::uint64_t> v(last - first + 1);
    std::iota(v.begin(), v.end(), first);
    return v;
}

}  // namespace

TEST_CASE("a rank holding 1 GiB more of one owner stands out, named with the site that holds the excess") {
    const LiveSite common{8 * GiB, at("ncclCommInitRank", 10)};
    const LiveSite extra{1 * GiB, at("ncclProxyConnect", 20)};
    std::vector<Report> reports;
    for (std::int64_t r = 0; r < 16; ++r) {
        const bool odd = r == 11;
        reports.push_back(rank(r, range(1, 10), {{"nccl", 8 * GiB + (odd ? GiB : 0)}, {"pytorch", 20 * GiB + static_cast<std::uint64_t>(r) * MiB}},
                               {{"nccl", odd ? std::vector<LiveSite>{common, extra} : std::vector<LiveSite>{common}}}));
    }
    const JobReport j = merge(std::move(reports));
    REQUIRE(j.outliers.size() == 1);
    const JobOutlier& o = j.outliers.front();
    CHECK(o.rank == 11);
    CHECK(o.owner == "nccl");
    CHECK((o.first_step == 1 && o.last_step == 10 && o.steps == 10 && o.steps_checked == 10));
    CHECK((o.excess_bytes == GiB && o.live_bytes == 9 * GiB && o.median_bytes == 8 * GiB && o.mad_bytes == 0));
    // The rank's own pytorch is 11 MiB, the median rank's 7.5 MiB (16 ranks): its total is 1 GiB + 3.5 MiB over.
    CHECK(o.rank_excess_bytes == static_cast<std::int64_t>(GiB + 3 * MiB + MiB / 2));
    REQUIRE(o.site);  // the site every rank has is the largest, but not what differs
    CHECK(o.site->frames.front().symbol == "ncclProxyConnect");
    CHECK((o.site_bytes == GiB && o.site_excess_bytes == GiB));
    CHECK(j.outlier_pairs == 1);
}

TEST_CASE("ranks that differ widely stand out only beyond k median absolute deviations, and never below the floor") {
    std::vector<Report> wide, near;
    for (std::int64_t r = 0; r < 64; ++r) {
        wide.push_back(rank(r, {1}, {{"kv_cache", static_cast<std::uint64_t>(r) * GiB}}));  // 0 … 63 GiB: a spread, no outlier
        near.push_back(rank(r, {1}, {{"nccl", 4 * GiB + (r == 5 ? 200 * MiB : 0)}}));      // 200 MiB over: under the floor
    }
    CHECK(merge(std::move(wide)).outliers.empty());
    CHECK(merge(std::vector<Report>(near)).outliers.empty());
    const JobReport low_floor = merge(std::move(near), OutlierRule{5, 100 * MiB});
    REQUIRE(low_floor.outliers.size() == 1);
    CHECK((low_floor.outliers.front().rank == 5 && low_floor.outliers.front().excess_bytes == 200 * MiB));
    CHECK((low_floor.outlier_rule.mads == 5 && low_floor.outlier_rule.floor_bytes == 100 * MiB));
}

TEST_CASE("two ranks have no majority: nothing stands out") {
    CHECK(merge({rank(0, {1}, {{"nccl", GiB}}), rank(1, {1}, {{"nccl", 10 * GiB}})}).outliers.empty());
}

TEST_CASE("an owner a rank alone has counts as none on the others") {
    std::vector<Report> reports;
    for (std::int64_t r = 0; r < 8; ++r)
        reports.push_back(r == 2 ? rank(r, {1, 2}, {{"pytorch", GiB}, {"deepep", 2 * GiB}}) : rank(r, {1, 2}, {{"pytorch", GiB}}));
    const JobReport j = merge(std::move(reports));
    REQUIRE(j.outliers.size() == 1);
    CHECK((j.outliers.front().rank == 2 && j.outliers.front().owner == "deepep" && j.outliers.front().median_bytes == 0 &&
           j.outliers.front().excess_bytes == 2 * GiB && !j.outliers.front().site));
}

TEST_CASE("a long job is compared on at most 64 steps of one grid, the same whatever order the reports come in") {
    // 12 ranks of 1000 steps (one that started late), rank 7 holding 2 GiB more nccl from step 500 on.
    auto reports = [] {
        std::vector<Report> v;
        for (std::int64_t r = 0; r < 12; ++r) {
            Report rep = rank(r, r == 3 ? range(301, 1000) : range(1, 1000), {{"nccl", GiB}});
            if (r == 7)
                for (Step& s : rep.steps)
                    if (s.step >= 500) s.by_owner["nccl"] += 2 * GiB;
            v.push_back(std::move(rep));
        }
        return v;
    };
    std::vector<Report> backwards = reports();
    std::reverse(backwards.begin(), backwards.end());
    const JobReport a = merge(reports()), b = merge(std::move(backwards));
    REQUIRE(a.outliers.size() == 1);
    const JobOutlier& o = a.outliers.front();
    // 1000 steps on a grid of multiples of 16: 62 steps (16 … 992); from 512 on, rank 7 stands out.
    CHECK((o.rank == 7 && o.first_step == 512 && o.last_step == 992 && o.steps == 31 && o.steps_checked == 62));
    REQUIRE(b.outliers.size() == 1);
    CHECK((b.outliers.front().rank == 7 && b.outliers.front().first_step == 512 && b.outliers.front().steps == 31 &&
           b.outliers.front().steps_checked == 62));
}

TEST_CASE("a job of thousands of ranks keeps fewer steps a rank, each rank's first leak among them") {
    // 5,000 ranks of 100 steps: 64 a rank would be 320,000 points; the job keeps at most 262,144 (52 a rank: 51
    // evenly spread, one place held for the first leak).
    JobReduce job;
    for (std::int64_t r = 0; r < 5000; ++r) {
        Report rep = rank(r, range(1, 100), {{"nccl", GiB}});
        if (r == 9)
            for (Step& s : rep.steps) s.leaked_bytes = s.step >= 37 ? 2 * MiB : 0;
        job.add("r" + std::to_string(r) + ".json", std::move(rep));
    }
    const JobReport j = job.finish();
    std::size_t points = 0;
    for (const JobRank& r : j.ranks) points += r.steps.size();
    CHECK(points <= kJobStepPoints);
    CHECK(j.ranks[0].steps.size() == 51);
    CHECK((j.ranks[0].steps.front().step == 1 && j.ranks[0].steps.back().step == 100));
    CHECK(j.ranks[9].first_leak_step == 37);
    CHECK(std::any_of(j.ranks[9].steps.begin(), j.ranks[9].steps.end(), [](const JobRankStep& s) { return s.step == 37; }));
}
