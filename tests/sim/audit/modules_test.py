#!/usr/bin/env python3
"""Modules and libraries the program keeps loaded (modules.cpp).

Usage: modules_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import re
import sys

from audit_common import SCENARIOS, run, only_report, marker_line, top_frame, source, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("modules.cpp")


def case_jit_modules(tmp):
    """A JIT keeping a module for each of 150 shapes a step, a library and a file's module: every step counts
    the modules live and their images' bytes exactly (the scenario prints what it loaded); each step's 150 kept
    modules raise a modules alarm naming the JIT's load line; the sites are rows of their own with their loads
    and unloads; the refused allocation's record and its stderr block say how many were loaded."""
    proc = run([SCENARIOS, "jit-modules"], tmp)
    out = proc.stdout
    library, file_bytes = map(int, re.search(r"library (\d+) bytes, file (\d+) bytes", out).groups())
    per_step = [int(n) for n in re.findall(r"compiled 150 shapes, (\d+) bytes", out)]
    expect(len(per_step) == 2 and "more than the device: CUDA_ERROR_OUT_OF_MEMORY" in out, out)
    rep = only_report(tmp)
    got = {s["step"]: (s.get("modules_live", 0), s.get("module_image_bytes", 0)) for s in rep["steps"] if not s["label"]}
    jit = per_step[0] + per_step[1]
    expect(got == {0: (0, 0), 1: (152, library + file_bytes + per_step[0]), 2: (302, library + file_bytes + jit),
                   3: (300, jit)}, f"steps: {got}")

    jit_line = marker_line(SRC, "jit_load")
    (alarm,) = rep["alarms"]
    expect((alarm["what"], alarm["owner"], alarm["site"]["api"], top_frame(alarm)["line"]) ==
           ("modules", "audit_scenarios", "cuModuleLoadData", jit_line), f"alarm: {alarm}")
    expect((alarm["count"], alarm["step"], alarm["last_step"], alarm["modules"], alarm["modules_live"]) == (2, 1, 2, 300, 302),
           f"alarm: {alarm}")
    expect(f"step 1: 150 more modules loaded and kept by audit_scenarios (152 live, " in proc.stderr and
           f"most at cuModuleLoadData in (anonymous namespace)::jit_modules(int, char**) ../tests/sim/audit/modules.cpp:{jit_line}"
           in proc.stderr, proc.stderr)

    rows = sorted((m["site"]["api"], top_frame(m)["line"], m["loads"], m["unloads"], m["live"], m["image_bytes"], m["peak_live"])
                  for m in rep["modules"])
    expect(rows == sorted([("cuModuleLoadData", jit_line, 300, 0, 300, jit, 300),
                           ("cuLibraryLoadData", marker_line(SRC, "library_load"), 1, 1, 0, 0, 1),
                           ("cuModuleLoad", marker_line(SRC, "file_load"), 1, 1, 0, 0, 1)]), f"module rows: {rows}")

    (oom,) = rep["oom"]
    expect((oom["modules_live"], oom["module_image_bytes"]) == (302, library + file_bytes + jit), f"oom: {oom}")
    expect(f"modules and libraries loaded: 302 (" in proc.stderr, proc.stderr)


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
