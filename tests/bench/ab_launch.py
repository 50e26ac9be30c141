#!/usr/bin/python3
"""What a call costs with two builds of the shim, side by side: one of bench_calls' patterns (a kernel launch
by default; one thread, the lock-free null driver) in separate processes, plain and under each shim, the order
shuffled each round, pinned to one core; per-round differences and their median.

  ab_launch.py BUILD BEFORE_SHIM AFTER_SHIM [--rounds 9] [--pattern launch|alloc_free|async|...]
  (BUILD: a build directory, for bench_calls and the null driver; the shims: two libcumemaudit.so)"""
import argparse
import os
import random
import re
import statistics
import subprocess
import tempfile

p = argparse.ArgumentParser()
p.add_argument("build")
p.add_argument("before")
p.add_argument("after")
p.add_argument("--rounds", type=int, default=9)
p.add_argument("--pattern", default="launch")
a = p.parse_args()
bench = f"{a.build}/tests/bench/bench_calls"
null = f"{a.build}/tests/bench/nulldrv"
reports = tempfile.mkdtemp()
shims = {"plain": None, "before": a.before, "after": a.after}
res = {k: [] for k in shims}
for rnd in range(a.rounds):
    order = list(shims); random.shuffle(order)
    for k in order:
        env = {kk: v for kk, v in os.environ.items() if kk not in ("LD_PRELOAD",)}
        env["LD_LIBRARY_PATH"] = null
        env["CUMEMAUDIT_OPTIONS"] = f"summary=0:fail_on=none:report_dir={reports}"
        if shims[k]: env["LD_PRELOAD"] = shims[k]
        out = subprocess.run(["taskset", "-c", "0", bench, "--child", "--patterns", a.pattern, "--threads", "1", "--iters", "2000000", "--repeats", "3", "--median"],
                             env=env, capture_output=True, text=True).stdout
        m = re.search(rf"RESULT {a.pattern} 1 ([\d.]+)", out)
        res[k].append(float(m.group(1)) if m else float("nan"))
for k, v in res.items(): print(k, f"median ns/{a.pattern}", round(statistics.median(v), 2), [round(x, 2) for x in v])
d = [a - b for a, b in zip(res["after"], res["before"])]
print("after - before per round (ns):", round(statistics.median(d), 2), [round(x, 2) for x in d])
