#!/usr/bin/env python3
"""CUDA arrays (arrays.cpp).

Usage: arrays_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import sys

from audit_common import SCENARIOS, MiB, REAL, run, only_report, marker_line, top_frame, source, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("arrays.cpp")


def case_arrays(tmp):
    """CUDA arrays are device memory booked by their descriptor, in the driver's whole 2 MiB pages, at the line
    that made them: steps count them (nothing unattributed), a context reset frees them as a teardown event
    (never held at exit), and the one made after the reset is held at exit. A refused array books nothing."""
    run([SCENARIOS, "arrays"], tmp)
    rep = only_report(tmp)
    st = {x["step"]: x for x in rep["steps"] if not x["label"]}
    kinds = [st[n]["by_kind"].get("array", 0) for n in (1, 2, 3)]
    expect(kinds == [256 * MiB, 578 * MiB, 256 * MiB], f"array bytes at steps: {kinds}")
    unattributed = [st[n]["unattributed_bytes"] for n in (1, 2, 3)]
    expect(max(unattributed) - min(unattributed) < 8 * MiB and (REAL or unattributed == [0, 0, 0]), f"unattributed: {unattributed}")
    ends = [(t["api"], t["device"], t["bytes"], t["allocations"], top_frame(t)["line"],
             [(f["kind"], f["bytes"], top_frame(f)["line"]) for f in t["freed"]]) for t in rep["teardowns"]]
    expect(ends == [("cuDevicePrimaryCtxReset", 0, 578 * MiB, 3, marker_line(SRC, "array_reset"),
                     [("array", 320 * MiB, marker_line(SRC, "array_mipmap")),
                      ("array", 256 * MiB, marker_line(SRC, "array_texture")),
                      ("array", 2 * MiB, marker_line(SRC, "array_small"))])], f"teardowns: {ends}")
    held = [(l["class"], l["kind"], l["site"]["api"], l["bytes"], top_frame(l)["line"]) for l in rep["leaks"]]
    expect(held == [("unfreed", "array", "cuArray3DCreate", 256 * MiB, marker_line(SRC, "array_after_reset"))],
           f"held at exit: {held}")
    expect(rep["misuse"] == [], f"misuse: {rep['misuse']}")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
