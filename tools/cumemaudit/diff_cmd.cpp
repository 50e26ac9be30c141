#include "diff_cmd.hpp"
#include "report/step_parts.hpp"
#include "report/gate.hpp"
#include "report/job.hpp"
#include "terminal_out.hpp"

#include "load_all.hpp"
#include "report/site_key.hpp"
#include "report/site_naming.hpp"
#include "report/text.hpp"
#include "report/timeline.hpp"
#include "site_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <map>

namespace cumemaudit::cli {
namespace {

using Bytes = std::map<std::string, std::uint64_t>;

DiffTable table(std::string title, const Bytes& a, const Bytes& b) {
    std::map<std::string, DiffRow> rows;
    for (const auto& [k, v] : a) rows[k] = {k, v, 0};
    for (const auto& [k, v] : b) {
        rows.try_emplace(k, DiffRow{k, 0, 0});
        rows[k].b = v;
    }
    DiffTable t{std::move(title), {}};
    for (auto& [k, row] : rows) t.rows.push_back(std::move(row));
    // Ties keep name order (the map's), so the output is the same on every run.
    std::stable_sort(t.rows.begin(), t.rows.end(), [](const DiffRow& x, const DiffRow& y) { return x.delta() > y.delta(); });
    return t;
}

Bytes owners_live(const report::Report& r) {
    Bytes m;
    for (const report::Owner& o : r.owners) m[o.owner] += o.live_bytes;
    return m;
}

Bytes kinds_live(const report::Report& r) {
    Bytes m;
    for (const report::Owner& o : r.owners)
        for (const auto& [kind, bytes] : o.live_by_kind) m[kind] += bytes;
    return m;
}

// One row per place: the same site may leak under two classes (unreachable and open-export); rows held at
// exit are not leaks (report::is_leak). Sites are one place by report::site_key (lines ignored unless asked:
// an edit above a leak moves its line, not the leak), named as every one-line view names them.
Bytes leak_sites(const report::Report& a, const report::Report& b, report::SiteKeyLines lines, Bytes& in_b) {
    std::vector<const report::Site*> sites;
    std::vector<std::string> keys;
    std::vector<const report::Leak*> rows;
    for (const report::Report* r : {&a, &b})
        for (const report::Leak& l : r->leaks)
            if (report::is_leak(l)) {
                rows.push_back(&l);
                sites.push_back(&l.site);
                keys.push_back(report::site_key(l.site, lines));
            }
    const std::vector<std::string> wheres = report::distinct_wheres(sites);
    std::map<std::string, std::string> names;  // key → the name of its first row
    Bytes in_a;
    std::size_t from_a = 0;
    for (const report::Leak& l : a.leaks) from_a += report::is_leak(l);
    for (std::size_t i = 0; i < rows.size(); ++i) {
        const std::string& name = names.try_emplace(keys[i], rows[i]->site.api + " at " + wheres[i] + " [" + rows[i]->owner + "]").first->second;
        (i < from_a ? in_a : in_b)[name] += rows[i]->bytes;
    }
    return in_a;
}

Bytes report_totals(const report::Report& r) {
    Bytes m{{"leaked", r.summary.leaked_bytes},
            {"unfreed at exit", r.summary.unfreed_bytes},
            {"peak tracked", r.summary.peak_tracked_bytes}};
    std::uint64_t live = 0;
    for (const report::Owner& o : r.owners) live += o.live_bytes;
    m["live (all owners)"] = live;
    if (!r.steps.empty()) m["driver used (last step)"] = r.steps.back().driver_used_bytes;
    return m;
}

Bytes step_totals(const report::Step& s) {
    std::uint64_t tracked = 0;
    for (const auto& [owner, bytes] : s.by_owner) tracked += bytes;
    // Leaked apart from the rest of what is tracked: a leak's growth and growth in use read differently.
    const std::uint64_t leaked = std::min(tracked, s.leaked_bytes);
    Bytes m{{"driver used", s.driver_used_bytes}, {"unattributed", s.unattributed_bytes},
            {"tracked (all owners)", tracked}, {"leaked so far", s.leaked_bytes}, {"tracked, in use", tracked - leaked}};
    if (s.pytorch_reserved_bytes) {
        m["pytorch allocated"] = s.pytorch_allocated_bytes;
        m["pytorch reserved"] = s.pytorch_reserved_bytes;
    }
    if (s.graph_mem_reserved_bytes) m["graph memory reserved"] = s.graph_mem_reserved_bytes;
    for (const report::StepPart& part : report::kStepParts)
        if (s.*part.bytes) m[part.label] = s.*part.bytes;
    return m;
}

std::string signed_bytes(std::int64_t d) {
    if (d == 0) return "0";
    const std::uint64_t mag = d < 0 ? static_cast<std::uint64_t>(-(d + 1)) + 1 : static_cast<std::uint64_t>(d);
    return fmt::format("{}{} ({}{})", d < 0 ? "-" : "+", report::human_bytes(mag), d < 0 ? "-" : "+", mag);
}

}  // namespace

Diff diff_reports(const report::Report& a, const report::Report& b, std::string name_a, std::string name_b,
                  report::SiteKeyLines lines) {
    Diff d{std::move(name_a), std::move(name_b), {}};
    d.tables.push_back(table("live bytes by owner", owners_live(a), owners_live(b)));
    d.tables.push_back(table("live bytes by kind", kinds_live(a), kinds_live(b)));
    Bytes sites_b;
    const Bytes sites_a = leak_sites(a, b, lines, sites_b);
    d.tables.push_back(table("leaked bytes by site", sites_a, sites_b));
    d.tables.push_back(table("totals", report_totals(a), report_totals(b)));
    return d;
}

Diff diff_steps(const report::Step& a, const report::Step& b) {
    Diff d{report::step_name(a), report::step_name(b), {}};
    d.tables.push_back(table("live bytes by owner", a.by_owner, b.by_owner));
    d.tables.push_back(table("live bytes by kind", a.by_kind, b.by_kind));
    d.tables.push_back(table("totals", step_totals(a), step_totals(b)));
    return d;
}

std::string diff_text(const Diff& d) {
    std::string out = fmt::format("cumemaudit diff: {} -> {}\n", d.a, d.b);
    for (const DiffTable& t : d.tables) {
        if (t.rows.empty()) continue;
        std::size_t w = t.title.size();
        for (const DiffRow& r : t.rows) w = std::max(w, r.name.size());
        out += fmt::format("\n{:<{}}  {:>12}  {:>12}  {}\n", t.title, w, "A", "B", "change");
        for (const DiffRow& r : t.rows)
            out += fmt::format("{:<{}}  {:>12}  {:>12}  {}\n", r.name, w, report::human_bytes(r.a),
                               report::human_bytes(r.b), signed_bytes(r.delta()));
    }
    return out;
}

namespace {

// One side of a diff, read as every view reads its paths (load_view_input): a report file, a merged job, or
// a directory of rank reports merged in memory; a job is seen as one process, its sites as leak rows.
std::optional<report::Report> side(const std::string& path, bool needs_steps) {
    ViewInput in;
    if (!load_view_input({path}, in)) return std::nullopt;
    if (!in.job) return std::move(in.reports.front());
    if (needs_steps) {
        cli::error("{}: --steps compares two steps of one process report, and this is a job (its ranks' steps "
                   "are in `cumemaudit html`)\n", path);
        return std::nullopt;
    }
    return report::job_as_process(*in.job);
}

}  // namespace

int diff_command(const std::vector<std::string>& files, const std::vector<std::string>& steps, bool match_lines) {
    if (steps.empty() ? files.size() != 2 : files.size() != 1) {
        cli::error("takes two reports (diff A B: report files, merged jobs or directories of reports), or one with --steps N M\n");
        return 2;
    }
    std::vector<report::Report> reports;
    bool ok = true;
    for (const std::string& f : files) {
        std::optional<report::Report> r = side(f, !steps.empty());
        if (r) reports.push_back(std::move(*r));
        ok = ok && r.has_value();
    }
    if (!ok) return 2;
    if (steps.empty()) {
        cli::print_safe(stdout, diff_text(diff_reports(reports[0], reports[1], files[0], files[1],
                                                               match_lines ? report::SiteKeyLines::match : report::SiteKeyLines::ignore)));
        return 0;
    }
    const report::Step* ab[2] = {report::find_step(reports[0], steps[0]), report::find_step(reports[0], steps[1])};
    for (int i = 0; i < 2; ++i) {
        if (ab[i] == nullptr) {
            cli::error("{}: no step or mark '{}' (the report has {} steps)\n", files[0],
                         steps[i].c_str(), reports[0].steps.size());
            return 2;
        }
    }
    cli::print_safe(stdout, diff_text(diff_steps(*ab[0], *ab[1])));
    return 0;
}

}  // namespace cumemaudit::cli
