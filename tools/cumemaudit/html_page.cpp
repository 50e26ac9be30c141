#include "html_page.hpp"

#include "html_chart.hpp"
#include "html_escape.hpp"
#include "html_flame.hpp"

#include <fmt/format.h>

namespace cumemaudit::cli {
namespace {

constexpr const char* kStyle = R"(
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:18px;margin:28px 0 6px;border-bottom:2px solid #4e79a7}
h3{font-size:15px;margin:20px 0 6px}nav a{margin-right:12px}.meta{color:#666}
.cards{display:flex;gap:10px;flex-wrap:wrap;margin:10px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:6px 12px;min-width:120px}
.card b{display:block;font-size:18px}.card.bad b{color:#c62828}
table{border-collapse:collapse;margin:4px 0 8px;font-size:13px}
th,td{border:1px solid #ddd;padding:3px 8px;vertical-align:top;text-align:left}
th{background:#f3f5f8;cursor:pointer;user-select:none}td.num{text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
ol.frames{margin:2px 0 0;padding-left:22px;font-family:ui-monospace,monospace;font-size:12px}
.none{color:#666;font-style:italic}
svg.chart{width:100%;max-width:960px;height:auto;display:block}
svg .grid{stroke:#e5e5e5}svg .axis{stroke:#555}
svg .ylabel{font-size:11px;text-anchor:end;fill:#444}svg .xlabel{font-size:11px;text-anchor:end;fill:#444}
svg .legend{font-size:12px;fill:#222}svg .area{stroke:#fff;stroke-width:.5;opacity:.9}
svg .area:hover{opacity:1}svg .driver{fill:none;stroke:#111;stroke-width:2}
svg .torch{fill:none;stroke:#111;stroke-width:1.5;stroke-dasharray:4 3}
svg .leaked{fill:none;stroke:#c62828;stroke-width:2;stroke-dasharray:1 2}
svg .hover{fill:transparent}svg .hover:hover{fill:rgba(0,0,0,.06)}
svg .alarm line{stroke:#c62828;stroke-dasharray:3 3}svg .alarm path{fill:#c62828}
svg .oom line{stroke:#6a1b9a;stroke-width:3}
.verdict{border-left:5px solid #2e7d32;background:#f1f8f1;padding:8px 14px;margin:12px 0;font-size:15px}
.verdict.bad{border-left-color:#c62828;background:#fdf1f1}.verdict p{margin:4px 0}
svg.heatmap .ylabel{font-size:9px}svg .ylabel.leaking{fill:#c62828;font-weight:bold}
.card .end-phrase{display:block;font-size:12px;max-width:460px;color:#444}td.end.bad{color:#c62828;font-weight:bold}
ul.rank-ends{margin:2px 0 4px;padding-left:22px}svg .rank-end{fill:none;stroke-width:2.5;stroke-linecap:round}
svg.heatmap .rank-end{stroke:#111;stroke-width:1.5}svg .ylabel.excess{fill:#1f4e99;font-weight:bold}
svg .total{stroke:#6a1b9a;stroke-width:1.5;stroke-dasharray:6 3}svg .forecast-line{fill:none;stroke:#c62828;stroke-width:2;stroke-dasharray:5 4}
svg .forecast-band{fill:rgba(198,40,40,.15);stroke:none}
)";

// Sorting by a click on a column head; the last line tells a test (and a person) the script ran to the end.
constexpr const char* kScript = R"(
for (const th of document.querySelectorAll("th")) {
  th.addEventListener("click", () => {
    const table = th.closest("table"), body = table.tBodies[0], i = th.cellIndex;
    const key = r => { const c = r.cells[i]; return c.dataset.sort !== undefined ? Number(c.dataset.sort) : c.textContent; };
    const down = th.dataset.dir !== "down";
    th.dataset.dir = down ? "down" : "up";
    const rows = Array.from(body.rows).sort((a, b) => { const x = key(a), y = key(b); return (x < y ? -1 : x > y ? 1 : 0) * (down ? -1 : 1); });
    for (const r of rows) body.appendChild(r);
  });
}
document.body.dataset.ok = "1";
)";

}  // namespace

std::string html_document(const std::string& title, const std::string& body) {
    return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
           "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>" + html_escape(title) +
           "</title>\n<style>" + std::string(kStyle) + kChartStyle + kFlameStyle + "</style></head>\n<body>\n<h1>" + html_escape(title) + "</h1>\n" + body +
           "<script>" + kChartScript + kFlameScript + kScript + "</script>\n</body></html>\n";
}

std::string html_card(const char* label, const std::string& value, bool bad) {
    return fmt::format("<div class=\"card{}\">{}<b>{}</b></div>", bad ? " bad" : "", label, value);
}

}  // namespace cumemaudit::cli
