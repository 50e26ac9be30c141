#!/usr/bin/env python3
"""between.py's own check: what a reader of its table relies on. A short run (3 rounds) with --rows and --also
keeps only the rows asked for, runs the variant in the same rounds as the four fixed modes (its figures sit
beside them in every round), and reports the variant's added time and its excess over the floor with an
interval; a malformed --rows or --also is refused with a message naming it, before anything runs. Figures
are printed, never asserted.

Run by meson (tests/bench/meson.build) with whichever python3 meson found."""
import json
import os
import subprocess
import sys
import tempfile

BETWEEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "between.py")
SHIM = os.environ["CUMEMAUDIT_SHIM"]


def between(*args):
    return subprocess.run([sys.executable, BETWEEN, *args], capture_output=True, text=True, timeout=600)


def main():
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "figures.json")
        p = between("--rounds", "3", "--iters", "2000", "--repeats", "1", "--rows", "async:1,alloc_free",
                    "--also", f"same-shim={SHIM}", "--json", out)
        print(p.stdout)
        if p.returncode != 0:
            sys.exit(f"FAIL: between.py exited {p.returncode}\n{p.stderr[-2000:]}")
        with open(out) as f:
            got = json.load(f)
        rows = [r["row"] for r in got["rows"]]
        if rows != ["cuMemAllocAsync+cuMemFreeAsync 4 KiB, 1 thread", "cuMemAlloc+cuMemFree 4 KiB"]:
            problems.append(f"--rows async:1,alloc_free kept {rows}")
        modes = ["plain", "forward-only", "floor", "cumemaudit", "same-shim"]
        if sorted(got["figures"]) != sorted(modes):
            problems.append(f"modes measured: {sorted(got['figures'])}, expected {modes}")
        for mode in modes:
            rounds = got["figures"].get(mode, [])
            if len(rounds) != 3 or any(sorted(r) != ["alloc_free 1", "async 1"] for r in rounds):
                problems.append(f"{mode}: every one of the 3 rounds should hold both rows, got {rounds}")
        for r in got["rows"]:
            variant = r.get("same-shim", {})
            if not {"added", "low", "high", "added_ns", "excess"} <= set(variant):
                problems.append(f"{r['row']}: the variant's entry lacks figures: {variant}")
            elif not variant["excess"]["low"] <= variant["excess"]["median"] <= variant["excess"]["high"]:
                problems.append(f"{r['row']}: the variant's interval does not hold its median: {variant['excess']}")
        if "same-shim - floor (of plain)" not in p.stdout:
            problems.append("the table has no column for the variant's excess")

        for args, says in [(["--rows", "nosuch"], "--rows nosuch: no row matches"),
                           (["--also", "floor=" + SHIM], "--also floor=" + SHIM + ": expected LABEL=LIBRARY with a new label"),
                           (["--also", "x=" + os.path.join(tmp, "missing.so")], "missing.so: no such file"),
                           (["--also", "novalue"], "--also novalue: expected LABEL=LIBRARY")]:
            p = between("--rounds", "3", *args)
            if p.returncode != 2 or says not in p.stderr:
                problems.append(f"between.py {' '.join(args)}: exit {p.returncode}, stderr {p.stderr.strip()[-300:]!r}; "
                                f"expected exit 2 saying {says!r}")
    if problems:
        sys.exit("FAIL:\n  " + "\n  ".join(problems))
    print("PASS: between.py keeps the rows asked for and measures a variant in the same rounds")


if __name__ == "__main__":
    main()
