#!/usr/bin/env python3
"""docs/COVERAGE.md's first table lists exactly the entry points of the hook table (by the "api" name each
row reports), and its second table (not yet modelled) names none of them. Every row of the first table says
what tests it (files that exist, or "none yet"), and every file docs/TESTING.md's feature table names exists.

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

def tested_by_failures(doc_name, part, column):
    """Rows of a table whose cell `column` (counted from the right) names no test, or a path that is not there."""
    failures, rows = [], 0
    for line in part.splitlines():
        if not line.startswith("| ") or line.startswith("| ---") or not line.endswith(" |"):
            continue
        cells = [c.strip() for c in line[2:-2].split(" | ")]
        if cells[0] in ("entry point", "feature"):
            continue
        rows += 1
        cell = cells[-column]
        paths = re.findall(r"`(tests/[^`]*)`", cell)
        if not paths and cell != "none yet":
            failures.append(f"{doc_name}: row {cells[0]!r} names no test: {cell!r}")
        failures += [f"{doc_name}: row {cells[0]!r} names {p}, which does not exist" for p in paths
                     if not os.path.exists(os.path.join(root, p))]
    if rows == 0:
        failures.append(f"{doc_name}: no rows read")
    return failures


failures += tested_by_failures("docs/COVERAGE.md", covered_part, 1)
testing = open(os.path.join(root, "docs", "TESTING.md")).read().partition("## Which tests cover a feature")[2]
failures += tested_by_failures("docs/TESTING.md", testing, 2)
if not apis:
    failures.append("no rows read from hooks.inc")
print("\n".join(failures) or f"{len(apis)} entry points agree with docs/COVERAGE.md")
sys.exit(1 if failures else 0)
