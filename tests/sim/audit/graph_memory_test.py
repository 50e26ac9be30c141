#!/usr/bin/env python3
"""Graph memory (graph_memory.cpp).

Usage: graph_memory_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import sys

from audit_common import SCENARIOS, MiB, REAL, run, only_report, marker_line, top_frame, source, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("graph_memory.cpp")


def case_graph_memory(tmp):
    """Graph memory is charged to the graph whose first upload or launch committed it, never to an owner's live
    device memory: steps name it (it leaves "unattributed"), it outlives the executable until the trim, which
    is a return at its line, and a captured allocation never freed is held at exit as graph memory."""
    run([SCENARIOS, "graph-memory"], tmp)
    rep = only_report(tmp)
    st = {x["step"]: x for x in rep["steps"] if not x["label"]}
    graph_mem = [st[n]["graph_mem_reserved_bytes"] for n in (1, 2, 3, 4)]
    expect(graph_mem == [0, 256 * MiB, 256 * MiB, 128 * MiB], f"graph memory at steps: {graph_mem}")
    unattributed = [st[n]["unattributed_bytes"] for n in (1, 2, 3, 4)]
    expect(max(unattributed) - min(unattributed) < 32 * MiB and (REAL or max(unattributed) == 0), f"unattributed: {unattributed}")
    device_kinds = [st[n]["by_kind"].get("async_pool", 0) for n in (1, 2, 3, 4)]
    expect(device_kinds == [0, 0, 0, 0], f"async_pool bytes at steps: {device_kinds}")
    graphs = [(g["allocations"], g["bytes"], g.get("graph_memory_bytes", 0)) for g in rep["graphs"]]
    expect(graphs == [(1, 256 * MiB, 256 * MiB), (1, 128 * MiB, 128 * MiB)], f"graphs: {graphs}")
    rets = [(m["what"], m["why"], m["api"], m["device"], m["step"], m["bytes"], top_frame(m)["line"]) for m in rep["returns"]]
    expect(rets == [("graph_memory", "trim", "cuDeviceGraphMemTrim", 0, 3, 256 * MiB, marker_line(SRC, "graph_trim"))],
           f"returns: {rets}")
    held = [(l["class"], l["kind"], l["bytes"], top_frame(l)["line"]) for l in rep["leaks"]]
    expect(held == [("unfreed", "graph", 128 * MiB, marker_line(SRC, "captured_alloc"))], f"held at exit: {held}")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
