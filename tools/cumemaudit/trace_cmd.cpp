#include "trace_cmd.hpp"
#include "report/step_parts.hpp"

#include "load_all.hpp"
#include "report/job_end_text.hpp"
#include "report/job_ends.hpp"
#include "output_name.hpp"
#include "terminal_out.hpp"
#include "report/site_naming.hpp"
#include "report/gate.hpp"
#include "report/graph_cost.hpp"
#include "report/oom_text.hpp"
#include "report/text.hpp"
#include "report/timeline.hpp"
#include "site_text.hpp"

#include <algorithm>
#include <limits>

namespace cumemaudit::cli {
namespace {

using nlohmann::json;

std::string process_name(const report::Report& r) {
    std::string n = r.process.rank >= 0 ? "rank " + std::to_string(r.process.rank) + " " : "";
    return n + "pid " + std::to_string(r.process.pid) + " on " + r.process.host;
}

// The earliest first step of all reports, so ranks line up; report times when no report has steps.
std::uint64_t origin_ns(const std::vector<report::Report>& reports) {
    std::uint64_t o = std::numeric_limits<std::uint64_t>::max();
    for (const report::Report& r : reports)
        if (!r.steps.empty()) o = std::min(o, r.steps.front().time_ns);
    if (o != std::numeric_limits<std::uint64_t>::max()) return o;
    for (const report::Report& r : reports)
        if (r.time_ns) o = std::min(o, r.time_ns);
    return o == std::numeric_limits<std::uint64_t>::max() ? 0 : o;
}

struct Events {
    json& list;
    int pid;
    std::uint64_t origin;

    double us(std::uint64_t ns) const { return ns > origin ? static_cast<double>(ns - origin) / 1000.0 : 0.0; }

    void counter(const std::string& name, std::uint64_t ns, std::uint64_t bytes) {
        list.push_back({{"ph", "C"}, {"name", name}, {"pid", pid}, {"tid", 0}, {"ts", us(ns)}, {"args", {{"bytes", bytes}}}});
    }
    void instant(const std::string& name, const char* cat, std::uint64_t ns, json args) {
        list.push_back({{"ph", "i"}, {"s", "p"}, {"name", name}, {"cat", cat}, {"pid", pid}, {"tid", 0},
                        {"ts", us(ns)}, {"args", std::move(args)}});
    }
};

void add_report(const report::Report& r, int pid, std::uint64_t origin, json& list) {
    Events ev{list, pid, origin};
    list.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", process_name(r)}}}});
    list.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}});

    const report::Timeline t = report::timeline(r);
    std::uint64_t end_ns = r.time_ns;
    for (const report::TimelinePoint& p : t.points) {
        const report::Step& s = *p.step;
        for (std::size_t i = 0; i < t.owners.size(); ++i) ev.counter("owner " + t.owners[i], s.time_ns, p.owner_bytes[i]);
        ev.counter("driver used", s.time_ns, s.driver_used_bytes);
        ev.counter("unattributed", s.time_ns, s.unattributed_bytes);
        if (s.leaked_bytes != 0) ev.counter("leaked so far", s.time_ns, s.leaked_bytes);
        if (s.process_used_bytes != 0) ev.counter("process used (NVML)", s.time_ns, s.process_used_bytes);
        for (const report::StepPart& part : report::kStepParts)
            if (s.*part.bytes != 0) ev.counter(part.label, s.time_ns, s.*part.bytes);
        json args = {{"tracked_bytes", p.tracked_bytes}, {"driver_used_bytes", s.driver_used_bytes},
                     {"unattributed_bytes", s.unattributed_bytes}, {"leaked_bytes", s.leaked_bytes}};
        if (s.pytorch_reserved_bytes) {
            args["pytorch_allocated_bytes"] = s.pytorch_allocated_bytes;
            args["pytorch_reserved_bytes"] = s.pytorch_reserved_bytes;
        }
        ev.instant(p.name, report::is_mark(s) ? "mark" : "step", s.time_ns, std::move(args));
        end_ns = std::max(end_ns, s.time_ns);
    }
    if (t.points.empty()) {  // no marks: the owners table is the one moment known, drawn at the report's time
        for (const report::Owner& o : r.owners) ev.counter("owner " + o.owner, r.time_ns, o.live_bytes);
    }
    for (const report::Alarm& a : r.alarms) {
        ev.instant("alarm: " + a.what + " " + a.owner + " +" + report::human_bytes(a.bytes), "alarm", a.time_ns,
                   {{"owner", a.owner}, {"bytes", a.bytes}, {"live_bytes", a.live_bytes}, {"step", a.step},
                    {"site", site_text(a.site)}});
    }
    for (const report::Oom& o : r.oom) {
        json parts = json::object();
        for (const report::OomPart& p : o.parts) parts[report::part_label(p, o)] = p.bytes;
        json pools = json::object();
        for (const report::TorchPool& p : o.pytorch_pools)
            pools[p.pool] = {{"allocated_bytes", p.allocated_bytes}, {"reserved_bytes", p.reserved_bytes},
                             {"fragmentation_bytes", p.fragmentation_bytes}};
        ev.instant("OOM: " + o.api + " of " + report::human_bytes(o.requested_bytes), "oom", o.time_ns,
                   {{"api", o.api}, {"requested_bytes", o.requested_bytes}, {"step", o.step},
                    {"driver_used_bytes", o.driver_used_bytes}, {"driver_free_bytes", o.driver_free_bytes},
                    {"leaked_bytes", o.leaked_bytes}, {"recovered", o.recovered}, {"parts", std::move(parts)},
                    {"pytorch_pools", std::move(pools)},
                    {"site", o.site.frames.empty() ? o.site.api : frame_text(o.site.frames.front())}});
    }
    // Each graph at its capture, with what it and all before it cost: "how big is one graph".
    for (const report::GraphCost& c : report::graph_costs(r)) {
        const report::Graph& g = *c.graph;
        ev.instant("graph " + std::to_string(g.id) + ": +" + report::human_bytes(c.new_bytes), "graph",
                   g.time_ns != 0 ? g.time_ns : end_ns,
                   {{"id", g.id}, {"step", g.step}, {"new_bytes", c.new_bytes},
                    {"earlier_graphs_bytes", c.shareable_bytes}, {"instantiate_cost_bytes", c.instantiate_bytes},
                    {"cumulative_bytes", c.cumulative_bytes}});
    }
    // Leaks are what is left at the end: they sit at the report's last moment. Held-at-exit rows are there
    // too, named as held, never as leaks (report::is_leak).
    for (const report::Leak& l : r.leaks) {
        const bool leak = report::is_leak(l);
        ev.instant((leak ? "leak: " : "held at exit: ") + report::human_bytes(l.bytes) + " " + l.cls + " " + l.owner,
                   leak ? "leak" : "held", end_ns,
                   {{"class", l.cls}, {"bytes", l.bytes}, {"allocations", l.allocations}, {"references", l.references},
                    {"owner", l.owner}, {"api", l.site.api},
                    {"top_frame", l.site.frames.empty() ? "" : frame_text(l.site.frames.front())}});
    }
}

// A job: one process per rank with its live and leaked bytes over the steps the merge kept, an instant at
// the step its leak began, naming the line of its largest leak site, and one where it died.
void add_job_rank(const report::JobReport& job, const report::JobRank& r, int pid, std::uint64_t origin, json& list) {
    Events ev{list, pid, origin};
    const std::string name = (r.rank >= 0 ? "rank " + std::to_string(r.rank) + " " : "") + "pid " + std::to_string(r.pid) +
                             " on " + r.host;
    list.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", name}}}});
    list.push_back({{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}});
    const std::string top = r.top_site >= 0 && static_cast<std::size_t>(r.top_site) < job.sites.size()
                                ? report::where(job.sites[static_cast<std::size_t>(r.top_site)].leak.site)
                                : "";
    for (const report::JobRankStep& s : r.steps) {
        ev.counter("live", s.time_ns, s.live_bytes);
        ev.counter("leaked so far", s.time_ns, s.leaked_bytes);
        if (r.first_leak_step >= 0 && s.step == static_cast<std::uint64_t>(r.first_leak_step))
            ev.instant("leak begins: step " + std::to_string(s.step) + (top.empty() ? "" : " at " + top), "leak", s.time_ns,
                       {{"step", s.step}, {"leaked_bytes", s.leaked_bytes}, {"site", top}});
    }
    if (r.leaked_bytes != 0 && !r.steps.empty())
        ev.instant("leaked at exit: " + report::human_bytes(r.leaked_bytes), "leak", r.steps.back().time_ns,
                   {{"leaked_bytes", r.leaked_bytes}, {"own_leaked_bytes", r.own_leaked_bytes}, {"site", top}});
    // A rank that did not end cleanly says how, where its counters stop.
    if (report::ended_badly(r.end) && !r.steps.empty())
        ev.instant("end: " + report::end_phrase(r.end), "end", r.steps.back().time_ns,
                   {{"how", r.end.how}, {"step", r.end.step}});
}

}  // namespace

json trace_job_json(const report::JobReport& job) {
    std::uint64_t origin = std::numeric_limits<std::uint64_t>::max();
    for (const report::JobRank& r : job.ranks)
        if (!r.steps.empty()) origin = std::min(origin, r.steps.front().time_ns);
    if (origin == std::numeric_limits<std::uint64_t>::max()) origin = 0;
    json list = json::array();
    for (std::size_t i = 0; i < job.ranks.size(); ++i) add_job_rank(job, job.ranks[i], static_cast<int>(i), origin, list);
    return {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ms"},
            {"otherData", {{"tool", "cumemaudit"}, {"origin_time_ns", origin}, {"job_reports", job.reports}}}};
}

json trace_json(const std::vector<report::Report>& reports) {
    const std::uint64_t origin = origin_ns(reports);
    json list = json::array();
    for (std::size_t i = 0; i < reports.size(); ++i) add_report(reports[i], static_cast<int>(i), origin, list);
    return {{"traceEvents", std::move(list)}, {"displayTimeUnit", "ms"},
            {"otherData", {{"tool", "cumemaudit"}, {"origin_time_ns", origin}}}};
}

int trace_command(const std::vector<std::string>& files, const std::string& out) {
    ViewInput in;
    if (!load_view_input(files, in)) return 2;
    const std::string path = out.empty() ? default_output(files, ".trace.json") : out;
    if (!write_text(path, (in.job ? trace_job_json(*in.job) : trace_json(in.reports)).dump(1) + "\n")) return 2;
    if (out.empty()) say(stdout, "cumemaudit trace: wrote {}\n", path);  // a name it chose: say which
    return 0;
}

}  // namespace cumemaudit::cli
