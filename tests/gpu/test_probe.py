#!/usr/bin/env python3
"""The misuse probe against docs/DRIVER.md's table of misuse answers: run on the simulated driver, every case
must print the table's "simulated" answer, and where the H200 answer is measured, the two must agree.

Usage: test_probe.py MISUSE_PROBE DRIVER_MD   (the simulated libcuda.so.1 first on LD_LIBRARY_PATH)"""
import re
import subprocess
import sys

probe, doc = sys.argv[1], sys.argv[2]
section = open(doc).read().split("## Misuse answers", 1)[1].split("\n## ", 1)[0]
# The H200 column: a measured answer, `pending`, or `modelled` (never run on the real driver: multicast).
table = {m[0]: (m[1], m[2]) for m in re.findall(r"^\| `(\w+)` \| `(\w+)` \| (`\w+`|pending|modelled) \|", section, re.M)}
out = subprocess.run([probe], capture_output=True, text=True, timeout=60).stdout
got = dict(re.findall(r"^probe (\w+) (\S+)$", out, re.M))
failures = []
for case, (sim, h200) in table.items():
    if got.get(case) != sim:
        failures.append(f"{case}: the simulated driver answers {got.get(case)}, docs/DRIVER.md says {sim}")
    if h200 not in ("pending", "modelled") and h200.strip("`") != sim:
        failures.append(f"{case}: docs/DRIVER.md has the H200 answer {h200} but the simulated one {sim}")
failures += [f"{case}: probed but missing from docs/DRIVER.md" for case in got if case not in table]
if not table:
    failures.append(f"no misuse table found in {doc}")
print("\n".join(failures) or f"{len(table)} misuse answers agree with docs/DRIVER.md")
sys.exit(1 if failures else 0)
