#include "html_flame.hpp"

#include "html_escape.hpp"
#include "site_text.hpp"

#include "common/object_roles.hpp"
#include "common/paths.hpp"
#include "report/gate.hpp"
#include "report/human_bytes.hpp"

#include <fmt/format.h>

#include <map>

namespace cumemaudit::cli {
namespace {

constexpr double kWidth = 1200, kRow = 18, kCharWidth = 7;

struct Node {
    std::uint64_t bytes = 0;
    char kind = 'n';
    std::string label;
    std::map<std::string, Node> kids;  // by whole text: a flame graph sorts siblings by name, not by size
};

std::string fitted(const std::string& label, double px) {
    const auto room = static_cast<std::size_t>(px / kCharWidth);
    if (room < 3) return "";
    return label.size() <= room ? label : label.substr(0, room - 1) + "…";
}

struct Drawer {
    std::uint64_t total;
    std::string svg;
    std::size_t nodes = 0;
    int depth = 0;

    void draw(const std::string& text, const Node& n, std::uint64_t offset, int d) {
        const double x = kWidth * static_cast<double>(offset) / static_cast<double>(total);
        const double w = kWidth * static_cast<double>(n.bytes) / static_cast<double>(total);
        if ((w < 1 && d > 0) || nodes == kMaxFlameNodes) return;
        ++nodes;
        depth = std::max(depth, d);
        const double pct = 100.0 * static_cast<double>(n.bytes) / static_cast<double>(total);
        svg += fmt::format(
            "<g class=\"fl k-{}\" data-x=\"{:.6f}\" data-w=\"{:.6f}\" data-d=\"{}\" data-l=\"{}\">"
            "<title>{} — {} ({} bytes, {:.1f}%)</title><rect x=\"{:.2f}\" y=\"{:.0f}\" width=\"{:.2f}\" "
            "height=\"{:.0f}\"/><text x=\"{:.2f}\" y=\"{:.0f}\">{}</text></g>\n",
            n.kind, x / kWidth, w / kWidth, d, html_escape(n.label), html_escape(text), report::human_bytes(n.bytes),
            n.bytes, pct, x, d * kRow, std::max(w - 0.5, 0.0), kRow - 1, x + 3, d * kRow + 13,
            html_escape(fitted(n.label, w - 6)));
        std::uint64_t at = offset;
        for (const auto& [kid_text, kid] : n.kids) {
            draw(kid_text, kid, at, d + 1);
            at += kid.bytes;
        }
    }
};

std::string chart(const char* heading, const char* none, const std::vector<const report::Leak*>& rows,
                  const char* root_label) {
    Node root;
    root.kind = 'r';
    for (const report::Leak* l : rows) {
        if (l->own_bytes == 0) continue;
        root.bytes += l->own_bytes;
        Node* at = &root;
        for (const StackFrame& f : merged_stack(l->site)) {
            at = &at->kids[f.text];
            at->kind = f.kind;
            at->label = f.label;
            at->bytes += l->own_bytes;
        }
    }
    std::string s = fmt::format("<h4>{}</h4>\n", heading);
    if (root.bytes == 0) return s + fmt::format("<p class=\"none\">{}</p>\n", none);
    root.label = fmt::format("{}: {}", root_label, report::human_bytes(root.bytes));
    Drawer d{root.bytes, {}};
    d.draw(root.label, root, 0, 0);
    return s + fmt::format("<svg class=\"flame\" viewBox=\"0 0 {:.0f} {:.0f}\" preserveAspectRatio=\"xMinYMin meet\">\n{}"
                           "</svg>\n",
                           kWidth, (d.depth + 1) * kRow, d.svg);
}

}  // namespace

std::vector<StackFrame> merged_stack(const report::Site& s) {
    std::vector<StackFrame> out;
    // Below the innermost Python frame, only native frames before the first binding (libffi, the
    // interpreter) are the program's: a C extension's. Without Python, the whole native stack.
    std::size_t native = s.frames.size();
    if (!s.python_frames.empty()) {
        native = 0;
        while (native < s.frames.size() && !object_roles::is_python_binding(s.frames[native].object)) ++native;
        for (auto it = s.python_frames.rbegin(); it != s.python_frames.rend(); ++it)
            out.push_back({python_frame_text(*it),
                           fmt::format("{} {}:{}", it->function, basename(it->file), it->line), 'p'});
    }
    for (std::size_t i = native; i-- > 0;)
        if (!object_roles::passes_on(s.frames[i].object)) out.push_back({frame_text(s.frames[i]), frame_text(s.frames[i]), 'n'});
    out.push_back({s.api, s.api, 'a'});
    return out;
}

std::string flame_graphs(const report::Report& r, std::size_t index) {
    std::vector<const report::Leak*> leaked, held;
    for (const report::Leak& l : r.leaks) {
        held.push_back(&l);
        if (report::is_leak(l)) leaked.push_back(&l);
    }
    return fmt::format("<div class=\"flames\" id=\"flames-{}\">\n", index) +
           chart("Leaked bytes by stack", "Nothing leaked.", leaked, "leaked") +
           chart(r.checkpoint ? "Bytes held at the checkpoint, by stack" : "Bytes held at exit, by stack",
                 "Nothing held.", held, "held") +
           "<p class=\"meta\">Root on top, callers above callees, the API last; Python frames in blue, native in "
           "orange. Click a frame to zoom in, the root to zoom out.</p>\n</div>\n";
}

const char* const kFlameStyle = R"(
svg.flame{width:100%;max-width:1200px;height:auto;display:block;font:11px ui-monospace,monospace}
svg.flame g.fl{cursor:pointer}svg.flame rect{stroke:#fff;stroke-width:.5}svg.flame text{fill:#111;pointer-events:none}
svg.flame .k-r rect{fill:#bbb}svg.flame .k-p rect{fill:#8fb3dd}svg.flame .k-n rect{fill:#f2a65a}
svg.flame .k-a rect{fill:#e15759}svg.flame g.fl:hover rect{stroke:#000}
)";

// Click to zoom: the clicked frame fills the width, its ancestors span it, frames outside it hide.
const char* const kFlameScript = R"(
for (const svg of document.querySelectorAll("svg.flame")) {
  const W = 1200, fit = (l, px) => { const n = Math.floor(px / 7); return n < 3 ? "" : l.length <= n ? l : l.slice(0, n - 1) + "…"; };
  svg.addEventListener("click", e => {
    const g = e.target.closest("g.fl"); if (!g) return;
    const x0 = +g.dataset.x, w0 = +g.dataset.w, d0 = +g.dataset.d;
    for (const n of svg.querySelectorAll("g.fl")) {
      const x = +n.dataset.x, w = +n.dataset.w, d = +n.dataset.d;
      const inside = d >= d0 ? x >= x0 - 1e-9 && x + w <= x0 + w0 + 1e-9 : x <= x0 + 1e-9 && x + w >= x0 + w0 - 1e-9;
      n.style.display = inside ? "" : "none";
      if (!inside) continue;
      const nx = d < d0 ? 0 : (x - x0) / w0 * W, nw = d < d0 ? W : w / w0 * W;
      n.querySelector("rect").setAttribute("x", nx); n.querySelector("rect").setAttribute("width", Math.max(nw - .5, 0));
      const t = n.querySelector("text"); t.setAttribute("x", nx + 3); t.textContent = fit(n.dataset.l, nw - 6);
    }
  });
}
)";

}  // namespace cumemaudit::cli
