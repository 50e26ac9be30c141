#include "html_tables.hpp"
#include "report/step_parts.hpp"
#include "report/gate.hpp"

#include "html_escape.hpp"
#include "report/graph_cost.hpp"
#include "report/oom_text.hpp"
#include "report/text.hpp"
#include "site_text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <vector>

namespace cumemaudit::cli {
namespace {

constexpr std::size_t kFramesShown = 6;

std::string bytes_cell(std::uint64_t b) {
    return fmt::format("<td class=\"num\" data-sort=\"{0}\" title=\"{0} bytes\">{1}</td>", b, report::human_bytes(b));
}
std::string signed_bytes_cell(std::int64_t b) {
    return fmt::format("<td class=\"num\" data-sort=\"{0}\" title=\"{0} bytes\">{1}</td>", b, report::human_signed_bytes(b));
}
std::string num_cell(std::uint64_t v) { return fmt::format("<td class=\"num\" data-sort=\"{0}\">{0}</td>", v); }
std::string text_cell(const std::string& t) { return "<td>" + html_escape(t) + "</td>"; }

std::string frames_cell(const report::Site& site) {
    std::string s = "<td><code>" + html_escape(site.api) + "</code>";
    // Python frames first: a Python caller's native frames are libffi and the interpreter.
    if (!site.python_frames.empty()) s += "<ol class=\"frames python\">";
    for (std::size_t i = 0; i < site.python_frames.size() && i < kFramesShown; ++i)
        s += "<li>" + html_escape(python_frame_text(site.python_frames[i])) + "</li>";
    if (!site.python_frames.empty()) s += "</ol>";
    if (!site.frames.empty()) s += "<ol class=\"frames\">";
    for (std::size_t i = 0; i < site.frames.size() && i < kFramesShown; ++i) {
        const report::Frame& f = site.frames[i];
        s += "<li title=\"" + html_escape(f.object) + "\">" + html_escape(frame_text(f)) + "</li>";
    }
    if (site.frames.size() > kFramesShown) s += fmt::format("<li class=\"more\">… {} more</li>", site.frames.size() - kFramesShown);
    if (!site.frames.empty()) s += "</ol>";
    return s + "</td>";
}

std::string table(const char* cls, const std::vector<std::string>& head, const std::string& rows, const char* none) {
    if (rows.empty()) return fmt::format("<p class=\"none\">{}</p>\n", none);
    std::string s = fmt::format("<table class=\"{}\"><thead><tr>", cls);
    for (const std::string& h : head) s += "<th>" + html_escape(h) + "</th>";
    return s + "</tr></thead><tbody>\n" + rows + "</tbody></table>\n";
}

std::string by_map(const std::map<std::string, std::uint64_t>& m) {
    std::string s;
    for (const auto& [k, v] : m) s += (s.empty() ? "" : ", ") + html_escape(k) + " " + report::human_bytes(v);
    return s;
}

}  // namespace

namespace {
std::string leak_rows(const report::Report& r, bool leaks) {
    std::string rows;
    for (const report::Leak& l : r.leaks) {
        if (report::is_leak(l) != leaks) continue;
        rows += "<tr>" + text_cell(l.cls) + bytes_cell(l.bytes) + num_cell(l.allocations) + num_cell(l.references) +
                text_cell(l.handle_type) + text_cell(l.owner) + text_cell(l.kind) + frames_cell(l.site) + "</tr>\n";
    }
    return rows;
}
const std::vector<std::string> kLeakHead = {"class", "bytes", "allocations", "references", "handle", "owner", "kind", "site"};
}  // namespace

std::string leaks_table(const report::Report& r) { return table("leaks", kLeakHead, leak_rows(r, true), "No leaks."); }

std::string held_table(const report::Report& r) {
    return table("held", kLeakHead, leak_rows(r, false), "Nothing held at exit.");
}

std::string misuse_table(const report::Report& r) {
    std::string rows;
    for (const report::Misuse& m : r.misuse) {
        rows += "<tr>" + text_cell(m.api) + text_cell(m.result) + text_cell(m.what) + num_cell(m.count) +
                text_cell(m.owner) + frames_cell(m.site) + "</tr>\n";
    }
    return table("misuse", {"api", "result", "what", "count", "owner", "site"}, rows, "No misuse.");
}

std::string owners_table(const report::Report& r) {
    std::set<std::string> kinds;
    for (const report::Owner& o : r.owners)
        for (const auto& [k, v] : o.live_by_kind) kinds.insert(k);
    std::vector<std::string> head{"owner", "live", "peak", "leaked"};
    for (const std::string& k : kinds) head.push_back("live " + k);
    std::string rows;
    for (const report::Owner& o : r.owners) {
        rows += "<tr>" + text_cell(o.owner) + bytes_cell(o.live_bytes) + bytes_cell(o.peak_bytes) + bytes_cell(o.leaked_bytes);
        for (const std::string& k : kinds) {
            const auto it = o.live_by_kind.find(k);
            rows += bytes_cell(it == o.live_by_kind.end() ? 0 : it->second);
        }
        rows += "</tr>\n";
    }
    return table("owners", head, rows, "No owners recorded.");
}

std::string alarms_table(const report::Report& r) {
    std::string rows;
    for (const report::Alarm& a : r.alarms) {
        // One row per alarm kind, owner and site, however often it was raised: the count and the last step say
        // whether it is still going on.
        rows += "<tr>" + num_cell(a.step) + num_cell(std::max(a.last_step, a.step)) + num_cell(a.count) + text_cell(a.what) +
                text_cell(a.owner) + bytes_cell(a.bytes) + bytes_cell(a.live_bytes) + frames_cell(a.site) + "</tr>\n";
    }
    return table("alarms", {"first step", "last step", "times raised", "what", "owner", "grew by", "live", "site"}, rows,
                 "No alarms.");
}

std::string graphs_table(const report::Report& r) {
    std::string rows;
    for (const report::GraphCost& c : report::graph_costs(r)) {
        const report::Graph& g = *c.graph;
        rows += "<tr>" + num_cell(g.id) + num_cell(g.step) + num_cell(g.allocations) + bytes_cell(g.bytes) +
                "<td>" + by_map(g.bytes_by_owner) + "</td>" + num_cell(g.instantiations) +
                signed_bytes_cell(g.instantiate_cost_bytes) + bytes_cell(c.shareable_bytes) +
                signed_bytes_cell(c.cumulative_bytes) + "</tr>\n";
    }
    return table("graphs",
                 {"graph", "step", "allocations", "bytes in capture", "by owner", "instantiations", "instantiate cost",
                  "reserved by earlier graphs", "cumulative"},
                 rows, "No CUDA graphs captured.");
}

std::string capture_table(const report::Report& r) {
    std::string rows;
    for (const report::CaptureHole& c : r.capture_profile)
        rows += "<tr>" + text_cell(c.line) + text_cell(c.pool) + num_cell(c.allocations) + bytes_cell(c.allocated_bytes) +
                bytes_cell(c.largest_bytes) + bytes_cell(c.hole_bytes) + num_cell(c.hole_blocks) + "</tr>\n";
    return table("capture",
                 {"line", "pool", "allocations", "allocated", "largest", "left free at the end", "in free blocks"}, rows,
                 "No capture profile: wrap the warm-up and capture loop in cumemaudit.capture_profile() (docs/PYTHON.md).");
}

std::string oom_table(const report::Report& r) {
    std::string s;
    for (const report::Oom& o : r.oom) {
        s += fmt::format("<p><b>Out of memory: {} of {}</b> returned {} at step {}{} · driver {} used of {}, {} free; "
                         "{} leaked</p>\n",
                         html_escape(o.api), report::human_bytes(o.requested_bytes), html_escape(o.result), o.step,
                         o.recovered ? " · recovered by a later retry" : "", report::human_bytes(o.driver_used_bytes),
                         report::human_bytes(o.driver_total_bytes), report::human_bytes(o.driver_free_bytes),
                         report::human_bytes(o.leaked_bytes));
        std::string rows;
        for (const report::OomPart& p : o.parts)
            rows += "<tr>" + text_cell(report::part_label(p, o)) + bytes_cell(p.bytes) + frames_cell(p.site) + "</tr>\n";
        s += table("oom", {"held by", "bytes", "site"}, rows, "");
        std::string pools;
        for (const report::TorchPool& p : o.pytorch_pools)
            pools += "<tr>" + text_cell(p.pool) + bytes_cell(p.allocated_bytes) + bytes_cell(p.reserved_bytes) +
                     bytes_cell(p.fragmentation_bytes) + "</tr>\n";
        if (!pools.empty())
            s += table("oom-pytorch", {"PyTorch pool", "allocated", "reserved", "reserved but unallocated"}, pools, "");
        s += table("oom-site", {"refused call"}, "<tr>" + frames_cell(o.site) + "</tr>\n", "");
    }
    return s.empty() ? "<p class=\"none\">No allocation was refused for lack of memory.</p>\n" : s;
}

std::string steps_table(const report::Timeline& t) {
    std::vector<std::string> head{"step"};
    for (const std::string& o : t.owners) head.push_back(o);
    for (const char* h : {"unattributed", "driver used", "this process (NVML)"}) head.push_back(h);
    for (const report::StepPart& part : report::kStepParts) head.push_back(part.label);
    for (const char* h : {"PyTorch allocated", "PyTorch reserved", "graph memory reserved"}) head.push_back(h);
    std::string rows;
    for (const report::TimelinePoint& p : t.points) {
        rows += "<tr>" + text_cell(p.name);
        for (const std::uint64_t b : p.owner_bytes) rows += bytes_cell(b);
        const report::Step& s = *p.step;
        rows += bytes_cell(s.unattributed_bytes) + bytes_cell(s.driver_used_bytes) + bytes_cell(s.process_used_bytes);
        for (const report::StepPart& part : report::kStepParts) rows += bytes_cell(s.*part.bytes);
        rows += bytes_cell(s.pytorch_allocated_bytes) + bytes_cell(s.pytorch_reserved_bytes) +
                bytes_cell(s.graph_mem_reserved_bytes) + "</tr>\n";
    }
    return table("steps", head, rows, "No steps recorded.");
}

}  // namespace cumemaudit::cli
