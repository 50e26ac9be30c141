#!/usr/bin/python3
"""The memory chart of `cumemaudit html` zooms and pans in a real headless Chromium, and draws the peak
between two marks: a wheel turn over the plot zooms about the pointer (the step under it stays put, labels
outside the plot hide), a drag pans, a double click shows every step again. On tests/views' sample report,
one of whose steps is given a peak between marks. Exits 77 (skipped) without chromium. Environment: CLI."""
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_html_chromium import body_attrs, browse, chromium, expect, script_errors, verdict  # noqa: E402

CLI = os.environ["CLI"]
MiB = 1 << 20

# Appended to a copy of the page: a wheel turn at the plot's middle, then a drag, then a double click,
# reading back the zoom, where the middle step's hover column sits, and how many labels show after each.
PROBE = """<script>
const svg = document.querySelector("svg.chart"), r = svg.getBoundingClientRect();
const plotLeft = r.left + (+svg.dataset.left) * r.width / svg.viewBox.baseVal.width;
const plotW = (+svg.dataset.plotw) * r.width / svg.viewBox.baseVal.width;
const cx = plotLeft + plotW / 2, cy = r.top + r.height / 3;
const cols = svg.querySelectorAll("rect.hover"), mid = cols[Math.floor(cols.length / 2)];
const midX = () => { const b = mid.getBoundingClientRect(); return Math.round(b.left + b.width / 2); };
const shown = () => Array.from(svg.querySelectorAll("text.xlabel")).filter(t => t.style.display !== "none").length;
const state = {before: {zoom: svg.dataset.zoom || "1", mid: midX(), labels: shown()}};
for (let i = 0; i < 4; ++i)
  svg.dispatchEvent(new WheelEvent("wheel", {deltaY: -100, clientX: midX(), clientY: cy, bubbles: true, cancelable: true}));
state.zoomed = {zoom: svg.dataset.zoom, mid: midX(), labels: shown()};
svg.dispatchEvent(new MouseEvent("mousedown", {clientX: cx, clientY: cy, bubbles: true}));
window.dispatchEvent(new MouseEvent("mousemove", {clientX: cx + 100, clientY: cy, bubbles: true}));
window.dispatchEvent(new MouseEvent("mouseup", {clientX: cx + 100, clientY: cy, bubbles: true}));
state.panned = {zoom: svg.dataset.zoom, mid: midX()};
svg.dispatchEvent(new MouseEvent("dblclick", {bubbles: true}));
state.reset = {zoom: svg.dataset.zoom, mid: midX(), labels: shown()};
document.body.dataset.zoom = JSON.stringify(state);
</script>"""

def main():
    browser = chromium()
    if browser is None:
        print("SKIP: chromium is not installed (scripts/setup installs the Debian package `chromium`)")
        return 77
    sample = json.load(open(os.path.join(HERE, "sample_report.json")))
    s = sample["steps"][20]
    tracked = sum(s["by_owner"].values())
    s["peak_tracked_bytes"] = tracked + 512 * MiB  # a 512 MiB temporary came and went before this mark
    with tempfile.TemporaryDirectory() as tmp:
        report, page = os.path.join(tmp, "r.json"), os.path.join(tmp, "r.html")
        json.dump(sample, open(report, "w"))
        p = subprocess.run([CLI, "html", report, "-o", page], capture_output=True, text=True, timeout=60)
        expect(p.returncode == 0, f"html: {p.stderr}")
        html = open(page).read()
        expect(len(re.findall(r'<path class="peak"', html)) == 1 and "peak between marks</text>" in html,
               "the peak line and its legend")
        expect(f"peak since the previous mark: {(tracked + 512 * MiB) / (1 << 30):.1f} GiB" in html
               or f"peak since the previous mark: {(tracked + 512 * MiB) / MiB:.1f} MiB" in html,
               "the step's tooltip names its peak")

        open(page + ".probe.html", "w").write(html.replace("</body>", PROBE + "</body>"))
        dom, log = browse(browser, page + ".probe.html", os.path.join(tmp, "profile"), "--dump-dom")
        attrs = body_attrs(dom)
        expect(attrs.get("ok") == "1" and script_errors(log) == [], f"script: {script_errors(log)}")
        z = json.loads(attrs.get("zoom", "{}").replace("&quot;", '"'))
        before, zoomed, panned, reset = z["before"], z["zoomed"], z["panned"], z["reset"]
        expect(abs(float(zoomed["zoom"]) - 1.25 ** 4) < 1e-3, f"four wheel turns zoom 1.25^4: {z}")
        expect(abs(zoomed["mid"] - before["mid"]) <= 2, f"the step under the pointer stays put: {z}")
        expect(zoomed["labels"] < before["labels"], f"labels outside the zoomed plot hide: {z}")
        expect(panned["mid"] - zoomed["mid"] > 50, f"a drag to the right moves the steps right: {z}")
        expect(reset["zoom"] == "1.000" and reset["mid"] == before["mid"] and reset["labels"] == before["labels"],
               f"a double click shows every step again: {z}")
    return verdict()


if __name__ == "__main__":
    sys.exit(main())
