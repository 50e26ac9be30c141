#!/usr/bin/env python3
"""Exported POSIX fds: an open export, and an export beside a reference never released (exports.cpp).

Usage: exports_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import sys

from audit_common import SCENARIOS, MiB, run, only_report, marker_line, leaks_by_api, top_frame, source, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("exports.cpp")


def case_open_export(tmp):
    run([SCENARIOS, "open-export"], tmp, rc=23)
    rep = only_report(tmp)
    rows = leaks_by_api(rep, "open-export")
    expect(len(rep["leaks"]) == 1 and "cuMemExportToShareableHandle" in rows, f"leaks: {rep['leaks']}")
    leak = rows["cuMemExportToShareableHandle"]
    expect(leak["bytes"] == 4 * MiB and leak["handle_type"] == "posix_fd", f"open export: {leak}")
    expect(top_frame(leak)["line"] == marker_line(SRC, "export"), f"site {top_frame(leak)}")
    expect(rep["summary"]["leaked_bytes"] == 4 * MiB, f"the closed export is not a leak: {rep['summary']}")


def case_held_export(tmp):
    """References nothing can release and an open exported fd: the references pin it, so the class is
    unreachable, named at the creation; open-export is only for memory an open fd alone holds."""
    run([SCENARIOS, "held-export"], tmp, rc=23)
    rep = only_report(tmp)
    expect([(l["class"], l["site"]["api"], l["bytes"], l["references"]) for l in rep["leaks"]] ==
           [("unreachable", "cuMemCreate", 6 * MiB, 1)], f"leaks: {rep['leaks']}")
    expect(top_frame(rep["leaks"][0])["line"] == marker_line(SRC, "held_create"), f"site {rep['leaks'][0]}")
    expect(rep["summary"]["leaked_bytes"] == 6 * MiB and rep["summary"]["leaked_references"] == 1, f"{rep['summary']}")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
