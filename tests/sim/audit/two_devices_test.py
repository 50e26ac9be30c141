#!/usr/bin/env python3
"""One process on two devices (two_devices.cpp).

Usage: two_devices_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import sys

from audit_common import SCENARIOS, MiB, REAL, run, only_report, marker_line, top_frame, source, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("two_devices.cpp")


def case_two_devices(tmp):
    """A process on two devices: each allocation carries its device, so device 1's out-of-memory record names
    only device 1's memory and its parts add up to device 1's used memory (before, device 0's 6 GiB made them
    5x too many); the step marked on device 1 counts only device 1's memory against its figures, and each
    owner's row splits its device memory by device."""
    if REAL:
        return  # one GPU on the GPU machine
    run([SCENARIOS, "two-devices"], tmp, env={"CUMEMAUDIT_SIM_DEVICES": "2", "CUMEMAUDIT_SIM_MEMORY": "8GiB"})
    rep = only_report(tmp)
    oom = rep["oom"][0]
    parts = sorted((p["what"], p.get("kind", ""), p["bytes"]) for p in oom["parts"])
    expect(oom["device"] == 1 and top_frame(oom)["line"] == marker_line(SRC, "dev1_refused"), f"oom: {oom}")
    expect(parts == [("live", "classic", 1024 * MiB), ("live", "vmm_physical", 512 * MiB)], f"oom parts: {parts}")
    expect(sum(p["bytes"] for p in oom["parts"]) == oom["driver_used_bytes"] == 1536 * MiB, f"oom: {oom}")
    st = next(x for x in rep["steps"] if x["step"] == 1 and not x["label"])
    expect((st["device"], st["driver_used_bytes"], st["unattributed_bytes"]) == (1, 1536 * MiB, 0), f"step: {st}")
    expect(st["by_kind"]["classic"] == 7168 * MiB, f"step's kinds are every device's: {st}")
    owner = next(o for o in rep["owners"] if o["owner"] == "audit_scenarios")
    expect(owner["live_by_device"] == {"0": 6144 * MiB, "1": 1024 * MiB}, f"owner: {owner}")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
