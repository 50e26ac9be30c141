#!/usr/bin/env python3
"""Eight threads churning allocations, with planted leaks at one site (threads.cpp).

Usage: threads_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import sys
import tempfile

from audit_common import SCENARIOS, run, only_report, marker_line, top_frame, source, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("threads.cpp")


def case_threads(tmp):
    run([SCENARIOS, "threads"], tmp, rc=0)
    rep = only_report(tmp)
    rows = [l for l in rep["leaks"] if l["class"] == "unfreed"]
    expect(len(rows) == 1, f"one unfreed site expected: {rep['leaks']}")
    expect(rows[0]["allocations"] == 36 and rows[0]["bytes"] == 36 * 3 * 4096, f"planted leaks: {rows[0]}")
    expect(top_frame(rows[0])["line"] == marker_line(SRC, "planted"), f"site {top_frame(rows[0])}")
    expect(rep["summary"]["leaked_bytes"] == 0 and rep["summary"]["misuse_events"] == 0, f"{rep['summary']}")
    expect(rep["summary"]["unfreed_bytes"] == 36 * 3 * 4096, f"unfreed {rep['summary']['unfreed_bytes']}")
    tmp2 = tempfile.mkdtemp(dir=tmp)
    run([SCENARIOS, "threads"], tmp2, flags=["--fail-on", "unfreed"], rc=23)


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
