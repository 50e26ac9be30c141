#include "html_chart.hpp"
#include "report/step_parts.hpp"

#include "html_axis.hpp"
#include "html_escape.hpp"
#include "report/text.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace cumemaudit::cli {

using namespace chart;

const char* const kChartStyle = R"(
svg.chart g.plot path,svg.chart g.plot line{vector-effect:non-scaling-stroke}svg.chart[data-plotw]{cursor:grab;touch-action:none}
svg .peak{fill:none;stroke:#555;stroke-width:1;stroke-dasharray:2 2}
)";

// x' = left + pan + zoom × (x − left): the plot group's transform; the step labels move to match.
const char* const kChartScript = R"(
for (const svg of document.querySelectorAll("svg.chart[data-plotw]")) {
  const plot = svg.querySelector("g.plot"), L = +svg.dataset.left, W = +svg.dataset.plotw;
  const labels = svg.querySelectorAll("text.xlabel"), vbw = svg.viewBox.baseVal.width;
  let k = 1, tx = 0, drag = null;
  const at = e => { const r = svg.getBoundingClientRect(); return (e.clientX - r.left) * vbw / r.width; };
  const apply = () => {
    k = Math.min(Math.max(k, 1), 500); tx = Math.min(0, Math.max(tx, W - W * k));
    plot.setAttribute("transform", `translate(${L + tx - k * L} 0) scale(${k} 1)`);
    for (const t of labels) {
      const x = L + tx + k * (+t.dataset.x - L);
      t.style.display = x < L - 1 || x > L + W + 1 ? "none" : "";
      t.setAttribute("transform", `translate(${x.toFixed(1)},${t.dataset.y}) rotate(-35)`);
    }
    svg.dataset.zoom = k.toFixed(3);
  };
  svg.addEventListener("wheel", e => {
    e.preventDefault();
    const p = at(e), old = k;
    k *= e.deltaY < 0 ? 1.25 : 0.8; k = Math.min(Math.max(k, 1), 500);
    tx = p - L - (p - L - tx) * k / old; apply();
  }, {passive: false});
  svg.addEventListener("mousedown", e => { drag = {x: at(e), tx}; svg.style.cursor = "grabbing"; });
  window.addEventListener("mousemove", e => { if (drag) { tx = drag.tx + at(e) - drag.x; apply(); } });
  window.addEventListener("mouseup", () => { drag = null; svg.style.cursor = ""; });
  svg.addEventListener("dblclick", () => { k = 1; tx = 0; apply(); });
}
)";

namespace {

// Where the process chart puts a point: x by its position among the steps, y by bytes on the axis. One step
// still gets a band across the plot: both ends of it stand for that step.
struct Plot {
    const report::Timeline& t;
    Axis axis;
    std::size_t n = t.points.size();
    std::size_t ends = n == 1 ? 2 : n;

    double x(std::size_t i) const { return n == 1 ? kLeft + (i ? kPlotW : 0) : kLeft + kPlotW * i / (n - 1); }
    double y(double bytes) const { return kTop + kPlotH - kPlotH * bytes / axis.top_bytes; }
    const report::TimelinePoint& point(std::size_t i) const { return t.points[n == 1 ? 0 : i]; }
    double mark_x(std::size_t i) const { return n == 1 ? kLeft + kPlotW / 2 : x(i); }  // a step's own column
};

// A marker's place (a point of the timeline) and its tooltip, escaped.
struct Mark {
    std::size_t point;
    std::string title;
};

// What the chart draws over the stacked areas, in drawing order (later on top): a line has a height at each
// point; a marker stands at the points its records name. Lines with a legend entry get one where they are
// drawn, in legend_place order. Their look is their class's style (kChartStyle, html_page's kStyle).
struct Overlay {
    const char* cls;
    const char* legend = nullptr;  // nullptr: no legend entry (a marker's tooltip says what it is)
    int legend_place = 0;
    const char* title = nullptr;   // a line's tooltip
    bool (*shown_at)(const report::TimelinePoint&) = nullptr;       // a line: drawn when any point shows it
    std::uint64_t (*bytes)(const report::TimelinePoint&) = nullptr;  // a line: its height at a point
    std::vector<Mark> (*marks)(const report::Report&, const report::Timeline&) = nullptr;  // a marker
    bool head = false;             // a marker: a triangle at its top
};

// Out-of-memory moments at the last point of their step: the refusal came after that mark.
std::vector<Mark> oom_marks(const report::Report& r, const report::Timeline& t) {
    std::vector<Mark> v;
    for (const report::Oom& o : r.oom)
        for (std::size_t i = t.points.size(); i-- > 0;) {
            if (t.points[i].step->step != o.step) continue;
            v.push_back({i, fmt::format("out of memory after {}: {} of {} refused, {} used, {} leaked", html_escape(t.points[i].name),
                                        html_escape(o.api), report::human_bytes(o.requested_bytes),
                                        report::human_bytes(o.driver_used_bytes), report::human_bytes(o.leaked_bytes))});
            break;
        }
    return v;
}

// Alarms at the first point of their step: the moment growth was first seen.
std::vector<Mark> alarm_marks(const report::Report& r, const report::Timeline& t) {
    std::vector<Mark> v;
    for (const report::Alarm& a : r.alarms)
        for (std::size_t i = 0; i < t.points.size(); ++i) {
            if (t.points[i].step->step != a.step) continue;
            v.push_back({i, fmt::format("alarm at {}: {} {} grew {} (live {})", html_escape(t.points[i].name), html_escape(a.what),
                                        html_escape(a.owner), report::human_bytes(a.bytes), report::human_bytes(a.live_bytes))});
            break;
        }
    return v;
}

using Point = report::TimelinePoint;
constexpr Overlay kOverlays[] = {
    {.cls = "torch", .legend = "PyTorch allocated", .legend_place = 3, .title = "PyTorch allocated (torch.cuda.memory_allocated)",
     .shown_at = [](const Point& p) { return p.step->pytorch_reserved_bytes != 0; },
     .bytes = [](const Point& p) { return p.step->pytorch_allocated_bytes; }},
    {.cls = "driver", .legend = "driver used", .legend_place = 0,
     .title = "driver used (cuMemGetInfo); the gap above the areas is unattributed",
     .shown_at = [](const Point& p) { return p.step->driver_used_bytes != 0; },
     .bytes = [](const Point& p) { return p.step->driver_used_bytes; }},
    // Part of the areas below it: the live memory nothing can release any more.
    {.cls = "leaked", .legend = "leaked so far", .legend_place = 1, .title = "leaked so far (unreachable VMM memory)",
     .shown_at = [](const Point& p) { return p.step->leaked_bytes != 0; },
     .bytes = [](const Point& p) { return p.step->leaked_bytes; }},
    // Above the areas where memory came and went between two marks.
    {.cls = "peak", .legend = "peak between marks", .legend_place = 2, .title = "the highest tracked bytes since the previous mark",
     .shown_at = [](const Point& p) { return p.step->peak_tracked_bytes > p.tracked_bytes; },
     .bytes = [](const Point& p) { return std::max(p.step->peak_tracked_bytes, p.tracked_bytes); }},
    {.cls = "oom", .marks = oom_marks},
    {.cls = "alarm", .marks = alarm_marks, .head = true},
};

bool shown(const Overlay& o, const report::Timeline& t) {
    return !o.shown_at || std::any_of(t.points.begin(), t.points.end(), o.shown_at);
}

std::string overlay_svg(const Overlay& o, const report::Report& r, const Plot& p) {
    if (o.marks) {
        std::string s;
        for (const Mark& m : o.marks(r, p.t))
            s += fmt::format("<g class=\"{3}\"><line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\"/>{4}<title>{5}</title></g>\n",
                             p.mark_x(m.point), kTop, kTop + kPlotH, o.cls,
                             o.head ? fmt::format("<path d=\"M{0:.1f},{1} l-6,-10 h12 Z\" transform=\"translate(0,10)\"/>",
                                                  p.mark_x(m.point), kTop)
                                    : "",
                             m.title);
        return s;
    }
    std::string d;
    for (std::size_t i = 0; i < p.ends; ++i)
        d += fmt::format("{}{:.1f},{:.1f}", i ? " L" : "M", p.x(i), p.y(static_cast<double>(o.bytes(p.point(i)))));
    return fmt::format("<path class=\"{}\" d=\"{}\"><title>{}</title></path>\n", o.cls, d, o.title);
}

std::string y_grid(const Plot& p) {
    std::string s;
    for (double b = 0; b <= p.axis.top_bytes + 0.5; b += p.axis.tick_bytes)
        s += fmt::format("<line class=\"grid\" x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>"
                         "<text class=\"ylabel\" x=\"{}\" y=\"{:.1f}\">{}</text>\n",
                         kLeft, kLeft + kPlotW, p.y(b), p.y(b), kLeft - 6, p.y(b) + 4, tick_label(b, p.axis));
    return s;
}

// One area per owner, stacked in timeline order (largest peak at the bottom).
std::string areas(const Plot& p) {
    std::string s;
    std::vector<double> below(p.ends, 0.0);
    for (std::size_t o = 0; o < p.t.owners.size(); ++o) {
        std::string top, bottom;
        std::uint64_t peak = 0;
        std::vector<double> above(p.ends);
        for (std::size_t i = 0; i < p.ends; ++i) {
            const std::uint64_t v = p.point(i).owner_bytes[o];
            peak = std::max(peak, v);
            above[i] = below[i] + static_cast<double>(v);
            top += fmt::format("{}{:.1f},{:.1f}", i ? " L" : "M", p.x(i), p.y(above[i]));
        }
        for (std::size_t i = p.ends; i-- > 0;) bottom += fmt::format(" L{:.1f},{:.1f}", p.x(i), p.y(below[i]));
        const std::string name = html_escape(p.t.owners[o]);
        s += fmt::format("<path class=\"area\" data-owner=\"{}\" fill=\"{}\" d=\"{}{} Z\"><title>{}: peak {} over "
                         "the steps, {} at the last</title></path>\n",
                         name, owner_colour(o), top, bottom, name, report::human_bytes(peak),
                         report::human_bytes(p.point(p.ends - 1).owner_bytes[o]));
        below = std::move(above);
    }
    return s;
}

std::string hover_tip(const report::Timeline& t, const report::TimelinePoint& p) {
    std::string tip = html_escape(p.name);
    for (std::size_t o = 0; o < t.owners.size(); ++o)
        if (p.owner_bytes[o]) {
            tip += "\n" + html_escape(t.owners[o]) + ": " + report::human_bytes(p.owner_bytes[o]);
            if (auto l = p.step->leaked_by_owner.find(t.owners[o]); l != p.step->leaked_by_owner.end())
                tip += " (leaked so far " + report::human_bytes(l->second) + ")";
        }
    if (p.step->leaked_bytes) tip += "\nleaked so far: " + report::human_bytes(p.step->leaked_bytes);
    if (p.step->peak_tracked_bytes > p.tracked_bytes)
        tip += "\npeak since the previous mark: " + report::human_bytes(p.step->peak_tracked_bytes);
    for (const report::StepPart& part : report::kStepParts)
        if (p.step->*part.bytes) tip += std::string("\n") + part.label + ": " + report::human_bytes(p.step->*part.bytes);
    tip += "\nunattributed: " + report::human_bytes(p.step->unattributed_bytes);
    tip += "\ndriver used: " + report::human_bytes(p.step->driver_used_bytes);
    return tip;
}

// A hover column per step into `s`, and the step labels returned: they sit outside the zoomed group, where
// the script moves them and text keeps its shape.
std::string hover_columns(const Plot& p, std::string& s) {
    const std::size_t n = p.n, every = (n + kMaxXLabels - 1) / kMaxXLabels;
    std::string labels;
    for (std::size_t i = 0; i < n; ++i) {
        const double cx = p.mark_x(i);
        const double half = n == 1 ? kPlotW / 2 : kPlotW / (n - 1) / 2;
        s += fmt::format("<rect class=\"hover\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\"><title>{}</title></rect>\n",
                         std::max(kLeft, cx - half), kTop, std::min(2 * half, kLeft + kPlotW - std::max(kLeft, cx - half)),
                         kPlotH, hover_tip(p.t, p.t.points[i]));
        // The last step is labelled too, unless that would overprint the label before it.
        if (i % every == 0 || (i + 1 == n && i % every >= (every + 1) / 2))
            labels += fmt::format("<text class=\"xlabel\" data-x=\"{0:.1f}\" data-y=\"{1}\" transform=\"translate({0:.1f},{1}) "
                                  "rotate(-35)\">{2}</text>\n", cx, kTop + kPlotH + 14, html_escape(p.t.points[i].name));
    }
    return labels;
}

// Top-down: the overlays' lines, then the owners in stacking order reversed, so it reads like the chart.
std::string legend(const Plot& p, const std::vector<const Overlay*>& drawn) {
    std::vector<const Overlay*> lines;
    for (const Overlay* o : drawn)
        if (o->legend) lines.push_back(o);
    std::stable_sort(lines.begin(), lines.end(), [](const Overlay* a, const Overlay* b) { return a->legend_place < b->legend_place; });
    std::string s;
    double ly = kTop + 8;
    const double lx = kLeft + kPlotW + 16;
    for (const Overlay* o : lines) {
        s += fmt::format("<line class=\"{}\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/><text class=\"legend\" x=\"{}\" "
                         "y=\"{}\">{}</text>\n", o->cls, lx, lx + 14, ly, ly, lx + 20, ly + 4, o->legend);
        ly += 18;
    }
    for (std::size_t o = p.t.owners.size(); o-- > 0;) {
        s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/><text class=\"legend\" x=\"{}\" "
                         "y=\"{}\">{}</text>\n", lx, ly - 6, owner_colour(o), lx + 20, ly + 4, html_escape(p.t.owners[o]));
        ly += 18;
    }
    return s;
}

}  // namespace

std::string memory_chart_svg(const report::Report& r, const report::Timeline& t) {
    if (t.points.empty()) return {};
    std::uint64_t max = 0;
    for (const report::TimelinePoint& p : t.points)
        max = std::max({max, p.tracked_bytes, p.step->driver_used_bytes, p.step->peak_tracked_bytes});
    const Plot plot{t, y_axis(max)};

    std::string s = fmt::format(
        "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" role=\"img\" "
        "aria-label=\"memory per owner over steps\" data-left=\"{}\" data-plotw=\"{}\">\n",
        kWidth, kHeight, kLeft, kPlotW);
    s += y_grid(plot);
    // The plot is one group the page's script zooms and pans along x (kChartScript), inside a nested
    // viewport of the axes' size that clips it (a viewport needs no id, nor a url() reference).
    s += fmt::format("<svg x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" viewBox=\"{0} {1} {2} {3}\" overflow=\"hidden\">"
                     "<g class=\"plot\">\n", kLeft, kTop - 12, kPlotW, kPlotH + 12);
    s += areas(plot);
    std::vector<const Overlay*> drawn;
    for (const Overlay& o : kOverlays)
        if (shown(o, t)) {
            s += overlay_svg(o, r, plot);
            drawn.push_back(&o);
        }
    const std::string labels = hover_columns(plot, s);
    s += "</g></svg>\n" + labels;
    s += fmt::format("<line class=\"axis\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/>"
                     "<line class=\"axis\" x1=\"{0}\" x2=\"{3}\" y1=\"{2}\" y2=\"{2}\"/>\n",
                     kLeft, kTop, kTop + kPlotH, kLeft + kPlotW);
    return s + legend(plot, drawn) + "</svg>\n";
}

}  // namespace cumemaudit::cli
