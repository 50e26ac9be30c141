#!/usr/bin/env python3
"""The pooled allocator under the auditor, on the simulated driver: examples/deepep_pool (the DeepEP
sequence ported onto the pool) runs under `cumemaudit run --sim` exactly as tests/sim/audit/audit_common.py
runs programs, and its JSON report must show zero leaks, zero misuse, exit 0, for either handle kind.

With `adapter` as a second argument the program runs DeepEP's own release-and-reallocate sequence through
PoolFabricAllocator (deepep_pool --adapter): the same clean report, and the same peak, since each larger
buffer reuses the chunks the smaller ones gave back.

Usage: test_pool_audit.py fabric|posix [adapter]   (paths from the environment meson sets: CLI, DEEPEP_POOL)."""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

CLI = os.environ["CLI"]
DEEPEP_POOL = os.environ["DEEPEP_POOL"]
MiB = 1 << 20
STEPS, SIZE_MIB = 3, 64


def fail(what):
    print(f"FAIL: {what}", file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) not in (2, 3) or sys.argv[1] not in ("fabric", "posix") or sys.argv[2:] not in ([], ["adapter"]):
        print(f"usage: {sys.argv[0]} fabric|posix [adapter]", file=sys.stderr)
        return 2
    handle = sys.argv[1]
    extra = ["--adapter"] if sys.argv[2:] == ["adapter"] else []
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [CLI, "run", "--sim", "--report-dir", tmp, "--",
               DEEPEP_POOL, "--handle", handle, "--steps", str(STEPS), "--size-mib", str(SIZE_MIB), *extra]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            fail(f"{' '.join(cmd)}: exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
        m = re.search(r"drop=(-?\d+)", proc.stdout)
        if m is None or int(m.group(1)) != 0:
            fail(f"cuMemGetInfo must end where it started:\n{proc.stdout}")
        files = glob.glob(os.path.join(tmp, "cumemaudit.*.json"))
        if len(files) != 1:
            fail(f"expected one report, found {files}")
        rep = json.load(open(files[0]))
        s = rep["summary"]
        if rep["leaks"] != [] or s["leaked_bytes"] != 0 or s["leaked_references"] != 0:
            fail(f"leaks: {s} {rep['leaks']}")
        if rep["misuse"] != [] or s["misuse_events"] != 0:
            fail(f"misuse: {rep['misuse']}")
        if s["unfreed_bytes"] != 0 or s.get("mapped_at_exit_bytes", 0) != 0:
            fail(f"left at exit: {s}")
        # The buffer grew in place to STEPS * SIZE_MIB; the peer's imports are of the same memory.
        if s["peak_tracked_bytes"] != STEPS * SIZE_MIB * MiB:
            fail(f"peak_tracked_bytes {s['peak_tracked_bytes']}, expected {STEPS * SIZE_MIB * MiB}")
        # Every driver call the pool counted went through the auditor.
        pool_calls = sum(int(n) for n in re.findall(r"\bcu\w+=(\d+)", proc.stdout.split("driver calls:")[1].splitlines()[0]))
        if s["intercepted_calls"] < pool_calls:
            fail(f"intercepted_calls {s['intercepted_calls']} < the pool's own count {pool_calls}")
        if "SUMMARY: cumemaudit: 0 bytes leaked in 0 allocations" not in proc.stderr:
            fail(f"no clean SUMMARY line:\n{proc.stderr}")
    print(f"ok {handle}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
