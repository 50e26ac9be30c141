#!/usr/bin/env python3
"""The shim stacked with another interposer, in either LD_PRELOAD order, on the simulated driver: the
program's results are unchanged, the other interposer still sees every call it hooks, and the report holds
exactly what it holds without the other one: bytes, API and line of each allocation.

Usage: test_coexist.py CASE (paths come from the environment meson sets)."""
import glob
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from cases import expect, main, named_cases  # noqa: E402

SHIM, SIM = os.environ["CUMEMAUDIT_SHIM"], os.environ["CUMEMAUDIT_SIM_DIR"]
MiB = 1 << 20


def line_of(path, marker):
    for number, text in enumerate(open(path), 1):
        if f"// site:{marker}" in text:
            return number
    raise AssertionError(marker)


def run(tmp, program, preload, counts_var):
    counts = os.path.join(tmp, "counts")
    env = {**os.environ, "LD_PRELOAD": ":".join(preload), "LD_LIBRARY_PATH": SIM, counts_var: counts,
           "CUMEMAUDIT_OPTIONS": f"report_dir={tmp}:summary=0"}
    proc = subprocess.run([program], capture_output=True, text=True, env=env, timeout=60)
    reports = glob.glob(os.path.join(tmp, "cumemaudit.*.json"))
    seen = dict(re.findall(r"(\w+)=(\d+)", open(counts).read())) if os.path.exists(counts) else {}
    return proc, ([json.load(open(f)) for f in reports]), {k: int(v) for k, v in seen.items()}


def unfreed(rep):
    return sorted((l["site"]["api"], l["bytes"], l["site"]["frames"][0]["line"]) for l in rep["leaks"] if l["class"] == "unfreed")


def check_hami(tmp, shim_first):
    user = os.environ["COEXIST_USER"]
    hami = os.environ["HAMI_LIKE"]
    alone_dir, both_dir = os.path.join(tmp, "alone"), os.path.join(tmp, "both")
    os.makedirs(alone_dir)
    os.makedirs(both_dir)
    alone, _, alone_seen = run(alone_dir, user, [hami], "HAMI_LIKE_COUNTS")
    expect(alone.returncode == 0, f"without the shim: exit {alone.returncode}\n{alone.stderr}")
    expect(alone_seen == {"allocs": 4, "frees": 1, "lookups": 1}, f"the stand-in alone saw {alone_seen}")
    both, reps, seen = run(both_dir, user, [SHIM, hami] if shim_first else [hami, SHIM], "HAMI_LIKE_COUNTS")
    expect((both.returncode, both.stdout) == (alone.returncode, alone.stdout),
           f"with the shim: exit {both.returncode}, stdout {both.stdout!r}\n{both.stderr}")
    expect(seen == alone_seen, f"with the shim the stand-in saw {seen}, alone {alone_seen}")
    warning = (f"cumemaudit warning: {hami} overrides dlsym and comes before libcumemaudit.so in LD_PRELOAD: the CUDA "
               "calls it forwards through its own table reach the driver unaudited; put libcumemaudit.so first")
    if not shim_first:
        # Its table of entry points came from the loader's dlsym on libcuda.so.1: no allocation reaches the
        # shim (only the program's own context retain does), and the one line says so and what to do.
        expect(warning in both.stderr and all(not r["leaks"] and r["summary"]["live_bytes"] == 0 for r in reps),
               f"reports {reps}, stderr:\n{both.stderr}")
        return
    expect(warning not in both.stderr, f"stderr:\n{both.stderr}")
    expect(len(reps) == 1, f"reports: {len(reps)}\n{both.stderr}")
    src = os.path.join(os.environ["SOURCE_ROOT"], "tests", "coexist", "coexist_user.cpp")
    want = sorted([("cuMemAlloc", 1 * MiB, line_of(src, "direct")), ("cuMemAlloc", 2 * MiB, line_of(src, "dlsym")),
                   ("cuMemAlloc", 3 * MiB, line_of(src, "procaddress"))])
    expect(unfreed(reps[0]) == want, f"unfreed rows {unfreed(reps[0])}, expected {want}")
    expect(reps[0]["misuse"] == [], f"misuse: {reps[0]['misuse']}")


def check_tms(tmp, shim_first):
    user = os.environ["RUNTIME_USER"]
    tms = os.environ["TMS_LIKE"]
    alone_dir, both_dir = os.path.join(tmp, "alone"), os.path.join(tmp, "both")
    os.makedirs(alone_dir)
    os.makedirs(both_dir)
    alone, _, alone_seen = run(alone_dir, user, [tms], "TMS_LIKE_COUNTS")
    expect(alone.returncode == 0 and alone_seen == {"mallocs": 2, "frees": 1}, f"alone: exit {alone.returncode}, saw {alone_seen}")
    both, reps, seen = run(both_dir, user, [SHIM, tms] if shim_first else [tms, SHIM], "TMS_LIKE_COUNTS")
    expect((both.returncode, both.stdout) == (alone.returncode, alone.stdout), f"with the shim: exit {both.returncode}\n{both.stderr}")
    expect(seen == alone_seen, f"with the shim the stand-in saw {seen}, alone {alone_seen}")
    expect(len(reps) == 1, f"reports: {len(reps)}\n{both.stderr}")
    src = os.path.join(os.environ["SOURCE_ROOT"], "tests", "sim", "audit", "runtime_user.cpp")
    rows = [r for r in unfreed(reps[0]) if r[0] == "cudaMalloc"]
    expect(rows == [("cudaMalloc", 6 * MiB, line_of(src, "runtime_leak"))], f"cudaMalloc rows {unfreed(reps[0])}")


def case_hami_first(tmp):
    """HAMi-core's way ahead of the shim in LD_PRELOAD: its hooks call libcuda.so.1 through a table its own
    dlsym lookup filled (dlvsym finds the loader's dlsym, never the shim's), so no call reaches the shim. The
    program and the stand-in are undisturbed, and one warning line says what happened and what to do."""
    check_hami(tmp, shim_first=False)


def case_hami_second(tmp):
    """The shim first (as `cumemaudit run` puts it): its wrappers forward to the next definition, the
    stand-in's hooks, and the program's dlsym look-ups go on to the stand-in's dlsym. Before, the shim
    looked entry points up with the loader's dlsym from the start, so the stand-in never saw a call."""
    check_hami(tmp, shim_first=True)


def case_tms_first(tmp):
    """torch_memory_saver's way ahead of the shim: cudaMalloc over the runtime's, reached through
    dlsym(RTLD_NEXT). Before, that first dlsym(RTLD_NEXT) came through the shim before it had found the
    loader's and was answered relative to the shim: the stand-in got its own cudaMalloc back and spun."""
    check_tms(tmp, shim_first=False)


def case_tms_second(tmp):
    check_tms(tmp, shim_first=True)


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
