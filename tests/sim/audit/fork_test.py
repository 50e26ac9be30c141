#!/usr/bin/env python3
"""A forked child's own report (fork.cpp).

Usage: fork_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import re
import sys

from audit_common import SCENARIOS, MiB, REAL, run, reports, marker_line, top_frame, source, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("fork.cpp")


def case_fork(tmp):
    proc = run([SCENARIOS, "fork"], tmp, rc=0)
    found = {k: re.search(rf"{k} pid=(\d+)", proc.stdout) for k in ("parent", "child")}
    expect(all(found.values()), f"program output:\n{proc.stdout}\n{proc.stderr}")
    parent, child = (int(found[k].group(1)) for k in ("parent", "child"))
    reps = {r["process"]["pid"]: r for r in reports(tmp).values()}
    expect(set(reps) == {parent, child}, f"reports for {sorted(reps)}, expected parent {parent} and child {child}")
    expect(reps[parent]["summary"]["leaked_bytes"] == 0, f"parent: {reps[parent]['summary']}")
    c = reps[child]
    if REAL:  # CUDA is not usable in a child forked after init: the driver's refusal passes through
        expect("child cuMemCreate=CUDA_SUCCESS" not in proc.stdout and "child_status=0" in proc.stdout,
               f"child on the real driver: {proc.stdout}")
        expect(c["summary"]["leaked_bytes"] == 0 and c["summary"]["intercepted_calls"] >= 1, f"child: {c['summary']}")
        return
    expect("child_status=23" in proc.stdout, f"the child's own gate fails it: {proc.stdout}")
    expect(c["summary"]["leaked_bytes"] == 6 * MiB and len(c["leaks"]) == 1, f"child: {c['summary']} {c['leaks']}")
    expect(top_frame(c["leaks"][0])["line"] == marker_line(SRC, "child"), "child site")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
