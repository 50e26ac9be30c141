#include "html_forecast.hpp"

#include "html_axis.hpp"
#include "html_escape.hpp"
#include "report/human_bytes.hpp"
#include "report/human_numbers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace cumemaudit::cli {

using namespace chart;

namespace {

// Each numbered step of the device, oldest first, with its peak as the forecast reads it.
std::map<std::uint64_t, std::uint64_t> step_peaks(const report::Report& r, std::int64_t device) {
    std::map<std::uint64_t, std::uint64_t> peaks;
    auto take = [&](const report::Step& s) {
        if (!s.label.empty() || s.driver_used_bytes == 0 || (device >= 0 && s.device >= 0 && s.device != device)) return;
        std::uint64_t tracked = 0;
        for (const auto& [owner, bytes] : s.by_owner) tracked += bytes;
        peaks[s.step] = s.driver_used_bytes + (s.peak_tracked_bytes > tracked ? s.peak_tracked_bytes - tracked : 0);
    };
    for (const report::StepWindow& w : r.step_history)
        for (const report::Step& s : w.steps) take(s);
    for (const report::Step& s : r.steps) take(s);
    return peaks;
}

std::uint64_t device_total(const report::Report& r, std::int64_t device) {
    std::uint64_t total = 0;
    for (const report::Step& s : r.steps)
        if (device < 0 || s.device < 0 || s.device == device) total = std::max(total, s.driver_total_bytes);
    return total;
}

}  // namespace

std::string forecast_chart_svg(const report::Report& r, const report::Forecast& f) {
    if (!f.oom_step) return {};
    const std::map<std::uint64_t, std::uint64_t> peaks = step_peaks(r, f.device);
    const std::uint64_t total = device_total(r, f.device);
    if (peaks.empty() || total == 0) return {};
    const std::uint64_t low = f.oom_step_low.value_or(*f.oom_step), high = std::max(f.oom_step_high.value_or(*f.oom_step), *f.oom_step);
    const std::uint64_t first = peaks.begin()->first, last = peaks.rbegin()->first;
    const std::uint64_t end = std::max(high, last + 1);
    const Axis axis = y_axis(total);
    const auto x = [&](std::uint64_t step) {
        return kLeft + kPlotW * static_cast<double>(step - first) / static_cast<double>(end - first);
    };
    const auto y = [&](double bytes) { return kTop + kPlotH - kPlotH * bytes / axis.top_bytes; };
    const std::string device = f.device >= 0 ? fmt::format("device {}", f.device) : "the device";

    std::string s = fmt::format("<svg class=\"chart forecast\" id=\"forecast-chart-{}\" xmlns=\"http://www.w3.org/2000/svg\" "
                                "viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"{}: step peaks and the forecast to its total\">\n",
                                f.device, kWidth, kHeight, device);
    for (double b = 0; b <= axis.top_bytes + 0.5; b += axis.tick_bytes)
        s += fmt::format("<line class=\"grid\" x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/><text class=\"ylabel\" x=\"{}\" "
                         "y=\"{:.1f}\">{}</text>\n", kLeft, kLeft + kPlotW, y(b), y(b), kLeft - 6, y(b) + 4, tick_label(b, axis));
    for (int i = 0; i <= 5; ++i) {  // step numbers, evenly
        const std::uint64_t step = first + (end - first) * static_cast<std::uint64_t>(i) / 5;
        s += fmt::format("<text class=\"xlabel\" x=\"{0:.1f}\" y=\"{1}\" transform=\"rotate(-35 {0:.1f} {1})\">step {2}</text>\n", x(step),
                         kTop + kPlotH + 16, report::grouped(step));
    }
    const double ty = y(static_cast<double>(total));
    s += fmt::format("<line class=\"total\" x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\"><title>{} total: {}</title></line>\n",
                     kLeft, kLeft + kPlotW, ty, ty, device, report::human_bytes(total));
    // The projection: from the last step's peak to the device's total at the forecast step, within its bounds.
    const double lx = x(last), ly = y(static_cast<double>(peaks.rbegin()->second));
    const std::string when = fmt::format("runs out at step ≈ {} ({}–{})", report::grouped(*f.oom_step), report::grouped(low),
                                         report::grouped(high));
    s += fmt::format("<path class=\"forecast-band\" d=\"M{:.1f},{:.1f} L{:.1f},{:.1f} L{:.1f},{:.1f} Z\"><title>90% bounds: {}</title></path>\n",
                     lx, ly, x(low), ty, x(high), ty, when);
    s += fmt::format("<path class=\"forecast-line\" d=\"M{:.1f},{:.1f} L{:.1f},{:.1f}\"><title>{} {}: {} a step</title></path>\n", lx, ly,
                     x(*f.oom_step), ty, device, when, report::human_bytes(f.rate_bytes_per_step));
    s += fmt::format("<g class=\"oom\"><line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\"/><title>{3} {4}</title></g>\n",
                     x(*f.oom_step), kTop, kTop + kPlotH, device, when);
    std::string d;
    for (const auto& [step, peak] : peaks) d += fmt::format("{}{:.1f},{:.1f}", d.empty() ? "M" : " L", x(step), y(static_cast<double>(peak)));
    s += fmt::format("<path class=\"driver\" d=\"{}\"><title>step peaks, steps {} to {}</title></path>\n", d, report::grouped(first),
                     report::grouped(last));
    s += fmt::format("<line class=\"axis\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/><line class=\"axis\" x1=\"{0}\" x2=\"{3}\" "
                     "y1=\"{2}\" y2=\"{2}\"/>\n", kLeft, kTop, kTop + kPlotH, kLeft + kPlotW);
    const double gx = kLeft + kPlotW + 16;
    s += fmt::format("<line class=\"driver\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/><text class=\"legend\" x=\"{3}\" y=\"{4}\">step peak</text>\n"
                     "<line class=\"forecast-line\" x1=\"{0}\" x2=\"{1}\" y1=\"{5}\" y2=\"{5}\"/><text class=\"legend\" x=\"{3}\" y=\"{6}\">forecast</text>\n"
                     "<rect class=\"forecast-band\" x=\"{0}\" y=\"{7}\" width=\"14\" height=\"10\"/><text class=\"legend\" x=\"{3}\" y=\"{8}\">90% bounds</text>\n"
                     "<line class=\"total\" x1=\"{0}\" x2=\"{1}\" y1=\"{9}\" y2=\"{9}\"/><text class=\"legend\" x=\"{3}\" y=\"{10}\">device total</text>\n",
                     gx, gx + 14, kTop + 8, gx + 20, kTop + 12, kTop + 26, kTop + 30, kTop + 39, kTop + 48, kTop + 62, kTop + 66);
    return s + "</svg>\n";
}

}  // namespace cumemaudit::cli
