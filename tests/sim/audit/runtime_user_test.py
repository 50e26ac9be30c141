#!/usr/bin/env python3
"""The runtime's allocation calls (runtime_user.cpp, over the stand-in cudart in stand_in_cudart.cpp), each
once at its caller's line.

Usage: runtime_user_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import os
import re
import sys

from audit_common import RUNTIME_USER, SOURCE_ROOT, MiB, run, only_report, marker_line, top_frame, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common


def case_runtime(tmp):
    # cudaMalloc3D and cudaMallocFromPoolAsync had no runtime hook: their memory was cudart's ("unknown"),
    # at a site inside cudart, until their rows joined the hook table.
    proc = run([RUNTIME_USER], tmp, rc=0)
    rep = only_report(tmp)
    src = os.path.join(SOURCE_ROOT, "tests", "sim", "audit", "runtime_user.cpp")
    rows = sorted((l["site"]["api"], l["kind"], l["bytes"], l["allocations"], l["owner"], top_frame(l)["line"])
                  for l in rep["leaks"] if l["class"] == "unfreed")
    pitch = (1000 + 511) // 512 * 512  # the simulated driver's row pitch
    expect(rows == sorted([("cudaMalloc", "classic", 6 * MiB, 1, "runtime_user", marker_line(src, "runtime_leak")),
                           ("cudaMalloc3D", "classic", pitch * 64 * 8, 1, "runtime_user", marker_line(src, "runtime_3d")),
                           ("cudaMallocFromPoolAsync", "async_pool", 3 * MiB, 1, "runtime_user", marker_line(src, "runtime_pool"))]),
           f"runtime allocations, each once at its line: {rows}")
    # The runtime's library loads are named by the program's line and cudaLibraryLoadData, not by cudart's
    # nested cuLibraryLoadData.
    image = int(re.search(r"library image (\d+) bytes", proc.stdout).group(1))
    modules = [(m["site"]["api"], m["owner"], top_frame(m)["line"], m["loads"], m["unloads"], m["live"], m["image_bytes"])
               for m in rep["modules"]]
    expect(modules == [("cudaLibraryLoadData", "runtime_user", marker_line(src, "runtime_library"), 2, 1, 1, image)],
           f"library rows: {modules}")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
