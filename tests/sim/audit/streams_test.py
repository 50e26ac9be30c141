#!/usr/bin/env python3
"""Streams' share of their context's memory (streams.cpp).

Usage: streams_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import sys

from audit_common import SCENARIOS, MiB, run, only_report, marker_line, source, top_frame, expect, expect_summary_block
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("streams.cpp")


def case_streams(tmp):
    """Each stream creation is measured, and what it took joins its context's part: 16 streams take 8 MiB (the
    context's beginning holds room for one, each 2 MiB more for four, as the H100 took), 8 destroyed and 8 made
    again take nothing, and a leak of two streams a step takes 2 MiB every second step. Every step's context
    part grows by exactly that and the unattributed bytes never move; the context's row counts the 32 streams
    made, their 12 MiB and the leak's line, and the exit summary names them."""
    env = {"CUMEMAUDIT_SIM_CONTEXT": "256MiB", "CUMEMAUDIT_SIM_SMS": "4", "CUMEMAUDIT_SIM_STREAM_CHUNK": "2MiB"}
    proc = run([SCENARIOS, "streams"], tmp, env=env)
    rep = only_report(tmp)
    steps = {s["step"]: s for s in rep["steps"] if not s["label"]}
    grown = {n: (steps[n]["context_bytes"] - steps[0]["context_bytes"]) // MiB for n in sorted(steps)}
    expect(grown == {0: 0, 1: 8, 2: 8, 3: 10, 4: 10, 5: 12, 6: 12}, f"the context part's growth by step (MiB): {grown}")
    unattributed = {n: steps[n]["unattributed_bytes"] for n in sorted(steps)}
    expect(len(set(unattributed.values())) == 1, f"unattributed by step: {unattributed}")
    (ctx,) = rep["contexts"]
    line = marker_line(SRC, "leaked_stream")
    expect((ctx["streams_created"], ctx["stream_bytes"], ctx["stream_site"]["api"], top_frame({"site": ctx["stream_site"]})["line"])
           == (32, 12 * MiB, "cuStreamCreate", line), f"context: {ctx}")
    expect_summary_block(proc.stderr, "Streams of the primary context",
                         "Streams of the primary context on device 0: 32 made, their creations took 12.0 MiB; "
                         "the last that took some at:\n", "streams.cpp", line)

CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
