#!/usr/bin/env python3
"""External memory (external_memory.cpp).

Usage: external_memory_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import sys

from audit_common import SCENARIOS, MiB, run, only_report, marker_line, top_frame, source, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("external_memory.cpp")


def case_external_memory(tmp):
    """External memory is an object of its exporter's bytes at the import's line (kind `external`, never this
    device's memory): a buffer mapped from it keeps it after the object's destroy, so it leaves the figures at
    the buffer's free; one never destroyed is held at exit; a refused import books nothing."""
    run([SCENARIOS, "external-memory"], tmp)
    rep = only_report(tmp)
    st = {x["step"]: x for x in rep["steps"] if not x["label"]}
    kinds = [st[n]["by_kind"].get("external", 0) for n in (1, 2, 3)]
    expect(kinds == [256 * MiB, 256 * MiB, 0], f"external bytes at steps: {kinds}")
    held = [(l["class"], l["kind"], l["site"]["api"], l["bytes"], top_frame(l)["line"]) for l in rep["leaks"]]
    expect(held == [("unfreed", "external", "cuImportExternalMemory", 128 * MiB, marker_line(SRC, "ext_kept"))],
           f"held at exit: {held}")
    expect(rep["misuse"] == [] and rep["summary"]["leaked_bytes"] == 0, f"misuse: {rep['misuse']}, summary: {rep['summary']}")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
