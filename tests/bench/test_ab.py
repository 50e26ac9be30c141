#!/usr/bin/env python3
"""bench_calls --ab, the in-process comparison tests/gpu/cost.py relies on, checked on the simulated driver:
its entry points do what the comparison assumes (ab_probe: a passed-through allocation is not recorded, the
"real" entry point is the driver's; the one recorded allocation is the only one unfreed at exit), and a full --ab child under the shim leaves a balanced ledger (no leak,
no misuse, although a third of its blocks pass through) and prints its AB lines. Under the minimal recorder
the same child runs too. Figures are printed, never asserted.

Run by meson (tests/bench/meson.build) with whichever python3 meson found."""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

SHIM, SIM, FLOOR = os.environ["CUMEMAUDIT_SHIM"], os.environ["CUMEMAUDIT_SIM_DIR"], os.environ["CUMEMAUDIT_FLOOR"]
PROBE, BENCH = os.environ["AB_PROBE"], os.environ["BENCH_CALLS"]


def run(cmd, preload, report_dir):
    env = {**os.environ, "LD_LIBRARY_PATH": SIM, "LD_PRELOAD": preload,
           "CUMEMAUDIT_OPTIONS": f"report_dir={report_dir}:summary=0:fail_on=none:checkpoint_s=0"}
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def report(report_dir):
    files = glob.glob(os.path.join(report_dir, "cumemaudit.*.json"))
    if len(files) != 1:
        raise SystemExit(f"FAIL: expected one report in {report_dir}, found {files}")
    with open(files[0]) as f:
        return json.load(f)


def main():
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "probe")
        p = run([PROBE], SHIM, d)
        if p.returncode != 0:
            return print(f"FAIL: ab_probe exit {p.returncode}\n{p.stdout}{p.stderr}", file=sys.stderr) or 1
        where = re.search(r"^real cuMemAlloc_v2 in (.+)$", p.stdout, re.M)
        if not where or os.path.realpath(os.path.dirname(where.group(1))) != os.path.realpath(SIM):
            problems.append(f"the real entry point is not the simulated driver's:\n{p.stdout}")
        if "not wrapped: null" not in p.stdout:
            problems.append(f"an entry point the shim does not wrap got an address:\n{p.stdout}")
        s = report(d)["summary"]
        if (s["unfreed_bytes"], s["unfreed_allocations"], s["peak_tracked_bytes"]) != (2 << 20, 1, 2 << 20):
            problems.append(f"expected only the recorded 2 MiB allocation unfreed at exit (and as the peak), got "
                            f"{s['unfreed_bytes']} bytes in {s['unfreed_allocations']} allocations, peak "
                            f"{s['peak_tracked_bytes']}")

        d = os.path.join(tmp, "ab")
        cmd = [BENCH, "--child", "--ab", "--patterns", "async,batch,vmm", "--threads", "1,2", "--iters", "2000",
               "--blocks", "3", "--depth", "8"]
        p = run(cmd, SHIM, d)
        lines = re.findall(r"^AB (\w+) (\d+) .*$", p.stdout, re.M)
        if p.returncode != 0 or len(lines) != 6:
            problems.append(f"bench_calls --ab under the shim: exit {p.returncode}, {len(lines)} AB lines\n{p.stdout}{p.stderr}")
        else:
            s = report(d)["summary"]
            if s["unfreed_bytes"] or s["leaked_bytes"] or s["misuse_events"] or s["live_bytes"]:
                problems.append(f"the ledger is not balanced after --ab: {s}")
        print(p.stdout, end="")
        p = run(cmd, FLOOR, os.path.join(tmp, "floor"))
        if p.returncode != 0 or len(re.findall(r"^AB ", p.stdout, re.M)) != 6:
            problems.append(f"bench_calls --ab under the minimal recorder: exit {p.returncode}\n{p.stdout}{p.stderr}")
    if problems:
        print("FAIL\n" + "\n".join(problems), file=sys.stderr)
        return 1
    print("ok: passed-through calls are not recorded, the real entry point is the driver's, the ledger balances")
    return 0


if __name__ == "__main__":
    sys.exit(main())
