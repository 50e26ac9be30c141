#!/usr/bin/env python3
"""A library loaded with RTLD_DEEPBIND (deepbind.cpp, deepbind_lib.cpp).

Usage: deepbind_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import os
import sys
import tempfile

from audit_common import SCENARIOS, SOURCE_ROOT, MiB, run, only_report, marker_line, top_frame, source, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("deepbind.cpp")


def case_deepbind(tmp):
    lib = os.environ["DEEPBIND_LIB"]
    src = os.path.join(SOURCE_ROOT, "tests", "sim", "audit", "deepbind_lib.cpp")
    proc = run([SCENARIOS, "deepbind", lib], tmp, rc=0)
    expect(proc.stderr.count("RTLD_DEEPBIND") == 1, f"one warning about the stripped flag:\n{proc.stderr}")
    rows = [l for l in only_report(tmp)["leaks"] if l["class"] == "unfreed"]
    expect(len(rows) == 1 and rows[0]["bytes"] == 7 * MiB and top_frame(rows[0])["line"] == marker_line(src, "deepbind_lib"),
           f"the library's own libcuda call is seen: {rows}")
    d = tempfile.mkdtemp(dir=tmp)
    proc = run([SCENARIOS, "deepbind", lib], d, flags=["--option", "deepbind=keep"], rc=0)
    expect("RTLD_DEEPBIND" not in proc.stderr, "deepbind=keep: no warning")
    expect(only_report(d)["leaks"] == [], "deepbind=keep: the library binds past the shim, as documented")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
