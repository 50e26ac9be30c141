#include "html_job_chart.hpp"

#include "html_axis.hpp"
#include "html_escape.hpp"
#include "report/job_end_text.hpp"
#include "report/job_ends.hpp"
#include "report/text.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <set>

namespace cumemaudit::cli {

using namespace chart;

namespace {

constexpr std::size_t kMaxHeatColumns = 80;
constexpr std::size_t kMaxHeatRows = 128;      // beyond, consecutive ranks share a row
constexpr std::size_t kMaxHeatTitles = 6000;   // beyond, a tooltip per cell would make the page heavy
constexpr std::size_t kMaxPointTitles = 2000;

// Every step number any rank kept, ascending.
std::vector<std::uint64_t> job_step_numbers(const report::JobReport& job) {
    std::vector<std::uint64_t> v;
    for (const report::JobRank& r : job.ranks)
        for (const report::JobRankStep& s : r.steps) v.push_back(s.step);
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
}

std::string rank_label(const report::JobRank& r) { return r.rank >= 0 ? fmt::format("rank {}", r.rank) : fmt::format("pid {}", r.pid); }

// A rank that died at a step, drawn where it ended: the step the merge kept at or before its end.
const report::JobRankStep* end_point(const report::JobRank& r) {
    if (!report::ended_badly(r.end) || r.end.step < 0) return nullptr;
    const report::JobRankStep* at = nullptr;
    for (const report::JobRankStep& s : r.steps)
        if (static_cast<std::int64_t>(s.step) <= r.end.step) at = &s;
    return at;
}

// ✕ centred on (x, y), `half` wide each way: a path, not a glyph, so it reads the same in every font.
std::string cross(double x, double y, double half) {
    return fmt::format("M{:.1f},{:.1f}L{:.1f},{:.1f}M{:.1f},{:.1f}L{:.1f},{:.1f}", x - half, y - half, x + half, y + half,
                       x - half, y + half, x + half, y - half);
}

std::string end_title(const report::JobRank& r) { return html_escape(rank_label(r) + " " + report::end_phrase(r.end)); }

}  // namespace

std::string job_leak_chart_svg(const report::JobReport& job, const std::vector<std::size_t>& drawn) {
    const std::vector<std::uint64_t> steps = job_step_numbers(job);
    if (steps.empty() || drawn.empty()) return {};
    std::uint64_t max = 0;
    std::size_t points = 0;
    for (const std::size_t i : drawn)
        for (const report::JobRankStep& s : job.ranks[i].steps) {
            max = std::max(max, s.leaked_bytes);
            ++points;
        }
    const Axis axis = y_axis(max);
    const double first = static_cast<double>(steps.front()), span = static_cast<double>(steps.back() - steps.front());
    const auto x = [&](std::uint64_t step) { return span == 0 ? kLeft + kPlotW / 2 : kLeft + kPlotW * (step - first) / span; };
    const auto y = [&](double bytes) { return kTop + kPlotH - kPlotH * bytes / axis.top_bytes; };

    std::string s = fmt::format("<svg class=\"chart\" id=\"job-leak-chart\" xmlns=\"http://www.w3.org/2000/svg\" "
                                "viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"leaked bytes per rank over steps\">\n",
                                kWidth, kHeight);
    for (double b = 0; b <= axis.top_bytes + 0.5; b += axis.tick_bytes)
        s += fmt::format("<line class=\"grid\" x1=\"{}\" x2=\"{}\" y1=\"{:.1f}\" y2=\"{:.1f}\"/>"
                         "<text class=\"ylabel\" x=\"{}\" y=\"{:.1f}\">{}</text>\n",
                         kLeft, kLeft + kPlotW, y(b), y(b), kLeft - 6, y(b) + 4, tick_label(b, axis));
    const std::size_t label_every = std::max<std::size_t>(1, (steps.size() + kMaxXLabels - 1) / kMaxXLabels);
    for (std::size_t i = 0; i < steps.size(); i += label_every)
        s += fmt::format("<text class=\"xlabel\" x=\"{:.1f}\" y=\"{:.1f}\" transform=\"rotate(-35 {:.1f} {:.1f})\">step {}</text>\n",
                         x(steps[i]), kTop + kPlotH + 16, x(steps[i]), kTop + kPlotH + 16, steps[i]);
    s += fmt::format("<line class=\"axis\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\"/><line class=\"axis\" x1=\"{0}\" "
                     "x2=\"{3}\" y1=\"{2}\" y2=\"{2}\"/>\n", kLeft, kTop, kTop + kPlotH, kLeft + kPlotW);
    std::size_t ends = 0;
    for (std::size_t n = 0; n < drawn.size(); ++n) {
        const report::JobRank& r = job.ranks[drawn[n]];
        const std::string colour = owner_colour(n);
        std::string line;
        for (const report::JobRankStep& st : r.steps)
            line += fmt::format("{}{:.1f},{:.1f}", line.empty() ? "" : " ", x(st.step), y(static_cast<double>(st.leaked_bytes)));
        s += fmt::format("<polyline class=\"rank-line\" data-rank=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" "
                         "points=\"{}\"><title>{}: {} leaked at exit</title></polyline>\n",
                         r.rank, colour, line, html_escape(rank_label(r)), report::human_bytes(r.leaked_bytes));
        if (points <= kMaxPointTitles)
            for (const report::JobRankStep& st : r.steps)
                s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"><title>{} · step {}: {} leaked ({} bytes)"
                                 "</title></circle>\n", x(st.step), y(static_cast<double>(st.leaked_bytes)), colour,
                                 html_escape(rank_label(r)), st.step, report::human_bytes(st.leaked_bytes), st.leaked_bytes);
        const report::JobRankStep* end = end_point(r);
        if (end != nullptr) {
            ++ends;
            s += fmt::format("<path class=\"rank-end\" data-rank=\"{}\" data-end=\"{}\" stroke=\"{}\" d=\"{}\"><title>{}</title></path>\n",
                             r.rank, html_escape(r.end.how), colour,
                             cross(x(end->step), y(static_cast<double>(end->leaked_bytes)), 6), end_title(r));
        }
        const double ly = kTop + 14 + 18.0 * static_cast<double>(n);
        s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"12\" height=\"3\" fill=\"{}\"/><text class=\"legend\" "
                         "x=\"{:.1f}\" y=\"{:.1f}\">{} · {}{}</text>\n", kLeft + kPlotW + 14, ly - 4, colour,
                         kLeft + kPlotW + 32, ly, html_escape(rank_label(r)), report::human_bytes(r.leaked_bytes),
                         end != nullptr ? fmt::format(" ✕<title>{}</title>", end_title(r)) : "");
    }
    if (ends > 0) {  // what the ✕ means, under the ranks
        const double ly = kTop + 14 + 18.0 * static_cast<double>(drawn.size()) + 8;
        s += fmt::format("<g class=\"legend-end\"><path class=\"rank-end\" stroke=\"#c62828\" d=\"{}\"/><text class=\"legend\" "
                         "x=\"{:.1f}\" y=\"{:.1f}\">ran out of memory</text><text class=\"legend\" x=\"{:.1f}\" y=\"{:.1f}\">"
                         "or died here</text></g>\n", cross(kLeft + kPlotW + 20, ly - 4, 5), kLeft + kPlotW + 32, ly,
                         kLeft + kPlotW + 32, ly + 14);
    }
    return s + "</svg>\n";
}

namespace {

// Each rank's live bytes less the job's median at that step: the excess a rank holds over its peers, every
// owner together; 0 below the job's outlier floor, so that ranks differing by a little draw nothing.
std::vector<std::vector<std::uint64_t>> excess_by_rank(const report::JobReport& job) {
    std::map<std::uint64_t, std::vector<std::uint64_t>> at_step;
    for (const report::JobRank& r : job.ranks)
        for (const report::JobRankStep& st : r.steps) at_step[st.step].push_back(st.live_bytes);
    std::map<std::uint64_t, std::uint64_t> median;
    for (auto& [step, v] : at_step) {
        std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
        median[step] = v[v.size() / 2];
    }
    std::vector<std::vector<std::uint64_t>> out;
    for (const report::JobRank& r : job.ranks) {
        std::vector<std::uint64_t>& row = out.emplace_back();
        for (const report::JobRankStep& st : r.steps) {
            const std::uint64_t excess = st.live_bytes > median[st.step] ? st.live_bytes - median[st.step] : 0;
            row.push_back(excess >= job.outlier_rule.floor_bytes ? excess : 0);
        }
    }
    return out;
}

}  // namespace

std::string job_heatmap_svg(const report::JobReport& job, HeatOf what) {
    const std::vector<std::uint64_t> steps = job_step_numbers(job);
    const std::size_t ranks = job.ranks.size();
    if (steps.empty() || ranks == 0) return {};
    const bool leaks = what == HeatOf::leaked;
    std::vector<std::vector<std::uint64_t>> values;  // parallel to each rank's steps
    if (leaks)
        for (const report::JobRank& r : job.ranks) {
            std::vector<std::uint64_t>& row = values.emplace_back();
            for (const report::JobRankStep& st : r.steps) row.push_back(st.leaked_bytes);
        }
    else
        values = excess_by_rank(job);
    // Columns: each step, or consecutive steps binned; rows: each rank, or consecutive ranks binned (a job of
    // thousands of ranks draws as many rows as a screen shows, not one per rank). A cell is the largest value
    // of its bin.
    const std::size_t cols = std::min(steps.size(), kMaxHeatColumns), rows = std::min(ranks, kMaxHeatRows);
    const auto column = [&](std::uint64_t step) {
        const std::size_t i = static_cast<std::size_t>(std::lower_bound(steps.begin(), steps.end(), step) - steps.begin());
        return i * cols / steps.size();
    };
    const auto row_of = [&](std::size_t rank_index) { return rank_index * rows / ranks; };
    std::vector<std::size_t> first_of(rows, ranks), last_of(rows, 0);  // the rank indexes a row holds
    for (std::size_t i = 0; i < ranks; ++i) {
        first_of[row_of(i)] = std::min(first_of[row_of(i)], i);
        last_of[row_of(i)] = std::max(last_of[row_of(i)], i);
    }
    std::vector<std::uint64_t> cell(rows * cols, 0), row_max(rows, 0);
    std::vector<bool> seen(rows * cols, false);
    std::uint64_t max = 0;
    for (std::size_t i = 0; i < ranks; ++i)
        for (std::size_t k = 0; k < job.ranks[i].steps.size(); ++k) {
            const std::size_t r = row_of(i), c = r * cols + column(job.ranks[i].steps[k].step);
            const std::uint64_t v = values[i][k];
            cell[c] = std::max(cell[c], v);
            seen[c] = true;
            row_max[r] = std::max(row_max[r], v);
            max = std::max(max, v);
        }
    if (!leaks && max == 0) return {};
    const auto row_label = [&](std::size_t r) {
        const report::JobRank& a = job.ranks[first_of[r]];
        const report::JobRank& b = job.ranks[last_of[r]];
        if (first_of[r] == last_of[r]) return rank_label(a);
        return a.rank >= 0 && b.rank >= 0 ? fmt::format("ranks {}–{}", a.rank, b.rank) : rank_label(a) + " …";
    };
    constexpr double left = 90, right = 20, top = 8, bottom = 52, width = 960;
    const double h = std::clamp(720.0 / static_cast<double>(rows), 2.0, 14.0);
    const double w = (width - left - right) / static_cast<double>(cols);
    const double height = top + h * static_cast<double>(rows) + bottom;
    const bool titles = rows * cols <= kMaxHeatTitles;
    std::string s = fmt::format("<svg class=\"chart heatmap\" id=\"{}\" xmlns=\"http://www.w3.org/2000/svg\" "
                                "viewBox=\"0 0 {} {:.0f}\" role=\"img\" aria-label=\"{}, rank by step\">\n",
                                leaks ? "job-heatmap" : "job-excess-heatmap", width, height,
                                leaks ? "leaked bytes" : "live bytes over the job's median");
    // Row labels never overlap: the rows with a value first, most bytes first, then others at a regular spacing,
    // each where no label is already within a label's height.
    constexpr double kLabelGap = 9;
    std::set<double> label_y;
    std::vector<bool> labelled(rows, false);
    const auto place = [&](std::size_t r) {
        const double ry = h * static_cast<double>(r);
        const auto next = label_y.lower_bound(ry);
        if (next != label_y.end() && *next - ry < kLabelGap) return;
        if (next != label_y.begin() && ry - *std::prev(next) < kLabelGap) return;
        label_y.insert(ry);
        labelled[r] = true;
    };
    std::vector<std::size_t> marked;
    for (std::size_t r = 0; r < rows; ++r)
        if (row_max[r] > 0) marked.push_back(r);
    std::stable_sort(marked.begin(), marked.end(), [&](std::size_t a, std::size_t b) { return row_max[a] > row_max[b]; });
    for (const std::size_t r : marked) place(r);
    const std::size_t label_every = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(2 * kLabelGap / h)));
    for (std::size_t r = 0; r < rows; r += label_every) place(r);
    for (std::size_t r = 0; r < rows; ++r) {
        const double ry = top + h * static_cast<double>(r);
        if (labelled[r])
            s += fmt::format("<text class=\"ylabel{}\" x=\"{}\" y=\"{:.1f}\">{}</text>\n", row_max[r] > 0 ? (leaks ? " leaking" : " excess") : "",
                             left - 6, ry + std::min(h, 12.0) - 2, html_escape(row_label(r)));
        for (std::size_t c = 0; c < cols; ++c) {
            const std::uint64_t b = cell[r * cols + c];
            if (!seen[r * cols + c] || (!leaks && b == 0)) continue;  // the page is white where nothing stands out
            // White is nothing; any value is visibly coloured (leaks red, excess blue), darker with more bytes.
            const double f = b == 0 || max == 0 ? 0.0 : 0.25 + 0.75 * static_cast<double>(b) / static_cast<double>(max);
            const int g = static_cast<int>(std::lround(245 - 205 * f));
            const int strong = b == 0 ? 245 : 230;
            s += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"rgb({},{},{})\"",
                             left + w * static_cast<double>(c), ry, w + 0.05, h + 0.05, leaks ? strong : g, g, leaks ? g : strong);
            s += titles ? fmt::format("><title>{} · step {}: {} {} ({} bytes)</title></rect>\n", html_escape(row_label(r)),
                                      steps[c * steps.size() / cols], report::human_bytes(b), leaks ? "leaked" : "over the job's median", b)
                        : "/>\n";
        }
    }
    // Where ranks ran out or died: one cross a cell, over the cell where it ended (its row is empty after).
    std::set<std::size_t> crossed;
    for (std::size_t i = 0; i < ranks; ++i) {
        const report::JobRank& rank = job.ranks[i];
        const report::JobRankStep* end = end_point(rank);
        if (end == nullptr || !crossed.insert(row_of(i) * cols + column(end->step)).second) continue;
        const double cx = left + w * (static_cast<double>(column(end->step)) + 0.5);
        const double cy = top + h * (static_cast<double>(row_of(i)) + 0.5);
        s += fmt::format("<path class=\"rank-end\" data-rank=\"{}\" data-end=\"{}\" d=\"{}\"><title>{}</title></path>\n", rank.rank,
                         html_escape(rank.end.how), cross(cx, cy, std::min(w, h) * 0.4 + 1), end_title(rank));
    }
    const std::size_t xlabel_every = std::max<std::size_t>(1, (cols + 11) / 12);
    for (std::size_t c = 0; c < cols; c += xlabel_every) {
        const double cx = left + w * (static_cast<double>(c) + 0.5);
        const double cy = top + h * static_cast<double>(rows) + 14;
        s += fmt::format("<text class=\"xlabel\" x=\"{:.1f}\" y=\"{:.1f}\" transform=\"rotate(-35 {:.1f} {:.1f})\">step {}</text>\n",
                         cx, cy, cx, cy, steps[c * steps.size() / cols]);
    }
    return s + "</svg>\n";
}

}  // namespace cumemaudit::cli
