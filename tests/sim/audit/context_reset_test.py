#!/usr/bin/env python3
"""A context's end frees what it owns (context_reset.cpp).

Usage: context_reset_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import sys

from audit_common import SCENARIOS, MiB, run, only_report, marker_line, top_frame, source, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("context_reset.cpp")


def case_context_reset(tmp):
    """A context's end frees the classic allocations it owns: they leave the ledger as a teardown event (never
    as held at exit, which failed fail_on=unfreed before), stream-ordered and cuMemCreate memory survive, and a
    free of a pointer the reset took is misuse."""
    proc = run([SCENARIOS, "context-reset"], tmp, flags=("--fail-on", "leaks,misuse,unfreed"), rc=23)
    rep = only_report(tmp)
    rows = [(l["class"], l["kind"], l["bytes"], top_frame(l)["line"]) for l in rep["leaks"]]
    expect(rows == [("unfreed", "classic", 32 * MiB, marker_line(SRC, "after_reset_alloc"))], f"held at exit: {rows}")
    misuse = [(m["api"], m["result"], m["what"], top_frame(m)["line"]) for m in rep["misuse"]]
    expect(misuse == [("cuMemFree", "CUDA_ERROR_INVALID_VALUE", "free of an unknown pointer", marker_line(SRC, "free_stale"))],
           f"misuse: {misuse}")
    ends = [(t["api"], t["device"], t["bytes"], t["allocations"], top_frame(t)["line"],
             [(f["kind"], f["bytes"], f["allocations"], top_frame(f)["line"]) for f in t["freed"]]) for t in rep["teardowns"]]
    expect(ends == [
        ("cuDevicePrimaryCtxReset", 0, 320 * MiB, 2, marker_line(SRC, "reset_call"),
         [("classic", 256 * MiB, 1, marker_line(SRC, "reset_alloc")),
          ("host_pinned", 64 * MiB, 1, marker_line(SRC, "reset_host"))]),
        ("cuCtxDestroy", -1, 16 * MiB, 1, marker_line(SRC, "ctx_destroy"),
         [("classic", 16 * MiB, 1, marker_line(SRC, "own_ctx_alloc"))])], f"teardowns: {ends}")
    s = rep["summary"]
    expect((s["teardown_freed_bytes"], s["teardown_freed_allocations"], s["unfreed_bytes"], s["live_bytes"]) ==
           (336 * MiB, 3, 32 * MiB, 32 * MiB), f"summary: {s}")
    expect("Context ended: cuDevicePrimaryCtxReset (device 0) at step 0 freed 335544320 bytes (320.0 MiB) in 2 allocations"
           in proc.stderr, f"stderr: {proc.stderr[-2000:]}")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
