#!/usr/bin/env python3
"""`cumemaudit budget` on a graph capture loop (capture_loop.cpp): a run that captured the 4 largest of 16 sizes
predicts what a run of all 16 measured.

Usage: capture_loop_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import json
import os
import subprocess
import sys

from audit_common import CLI, SCENARIOS, MiB, run, only_report, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SIZES = [4096, 3072, 2048, 1536, 1024, 768, 512, 384, 256, 192, 128, 96, 64, 32, 16, 8]
ROW = 8192  # bytes a size's output takes per unit: a hidden size of 4096 in bf16
ALL = ",".join(map(str, SIZES))


def budget(report_dir, *flags):
    return subprocess.run([CLI, "budget", report_dir, *flags], capture_output=True, text=True, timeout=60)


def case_capture_loop_budget(tmp):
    """Every size's cost: the 4 captured as measured, the 12 others predicted from graphs 2 to 4 (the first paid
    for the temporaries the others reuse), each equal to what the run of all 16 measured for it; the memory
    left at 90% starts from the mark before the first capture."""
    first, every = os.path.join(tmp, "first4"), os.path.join(tmp, "all16")
    run([SCENARIOS, "capture-loop", ",".join(map(str, SIZES[:4])), str(ROW)], first)
    run([SCENARIOS, "capture-loop", ALL, str(ROW)], every)
    out = os.path.join(tmp, "budget.json")
    proc = budget(first, "--sizes", ALL, "--json", out)
    expect(proc.returncode == 0, f"budget: exit {proc.returncode}: {proc.stderr}")
    got = json.load(open(out))
    measured = only_report(every)
    truth = [(g["bytes_by_owner"], g["instantiate_cost_bytes"]) for g in measured["graphs"]]
    expect(len(truth) == 16, f"the run of all sizes captured {len(truth)} graphs")
    rows = [(r["by_owner"], r["instantiate_bytes"]) for r in got["sizes"]]
    expect(rows == truth, f"per size: predicted {rows}, measured {truth}")
    expect([r["measured"] for r in got["sizes"]] == [True] * 4 + [False] * 12, "measured flags")
    expect(got["total_bytes"] == sum(sum(o.values()) + i for o, i in truth) == 64 * MiB + sum(SIZES[1:]) * ROW,
           f"total: {got['total_bytes']}")
    expect([(f["part"], f["bytes_per_unit"], f["from_graphs"]) for f in got["fits"]] == [("audit_scenarios", ROW, [2, 3, 4])],
           f"fits: {got['fits']}")
    mark = next(s for s in only_report(first)["steps"] if s["label"] == "before capture")
    expect(got["used_before_bytes"] == mark["driver_used_bytes"] and got["device_total_bytes"] == mark["driver_total_bytes"],
           f"before capture: {got['used_before_bytes']}, {got['device_total_bytes']}")
    expect(got["left_bytes"] == round(mark["driver_total_bytes"] * 0.9) - mark["driver_used_bytes"] - got["total_bytes"],
           f"left: {got['left_bytes']}")
    text = budget(first, "--sizes", ALL).stdout
    for line in ("Capture budget: 4 of 16 sizes captured in the run, 12 predicted",
                 "Measured 116.0 MiB; predicted 27.2 MiB; every size 143.2 MiB",
                 "  fit: audit_scenarios 8.0 KiB per unit of size, from graphs 2, 3, 4"):
        expect(line in text.splitlines(), f"{line!r} not in:\n{text}")


def case_capture_loop_budget_errors(tmp):
    """Sizes that cannot be matched to the run's graphs, or are not sizes, and a report without graphs: exit 2
    and a message that says which."""
    run([SCENARIOS, "capture-loop", "64,32", str(ROW)], tmp)
    for flags, message in [(["--sizes", "64"], "the report has 2 graphs but --sizes names 1 sizes"),
                           (["--sizes", "64,,32"], "--sizes: '' is not a size above 0"),
                           (["--sizes", "64,0"], "--sizes: '0' is not a size above 0"),
                           (["--sizes", "64,32", "--utilization", "1.5"], "--utilization")]:
        proc = budget(tmp, *flags)
        expect(proc.returncode == 2 and message in proc.stderr, f"{flags}: exit {proc.returncode}: {proc.stderr}")
    empty = os.path.join(tmp, "none")
    run([SCENARIOS, "capture-loop", "", str(ROW)], empty)
    proc = budget(empty, "--sizes", "64")
    expect(proc.returncode == 2 and "the report has no CUDA graphs" in proc.stderr, f"no graphs: exit {proc.returncode}: {proc.stderr}")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
