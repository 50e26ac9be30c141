#!/usr/bin/env python3
"""A context's device heap (device_heap.cpp).

Usage: device_heap_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import sys

from audit_common import REAL, SCENARIOS, run, only_report, marker_line, source, top_frame, expect, expect_summary_block
from cases import main, named_cases  # tests/support, on sys.path through audit_common

MiB = 1 << 20
SRC = source("device_heap.cpp")


def case_device_heap(tmp):
    """The first launch of a kernel that calls malloc reserves its context's heap, the limit and 2 MiB: 66 MiB
    at the primary context's 64 MiB limit, then 10 MiB at a second context's default 8 MiB, where the runtime's
    way (a library's kernel launched without a get) loads the kernel's code in the same launch. Each step names
    the heaps apart from the code (138 MiB for a heap kernel's module in a context, as the H100 and H200 took;
    the small kernel's own code fits the chunk the driver's code holds), a second launch takes nothing, a context's end gives back its heap and the code the driver
    held there, and the unattributed bytes never move. The context's row and the exit summary name the kernel
    and the line whose launch reserved the raised heap."""
    env = {"CUMEMAUDIT_SIM_CONTEXT": "256MiB", "CUMEMAUDIT_SIM_SMS": "4", "CUMEMAUDIT_SIM_HEAP_CODE": "138MiB"}
    proc = run([SCENARIOS, "device-heap"], tmp, env=env)
    rep = only_report(tmp)
    steps = {s["step"]: s for s in rep["steps"] if not s["label"]}
    heap = {n: steps[n].get("malloc_heap_bytes", 0) // MiB for n in sorted(steps)}
    expect(heap == {0: 0, 1: 0, 2: 66, 3: 66, 4: 66, 5: 76, 6: 66}, f"device heaps by step (MiB): {heap}")
    if not REAL:  # the code's bytes are the simulated driver's (the real one's differ by a chunk or two)
        code = {n: steps[n].get("module_code_bytes", 0) // MiB for n in sorted(steps)}
        expect(code == {0: 0, 1: 138, 2: 138, 3: 138, 4: 138, 5: 276, 6: 138}, f"module code by step (MiB): {code}")
    unattributed = {n: steps[n]["unattributed_bytes"] for n in sorted(steps)}
    expect(len(set(unattributed.values())) == 1, f"unattributed by step: {unattributed}")
    (ctx,) = rep["contexts"]
    line = marker_line(SRC, "heap_launch")
    expect(ctx["primary"] and ctx["malloc_heap_bytes"] == 66 * MiB and ctx["malloc_heap_kernel"] == "heap_user"
           and top_frame({"site": ctx["malloc_heap_site"]})["line"] == line, f"context: {ctx}")
    expect_summary_block(proc.stderr, "Device heap of the primary context",
                         "Device heap of the primary context on device 0: 66.0 MiB, reserved by the first launch "
                         "of heap_user at:\n", "device_heap.cpp", line)

CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
