#!/usr/bin/env python3
"""Misuse with the driver's answers, and a handle value created again (misuse.cpp).

Usage: misuse_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import sys
import tempfile

from audit_common import (SCENARIOS, MiB, REAL, run, only_report, marker_line, leaks_by_api, top_frame, drop_of,
    source, expect)
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("misuse.cpp")


def case_misuse(tmp):
    run([SCENARIOS, "misuse"], tmp, rc=0)
    rep = only_report(tmp)
    rows = {(m["api"], m["result"]): m for m in rep["misuse"]}
    expect(set(rows) == {("cuMemRelease", "CUDA_ERROR_INVALID_VALUE"), ("cuMemAddressFree", "CUDA_ERROR_INVALID_VALUE"),
                         ("cuMemMap", "CUDA_ERROR_INVALID_VALUE")},
           f"misuse rows: {rep['misuse']}")
    expect(rep["summary"]["misuse_events"] == 3, f"misuse_events {rep['summary']['misuse_events']}")
    # A successful map keeps no site (the allocation keeps its create's); a refused one is captured whole.
    for api, marker in (("cuMemRelease", "double_release"), ("cuMemAddressFree", "free_mapped"),
                        ("cuMemMap", "map_onto_mapped")):
        row = rows[(api, "CUDA_ERROR_INVALID_VALUE")]
        frame = row["site"]["frames"][0]
        expect(frame["line"] == marker_line(SRC, marker), f"{api}: line {frame['line']}")
    expect(rows[("cuMemMap", "CUDA_ERROR_INVALID_VALUE")]["what"] == "map onto a mapped range",
           f"the refused map: {rows[('cuMemMap', 'CUDA_ERROR_INVALID_VALUE')]}")
    expect(rep["leaks"] == [], f"no leaks expected: {rep['leaks']}")
    # misuse does not fail the default gate, fail_on=misuse does
    tmp2 = tempfile.mkdtemp(dir=tmp)
    run([SCENARIOS, "misuse"], tmp2, flags=["--fail-on", "misuse"], rc=23)


def case_reuse(tmp):
    proc = run([SCENARIOS, "reuse"], tmp, rc=23)
    # The simulated driver always hands the value out again; the H200's driver did not in this sequence
    # (tests/gpu/RESULTS.md): either way the leak must be the second creation's.
    expect(REAL or "same_value=1" in proc.stdout, f"the simulated driver reuses handle values: {proc.stdout}")
    rep = only_report(tmp)
    rows = leaks_by_api(rep)
    expect(list(rows) == ["cuMemCreate"] and rows["cuMemCreate"]["bytes"] == 2 * MiB, f"leaks: {rep['leaks']}")
    expect(top_frame(rows["cuMemCreate"])["line"] == marker_line(SRC, "reuse_second"),
           f"the reused handle's leak belongs to its second creation: {top_frame(rows['cuMemCreate'])}")
    expect(rep["summary"]["leaked_bytes"] == drop_of(proc.stdout), "leaked bytes vs drop")


def case_enforce_misuse(tmp):
    """Double release, address free while mapped and a map onto a mapped range return the driver's codes
    under enforce too (the program checks them), and are recorded as misuse."""
    run([SCENARIOS, "misuse"], tmp, flags=["--option", "mode=enforce"], rc=0)
    rep = only_report(tmp)
    expect(sorted(m["api"] for m in rep["misuse"]) == ["cuMemAddressFree", "cuMemMap", "cuMemRelease"],
           f"misuse: {rep['misuse']}")
    d = tempfile.mkdtemp(dir=tmp)
    proc = run([SCENARIOS, "reuse"], d, flags=["--option", "mode=enforce"], rc=23)
    expect("same_value=0" in proc.stdout, f"virtual handle values are never reused: {proc.stdout}")
    rows = leaks_by_api(only_report(d))
    expect(top_frame(rows["cuMemCreate"])["line"] == marker_line(SRC, "reuse_second"), "the second creation leaked")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
