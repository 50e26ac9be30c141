#include "html_job.hpp"

#include "html_escape.hpp"
#include "html_job_chart.hpp"
#include "html_page.hpp"
#include "report/job_end_text.hpp"
#include "report/job_ends.hpp"
#include "report/human_numbers.hpp"
#include "report/site_naming.hpp"
#include "report/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace cumemaudit::cli {
namespace {

constexpr std::size_t kRanksDrawn = 8;       // lines one chart tells apart; beyond, the heatmap shows every rank
constexpr std::size_t kPinningShown = 20;
constexpr std::size_t kLeakingShown = 16;
constexpr std::size_t kEndsNamed = 8;        // ranks the verdict names one by one
constexpr std::size_t kEndCards = 16;        // a card each; the rest are in every rank's table
constexpr std::size_t kEndsDrawn = 4;        // ranks that died drawn besides the leaking ones
constexpr std::size_t kPageRows = 1000;      // rows of a rank table the page holds: job.json has every one
constexpr std::size_t kOutliersShown = 200;

using report::human_bytes;

std::string bytes_cell(std::uint64_t b) {
    return fmt::format("<td class=\"num\" data-sort=\"{0}\" title=\"{0} bytes\">{1}</td>", b, human_bytes(b));
}
std::string num_cell(std::int64_t v) { return fmt::format("<td class=\"num\" data-sort=\"{0}\">{0}</td>", v); }
std::string text_cell(const std::string& t) { return "<td>" + html_escape(t) + "</td>"; }
// A rank, or a dash for "no rank" (-1 in the model): never the sentinel itself.
std::string rank_cell(std::int64_t r) { return r >= 0 ? num_cell(r) : "<td class=\"num\" data-sort=\"-1\">—</td>"; }
std::string end_cell(const report::JobRank& r) {
    const std::string label = report::end_label(r.end);
    if (label.empty()) return text_cell("—");
    return fmt::format("<td class=\"end{}\" title=\"{}\">{}</td>", report::ended_badly(r.end) ? " bad" : "",
                       html_escape(report::end_phrase(r.end)), html_escape(label));
}
std::string rank_name(const report::JobRank& r) { return r.rank >= 0 ? fmt::format("rank {}", r.rank) : fmt::format("pid {}", r.pid); }

const report::JobSite* top_site(const report::JobReport& j, const report::JobRank& r) {
    return r.top_site >= 0 && static_cast<std::size_t>(r.top_site) < j.sites.size() ? &j.sites[static_cast<std::size_t>(r.top_site)] : nullptr;
}

std::string since(const report::JobRank& r) { return r.first_leak_step >= 0 ? fmt::format("step {}", r.first_leak_step) : "—"; }

// Leaking ranks, largest first (indices into j.ranks).
std::vector<std::size_t> leaking_ranks(const report::JobReport& j) {
    std::vector<std::size_t> v;
    for (std::size_t i = 0; i < j.ranks.size(); ++i)
        if (j.ranks[i].leaked_bytes > 0 || j.ranks[i].leaked_allocations > 0) v.push_back(i);
    std::stable_sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) { return j.ranks[a].leaked_bytes > j.ranks[b].leaked_bytes; });
    return v;
}

std::size_t site_index(const report::JobReport& j, const report::JobSite* site) { return static_cast<std::size_t>(site - j.sites.data()); }

// The ranks that did not end cleanly, named one by one: a rank whose line stops is said to have died, and how.
std::string ends_verdict(const report::JobReport& j) {
    if (j.rank_ends.empty()) return {};
    std::string v = fmt::format("<p class=\"rank-ends\"><b>{} of {} ranks did not end cleanly</b>:</p>\n<ul class=\"rank-ends\">",
                                j.rank_ends.size(), j.ranks.size());
    for (std::size_t i = 0; i < j.rank_ends.size() && i < kEndsNamed; ++i) {
        const report::JobEndRow& e = j.rank_ends[i];
        v += fmt::format("<li data-rank=\"{}\"><b>{}</b> {}</li>", e.rank,
                         e.rank >= 0 ? fmt::format("rank {}", e.rank) : fmt::format("pid {}", e.pid),
                         html_escape(report::end_phrase(e.end)));
    }
    if (j.rank_ends.size() > kEndsNamed)
        v += fmt::format("<li>… {} more (Every rank, below)</li>", j.rank_ends.size() - kEndsNamed);
    return v + "</ul>\n";
}

std::string verdict(const report::JobReport& j, const std::vector<std::size_t>& leaking) {
    const report::Summary& s = j.summary.process;
    if (leaking.empty())
        return fmt::format("<div class=\"verdict{}\" id=\"verdict\"><p><b>No rank leaks</b> ({} rank reports).</p>\n{}</div>\n",
                           j.rank_ends.empty() ? "" : " bad", j.reports, ends_verdict(j));
    const report::JobRank& worst = j.ranks[leaking.front()];
    std::string v = fmt::format("<div class=\"verdict bad\" id=\"verdict\"><p><b>{} of {} ranks leak</b>: {} ({} bytes) in "
                                "{} allocations, each counted once across ranks.</p>\n",
                                leaking.size(), j.ranks.size(), human_bytes(s.leaked_bytes), s.leaked_bytes, s.leaked_allocations);
    v += fmt::format("<p>Worst: <b>{}</b> holds {} leaked", html_escape(rank_name(worst)), human_bytes(worst.leaked_bytes));
    if (worst.first_leak_step >= 0) v += fmt::format(" since <b>step {}</b>", worst.first_leak_step);
    const std::vector<std::string> wheres = report::job_site_wheres(j);
    if (const report::JobSite* site = top_site(j, worst))
        v += fmt::format(", largest at <code>{}</code> ({})", html_escape(wheres[site_index(j, site)]), html_escape(site->leak.site.api));
    v += ".</p>\n";
    if (!j.sites.empty()) {
        const report::JobSite& t = j.sites.front();
        v += fmt::format("<p>Top site: <code>{}</code> ({}), {} on {} ranks.</p>\n", html_escape(wheres.front()),
                         html_escape(t.leak.site.api), human_bytes(t.leak.bytes), t.ranks);
    }
    return v + ends_verdict(j) + "</div>\n";
}

// The leaking ranks from `from` to `to` (positions in `leaking`), in a table of class `cls`.
std::string leaking_rows(const report::JobReport& j, const std::vector<std::size_t>& leaking, std::size_t from,
                         std::size_t to, const char* cls) {
    std::string s = fmt::format("<table class=\"{}\"><thead><tr><th>rank</th><th>leaked (held)</th><th>own</th><th>since</th>"
                                "<th>top site</th><th>end</th><th>host · pid</th></tr></thead><tbody>\n", cls);
    const std::vector<std::string> wheres = report::job_site_wheres(j);
    for (std::size_t n = from; n < to; ++n) {
        const std::size_t i = leaking[n];
        const report::JobRank& r = j.ranks[i];
        const report::JobSite* site = top_site(j, r);
        s += "<tr>" + rank_cell(r.rank) + bytes_cell(r.leaked_bytes) + bytes_cell(r.own_leaked_bytes) + text_cell(since(r)) +
             (site ? "<td><code>" + html_escape(wheres[site_index(j, site)]) + "</code> " + html_escape(site->leak.site.api) + "</td>"
                   : text_cell("—")) + end_cell(r) +
             text_cell(fmt::format("{} · {}{}", r.host, r.pid, r.checkpoint ? " (checkpoint only)" : "")) + "</tr>\n";
    }
    return s + "</tbody></table>\n";
}

// The worst ranks in view; the rest folded, so the chart stays near the top of a page of a thousand ranks.
std::string leaking_table(const report::JobReport& j, const std::vector<std::size_t>& leaking) {
    if (leaking.empty()) return "<p class=\"none\">No leaks.</p>\n";
    const std::size_t shown = std::min(leaking.size(), kLeakingShown);
    std::string s = leaking_rows(j, leaking, 0, shown, "leaking-ranks");
    const std::size_t more = std::min(leaking.size(), kPageRows);
    if (shown < leaking.size())
        s += fmt::format("<details><summary>{} more leaking ranks</summary>\n", leaking.size() - shown) +
             leaking_rows(j, leaking, shown, more, "leaking-ranks-more") +
             (more < leaking.size() ? fmt::format("<p>… and {} more: the job file lists every rank.</p>\n", leaking.size() - more) : "") +
             "</details>\n";
    return s;
}

std::string compact(const std::vector<std::int64_t>& list) {
    std::string s;
    for (std::size_t i = 0; i < list.size(); ++i) {
        std::size_t k = i;
        while (k + 1 < list.size() && list[k + 1] == list[k] + 1) ++k;
        s += (s.empty() ? "" : ",") + (k == i ? std::to_string(list[i]) : fmt::format("{}-{}", list[i], list[k]));
        i = k;
    }
    return s;
}

std::string sites_table(const report::JobReport& j) {
    if (j.sites.empty()) return "<p class=\"none\">No leak sites.</p>\n";
    std::string s = "<table class=\"job-sites\"><thead><tr><th>bytes</th><th>class</th><th>API</th><th>where</th>"
                    "<th>allocations</th><th>references</th><th>owner</th><th>ranks</th></tr></thead><tbody>\n";
    for (const report::JobSite& site : j.sites) {
        const report::Leak& l = site.leak;
        s += "<tr>" + bytes_cell(l.bytes) + text_cell(l.cls) + "<td><code>" + html_escape(l.site.api) + "</code></td><td><code>" +
             html_escape(report::where(l.site)) + "</code></td>" + num_cell(static_cast<std::int64_t>(l.allocations)) +
             num_cell(static_cast<std::int64_t>(l.references)) + text_cell(l.owner) +
             text_cell(fmt::format("{} [{}]", site.ranks, compact(site.rank_list))) + "</tr>\n";
    }
    return s + "</tbody></table>\n";
}

std::string pinning_part(const report::JobReport& j) {
    if (j.pinning.empty()) return "<p class=\"none\">No rank's imports pin another's memory.</p>\n";
    std::string s = fmt::format("<p>{} ({} bytes) of exported memory held by peers' unreleased imports, in {} rank pairs{}.</p>\n",
                                human_bytes(j.summary.pinned_by_peers_bytes), j.summary.pinned_by_peers_bytes, j.pinning_pairs,
                                j.pinning_pairs > kPinningShown ? fmt::format("; the largest {}", kPinningShown) : "");
    s += "<table class=\"pinning\"><thead><tr><th>importer</th><th>pins</th><th>of exporter</th><th>imports</th></tr></thead><tbody>\n";
    for (std::size_t i = 0; i < j.pinning.size() && i < kPinningShown; ++i) {
        const report::JobPinning& p = j.pinning[i];
        s += "<tr>" + rank_cell(p.importer_rank) + bytes_cell(p.bytes) + rank_cell(p.exporter_rank) +
             num_cell(static_cast<std::int64_t>(p.imports)) + "</tr>\n";
    }
    return s + "</tbody></table>\n";
}

std::string exit_text(const report::JobRank& r) {
    if (!r.replaced_by_exec.empty()) return "exec " + r.replaced_by_exec;
    if (r.checkpoint) return "checkpoint only";
    return r.exit_code ? std::to_string(*r.exit_code) : "—";
}

// A card for each rank that did not end cleanly, its end in a few words and in full.
std::string end_cards(const report::JobReport& j) {
    if (j.rank_ends.empty()) return {};
    std::string s = "<div class=\"cards rank-end-cards\">";
    for (std::size_t i = 0; i < j.rank_ends.size() && i < kEndCards; ++i) {
        const report::JobEndRow& e = j.rank_ends[i];
        s += fmt::format("<div class=\"card bad rank-end\" data-rank=\"{}\" data-end=\"{}\">{}<b>{}</b><span class=\"end-phrase\">{}</span></div>",
                         e.rank, html_escape(e.end.how), e.rank >= 0 ? fmt::format("rank {}", e.rank) : fmt::format("pid {}", e.pid),
                         html_escape(report::end_label(e.end)), html_escape(report::end_phrase(e.end)));
    }
    s += "</div>\n";
    if (j.rank_ends.size() > kEndCards)
        s += fmt::format("<p>… {} more ranks that did not end cleanly: their end is in Every rank, below.</p>\n", j.rank_ends.size() - kEndCards);
    return s;
}

// The rank forecast to run out first, leading the page as it leads merge's text.
std::string forecast_part(const report::JobReport& j) {
    if (!j.earliest_forecast) return {};
    const report::JobForecast& e = *j.earliest_forecast;
    const report::Forecast& f = e.forecast;
    std::string s = fmt::format("<div class=\"verdict bad\" id=\"forecast\"><p><b>{} runs out of memory first</b>, at step ≈ {} "
                                "({}–{})", e.rank >= 0 ? fmt::format("Rank {}", e.rank) : std::string("A process without rank"),
                                report::grouped(*f.oom_step), report::grouped(f.oom_step_low.value_or(0)),
                                report::grouped(f.oom_step_high.value_or(0)));
    if (f.oom_in_s) s += fmt::format(", in about {}", report::about(static_cast<double>(*f.oom_in_s)));
    if (!f.owner.empty()) s += fmt::format(", driven by <b>{}</b>", html_escape(f.owner));
    if (!f.site.api.empty()) s += fmt::format(" at <code>{}</code> ({})", html_escape(report::where(f.site)), html_escape(f.site.api));
    return s + fmt::format(". {} of {} ranks are forecast to run out.</p></div>\n", e.ranks, j.reports);
}

std::size_t standing_out(const report::JobReport& j) {
    std::set<std::int64_t> ranks;
    for (const report::JobOutlier& o : j.outliers) ranks.insert(o.rank);
    return ranks.size();
}

// The ranks that hold more than their peers: one row per rank and owner, the site that explains it.
std::string outliers_part(const report::JobReport& j) {
    const report::OutlierRule& rule = j.outlier_rule;
    std::string s = fmt::format("<p>A rank stands out where an owner's live bytes exceed the job's median at a step by more "
                                "than {:g} median absolute deviations and by at least {}.</p>\n", rule.mads, human_bytes(rule.floor_bytes));
    if (j.outliers.empty()) return s + "<p class=\"none\">No rank stands out: the ranks hold alike.</p>\n";
    s += "<table class=\"outliers\"><thead><tr><th>rank</th><th>owner</th><th>over the median</th><th>holds</th><th>median</th>"
         "<th>rank over the median (every owner)</th><th>at step</th><th>steps standing out</th><th>explained by</th></tr></thead><tbody>\n";
    for (std::size_t i = 0; i < j.outliers.size() && i < kOutliersShown; ++i) {
        const report::JobOutlier& o = j.outliers[i];
        const std::string rank_total = fmt::format("<td class=\"num\" data-sort=\"{0}\" title=\"{0} bytes\">{1}</td>", o.rank_excess_bytes,
                                                   report::human_signed_bytes(o.rank_excess_bytes, true));
        s += fmt::format("<tr data-rank=\"{}\">", o.rank) + rank_cell(o.rank) + text_cell(o.owner) + bytes_cell(o.excess_bytes) +
             bytes_cell(o.live_bytes) + bytes_cell(o.median_bytes) + rank_total + num_cell(static_cast<std::int64_t>(o.step)) +
             text_cell(fmt::format("{} of {} ({}–{})", o.steps, o.steps_checked, o.first_step, o.last_step)) +
             (o.site ? fmt::format("<td><code>{}</code> {} holds {} (+{})</td>", html_escape(report::where(*o.site)), html_escape(o.site->api),
                                   human_bytes(o.site_bytes), human_bytes(o.site_excess_bytes))
                     : text_cell("—")) + "</tr>\n";
    }
    s += "</tbody></table>\n";
    const std::size_t listed = std::min(j.outliers.size(), kOutliersShown);
    if (j.outlier_pairs > listed)
        s += fmt::format("<p>… and {} more (rank, owner) pairs; the largest {} are listed (the job file keeps {}).</p>\n",
                         j.outlier_pairs - listed, listed, j.outliers.size());
    const std::string heat = job_heatmap_svg(j, HeatOf::excess);
    if (!heat.empty())
        s += "<h3>Live bytes over the job's median, rank by step</h3>\n<p>Blue where a rank held more than the median rank "
             "by at least the floor, darker with more bytes.</p>\n" + heat;
    return s;
}

std::string ranks_table(const report::JobReport& j) {
    std::string s = "<table class=\"ranks\"><thead><tr><th>rank</th><th>leaked (held)</th><th>own</th><th>since</th>"
                    "<th>held at exit (not leaked)</th><th>pins peers</th><th>pinned by peers</th><th>exit</th><th>end</th><th>file</th>"
                    "</tr></thead><tbody>\n";
    for (std::size_t i = 0; i < j.ranks.size() && i < kPageRows; ++i) {
        const report::JobRank& r = j.ranks[i];
        s += "<tr>" + rank_cell(r.rank) + bytes_cell(r.leaked_bytes) + bytes_cell(r.own_leaked_bytes) + text_cell(since(r)) +
             bytes_cell(r.held_at_exit_bytes) + bytes_cell(r.pins_peers_bytes) + bytes_cell(r.pinned_by_peers_bytes) +
             text_cell(exit_text(r)) + end_cell(r) + text_cell(r.file) + "</tr>\n";
    }
    s += "</tbody></table>\n";
    if (j.ranks.size() > kPageRows)
        s += fmt::format("<p>The first {} ranks; the job file lists all {}.</p>\n", kPageRows, j.ranks.size());
    return s;
}

}  // namespace

std::string html_job_page(const report::JobReport& j) {
    const report::Summary& m = j.summary.process;
    const std::vector<std::size_t> leaking = leaking_ranks(j);
    std::string s = fmt::format("<p class=\"meta\">{} rank reports, {}; bytes in KiB/MiB/GiB (1 GiB = 2<sup>30</sup> "
                                "bytes), exact figures on hover.</p>\n", j.reports, report::world_size_words(j.world_size));
    s += forecast_part(j);
    s += verdict(j, leaking);
    s += "<div class=\"cards\">" + html_card("leaked", human_bytes(m.leaked_bytes), m.leaked_bytes != 0) +
         html_card("leaking ranks", fmt::format("{} of {}", leaking.size(), j.ranks.size()), !leaking.empty()) +
         html_card("leak sites", std::to_string(j.sites.size()), !j.sites.empty()) +
         html_card("held at exit, not leaks", human_bytes(m.unfreed_bytes + m.mapped_at_exit_bytes)) +
         html_card("pinned by peers", human_bytes(j.summary.pinned_by_peers_bytes), j.summary.pinned_by_peers_bytes != 0) +
         html_card("ranks that stand out", fmt::format("{} of {}", standing_out(j), j.ranks.size()), !j.outliers.empty()) +
         html_card("did not end cleanly", fmt::format("{} of {}", j.rank_ends.size(), j.ranks.size()), !j.rank_ends.empty()) +
         html_card("problems", std::to_string(j.problems.size()), !j.problems.empty()) + "</div>\n";
    s += end_cards(j);
    s += "<h2>Ranks that stand out</h2>\n" + outliers_part(j);
    s += "<h2>Leaking ranks</h2>\n" + leaking_table(j, leaking);
    s += "<h2>Leaked bytes over steps</h2>\n";
    std::vector<std::size_t> drawn(leaking.begin(), leaking.begin() + static_cast<std::ptrdiff_t>(std::min(leaking.size(), kRanksDrawn)));
    // A rank that died is drawn with its end marked, leaking or not: its line stopping is the news.
    std::size_t died_drawn = 0;
    for (std::size_t i = 0; i < j.ranks.size() && died_drawn < kEndsDrawn; ++i)
        if (report::ended_badly(j.ranks[i].end) && std::find(drawn.begin(), drawn.end(), i) == drawn.end()) {
            drawn.push_back(i);
            ++died_drawn;
        }
    const std::string lines = job_leak_chart_svg(j, drawn);
    if (lines.empty())
        s += "<p class=\"none\">No leaked bytes at any step: nothing leaked, or no steps marked (cumemaudit_step(), or the "
             "Python helper's cumemaudit.step(n)).</p>\n";
    else
        s += (leaking.size() > kRanksDrawn ? fmt::format("<p>The {} ranks that leak most, one line each.</p>\n", kRanksDrawn) : "") + lines;
    if (j.ranks.size() > kRanksDrawn || leaking.size() > kRanksDrawn) {
        const std::string heat = job_heatmap_svg(j);
        if (!heat.empty()) s += "<h3>Every rank by step</h3>\n<p>Red where a rank had leaked by that step, darker with more bytes" +
                                   std::string(j.rank_ends.empty() ? "" : "; ✕ where a rank ran out of memory or died") + ".</p>\n" + heat;
    }
    s += "<h2>Leak sites across ranks</h2>\n" + sites_table(j);
    s += "<h2>Cross-rank pinning</h2>\n" + pinning_part(j);
    if (!j.problems.empty()) {
        s += "<h2>Problems</h2>\n<ul class=\"problems\">";
        for (const report::JobProblem& p : j.problems)
            s += "<li>" + html_escape((p.file.empty() ? "" : p.file + ": ") + p.what) + "</li>";
        s += "</ul>\n";
    }
    s += fmt::format("<h2>Every rank</h2>\n<details><summary>{} ranks</summary>\n", j.ranks.size()) + ranks_table(j) + "</details>\n";
    return html_document("cumemaudit job", s);
}

}  // namespace cumemaudit::cli
