#!/usr/bin/env python3
"""A stream-ordered pool's idle memory (pool_idle.cpp).

Usage: pool_idle_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import sys

from audit_common import SCENARIOS, MiB, REAL, run, only_report, marker_line, top_frame, source, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("pool_idle.cpp")


def case_pool_idle(tmp):
    """A stream-ordered pool's idle memory is named while it exists: at steps (it leaves "unattributed") and in
    the pool's row; a trim and the driver's own take-back before a refusal are returns at their calls' lines,
    and the out-of-memory record names no idle memory that was already gone. A host pool's memory is never the
    device's."""
    proc = run([SCENARIOS, "pool-idle"], tmp, env={"CUMEMAUDIT_SIM_MEMORY": "16GiB"})
    rep = only_report(tmp)
    chunk = 32 * MiB  # what a pool reserves at a time (measured)
    s1, s2, s3 = (next(x for x in rep["steps"] if x["step"] == n and not x["label"]) for n in (1, 2, 3))
    primed = s1["async_pool_reserved_bytes"]
    expect(primed >= 4096 * MiB and primed % chunk == 0 and s1["async_pool_used_bytes"] == 0, f"step 1: {s1}")
    expect((s2["async_pool_reserved_bytes"], s2["async_pool_used_bytes"]) == (primed, 256 * MiB), f"step 2: {s2}")
    expect((s3["async_pool_reserved_bytes"], s3["async_pool_used_bytes"]) == (1024 * MiB, 256 * MiB), f"step 3: {s3}")
    # The idle gigabytes are the pool's, not unattributed (on the simulated driver nothing else is used).
    for st in (s1, s2, s3):
        expect(st["unattributed_bytes"] == 0 if not REAL else st["unattributed_bytes"] < 1024 * MiB, f"unattributed: {st}")
    created = [p for p in rep["pools"] if p["origin"] == "created"]
    expect([(p["location"], p["device"]) for p in created] == [("device 0", 0), ("host NUMA 0", -1)], f"pools: {rep['pools']}")
    mine = created[0]
    expect(top_frame(mine)["line"] == marker_line(SRC, "pool_create") and mine["release_threshold"] > 0 and
           mine["peak_reserved_bytes"] == primed, f"pool: {mine}")
    expect((mine["reserved_bytes"], mine["used_bytes"], mine["idle_bytes"]) == (256 * MiB, 256 * MiB, 0), f"pool at the end: {mine}")
    defaults = [(p["device"], p["reserved_bytes"]) for p in rep["pools"] if p["origin"] == "default"]
    expect(defaults == [(0, 0)], f"default pools: {defaults}")
    rets = [(m["what"], m["why"], m["api"], m["pool"], m["device"], m["step"], m["bytes"], top_frame(m)["line"]) for m in rep["returns"]]
    expect(rets == [("pool", "trim", "cuMemPoolTrimTo", mine["id"], 0, 2, primed - 1024 * MiB, marker_line(SRC, "pool_trim")),
                    ("pool", "refusal", "cuMemAlloc", 0, 0, 3, 768 * MiB, marker_line(SRC, "pool_refused"))],
           f"returns: {rets}")
    expect(rep["summary"]["returned_bytes"] == primed - 256 * MiB, f"summary: {rep['summary']}")
    oom = rep["oom"][0]
    parts = [(p["what"], p.get("kind", ""), p["bytes"]) for p in oom["parts"]]
    expect(("live", "async_pool", 256 * MiB) in parts and not any(p[0] == "async_pool_idle" for p in parts), f"oom parts: {parts}")
    expect(sum(p["bytes"] for p in oom["parts"]) == oom["driver_used_bytes"], f"oom: {oom}")
    held = sorted((l["class"], l["kind"], l["bytes"], top_frame(l)["line"]) for l in rep["leaks"])
    expect(held == sorted([("unfreed", "async_pool", 256 * MiB, marker_line(SRC, "pool_alloc")),
                           ("unfreed", "async_pool_host", 64 * MiB, marker_line(SRC, "host_pool_alloc"))]),
           f"held at exit: {held}")
    expect("pool_idle: free=" in proc.stdout, proc.stdout)


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
