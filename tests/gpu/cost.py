#!/usr/bin/env python3
"""What the shim costs on a GPU, measured so that a few percent can be told from noise.

Two measurements in the same rounds, every process pinned to the same cores:

- Between processes (what a user measures): plain; forward-only (the shim preloaded, its wrappers forwarding
  without recording: bench_calls --pass-through); under the minimal recorder (tests/bench/floor's
  libminrec.so: one open-addressing slot and a per-thread counter per allocation, the floor of any
  recorder); under cumemaudit (`cumemaudit run`, default options), each its own process, interleaved round
  by round (the order rotates). A pattern's result is the median over rounds of the per-round ratios to
  plain with a 95% bootstrap interval (tests/bench/between.py); a verdict only where the interval lies on
  one side of the target, and "cannot tell" otherwise. Targets: cumemaudit within the floor + 3 points
  (async, batch), the VMM cycle within +2%, the PyTorch step within +2% without caching and +0.5% with it.
- Inside one process (bench_calls --ab, torch_workloads.py train --ab): each thread of the audited (and
  the floor's) process alternates iteration by iteration between the driver's own entry points and the
  program's (the preloaded library's), timing each with the TSC, in blocks with recording on and blocks
  with it paused (the wrappers' forwarding alone). Per block the ratio of the two kinds' means (below the
  99th percentile); per process the median over blocks; over rounds their median and min..max. It cancels
  the process-to-process noise of the host, but it understates: a direct call alternating with recorded
  ones finds the driver's lines pushed out by the shim's and runs slower than in a plain process, so part
  of the shim's cost is counted as the driver's (docs/COST.md). The PyTorch step alternates step by step between
  recorded and passed through (it cannot call the driver directly: cudart holds cuGetProcAddress's
  pointers).

Patterns:

  async 1/4/16 threads   cuMemAllocAsync + cuMemFreeAsync, 4 KiB, null stream       (bench_calls --child)
  batch                  cuMemAlloc 4 KiB x2000, then cuMemFree x2000              (bench_calls --child)
  vmm                    cuMemCreate+Map+SetAccess+Unmap+Release, 2 MiB            (bench_calls --child)
  torch step             a training step with PYTORCH_NO_CUDA_MEMORY_CACHING=1     (torch_workloads.py train)
  torch step, caching    the same step with PyTorch's caching allocator, as jobs run (torch_workloads.py train)
                         (plain vs cumemaudit only: PyTorch reaches the driver through cuGetProcAddress,
                         which the minimal recorder does not interpose)

  python3 tests/gpu/cost.py --build BUILD [--out DIR] [--rounds 9] [--blocks 5] [--cores 0-15]
                            [--budget-s 360] [--iters-scale N] [--torch-steps 400] [--resume COST_JSON]
                            [--pin-rows] [--processes K] [--torch-processes K] [--also LABEL=LIBRARY]
                            [--rows ROW,...]

Needs the build's bench_calls, libminrec.so and cumemaudit CLI (carry the build dir), a GPU, PyTorch.
Prints a markdown table and writes cost.md and cost.json into --out. Rounds stop early when the budget
(seconds) would be exceeded; the table says how many rounds each row got. --resume goes on from an earlier
run's cost.json (its figures and its round count: the order keeps rotating from where it stopped), so rounds
that do not fit one command's time limit can be spread over several commands of one lease. --pin-rows pins a
call row's processes to the first of --cores, as many as it has threads plus one, the same cores for every
process. On a GPU host a process runs the same loop at one of two speeds and keeps it, whatever its cores or
its address-space layout (docs/COST.md), which ratios of single processes cannot survive: --processes K runs
each mode of a call row as K processes a round and takes the fastest, so that every mode is compared at the
host's faster speed (each process's figures are kept in cost.json); --torch-processes K does the same for the
PyTorch rows, whose processes take seconds each. --also LABEL=LIBRARY runs another build of the shim (a
variant with one part taken out: tests/bench/variants) as one more mode of the call rows between processes, so
that what each part costs on the real driver is read in the same rounds: the table gives its added time and its
difference from cumemaudit. --rows spends a lease's rounds on the rows named (async:1, async:16, batch, torch, ...)
and leaves the others out of the rounds and the tables.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench"))
from between import bootstrap_median, judge  # noqa: E402  (one statistics for both drivers)

CALL_ROWS = [  # (row name, bench pattern, threads, calls per pair/cycle, iterations per thread per repeat)
    ("cuMemAllocAsync+cuMemFreeAsync 4 KiB, 1 thread", "async", 1, 2, 20000),
    ("cuMemAllocAsync+cuMemFreeAsync 4 KiB, 4 threads", "async", 4, 2, 5000),
    ("cuMemAllocAsync+cuMemFreeAsync 4 KiB, 16 threads", "async", 16, 2, 2000),
    ("cuMemAlloc 4 KiB x2000 then cuMemFree x2000 (per pair)", "batch", 1, 2, 20000),
    ("VMM create+map+access+unmap+release 2 MiB (per cycle)", "vmm", 1, 5, 2000),
]
TORCH_ROWS = [  # (row name, key, environment): PyTorch's step without its caching allocator and with it
    ("PyTorch training step, PYTORCH_NO_CUDA_MEMORY_CACHING=1", "torch", {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}),
    ("PyTorch training step, caching allocator", "torch_caching", {}),
]
# In one process: at most this many % added.
TARGET = {"async": 10.0, "batch": 5.0, "vmm": 2.0, "torch": 1.0, "torch_caching": 1.0}
# Between processes: (what is judged, at most): the excess over the floor, or the added time itself.
BETWEEN_TARGET = {"async": ("excess", 0.03), "batch": ("excess", 0.03), "vmm": ("added", 0.02), "torch": ("added", 0.02),
                  "torch_caching": ("added", 0.005)}


def row_keys():
    """Every row's name for --rows, in table order."""
    return [f"{pat}:{threads}" for _, pat, threads, *_ in CALL_ROWS] + [key for _, key, _ in TORCH_ROWS]


def chosen_rows(spec):
    """--rows's list as (call rows, PyTorch rows), each in table order; None: every row. An item names a call row as
    PATTERN:THREADS or PATTERN (all its thread counts), a PyTorch row by its key. ValueError names what matched none."""
    if spec is None:
        return list(CALL_ROWS), list(TORCH_ROWS)
    items = [item.strip() for item in spec.split(",") if item.strip()]
    unknown = [item for item in items if not any(item == key or item == key.split(":")[0] for key in row_keys())]
    if unknown or not items:
        raise ValueError(f"no row {', '.join(unknown) or '(none named)'}; rows: {', '.join(row_keys())}")
    calls = [r for r in CALL_ROWS if f"{r[1]}:{r[2]}" in items or r[1] in items]
    return calls, [r for r in TORCH_ROWS if r[1] in items]


def cpu_list(spec):
    """taskset -c's list ("0-3,8,10-11") as core numbers, in order."""
    cores = []
    for part in spec.split(","):
        low, _, high = part.partition("-")
        cores += range(int(low), int(high or low) + 1)
    return cores


def torch_figures(stdout, with_ab):
    """torch_workloads.py train's median step (µs) and, with --ab, its in-process added %: None if missing."""
    m = re.search(r"step_median_us=([\d.]+)", stdout)
    ab = re.search(r"ab: added_pct=([-\d.]+)", stdout)
    if not m or (with_ab and not ab):
        return None
    return float(m.group(1)), float(ab.group(1)) if ab else None


def sh(cmd, env, timeout):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env}, timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout}s"
    except OSError as e:  # a program that is not there (nvidia-smi on a dry run)
        return 127, "", str(e)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--blocks", type=int, default=5, help="blocks of each kind per in-process comparison")
    ap.add_argument("--cores", default="0-15", help="taskset -c list every process is pinned to")
    ap.add_argument("--budget-s", type=float, default=360)
    ap.add_argument("--iters-scale", type=int, default=1, help="multiplies every pattern's iterations")
    ap.add_argument("--torch-steps", type=int, default=400)
    ap.add_argument("--no-torch", action="store_true", help="leave the PyTorch rows out (a dry run without a GPU)")
    ap.add_argument("--torch-workload", default=os.path.join(HERE, "torch_workloads.py"), metavar="SCRIPT",
                    help="the training step's script (its `train` prints the lines torch_figures reads; a test "
                         "without PyTorch gives a stand-in)")
    ap.add_argument("--resume", metavar="COST_JSON", help="go on from an earlier run's cost.json: its rounds count")
    ap.add_argument("--pin-rows", action="store_true",
                    help="pin a call row's processes to its threads' count of --cores plus one (the driver's own "
                         "threads), always the same cores, instead of all of them")
    ap.add_argument("--processes", type=int, default=1, metavar="K",
                    help="run each mode of a call row as K processes a round and take the fastest (a GPU host gives "
                         "each process one of two speeds)")
    ap.add_argument("--torch-processes", type=int, default=1, metavar="K",
                    help="the same for the PyTorch rows (each process loads PyTorch: seconds, not a fraction of one)")
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=LIBRARY",
                    help="another build of the shim (a variant: a part taken out, an earlier commit) run as one more "
                         "mode of the call rows between processes, through the same CLI (CUMEMAUDIT_SHIM)")
    ap.add_argument("--rows", metavar="ROW,...",
                    help="only these rows, in the rounds and the tables: a call row as PATTERN:THREADS or PATTERN (all "
                         f"its thread counts), a PyTorch row by its key; rows: {', '.join(row_keys())}")
    a = ap.parse_args()
    try:
        call_rows, torch_rows = chosen_rows(a.rows)
    except ValueError as e:
        ap.error(f"--rows {a.rows}: {e}")
    if a.no_torch:
        torch_rows = []
    also = {}
    for item in a.also:
        label, sep, library = item.partition("=")
        if not sep or not label or label in ("plain", "forward-only", "floor", "cumemaudit") or label in also:
            ap.error(f"--also {item}: expected LABEL=LIBRARY with a new label")
        if not os.path.isfile(library):
            ap.error(f"--also {item}: {library}: no such file")
        also[label] = os.path.abspath(library)
    for name in ("processes", "torch_processes"):
        if getattr(a, name) < 1:
            ap.error(f"--{name.replace('_', '-')} {getattr(a, name)}: at least 1")
    build = os.path.abspath(a.build)
    out = a.out or tempfile.mkdtemp(prefix="cumemaudit-cost-")
    os.makedirs(out, exist_ok=True)
    bench = os.path.join(build, "tests", "bench", "bench_calls")
    floor = os.path.join(build, "tests", "bench", "floor", "libminrec.so")
    cli = os.path.join(build, "tools", "cumemaudit", "cumemaudit")
    for path in (bench, floor, cli):
        if not os.path.exists(path):
            sys.exit(f"cost.py: {path} missing (build with meson, then carry the build directory)")
    pin = ["taskset", "-c", a.cores] if shutil.which("taskset") else []
    if not pin:
        print("cost.py: no taskset here; processes are not pinned (the table says so)", flush=True)
        a.cores = "none (no taskset)"
    # On a GPU host a process runs the same loop at one of two speeds and keeps it (docs/COST.md); which one
    # may depend on where its threads land. --pin-rows gives every process of a row the same few cores.
    cores = cpu_list(a.cores) if pin else []

    def row_pin(threads):
        if not pin or not a.pin_rows:
            return pin
        return ["taskset", "-c", ",".join(str(c) for c in cores[:threads + 1])]
    report_dir = tempfile.mkdtemp(prefix="cumemaudit-cost-reports-")
    audited = [cli, "run", "--report-dir", report_dir, "--fail-on", "none", "--"]
    quiet = {"CUMEMAUDIT_OPTIONS": "summary=0"}
    modes = {"plain": ([], {}), "forward-only": (audited, quiet), "floor": ([], {"LD_PRELOAD": floor}),
             "cumemaudit": (audited, quiet), **{label: (audited, {**quiet, "CUMEMAUDIT_SHIM": library})
                                                for label, library in also.items()}}

    started = time.time()
    per_round = {}  # (row, mode) -> [figure per round]
    processes = {}  # (row, mode) -> [[each process's figure] per round], for call rows
    in_process = {}  # (row, mode) -> [{"added": %, "passing": %} per round], from the --ab children
    failures = []
    rounds_done = 0
    if a.resume:
        try:
            with open(a.resume) as f:
                state = json.load(f)["state"]
        except (OSError, ValueError, KeyError) as e:
            sys.exit(f"cost.py: --resume {a.resume}: not a cost.json this script wrote ({e})")
        per_round = {(row, mode): v for row, mode, v in state["per_round"]}
        in_process = {(row, mode): v for row, mode, v in state["in_process"]}
        processes = {(row, mode): v for row, mode, v in state.get("processes", [])}
        failures, rounds_done = state["failures"], state["rounds"]
        rows_now = [row for row, *_ in call_rows + torch_rows]
        was = (state.get("pin_rows", False), state.get("processes_per_round", 1), state.get("torch_processes", 1),
               state.get("also", []), state.get("rows", [row for row, *_ in CALL_ROWS + TORCH_ROWS]))
        if was != (a.pin_rows, a.processes, a.torch_processes, list(also), rows_now):
            sys.exit(f"cost.py: --resume {a.resume} was measured {'with' if was[0] else 'without'} --pin-rows, with "
                     f"--processes {was[1]} and --torch-processes {was[2]}, variants {was[3] or 'none'}"
                     f"{'' if was[4] == rows_now else ', other rows (' + '; '.join(was[4]) + ')'}: go on the same way")
        print(f"cost.py: going on from {a.resume}, {rounds_done} rounds done", flush=True)
    def run_processes(cmd, env, k, parse, what):
        """cmd run as k processes, one after another: each one's parse(stdout), or None once one fails (its
        failure recorded)."""
        figures = []
        for _ in range(k):
            rc, so, se = sh(cmd, env, 240)
            figure = parse(so) if rc == 0 else None
            if figure is None:
                failures.append(f"{what}: rc {rc}: {se[-300:]}")
                return None
            figures.append(figure)
        return figures

    round_s = 0.0
    first_round = rounds_done
    for r in range(first_round, a.rounds):
        if r > first_round and time.time() - started + round_s > a.budget_s:
            break
        t0 = time.time()
        order = list(modes)[r % len(modes):] + list(modes)[:r % len(modes)]
        for mode in order:
            prefix, env = modes[mode]
            for row, pat, threads, calls, iters in call_rows:
                base = row_pin(threads) + prefix + [bench, "--child", "--patterns", pat, "--threads", str(threads),
                                       "--iters", str(iters * a.iters_scale), "--depth", "40", "--median"]
                # Between processes: a loop of the pattern alone, the median of --blocks runs; of K such
                # processes the fastest.
                cmd = base + ["--repeats", str(a.blocks)] + (["--pass-through"] if mode == "forward-only" else [])
                pattern = re.compile(rf"^RESULT {pat} {threads} ([\d.]+)$", re.M)
                figures = run_processes(cmd, env, a.processes, pattern.search, f"{mode} {pat} {threads}T")
                if figures:
                    figures = [float(m.group(1)) * calls for m in figures]
                    per_round.setdefault((row, mode), []).append(min(figures))
                    processes.setdefault((row, mode), []).append(figures)
                if mode not in ("cumemaudit", "floor"):
                    continue
                # Inside one process: the same loop alternating direct and preloaded entry points.
                rc, so, se = sh(base + ["--ab", "--blocks", str(a.blocks)], env, 240)
                ab = re.search(rf"^AB {pat} {threads} ([-\d. ]+)$", so, re.M)
                if rc != 0 or not ab:
                    failures.append(f"{mode} --ab {pat} {threads}T: rc {rc}: {se[-300:]}")
                    continue
                # direct passing recorded (ns per call), added%, passing%, min%, max%
                f = [float(x) for x in ab.group(1).split()]
                in_process.setdefault((row, mode), []).append({"added": f[3], "passing": f[4], "direct_ns": f[0] * calls})
        for mode in order:
            if mode not in ("plain", "cumemaudit"):
                continue
            prefix, env = modes[mode]
            for row, key, torch_env in torch_rows:
                wl = [sys.executable, a.torch_workload, "train", "--steps", str(a.torch_steps)]
                if mode == "cumemaudit":
                    wl.append("--ab")
                steps = run_processes(pin + prefix + wl, {**env, **torch_env}, a.torch_processes,
                                      lambda so: torch_figures(so, with_ab=mode == "cumemaudit"), f"{mode} {key}")
                if steps:
                    per_round.setdefault((row, mode), []).append(min(us for us, _ in steps) * 1000)
                    processes.setdefault((row, mode), []).append([us * 1000 for us, _ in steps])
                    if mode == "cumemaudit":
                        added = statistics.median(ab for _, ab in steps)
                        in_process.setdefault((row, mode), []).append({"added": added, "passing": None})
        rounds_done += 1
        round_s = time.time() - t0
        print(f"round {r + 1} done in {round_s:.0f}s", flush=True)

    def fmt_ns(ns):
        return f"{ns / 1000:.2f} µs" if ns >= 10000 else f"{ns:.0f} ns"

    def spread(values):
        return f"{statistics.median(values):+.1f}% ({min(values):+.1f}..{max(values):+.1f})"

    # Inside one process: what the targets are judged on.
    ab_rows = ["| pattern | rounds | direct (median) | cumemaudit adds (median; min..max over rounds) | of which "
               "forwarding | floor adds | target | verdict |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    raw = {}
    for row, pat, *_ in call_rows + torch_rows:
        ours = in_process.get((row, "cumemaudit"), [])
        if not ours:
            ab_rows.append(f"| {row} | 0 | — | — | — | — | ≤ {TARGET[pat]:.0f}% | no data |")
            continue
        added = [r["added"] for r in ours]
        passing = [r["passing"] for r in ours if r["passing"] is not None]
        direct = [r["direct_ns"] for r in ours if "direct_ns" in r]
        floor = [r["added"] for r in in_process.get((row, "floor"), [])]
        med, width = statistics.median(added), max(added) - min(added)
        verdict = ("meets" if med <= TARGET[pat] else f"misses by {med - TARGET[pat]:.1f} pt") + \
                  ("" if width < 2.0 else f"; spread {width:.1f} pt ≥ 2")
        ab_rows.append(f"| {row} | {len(ours)} | {fmt_ns(statistics.median(direct)) if direct else '(passed through)'} | "
                       f"{spread(added)} | {spread(passing) if passing else '—'} | {spread(floor) if floor else '—'} | "
                       f"≤ {TARGET[pat]:.0f}% | {verdict} |")
        raw[f"{row} | in-process"] = {"cumemaudit": ours, "floor": in_process.get((row, "floor"), [])}

    # Between processes: what a user measures.
    head = ["pattern", "rounds", "plain (median)", "forward-only adds", "floor adds", "cumemaudit adds",
            "cumemaudit − floor (of plain)", "target", "verdict"]
    head += [x for label in also for x in (f"{label} adds", f"{label} − cumemaudit (of plain)")]
    rows = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for row, pat, *_ in call_rows + torch_rows:
        plain = per_round.get((row, "plain"), [])
        if not plain:
            rows.append(f"| {row} | 0 | — | — | — | — | — | — | no data |" + " — |" * (2 * len(also)))
            continue
        cells = [row, str(len(plain)), fmt_ns(statistics.median(plain))]
        interval = {}
        for mode in ("forward-only", "floor", "cumemaudit", *also):
            fig = per_round.get((row, mode), [])
            n = min(len(fig), len(plain))
            if n < 1:
                continue
            added = [fig[i] / plain[i] - 1 for i in range(n)]  # the same round: interleaved, so drift cancels
            interval[mode] = bootstrap_median(added)
            raw[f"{row} | {mode}"] = {"figures_ns": fig, "plain_ns": plain, "ratios": [x + 1 for x in added]}
            if (row, mode) in processes:
                raw[f"{row} | {mode}"]["processes_ns"] = processes[(row, mode)]
        def difference(mode, base):  # (mode − base) of plain, round by round
            ours, other = per_round.get((row, mode), []), per_round.get((row, base), [])
            n = min(len(ours), len(other), len(plain))
            return bootstrap_median([(ours[i] - other[i]) / plain[i] for i in range(n)]) if n else None

        def cell(interval):
            return "{:+.1%} [{:+.1%}..{:+.1%}]".format(*interval) if interval else "—"
        cells += [cell(interval.get(mode)) for mode in ("forward-only", "floor", "cumemaudit")]
        excess = difference("cumemaudit", "floor")
        what, limit = BETWEEN_TARGET[pat]
        judged = excess if what == "excess" else interval.get("cumemaudit")
        cells += [cell(excess), f"{'floor' if what == 'excess' else ''} +{100 * limit:g}%".strip(),
                  judge(judged[1], judged[2], limit) if judged else "no data"]
        for label in also:
            cells += [cell(interval.get(label)), cell(difference(label, "cumemaudit"))]
        rows.append("| " + " | ".join(cells) + " |")
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    _, smi, _ = sh(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], {}, 30)
    head = (f"cumemaudit cost, {when}, {smi.strip() or 'GPU unknown'}; {rounds_done} rounds, every process pinned "
            f"to cores {a.cores}{' (a call row: its threads plus one of them)' if a.pin_rows else ''}; iterations per thread and block: async 20000/5000/2000 at 1/4/16 threads, batch "
            f"20000, vmm 2000 (x{a.iters_scale}); {a.torch_steps} torch steps per process")
    table = (head + f"\n\nInside one process (iteration by iteration, direct against the preloaded library's entry "
             f"points, in {a.blocks} blocks recorded and {a.blocks} passing through; per process the median of the "
             "per-block ratios; the torch row alternates steps recorded and passed through):\n\n" + "\n".join(ab_rows) +
             "\n\nBetween processes (plain, forward-only, minimal recorder, cumemaudit, each its own process, "
             f"order rotated; per round the fastest of {a.processes} processes, each the median of {a.blocks} runs "
             f"(a PyTorch row: the fastest of {a.torch_processes}, each its median step); the median of the per-round "
             "ratios to plain "
             "[95% bootstrap interval]; a verdict only where the interval is on one side of the target):\n\n"
             + "\n".join(rows) + "\n")
    if failures:
        table += "\nFailures:\n" + "\n".join(f"- {f}" for f in failures) + "\n"
    print(table)
    with open(os.path.join(out, "cost.md"), "w") as f:
        f.write(table)
    with open(os.path.join(out, "cost.json"), "w") as f:
        state = {"rounds": rounds_done, "failures": failures, "pin_rows": a.pin_rows,
                 "processes_per_round": a.processes, "torch_processes": a.torch_processes, "also": list(also),
                 "rows": [row for row, *_ in call_rows + torch_rows],
                 "per_round": [[row, mode, v] for (row, mode), v in per_round.items()],
                 "processes": [[row, mode, v] for (row, mode), v in processes.items()],
                 "in_process": [[row, mode, v] for (row, mode), v in in_process.items()]}
        json.dump({"when": when, "rounds": rounds_done, "blocks": a.blocks, "cores": a.cores, "raw": raw,
                   "failures": failures, "state": state}, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
