#include "html_chart.hpp"

#include "html_escape.hpp"
#include "report/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace cumemaudit::cli {
namespace {

constexpr double kWidth = 960, kHeight = 380;
constexpr double kLeft = 80, kRight = 170, kTop = 16, kBottom = 80;
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;
constexpr std::size_t kMaxXLabels = 12;

// Tableau 10: distinguishable, and readable on white.
constexpr const char* kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};

// A tick spacing of 1, 2 or 5 times a power of ten in the unit the axis reads in, about five ticks.
struct Axis {
    double top_bytes, tick_bytes, unit_bytes;
    const char* unit;
};

Axis y_axis(std::uint64_t max_bytes) {
    const double max = std::max<double>(static_cast<double>(max_bytes), 1.0);
    Axis a{0, 0, 1, "B"};
    if (max >= 1024.0 * 1024 * 1024) a = {0, 0, 1024.0 * 1024 * 1024, "GiB"};
    else if (max >= 1024.0 * 1024) a = {0, 0, 1024.0 * 1024, "MiB"};
    else if (max >= 1024.0) a = {0, 0, 1024.0, "KiB"};
    const double raw = max / a.unit_bytes / 5;
    const double p = std::pow(10, std::floor(std::log10(raw)));
    const double step = raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
    a.tick_bytes = step * a.unit_bytes;
    a.top_bytes = std::ceil(max / a.tick_bytes) * a.tick_bytes;
    return a;
}

std::string tick_label(double bytes, const Axis& a) {
    const double v = bytes / a.unit_bytes;
    return v == std::floor(v) ? fmt::format("{:.0f} {}", v, a.unit) : fmt::format("{:.1f} {}", v, a.unit);
}

}  // namespace

std::string owner_colour(std::size_t index) { return kPalette[index % std::size(kPalette)]; }

std::string memory_chart_svg(const report::Report& r, const report::Timeline& t) {
    const std::size_t n = t.points.size();
    if (n == 0) return {};
    std::uint64_t max = 0;
    bool has_driver = false, has_torch = false, has_leak = false;
    for (const report::TimelinePoint& p : t.points) {
        max = std::max({max, p.tracked_bytes, p.step->driver_used_bytes});
        has_driver |= p.step->driver_used_bytes != 0;
        has_torch |= p.step->pytorch_reserved_bytes != 0;
        has_leak |= p.step->leaked_bytes != 0;
    }
    const Axis axis = y_axis(max);
    // One step still gets a band across the plot: both ends of it stand for that step.
    const auto x = [&](std::size_t i) { return n == 1 ? kLeft + (i ? kPlotW : 0) : kLeft + kPlotW * i / (n - 1); };
    const auto y = [&](double bytes) { return kTop + kPlotH - kPlotH * bytes / axis.top_bytes; };
    const std::size_t ends = n == 1 ? 2 : n;
    const auto point = [&](std::size_t i) -> const report::TimelinePoint& { return t.points[n == 1 ? 0 : i]; };

    std::string s = fmt::format(
        "<svg class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" role=\"img\" "
        "aria-label=\"memory per owner over steps\">\n",
        kWidth, kHeight);
    for (double b = 0; b <= axis.top_bytes + 0.5; b += axis.tick_bytes) {
        s += fmt::format("<line class=\"grid\" x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>"
                         "<text class=\"ylabel\" x=\"{}\" y=\"{:.1f}\">{}</text>\n",
                         kLeft, kLeft + kPlotW, y(b), y(b), kLeft - 6, y(b) + 4, tick_label(b, axis));
    }

    std::vector<double> below(ends, 0.0);
    for (std::size_t o = 0; o < t.owners.size(); ++o) {
        std::string top, bottom;
        std::uint64_t peak = 0;
        std::vector<double> above(ends);
        for (std::size_t i = 0; i < ends; ++i) {
            const std::uint64_t v = point(i).owner_bytes[o];
            peak = std::max(peak, v);
            above[i] = below[i] + static_cast<double>(v);
            top += fmt::format("{}{:.1f},{:.1f}", i ? " L" : "M", x(i), y(above[i]));
        }
        for (std::size_t i = ends; i-- > 0;) bottom += fmt::format(" L{:.1f},{:.1f}", x(i), y(below[i]));
        const std::string name = html_escape(t.owners[o]);
        s += fmt::format("<path class=\"area\" data-owner=\"{}\" fill=\"{}\" d=\"{}{} Z\"><title>{}: peak {} over "
                         "the steps, {} at the last</title></path>\n",
                         name, owner_colour(o), top, bottom, name, report::human_bytes(peak),
                         report::human_bytes(point(ends - 1).owner_bytes[o]));
        below = std::move(above);
    }

    const auto line = [&](const char* cls, const char* title, auto bytes_of) {
        std::string d;
        for (std::size_t i = 0; i < ends; ++i)
            d += fmt::format("{}{:.1f},{:.1f}", i ? " L" : "M", x(i), y(static_cast<double>(bytes_of(point(i)))));
        s += fmt::format("<path class=\"{}\" d=\"{}\"><title>{}</title></path>\n", cls, d, title);
    };
    if (has_torch)
        line("torch", "PyTorch allocated (torch.cuda.memory_allocated)",
             [](const report::TimelinePoint& p) { return p.step->pytorch_allocated_bytes; });
    if (has_driver)
        line("driver", "driver used (cuMemGetInfo); the gap above the areas is unattributed",
             [](const report::TimelinePoint& p) { return p.step->driver_used_bytes; });
    if (has_leak)  // part of the areas below it: the live memory nothing can release any more
        line("leaked", "leaked so far (unreachable VMM memory)",
             [](const report::TimelinePoint& p) { return p.step->leaked_bytes; });

    // Out-of-memory moments at the last point of their step: the refusal came after that mark.
    for (const report::Oom& o : r.oom) {
        for (std::size_t i = n; i-- > 0;) {
            if (t.points[i].step->step != o.step) continue;
            const double ox = n == 1 ? kLeft + kPlotW / 2 : x(i);
            s += fmt::format("<g class=\"oom\"><line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\"/>"
                             "<title>out of memory after {3}: {4} of {5} refused, {6} used, {7} leaked</title></g>\n",
                             ox, kTop, kTop + kPlotH, html_escape(t.points[i].name), html_escape(o.api),
                             report::human_bytes(o.requested_bytes), report::human_bytes(o.driver_used_bytes),
                             report::human_bytes(o.leaked_bytes));
            break;
        }
    }
    // Alarms at the first point of their step: the moment growth was first seen.
    for (const report::Alarm& a : r.alarms) {
        for (std::size_t i = 0; i < n; ++i) {
            if (t.points[i].step->step != a.step) continue;
            const double ax = n == 1 ? kLeft + kPlotW / 2 : x(i);
            s += fmt::format("<g class=\"alarm\"><line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\"/>"
                             "<path d=\"M{0:.1f},{1} l-6,-10 h12 Z\" transform=\"translate(0,10)\"/>"
                             "<title>alarm at {3}: {4} {5} grew {6} (live {7})</title></g>\n",
                             ax, kTop, kTop + kPlotH, html_escape(t.points[i].name), html_escape(a.what),
                             html_escape(a.owner), report::human_bytes(a.bytes), report::human_bytes(a.live_bytes));
            break;
        }
    }

    const std::size_t every = (n + kMaxXLabels - 1) / kMaxXLabels;
    for (std::size_t i = 0; i < n; ++i) {
        const double cx = n == 1 ? kLeft + kPlotW / 2 : x(i);
        const double half = n == 1 ? kPlotW / 2 : kPlotW / (n - 1) / 2;
        const report::TimelinePoint& p = t.points[i];
        std::string tip = html_escape(p.name);
        for (std::size_t o = 0; o < t.owners.size(); ++o)
            if (p.owner_bytes[o]) {
                tip += "\n" + html_escape(t.owners[o]) + ": " + report::human_bytes(p.owner_bytes[o]);
                if (auto l = p.step->leaked_by_owner.find(t.owners[o]); l != p.step->leaked_by_owner.end())
                    tip += " (leaked so far " + report::human_bytes(l->second) + ")";
            }
        if (p.step->leaked_bytes) tip += "\nleaked so far: " + report::human_bytes(p.step->leaked_bytes);
        tip += "\nunattributed: " + report::human_bytes(p.step->unattributed_bytes);
        tip += "\ndriver used: " + report::human_bytes(p.step->driver_used_bytes);
        s += fmt::format("<rect class=\"hover\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\"><title>{}</title></rect>\n",
                         std::max(kLeft, cx - half), kTop, std::min(2 * half, kLeft + kPlotW - std::max(kLeft, cx - half)),
                         kPlotH, tip);
        // The last step is labelled too, unless that would overprint the label before it.
        if (i % every == 0 || (i + 1 == n && i % every >= (every + 1) / 2))
            s += fmt::format("<text class=\"xlabel\" transform=\"translate({:.1f},{}) rotate(-35)\">{}</text>\n", cx,
                             kTop + kPlotH + 14, html_escape(p.name));
    }
    s += fmt::format("<line class=\"axis\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/>"
                     "<line class=\"axis\" x1=\"{0}\" x2=\"{3}\" y1=\"{2}\" y2=\"{2}\"/>\n",
                     kLeft, kTop, kTop + kPlotH, kLeft + kPlotW);

    // Legend top-down in stacking order reversed, so it reads like the chart: top area first.
    double ly = kTop + 8;
    const double lx = kLeft + kPlotW + 16;
    if (has_driver) {
        s += fmt::format("<line class=\"driver\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/><text class=\"legend\" x=\"{}\" "
                         "y=\"{}\">driver used</text>\n", lx, lx + 14, ly, ly, lx + 20, ly + 4);
        ly += 18;
    }
    if (has_leak) {
        s += fmt::format("<line class=\"leaked\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/><text class=\"legend\" x=\"{}\" "
                         "y=\"{}\">leaked so far</text>\n", lx, lx + 14, ly, ly, lx + 20, ly + 4);
        ly += 18;
    }
    if (has_torch) {
        s += fmt::format("<line class=\"torch\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/><text class=\"legend\" x=\"{}\" "
                         "y=\"{}\">PyTorch allocated</text>\n", lx, lx + 14, ly, ly, lx + 20, ly + 4);
        ly += 18;
    }
    for (std::size_t o = t.owners.size(); o-- > 0;) {
        s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/><text class=\"legend\" x=\"{}\" "
                         "y=\"{}\">{}</text>\n", lx, ly - 6, owner_colour(o), lx + 20, ly + 4, html_escape(t.owners[o]));
        ly += 18;
    }
    return s + "</svg>\n";
}

}  // namespace cumemaudit::cli
