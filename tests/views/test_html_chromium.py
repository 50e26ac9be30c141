#!/usr/bin/env python3
"""The HTML page of `cumemaudit html` loaded in a real headless Chromium (Debian's `chromium`): the chart
and the tables are in the rendered DOM, the areas have a size on screen, the page's own script ran to its
end with no script error, and markup planted in a report stays text. Exits 77 (skipped) when chromium is
not installed; scripts/setup installs it. The page of a job (rank reports given as a directory) too.
Environment from meson: CLI."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = os.path.join(HERE, "sample_report.json")
CLI = os.environ["CLI"]
SKIP = 77

# Appended to a copy of the page only: measures what the browser laid out, for the assertions below.
PROBE = """<script>
const sizes = Array.from(document.querySelectorAll("svg.chart path.area"), p => {
  const b = p.getBBox(); return [p.dataset.owner, Math.round(b.width), Math.round(b.height)]; });
document.body.dataset.areas = JSON.stringify(sizes);
document.body.dataset.chartWidth = Math.round(document.querySelector("svg.chart").getBoundingClientRect().width);
</script>"""

failures = []


def expect(ok, what):
    if not ok:
        failures.append(what)


def verdict():
    """Prints each failure and ok, or their count; the exit status."""
    for f in failures:
        print("FAIL:", f)
    print("ok" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def browse(browser, page, profile, *extra):
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}", "--window-size=1100,1400",
           *extra, "file://" + page]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        sys.exit(f"chromium failed ({p.returncode}):\n{p.stderr[-4000:]}")
    return p.stdout, p.stderr


def script_errors(stderr):
    # Chromium logs console messages and uncaught exceptions as "CONSOLE(line)] ..." lines.
    return [l for l in stderr.splitlines() if "CONSOLE" in l or "Uncaught" in l]


def body_attrs(dom):
    m = re.search(r"<body([^>]*)>", dom)
    return dict(re.findall(r'data-([\w-]+)="([^"]*)"', m.group(1))) if m else {}


def render(tmp, name, report):
    path = os.path.join(tmp, name + ".json")
    with open(path, "w") as f:
        json.dump(report, f)
    out = os.path.join(tmp, name + ".html")
    p = subprocess.run([CLI, "html", path, "-o", out], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        sys.exit(f"cumemaudit html failed ({p.returncode}): {p.stderr}")
    return out


# Appended to a copy of the job page only: what the browser laid out of its chart and heatmap.
JOB_PROBE = """<script>
const lines = Array.from(document.querySelectorAll("#job-leak-chart polyline.rank-line"), p => {
  const b = p.getBBox(); return [p.dataset.rank, Math.round(b.width)]; });
document.body.dataset.lines = JSON.stringify(lines);
const heat = document.querySelector("#job-heatmap").getBoundingClientRect();
document.body.dataset.heat = JSON.stringify([document.querySelectorAll("#job-heatmap rect").length,
                                             Math.round(heat.width), Math.round(heat.height)]);
const box = q => { const e = document.querySelector(q); if (!e) return null; const b = e.getBBox();
                   return [Math.round(b.x), Math.round(b.y), Math.round(b.width), Math.round(b.height)]; };
document.body.dataset.ends = JSON.stringify({chart: box('#job-leak-chart path.rank-end[data-rank="7"]'),
                                             legend: box("#job-leak-chart .legend-end"),
                                             heat: box('#job-heatmap path.rank-end[data-rank="7"]'),
                                             heatmarks: document.querySelectorAll("#job-heatmap path.rank-end").length});
</script>"""
JOB_RANKS = 12
JOB_LEAKERS = (3, 7)
OOM_RANK = 7  # a leaking rank that runs out of memory at its last step and exits 1


def out_of_memory(rep):
    """The rank's last step ends in a refusal of 1 GiB it does not get past."""
    last = max(st["step"] for st in rep["steps"] if not st.get("label"))
    rep["process"]["exit_code"] = 1
    rep["summary"]["oom_events"] = 1
    rep["oom"] = [{"time_ns": 0, "step": last, "api": "cuMemCreate", "result": "CUDA_ERROR_OUT_OF_MEMORY",
                   "requested_bytes": 1 << 30, "owner": "deepep", "site": rep["leaks"][0]["site"],
                   "driver_free_bytes": 1 << 29, "driver_total_bytes": 80 << 30, "driver_used_bytes": (80 << 30) - (1 << 29),
                   "leaked_bytes": rep["summary"]["leaked_bytes"], "unattributed_bytes": 0, "parts": [], "recovered": False}]
    return last


def job_page(browser, tmp, sample):
    """The page of a job: 12 rank reports derived from the sample (ranks 3 and 7 keep its leak, the others
    leak nothing), given as a directory. It opens with who leaks, draws a line per leaking rank and a
    rank-by-step heatmap, and its script runs."""
    ranks = os.path.join(tmp, "ranks")
    os.makedirs(ranks)
    for r in range(JOB_RANKS):
        rep = json.loads(json.dumps(sample))
        rep["process"].update(rank=r, pid=1000 + r, world_size=JOB_RANKS, local_rank=r % 8)
        if r not in JOB_LEAKERS:
            rep["leaks"] = [l for l in rep["leaks"] if l["class"] not in ("unreachable", "open-export")]
            rep["summary"].update(leaked_bytes=0, leaked_allocations=0, leaked_references=0)
            for st in rep["steps"]:
                st["leaked_bytes"] = 0
        if r == OOM_RANK:
            oom_step = out_of_memory(rep)
        with open(os.path.join(ranks, f"cumemaudit.h.{1000 + r}.r{r}.json"), "w") as f:
            json.dump(rep, f)
    page = os.path.join(tmp, "job.html")
    p = subprocess.run([CLI, "html", ranks, "-o", page], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        sys.exit(f"cumemaudit html DIR failed ({p.returncode}): {p.stderr}")
    with open(page) as f:
        probed = f.read().replace("</body>", JOB_PROBE + "</body>")
    probe_page = os.path.join(tmp, "job-probe.html")
    with open(probe_page, "w") as f:
        f.write(probed)
    dom, log = browse(browser, probe_page, os.path.join(tmp, "profile5"), "--dump-dom")
    attrs = body_attrs(dom)
    expect(attrs.get("ok") == "1" and script_errors(log) == [], f"job page script: {attrs.get('ok')} {script_errors(log)}")
    leaked = sample["summary"]["leaked_bytes"]
    expect(f"<b>2 of 12 ranks leak</b>: " in dom and f"Worst: <b>rank 3</b>" in dom, "the verdict does not open the page")
    lines = json.loads(attrs.get("lines", "[]").replace("&quot;", '"'))
    expect([l[0] for l in lines] == ["3", "7"] and all(w > 500 for _, w in lines), f"laid-out rank lines: {lines}")
    heat = json.loads(attrs.get("heat", "[]").replace("&quot;", '"'))
    steps = len({st["step"] for st in sample["steps"] if not st.get("label")})
    expect(len(heat) == 3 and heat[0] == JOB_RANKS * steps and heat[1] > 600 and heat[2] > 100, f"heatmap: {heat}")
    expect(f"{leaked * 2} bytes" in dom.replace("(", " ").replace(")", " "), "the job's leaked bytes are not on the page")
    # Rank 7's end: named in the verdict, on a card of its own, a ✕ where its line stops (in the legend) and
    # over its heatmap row's last cell.
    expect(f'<li data-rank="{OOM_RANK}"><b>rank {OOM_RANK}</b> ran out of memory at step {oom_step}: cuMemCreate 1.0 GiB at '
           in dom and "<p class=\"rank-ends\"><b>1 of 12 ranks did not end cleanly</b>:</p>" in dom,
           "the verdict does not name the rank that ran out of memory")
    expect(f'data-rank="{OOM_RANK}" data-end="out_of_memory">rank {OOM_RANK}<b>out of memory at step {oom_step}</b>' in dom,
           "no card of the rank's end")
    ends = json.loads(attrs.get("ends", "{}").replace("&quot;", '"'))
    chart_x, heat_x = (ends.get("chart") or [0])[0], (ends.get("heat") or [0])[0]
    expect(ends.get("chart") and ends["chart"][2] >= 10 and ends["chart"][3] >= 10 and chart_x > 700,
           f"the chart's end mark is not at the right end of the plot: {ends}")
    expect(ends.get("legend") and ends["legend"][2] > 50 and ends["legend"][0] > 780, f"the end mark's legend entry: {ends}")
    expect(ends.get("heat") and ends["heat"][2] > 0 and heat_x > 800 and ends.get("heatmarks") == 1, f"the heatmap's end mark: {ends}")
    shot = os.path.join(tmp, "job.png")
    browse(browser, page, os.path.join(tmp, "profile6"), "--hide-scrollbars", f"--screenshot={shot}")
    with open(shot, "rb") as f:
        png = f.read()
    expect(png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20000, f"job page screenshot: {len(png)} bytes")


def main():
    browser = chromium()
    if browser is None:
        print("SKIP: chromium is not installed (scripts/setup installs the Debian package `chromium`)")
        return SKIP
    with open(SAMPLE) as f:
        sample = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        page = render(tmp, "sample", sample)
        dom, log = browse(browser, page, os.path.join(tmp, "profile1"), "--dump-dom")
        expect(body_attrs(dom).get("ok") == "1", "the page's script did not run to its end (no data-ok on <body>)")
        expect(script_errors(log) == [], f"script errors: {script_errors(log)}")
        expect(len(re.findall(r'<svg class="chart"', dom)) == 1, "no chart in the DOM")
        owners = re.findall(r'<path class="area" data-owner="([^"]*)"', dom)
        expect(owners == ["pytorch", "deepep", "nccl", "cublas"], f"chart areas: {owners}")
        expect('<path class="driver"' in dom, "no driver-used line")
        for table in ("leaks", "alarms", "graphs", "owners", "misuse", "steps"):
            expect(f'<table class="{table}">' in dom, f"no {table} table in the DOM")
        expect("deep_ep::FabricAllocator::grow(unsigned long) csrc/kernels/fabric.cu:118" in dom, "leak site missing")

        with open(page) as f:
            probed = f.read().replace("</body>", PROBE + "</body>")
        probe_page = os.path.join(tmp, "probe.html")
        with open(probe_page, "w") as f:
            f.write(probed)
        dom, log = browse(browser, probe_page, os.path.join(tmp, "profile2"), "--dump-dom")
        attrs = body_attrs(dom)
        expect(script_errors(log) == [], f"script errors with the probe: {script_errors(log)}")
        areas = json.loads(attrs.get("areas", "[]").replace("&quot;", '"'))
        expect([a[0] for a in areas] == ["pytorch", "deepep", "nccl", "cublas"], f"laid-out areas: {areas}")
        expect(all(w > 500 and h > 0 for _, w, h in areas), f"an area has no size on screen: {areas}")
        expect(int(attrs.get("chartwidth", attrs.get("chart-width", "0"))) > 600, f"chart width: {attrs}")

        shot = os.path.join(tmp, "shot.png")
        browse(browser, page, os.path.join(tmp, "profile3"), "--hide-scrollbars", f"--screenshot={shot}")
        with open(shot, "rb") as f:
            png = f.read()
        expect(png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20000, f"screenshot: {len(png)} bytes")

        evil = dict(sample)
        evil["owners"] = [dict(o) for o in sample["owners"]]
        evil["owners"][0]["owner"] = "<script>document.body.dataset.pwned=1</script>"
        evil["process"] = dict(sample["process"], argv=["<img src=x onerror=document.body.dataset.pwned=2>"])
        dom, log = browse(browser, render(tmp, "evil", evil), os.path.join(tmp, "profile4"), "--dump-dom")
        attrs = body_attrs(dom)
        expect(attrs.get("ok") == "1" and "pwned" not in attrs, f"markup from a report ran: {attrs}")
        expect("<img" not in dom, "an <img> from a report reached the DOM")
        job_page(browser, tmp, sample)
    return verdict()


if __name__ == "__main__":
    sys.exit(main())
