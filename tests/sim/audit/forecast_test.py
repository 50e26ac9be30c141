#!/usr/bin/env python3
"""When the device runs out, forecast at each step (forecast.cpp).

Usage: forecast_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import glob
import json
import os
import re
import subprocess
import sys

from audit_common import CLI, SCENARIOS, MiB, run, only_report, marker_line, top_frame, source, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("forecast.cpp")
GiB = 1024 * MiB
kLeft, kPlotW, kTop, kPlotH = 80, 710, 16, 284  # tools/cumemaudit/html_axis.hpp's plot, rounded as the SVG writes it


def case_forecast_leak(tmp):
    """1 GiB leaked a step on an 80 GiB device: no forecast before eight steps; from the eighth on, every step
    says leak, out of memory at step 80 (bounds 80 to 80: the rate never varies); the report's forecast names
    the owner, the leaking line and the rate; one warning line, at step 8, since the forecast never moves."""
    proc = run([SCENARIOS, "forecast-leak"], tmp, rc=23)
    rep = only_report(tmp)
    got = {s["step"]: (s["forecast_trend"], s["forecast_oom_step"], s["forecast_oom_step_low"], s["forecast_oom_step_high"])
           for s in rep["steps"] if not s["label"]}
    want = {n: ("unknown", None, None, None) if n < 8 else ("leak", 80, 80, 80) for n in range(1, 41)}
    expect(got == want, f"steps: {got}")
    expect(all((s["forecast_oom_in_s"] is None) == (s["step"] < 8) for s in rep["steps"]), f"{rep['steps']}")
    (f,) = rep["forecasts"]
    expect((f["device"], f["step"], f["trend"], f["oom_step"], f["oom_step_low"], f["oom_step_high"], f["owner"],
            f["rate_bytes_per_step"], f["site"]["api"], top_frame(f)["line"]) ==
           (0, 40, "leak", 80, 80, 80, "audit_scenarios", GiB, "cuMemCreate", marker_line(SRC, "leak_create")), f"forecast: {f}")
    lines = [l for l in proc.stderr.splitlines() if "warning:" in l and "runs out of memory" in l]
    expect(len(lines) == 1 and lines[0].endswith(
        "warning: step 8: at this rate device 0 runs out of memory at step ≈ 80 (80–80), in about 0 s: leaked memory "
        f"grows 1.0 GiB per step, most at cuMemCreate in (anonymous namespace)::forecast_leak(int, char**) "
        f"../tests/sim/audit/forecast.cpp:{marker_line(SRC, 'leak_create')}"), f"warnings: {lines}")
    # The summary at exit ends with where the steps led, as the report has it.
    expect(f"\nForecast: device 0 runs out of memory at step ≈ 80 (80–80), 40 steps after step 40, in about 0 s: leaked memory "
           f"grows 1.0 GiB per step, most at cuMemCreate in forecast.cpp:{marker_line(SRC, 'leak_create')} "
           "((anonymous namespace)::forecast_leak(int, char**))\n" in proc.stderr, f"exit summary:\n{proc.stderr}")

    # The page draws where the steps lead: the projection from step 40's peak (40 GiB) reaches the device's 80 GiB
    # at step 80, the right end of a step axis that runs from step 1 to the forecast's high bound.
    (report_file,) = glob.glob(os.path.join(tmp, "cumemaudit.*.json"))
    page = os.path.join(tmp, "page.html")
    drawn = subprocess.run([CLI, "html", "-o", page, report_file], capture_output=True, text=True, timeout=60)
    expect(drawn.returncode == 0, f"html: {drawn.stderr}")
    with open(page) as f:
        html = f.read()
    expect('<svg class="chart forecast" id="forecast-chart-0"' in html, "the forecast chart")
    projection = re.search(r'<path class="forecast-line" d="M([\d.]+),([\d.]+) L([\d.]+),([\d.]+)">', html)
    expect(projection is not None and [float(v) for v in projection.groups()] == [round(kLeft + kPlotW * 39 / 79, 1), kTop + kPlotH / 2,
                                                                                  kLeft + kPlotW, kTop],
           f"projection: {projection and projection.groups()}")

    # The gate on the forecast alone (leaks let through): 40 steps left fail a limit of 40, pass one of 39; a
    # duration judges the seconds left; a limit that is neither is a usage error.
    def check(limit):
        return subprocess.run([CLI, "check", "--fail-on", "none", "--max-forecast-steps", limit, report_file],
                              capture_output=True, text=True, timeout=60)
    fail = f"FAIL {report_file}: device 0 runs out of memory at step ≈ 80 (80–80), 40 steps after step 40, in about 0 s (leak, driven by audit_scenarios)\n"
    got = {limit: (p.returncode, p.stdout) for limit in ("39", "40", "1h") for p in [check(limit)]}
    expect(got["39"][0] == 0 and got["39"][1].startswith("PASS ") and got["40"] == (1, fail) and got["1h"] == (1, fail), f"check: {got}")
    bad = check("lots")
    expect((bad.returncode, bad.stderr) == (2, "cumemaudit check: --max-forecast-steps: 'lots' is neither a step count such as "
                                                "5000 nor a duration such as 90m, 3h or 7d\n"), f"{bad.returncode} {bad.stderr!r}")


def case_forecast_job(tmp):
    """Three ranks leaking, rank 1 faster (1.5 GiB a step: full at step 54, the others at 80): merge leads with
    the rank that runs out first, its step, what drives it and how many ranks are forecast to run out; the job
    file keeps it and reads back."""
    for rank, mib in ((0, "1024"), (1, "1536"), (2, "1024")):
        run([SCENARIOS, "forecast-leak", mib], tmp, rc=23, env={"RANK": str(rank), "WORLD_SIZE": "3"})
    job = os.path.join(tmp, "job.json")
    merged = subprocess.run([CLI, "merge", "-o", job, tmp], capture_output=True, text=True, timeout=60)
    line = f"forecast: rank 1 runs out of memory first, at step ≈ 54 (54–54), in about 0 s, driven by audit_scenarios at " \
           f"cuMemCreate in forecast.cpp:{marker_line(SRC, 'leak_create')} ((anonymous namespace)::forecast_leak(int, char**)) " \
           f"(3 of 3 ranks forecast to run out)\n"
    expect(merged.stdout.splitlines(keepends=True)[2] == line, f"merge:\n{merged.stdout}")
    with open(job) as f:
        earliest = json.load(f)["earliest_forecast"]
    expect((earliest["rank"], earliest["ranks"], earliest["forecast"]["oom_step"], earliest["forecast"]["trend"]) ==
           (1, 3, 54, "leak"), f"{earliest}")
    page = os.path.join(tmp, "job.html")
    drawn = subprocess.run([CLI, "html", "-o", page, job], capture_output=True, text=True, timeout=60)
    with open(page) as f:
        html = f.read()
    expect(drawn.returncode == 0 and re.search(r'<div class="verdict bad" id="forecast"><p><b>Rank 1 runs out of memory first</b>, '
                                               r'at step ≈ 54 \(54–54\)', html) is not None, "the job page leads with the forecast")
    again = subprocess.run([CLI, "check", job], capture_output=True, text=True, timeout=60)
    expect(again.returncode == 1 and again.stdout.startswith(f"FAIL {job}: "), f"{again.returncode} {again.stdout} {again.stderr}")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
