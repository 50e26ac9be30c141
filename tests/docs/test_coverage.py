#!/usr/bin/env python3
"""docs/COVERAGE.md's first table lists exactly the entry points of the hook table (by the "api" name each
row reports), and its second table (not yet modelled) names none of them.

Usage: test_coverage.py SOURCE_ROOT"""
import os
import re
import sys

root = sys.argv[1]
hooks = open(os.path.join(root, "src", "shim", "boundary", "hooks.inc")).read()
apis = set(re.findall(r"^DRIVER_HOOK\(\w+, \w+, \"(\w+)\"", hooks, re.M))
apis |= set(re.findall(r"^RUNTIME_HOOK\(\w+, \"(\w+)\"", hooks, re.M))
doc = open(os.path.join(root, "docs", "COVERAGE.md")).read()
covered_part, _, missing_part = doc.partition("## Not yet modelled")
covered_part = covered_part.partition("## Covered")[2]


def first_cells(part):
    names = set()
    for line in part.splitlines():
        if line.startswith("| `"):
            names |= set(re.findall(r"`(cu\w+)`", line.split(" | ")[0]))
    return names


covered, missing = first_cells(covered_part), first_cells(missing_part)
failures = [f"{a}: in hooks.inc, not in docs/COVERAGE.md's covered table" for a in sorted(apis - covered)]
failures += [f"{a}: in docs/COVERAGE.md's covered table, not in hooks.inc" for a in sorted(covered - apis)]
failures += [f"{a}: wrapped, yet listed as not yet modelled" for a in sorted(missing & apis)]
if not apis:
    failures.append("no rows read from hooks.inc")
print("\n".join(failures) or f"{len(apis)} entry points agree with docs/COVERAGE.md")
sys.exit(1 if failures else 0)
