// The text of a job report, as `cumemaudit merge` prints it; see job.hpp. Concise by default, as LSan's
// summary is: a 1024-rank job reads in one screen, and JobTextDetail asks for every row of a part.
#include "job.hpp"
#include "job_end_text.hpp"
#include "human_numbers.hpp"
#include "job_ends.hpp"
#include "site_naming.hpp"
#include "text.hpp"

#include "common/paths.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace cumemaudit::report {
namespace {

std::string rank_name(std::int64_t r) { return r >= 0 ? fmt::format("rank {}", r) : std::string("a process without rank"); }

// 0-3,5,7-8
std::string compact_ranks(const std::vector<std::int64_t>& list) {
    std::string s;
    std::int64_t start = -2, last = -2;
    auto flush = [&] {
        if (start < -1) return;
        if (!s.empty()) s += ',';
        s += start == last ? std::to_string(start) : fmt::format("{}-{}", start, last);
    };
    for (const std::int64_t r : list) {
        if (r == last + 1 && start >= -1) {
            last = r;
            continue;
        }
        flush();
        start = last = r;
    }
    flush();
    return s;
}

std::string rank_line(const JobReport& j, const JobRank& r) {
    std::string t = fmt::format("  {:<10} {:>10} ({} bytes; own {})", rank_name(r.rank), human_bytes(r.leaked_bytes),
                                r.leaked_bytes, human_bytes(r.own_leaked_bytes));
    if (r.first_leak_step >= 0) t += fmt::format("  since step {}", r.first_leak_step);
    if (r.top_site >= 0 && static_cast<std::size_t>(r.top_site) < j.sites.size())
        t += "  at " + where(j.sites[static_cast<std::size_t>(r.top_site)].leak.site);
    return t + (r.checkpoint ? "  (checkpoint only)\n" : "\n");
}

void ranks_part(std::string& t, const JobReport& j, bool all) {
    std::vector<const JobRank*> leaking;
    for (const JobRank& r : j.ranks)
        if (r.leaked_bytes > 0 || r.leaked_allocations > 0) leaking.push_back(&r);
    std::stable_sort(leaking.begin(), leaking.end(),
                     [](const JobRank* a, const JobRank* b) { return a->leaked_bytes > b->leaked_bytes; });
    if (all) {
        t += "every rank (held = all its references pin, imports included; own = allocations it created):\n";
        for (const JobRank& r : j.ranks) t += rank_line(j, r);
        return;
    }
    if (leaking.empty()) {
        t += fmt::format("leaking ranks: none of {}\n", j.ranks.size());
        return;
    }
    t += fmt::format("leaking ranks: {} of {}, largest first (held = all its references pin, imports included; "
                     "own = allocations it created):\n", leaking.size(), j.ranks.size());
    for (std::size_t i = 0; i < leaking.size() && i < kTextRanks; ++i) t += rank_line(j, *leaking[i]);
    if (leaking.size() > kTextRanks)
        t += fmt::format("  … {} more leaking ranks (--all-ranks)\n", leaking.size() - kTextRanks);
}

// The ranks that did not end cleanly, each in one line: a rank whose chart line stops is named with why.
void ends_part(std::string& t, const JobReport& j, bool all) {
    if (j.rank_ends.empty()) return;
    t += fmt::format("ranks that did not end cleanly: {} of {}\n", j.rank_ends.size(), j.ranks.size());
    const std::size_t shown = all ? j.rank_ends.size() : std::min(j.rank_ends.size(), kTextRanks);
    for (std::size_t i = 0; i < shown; ++i)
        t += fmt::format("  {} {}\n", rank_name(j.rank_ends[i].rank), end_phrase(j.rank_ends[i].end));
    if (shown < j.rank_ends.size())
        t += fmt::format("  … {} more ranks that did not end cleanly (--all-ranks)\n", j.rank_ends.size() - shown);
}

void sites_part(std::string& t, const JobReport& j, bool all) {
    if (j.sites.empty()) return;
    t += fmt::format("leak sites: {} across ranks, largest first (each allocation counted once):\n", j.sites.size());
    const std::size_t shown = all ? j.sites.size() : std::min(j.sites.size(), kTextSites);
    const std::vector<std::string> wheres = job_site_wheres(j);
    for (std::size_t i = 0; i < shown; ++i) {
        const JobSite& s = j.sites[i];
        t += fmt::format("  {:>10}  {:<14} {} at {}  ranks: {} [{}]\n", human_bytes(s.leak.bytes), s.leak.cls,
                         s.leak.site.api, wheres[i], s.ranks, compact_ranks(s.rank_list));
    }
    if (shown < j.sites.size()) t += fmt::format("  … {} more sites (--all-sites)\n", j.sites.size() - shown);
}

void pinning_part(std::string& t, const JobReport& j, bool all) {
    if (j.pinning.empty()) return;
    t += fmt::format("cross-rank pinning: {} of exported memory held by peers' unreleased imports, {} rank pairs",
                     human_bytes(j.summary.pinned_by_peers_bytes), j.pinning_pairs);
    t += all ? ":\n" : "; largest:\n";
    const std::size_t shown = all ? j.pinning.size() : std::min(j.pinning.size(), kTextPinningRows);
    for (std::size_t i = 0; i < shown; ++i) {
        const JobPinning& p = j.pinning[i];
        t += fmt::format("  {}'s imports pin {} of {}'s memory\n", rank_name(p.importer_rank), human_bytes(p.bytes),
                         rank_name(p.exporter_rank));
    }
    if (j.pinning_pairs > shown)
        t += fmt::format("  … {} more pairs ({}the JSON lists the largest {})\n", j.pinning_pairs - shown,
                         all ? "" : "--pinning; ", kMaxPinningRows);
}

void steps_part(std::string& t, const JobReport& j, bool all) {
    if (j.steps.empty()) return;
    if (all) {
        t += "steps (live bytes summed over ranks):\n";
        for (const JobStep& s : j.steps)
            t += fmt::format("  step {:<6} {:>10}  growth {:+} bytes  ({} ranks)\n", s.step, human_bytes(s.live_bytes),
                             s.growth_bytes, s.ranks);
        return;
    }
    const JobStep& first = j.steps.front();
    const JobStep& last = j.steps.back();
    const JobStep* peak = &first;
    for (const JobStep& s : j.steps)
        if (s.growth_bytes > peak->growth_bytes) peak = &s;
    t += fmt::format("steps {}-{} (live bytes summed over ranks): {} at the first, {} at the last", first.step, last.step,
                     human_bytes(first.live_bytes), human_bytes(last.live_bytes));
    t += peak->growth_bytes > 0 ? fmt::format("; peak growth {:+} bytes at step {} (--steps)\n", peak->growth_bytes, peak->step)
                                : "; no growth (--steps)\n";
}

}  // namespace

std::string world_size_words(std::int64_t w) { return w > 0 ? fmt::format("world size {}", w) : "world size not given by any report"; }

std::vector<std::string> job_site_wheres(const JobReport& j) {
    std::vector<const Site*> sites;
    for (const JobSite& s : j.sites) sites.push_back(&s.leak.site);
    return distinct_wheres(sites);
}

// The job's first question once steps were marked: which rank runs out first, when, and what drives it.
void forecast_part(std::string& t, const JobReport& j) {
    if (!j.earliest_forecast) return;
    const JobForecast& e = *j.earliest_forecast;
    const Forecast& f = e.forecast;
    t += fmt::format("forecast: {} runs out of memory first, at step ≈ {} ({}–{})", rank_name(e.rank), grouped(*f.oom_step),
                     grouped(f.oom_step_low.value_or(0)), grouped(f.oom_step_high.value_or(0)));
    if (f.oom_in_s) t += fmt::format(", in about {}", about(static_cast<double>(*f.oom_in_s)));
    if (!f.owner.empty()) t += fmt::format(", driven by {}", f.owner);
    if (!f.site.api.empty()) t += fmt::format(" at {} in {}", f.site.api, where(f.site));
    t += fmt::format(" ({} of {} ranks forecast to run out)\n", e.ranks, j.reports);
}

// "why is this rank different?": one line a rank, its owners that stand out largest first, each with the site
// that explains it.
void outliers_part(std::string& t, const JobReport& j, bool all) {
    if (j.outliers.empty()) return;
    std::vector<std::int64_t> order;
    std::map<std::int64_t, std::vector<const JobOutlier*>> by_rank;
    for (const JobOutlier& o : j.outliers) {
        if (!by_rank.count(o.rank)) order.push_back(o.rank);
        by_rank[o.rank].push_back(&o);
    }
    t += fmt::format("ranks that stand out: {} of {} (an owner's live bytes over the job's median by more than {:g} "
                     "median absolute deviations and at least {}):\n",
                     order.size(), j.reports, j.outlier_rule.mads, human_bytes(j.outlier_rule.floor_bytes));
    const std::size_t shown = all ? order.size() : std::min(order.size(), kTextRanks);
    for (std::size_t i = 0; i < shown; ++i) {
        const std::vector<const JobOutlier*>& rows = by_rank[order[i]];
        const JobOutlier& top = *rows.front();
        std::string line = fmt::format("  {}: {} over the median at step {}", rank_name(top.rank), human_signed_bytes(top.rank_excess_bytes, true), top.step);
        for (const JobOutlier* o : rows) {
            line += fmt::format("{}{} +{}", o == &top ? ", " : "; ", o->owner, human_bytes(o->excess_bytes));
            if (o->site) line += fmt::format(" at {} in {}", o->site->api, where(*o->site));
            line += o->steps == 1 ? fmt::format(" (at step {} only)", o->first_step)
                                  : fmt::format(" (at {} of {} steps, {}–{})", o->steps, o->steps_checked, o->first_step, o->last_step);
        }
        t += line + "\n";
    }
    if (shown < order.size()) t += fmt::format("  … {} more ranks that stand out (--all-ranks)\n", order.size() - shown);
    if (j.outlier_pairs > j.outliers.size())
        t += fmt::format("  … the job has {} (rank, owner) pairs standing out; the JSON keeps the largest {}\n", j.outlier_pairs, j.outliers.size());
}

std::string text_summary(const JobReport& j, const JobTextDetail& detail) {
    const Summary& sum = j.summary.process;
    std::string t = fmt::format("cumemaudit merge: {} rank reports, {}\n", j.reports, world_size_words(j.world_size));
    t += fmt::format("job: {} ({} bytes) leaked in {} allocations, each counted once across ranks\n",
                     human_bytes(sum.leaked_bytes), sum.leaked_bytes, sum.leaked_allocations);
    forecast_part(t, j);
    outliers_part(t, j, detail.all_ranks);
    ends_part(t, j, detail.all_ranks);
    ranks_part(t, j, detail.all_ranks);
    sites_part(t, j, detail.all_sites);
    const std::uint64_t held = sum.unfreed_bytes + sum.mapped_at_exit_bytes;
    if (held > 0) {
        std::size_t holding = 0;
        for (const JobRank& r : j.ranks) holding += r.held_at_exit_bytes > 0;
        t += fmt::format("held at exit, not leaks: {} ({} bytes) unfreed or mapped at exit", human_bytes(held), held);
        t += holding > 0 ? fmt::format(" on {} ranks\n", holding) : "\n";
    }
    pinning_part(t, j, detail.pinning);
    steps_part(t, j, detail.steps);
    for (std::size_t i = 0; i < j.problems.size() && i < kTextProblems; ++i) {
        const JobProblem& p = j.problems[i];
        t += fmt::format("PROBLEM: {}{}\n", p.file.empty() ? "" : p.file + ": ", p.what);
    }
    if (j.problems.size() > kTextProblems)
        t += fmt::format("… {} more problems (the JSON lists every one)\n", j.problems.size() - kTextProblems);
    t += fmt::format("SUMMARY: cumemaudit job: {} bytes leaked in {} allocations on {} ranks; {} problems\n",
                     sum.leaked_bytes, sum.leaked_allocations, j.reports, j.problems.size());
    return t;
}

}  // namespace cumemaudit::report
