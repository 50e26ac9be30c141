#!/usr/bin/env python3
"""What a user pays, measured the way a user measures it: the same program in separate processes, without and
with the audit.

Four modes (and any --also variants), one process each per round, the order rotated every round, every process pinned to the same cores:

  plain         no preloaded library
  forward-only  the shim preloaded, its wrappers forwarding without recording (bench_calls --pass-through)
  floor         the minimal recorder (tests/bench/floor: one open-addressing slot and a per-thread counter per
                allocation), the least any recorder costs
  cumemaudit    the shim preloaded with its default options (summary=0, fail_on=none)

Each child prints ns per call for every row (bench_calls --child, the median of its repeats). A mode's figure
for a row is the median over rounds of its per-round ratio to plain (so drift between rounds cancels), with a
bootstrap interval of that median (95%, rounds resampled). A verdict is given only where the interval lies on
one side of the target; where it straddles it, the row says it cannot tell.

The target on the simulated driver: cumemaudit's added time at most the floor's added time plus 15% of the plain
call (judged on the per-round excess (cumemaudit - floor) / plain).

  between.py [--rounds 9] [--iters 100000] [--repeats 3] [--cores 0-1] [--markdown] [--json FILE]
             [--rows async,alloc_free,...] [--also LABEL=LIBRARY ...]

--also runs another build of the shim (a variant: an earlier commit, a part taken out) as one more mode in the
same rounds, with cumemaudit's options, and reports it beside cumemaudit: how a variant's cost compares is then
measured, not inferred from two runs an hour apart. --rows keeps only the rows whose pattern is named (a
pattern with its threads: async:2).

Needs BENCH_CALLS, CUMEMAUDIT_SHIM, CUMEMAUDIT_FLOOR and CUMEMAUDIT_SIM_DIR (meson's benchmark() sets them)."""
import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROWS = [  # (row, bench pattern, threads, calls per iteration)
    ("cuMemAllocAsync+cuMemFreeAsync 4 KiB, 1 thread", "async", 1, 2),
    ("cuMemAllocAsync+cuMemFreeAsync 4 KiB, 2 threads", "async", 2, 2),
    ("cuMemAlloc+cuMemFree 4 KiB", "alloc_free", 1, 2),
    ("VMM create+map+access+unmap+release 2 MiB", "vmm", 1, 5),
]
MODES = ["plain", "forward-only", "floor", "cumemaudit"]
SIM_TARGET = 0.15  # cumemaudit - floor, as a share of the plain call


def bootstrap_median(values, resamples=4000, seed=1):
    """The median and its 95% bootstrap interval (the rounds resampled with replacement)."""
    rng = random.Random(seed)
    medians = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(resamples))
    return statistics.median(values), medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]


def judge(low, high, limit):
    """'meets' or 'misses' only where the whole interval is on one side of the limit."""
    if high <= limit:
        return "meets"
    if low > limit:
        return "misses"
    return "cannot tell: the interval straddles the target"


def pct(x):
    return f"{100 * x:+.1f}%"


def run_child(cmd, env):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if p.returncode != 0:
        sys.exit(f"between.py: {' '.join(cmd)} exited {p.returncode}\n{p.stderr[-2000:]}")
    return {(m.group(1), int(m.group(2))): float(m.group(3))
            for m in re.finditer(r"^RESULT (\w+) (\d+) ([\d.]+)$", p.stdout, re.M)}


def mode_env(mode, paths, report_dir, also):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "CUMEMAUDIT_OPTIONS")}
    env["LD_LIBRARY_PATH"] = paths["sim"] + (":" + os.environ["LD_LIBRARY_PATH"] if os.environ.get("LD_LIBRARY_PATH") else "")
    if mode in ("forward-only", "cumemaudit") or mode in also:
        env["LD_PRELOAD"] = also.get(mode, paths["shim"])
        env["CUMEMAUDIT_OPTIONS"] = f"report_dir={report_dir}:summary=0:fail_on=none"
    elif mode == "floor":
        env["LD_PRELOAD"] = paths["floor"]
    return env


def measure(a, paths, rows, modes):
    pin = ["taskset", "-c", a.cores] if shutil.which("taskset") else []
    # One child per thread count: a process whose threads once allocated together keeps the ledger's lock
    # unbiased (src/ledger/spin_lock.hpp), so a one-thread row run after a two-thread one would measure that.
    children = []
    for threads in sorted({r[2] for r in rows}):
        patterns = ",".join(sorted({r[1] for r in rows if r[2] == threads}))
        children.append(pin + [paths["bench"], "--child", "--patterns", patterns, "--threads", str(threads),
                               "--iters", str(a.iters), "--repeats", str(a.repeats), "--median", "--depth", "40"])
    figures = {m: [] for m in modes}  # mode -> [{(pattern, threads): ns per call} per round]
    with tempfile.TemporaryDirectory(prefix="cumemaudit-between-") as report_dir:
        for r in range(a.rounds):
            order = modes[r % len(modes):] + modes[:r % len(modes)]
            for mode in order:
                seen = {}
                for base in children:
                    cmd = base + (["--pass-through"] if mode == "forward-only" else [])
                    seen.update(run_child(cmd, mode_env(mode, paths, report_dir, a.also)))
                figures[mode].append(seen)
            print(f"round {r + 1} of {a.rounds}: {' '.join(order)}", file=sys.stderr, flush=True)
    return figures


def summarize(figures, chosen, modes):
    rows = []
    rounds = len(figures["plain"])
    for name, pattern, threads, calls in chosen:
        key = (pattern, threads)
        plain = [figures["plain"][r][key] for r in range(rounds)]
        row = {"row": name, "plain_ns": statistics.median(plain) * calls, "rounds": rounds}
        for mode in modes[1:]:
            ratios = [figures[mode][r][key] / plain[r] - 1 for r in range(rounds)]
            added = [(figures[mode][r][key] - plain[r]) * calls for r in range(rounds)]
            med, low, high = bootstrap_median(ratios)
            row[mode] = {"added": med, "low": low, "high": high, "added_ns": statistics.median(added)}
        for mode in modes[3:]:  # cumemaudit and each variant
            excess = [(figures[mode][r][key] - figures["floor"][r][key]) / plain[r] for r in range(rounds)]
            med, low, high = bootstrap_median(excess)
            entry = {"median": med, "low": low, "high": high, "verdict": judge(low, high, SIM_TARGET)}
            if mode == "cumemaudit":
                row["excess"] = entry
            else:
                row[mode]["excess"] = entry
        rows.append(row)
    return rows


def table(rows, markdown, modes):
    also = modes[4:]
    head = ["row", "plain ns", "forward-only", "floor", "cumemaudit", "cumemaudit - floor (of plain)", "target +15%"]
    head += [x for label in also for x in (label, f"{label} - floor (of plain)")]
    lines = []
    for r in rows:
        cells = [r["row"], f"{r['plain_ns']:.0f}"]
        for mode in modes[1:4]:
            m = r[mode]
            cells.append(f"{pct(m['added'])} [{pct(m['low'])}..{pct(m['high'])}] {m['added_ns']:+.0f} ns")
        e = r["excess"]
        cells += [f"{pct(e['median'])} [{pct(e['low'])}..{pct(e['high'])}]", e["verdict"]]
        for label in also:
            m = r[label]
            e = m["excess"]
            cells += [f"{pct(m['added'])} [{pct(m['low'])}..{pct(m['high'])}] {m['added_ns']:+.0f} ns",
                      f"{pct(e['median'])} [{pct(e['low'])}..{pct(e['high'])}]"]
        lines.append(cells)
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
        out += ["| " + " | ".join(c) + " |" for c in lines]
    else:
        widths = [max(len(x[i]) for x in [head] + lines) for i in range(len(head))]
        out = ["  ".join(c.ljust(w) for c, w in zip(x, widths)).rstrip() for x in [head] + lines]
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--iters", type=int, default=100000, help="iterations per thread per repeat")
    ap.add_argument("--repeats", type=int, default=3, help="timed loops per child; it prints their median")
    ap.add_argument("--cores", default="0-1", help="taskset -c list every process is pinned to")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--json", help="write the figures and the summary here")
    ap.add_argument("--rows", help="only these rows: patterns, each optionally with its threads (async:2,alloc_free)")
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=LIBRARY",
                    help="another build of the shim, run as one more mode in the same rounds")
    a = ap.parse_args()
    if a.rounds < 3:
        ap.error("--rounds: at least 3 (a bootstrap of fewer says nothing)")
    chosen = ROWS
    if a.rows:
        wanted = [w.split(":") for w in a.rows.split(",")]
        chosen = [r for r in ROWS if any(w[0] == r[1] and (len(w) == 1 or w[1] == str(r[2])) for w in wanted)]
        if not chosen:
            ap.error(f"--rows {a.rows}: no row matches; patterns are {', '.join(sorted({r[1] for r in ROWS}))}")
    also = {}
    for item in a.also:
        label, sep, library = item.partition("=")
        if not sep or not label or label in MODES or label in also:
            ap.error(f"--also {item}: expected LABEL=LIBRARY with a new label")
        if not os.path.isfile(library):
            ap.error(f"--also {item}: {library}: no such file")
        also[label] = os.path.abspath(library)
    a.also = also
    modes = MODES + list(also)
    try:
        paths = {"bench": os.environ["BENCH_CALLS"], "shim": os.environ["CUMEMAUDIT_SHIM"],
                 "floor": os.environ["CUMEMAUDIT_FLOOR"], "sim": os.environ["CUMEMAUDIT_SIM_DIR"]}
    except KeyError as e:
        sys.exit(f"between.py: {e.args[0]} is not set (meson's benchmark() sets it)")
    figures = measure(a, paths, chosen, modes)
    rows = summarize(figures, chosen, modes)
    print(f"between processes on the simulated driver: {a.rounds} rounds, order rotated, pinned to cores {a.cores}; "
          f"added time as the median of per-round ratios to plain, [95% bootstrap interval], and ns per iteration")
    print(table(rows, a.markdown, modes))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rounds": a.rounds, "rows": rows,
                       "figures": {m: [{f"{k[0]} {k[1]}": v for k, v in rnd.items()} for rnd in figures[m]] for m in modes}},
                      f, indent=1)


if __name__ == "__main__":
    main()
