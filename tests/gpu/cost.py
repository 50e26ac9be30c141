#!/usr/bin/env python3
"""What the shim costs on a GPU, measured so that a few percent can be told from noise (issue 18).

Three ways of running the same binary, interleaved round by round (the order rotates), every process pinned
to the same cores: plain; under cumemaudit (`cumemaudit run`, default options); under the minimal recorder
(tests/bench/floor's libminrec.so: one open-addressing slot and a per-thread counter per allocation, the
floor of any recorder). Per round, each figure is the median of the child's repeats; a pattern's result is
the median over rounds and the spread (min..max) of the per-round ratios audited/plain. Patterns:

  async 1/4/16 threads   cuMemAllocAsync + cuMemFreeAsync, 4 KiB, null stream       (bench_calls --child)
  batch                  cuMemAlloc 4 KiB x2000, then cuMemFree x2000              (bench_calls --child)
  vmm                    cuMemCreate+Map+SetAccess+Unmap+Release, 2 MiB            (bench_calls --child)
  torch step             a training step with PYTORCH_NO_CUDA_MEMORY_CACHING=1     (torch_workloads.py train)
                         (plain vs cumemaudit only: PyTorch reaches the driver through cuGetProcAddress,
                         which the minimal recorder does not interpose)

  python3 tests/gpu/cost.py --build BUILD [--out DIR] [--rounds 7] [--cores 0-15] [--budget-s 360]
                            [--iters-scale N] [--torch-steps 400]

Needs the build's bench_calls, libminrec.so and cumemaudit CLI (carry the build dir), a GPU, PyTorch.
Prints a markdown table and writes cost.md and cost.json into --out. Rounds stop early when the budget
(seconds) would be exceeded; the table says how many rounds each row got.
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

CALL_ROWS = [  # (row name, bench pattern, threads, calls per pair/cycle, iterations per thread per repeat)
    ("cuMemAllocAsync+cuMemFreeAsync 4 KiB, 1 thread", "async", 1, 2, 20000),
    ("cuMemAllocAsync+cuMemFreeAsync 4 KiB, 4 threads", "async", 4, 2, 5000),
    ("cuMemAllocAsync+cuMemFreeAsync 4 KiB, 16 threads", "async", 16, 2, 2000),
    ("cuMemAlloc 4 KiB x2000 then cuMemFree x2000 (per pair)", "batch", 1, 2, 20000),
    ("VMM create+map+access+unmap+release 2 MiB (per cycle)", "vmm", 1, 5, 2000),
]
TORCH_ROW = "PyTorch training step, PYTORCH_NO_CUDA_MEMORY_CACHING=1"
TARGET = {"async": 10.0, "batch": 5.0, "vmm": 2.0, "torch": 1.0}  # issue 18: at most this many % added


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
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--cores", default="0-15", help="taskset -c list every process is pinned to")
    ap.add_argument("--budget-s", type=float, default=360)
    ap.add_argument("--iters-scale", type=int, default=1, help="multiplies every pattern's iterations")
    ap.add_argument("--torch-steps", type=int, default=400)
    ap.add_argument("--no-torch", action="store_true", help="leave the PyTorch row out (a dry run without a GPU)")
    a = ap.parse_args()
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
    report_dir = tempfile.mkdtemp(prefix="cumemaudit-cost-reports-")
    audited = [cli, "run", "--report-dir", report_dir, "--fail-on", "none", "--"]
    quiet = {"CUMEMAUDIT_OPTIONS": "summary=0"}
    modes = {"plain": ([], {}), "cumemaudit": (audited, quiet), "floor": ([], {"LD_PRELOAD": floor})}

    started = time.time()
    per_round = {}  # (row, mode) -> [figure per round]
    failures = []
    rounds_done = 0
    round_s = 0.0
    for r in range(a.rounds):
        if r > 0 and time.time() - started + round_s > a.budget_s:
            break
        t0 = time.time()
        order = list(modes)[r % 3:] + list(modes)[:r % 3]
        for mode in order:
            prefix, env = modes[mode]
            for row, pat, threads, calls, iters in CALL_ROWS:
                cmd = pin + prefix + [bench, "--child", "--patterns", pat, "--threads", str(threads),
                                      "--iters", str(iters * a.iters_scale), "--repeats", "5", "--depth", "40", "--median"]
                rc, so, se = sh(cmd, env, 120)
                m = re.search(rf"^RESULT {pat} {threads} ([\d.]+)$", so, re.M)
                if rc != 0 or not m:
                    failures.append(f"{mode} {pat} {threads}T: rc {rc}: {se[-300:]}")
                else:
                    per_round.setdefault((row, mode), []).append(float(m.group(1)) * calls)
        for mode in order:
            if mode == "floor" or a.no_torch:
                continue
            prefix, env = modes[mode]
            wl = [sys.executable, os.path.join(HERE, "torch_workloads.py"), "train", "--steps", str(a.torch_steps)]
            rc, so, se = sh(pin + prefix + wl, {**env, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}, 180)
            m = re.search(r"step_median_us=([\d.]+)", so)
            if rc != 0 or not m:
                failures.append(f"{mode} torch: rc {rc}: {se[-300:]}")
            else:
                per_round.setdefault((TORCH_ROW, mode), []).append(float(m.group(1)) * 1000)
        rounds_done += 1
        round_s = time.time() - t0
        print(f"round {r + 1} done in {round_s:.0f}s", flush=True)

    def fmt_ns(ns):
        return f"{ns / 1000:.2f} µs" if ns >= 10000 else f"{ns:.0f} ns"

    rows = ["| pattern | rounds | plain (median) | cumemaudit | added (median; pairwise spread) | floor | added | target | verdict |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    raw = {}
    for row, pat, *_ in CALL_ROWS + [(TORCH_ROW, "torch", 0, 0, 0)]:
        plain = per_round.get((row, "plain"), [])
        if not plain:
            rows.append(f"| {row} | 0 | — | — | — | — | — | — | no data |")
            continue
        cells = [row, str(len(plain)), fmt_ns(statistics.median(plain))]
        verdict = ""
        for mode in ("cumemaudit", "floor"):
            fig = per_round.get((row, mode), [])
            n = min(len(fig), len(plain))
            if n == 0:
                cells += ["—", "—"]
                continue
            ratios = [fig[i] / plain[i] for i in range(n)]  # the same round: interleaved, so drift cancels
            med = (statistics.median(ratios) - 1) * 100
            lo, hi = (min(ratios) - 1) * 100, (max(ratios) - 1) * 100
            cells += [fmt_ns(statistics.median(fig)), f"{med:+.1f}% ({lo:+.1f}..{hi:+.1f})"]
            raw[f"{row} | {mode}"] = {"figures_ns": fig, "plain_ns": plain, "ratios": ratios}
            if mode == "cumemaudit":
                spread = hi - lo
                target = TARGET[pat]
                verdict = ("meets" if med <= target else f"misses by {med - target:.1f} pt") + \
                          ("" if spread < 2.0 else f"; spread {spread:.1f} pt ≥ 2: add rounds")
        cells += [f"≤ {TARGET[pat]:.0f}%", verdict]
        rows.append("| " + " | ".join(cells) + " |")
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    _, smi, _ = sh(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], {}, 30)
    head = (f"cumemaudit cost, {when}, {smi.strip() or 'GPU unknown'}; {rounds_done} interleaved rounds "
            f"(plain, cumemaudit, minimal recorder; order rotated), pinned to cores {a.cores}; per round the median "
            f"of 5 repeats (iterations per thread: async 20000/5000/2000 at 1/4/16 threads, batch 20000, vmm 2000, "
            f"x{a.iters_scale}) or of {a.torch_steps} torch steps; added = median of "
            f"the per-round ratios, with their min..max")
    table = head + "\n\n" + "\n".join(rows) + "\n"
    if failures:
        table += "\nFailures:\n" + "\n".join(f"- {f}" for f in failures) + "\n"
    print(table)
    with open(os.path.join(out, "cost.md"), "w") as f:
        f.write(table)
    with open(os.path.join(out, "cost.json"), "w") as f:
        json.dump({"when": when, "rounds": rounds_done, "cores": a.cores, "raw": raw, "failures": failures}, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
