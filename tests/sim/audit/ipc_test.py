#!/usr/bin/env python3
"""Memory shared with another process: legacy IPC, dma-buf fds and pool IPC (ipc.cpp).

Usage: ipc_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import json
import os
import re
import subprocess
import sys

from audit_common import (CLI, SCENARIOS, MiB, REAL, reports, marker_line, top_frame, run_on_shared_node, source,
    expect)
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("ipc.cpp")


def case_ipc_dmabuf(tmp):
    """Classic memory shared outside its allocation. The exporter's legacy IPC handle is an export row with the
    buffer's bytes, released at its free; the importer that never closed its open pins those bytes, which
    `merge` names with the exporter's size (the importer's driver tells it none), as pinning and as the
    importer's memory held at exit. Three dma-buf fds open past
    the free are open-export leaks at their own lines (of classic memory, of part of it, with the whole
    allocation's bytes, and of a VMM mapping); one closed first leaves nothing."""
    proc = run_on_shared_node([SCENARIOS, "ipc-dmabuf"], tmp, rc=23)
    importer_pid = int(re.search(r"ipc_dmabuf: importer (\d+)", proc.stdout).group(1))
    reps = {r["process"]["pid"]: r for r in reports(tmp).values()}
    expect(len(reps) == 2 and importer_pid in reps, f"reports: {list(reps)}")
    exporter = next(r for pid, r in reps.items() if pid != importer_pid)
    importer = reps[importer_pid]
    leaks = [(l["class"], l["kind"], l["handle_type"], l["bytes"], l["site"]["api"], top_frame(l)["line"]) for l in exporter["leaks"]]
    expect(leaks == [("open-export", "classic", "posix_fd", 256 * MiB, "cuMemGetHandleForAddressRange", marker_line(SRC, "dmabuf_get")),
                     ("open-export", "classic", "posix_fd", 128 * MiB, "cuMemGetHandleForAddressRange", marker_line(SRC, "dmabuf_part_get")),
                     ("open-export", "vmm_physical", "posix_fd", 64 * MiB, "cuMemGetHandleForAddressRange", marker_line(SRC, "dmabuf_vmm_get"))],
           f"exporter's leaks: {leaks}")
    expect(exporter["summary"]["leaked_bytes"] == 448 * MiB, f"summary: {exporter['summary']}")
    ipc = [(e["bytes"], e["released"], top_frame(e)["line"]) for e in exporter["exports"] if e["handle_type"] == "ipc"]
    expect(ipc == [(1024 * MiB, True, marker_line(SRC, "ipc_get"))], f"exporter's IPC exports: {exporter['exports']}")
    opened = [(i["handle_type"], i["mapped"], i["released"]) for i in importer["imports"]]
    expect(opened == [("ipc", True, False)], f"importer's imports: {importer['imports']}")
    held = [(l["class"], l["kind"], top_frame(l)["line"]) for l in importer["leaks"]]
    expect(held == [("unfreed", "ipc", marker_line(SRC, "ipc_open"))], f"importer's rows: {held}")
    expect("1 of them: legacy IPC opens of another process's memory, whose size only the exporter knows" in proc.stderr,
           f"the importer's summary says why its open holds 0 bytes:\n{proc.stderr}")
    job = os.path.join(tmp, "job.json")
    subprocess.run([CLI, "merge", "-o", job, *reports(tmp)], capture_output=True, text=True, timeout=60)
    merged = json.load(open(job))
    pins = [p["bytes"] for p in merged["pinning"]]
    expect(pins == [1024 * MiB], f"pinning: {pins}")
    # Joined to the exporter's row, the importer's open holds the GiB it keeps alive.
    held = {r["pid"]: r["held_at_exit_bytes"] for r in merged["ranks"]}
    expect(held == {importer_pid: 1024 * MiB, exporter["process"]["pid"]: 0}, f"held at exit: {held}")
    expect(merged["summary"]["unfreed_bytes"] == 1024 * MiB, f"job summary: {merged['summary']}")


def case_pool_ipc(tmp):
    """A stream-ordered pool's pointer shared with another process: the exporter's export row has the buffer's
    bytes and is released at its free. The memory stays used but leaves the exporter's pool figures (measured),
    so the exporter's step can only call it unattributed; the importer's import, never freed, is held at exit
    at its line, in an imported pool's row; `merge` names the bytes the importer pins."""
    proc = run_on_shared_node([SCENARIOS, "pool-ipc"], tmp)
    importer_pid = int(re.search(r"pool_ipc: importer (\d+)", proc.stdout).group(1))
    reps = {r["process"]["pid"]: r for r in reports(tmp).values()}
    expect(len(reps) == 2 and importer_pid in reps, f"reports: {list(reps)}")
    exporter = next(r for pid, r in reps.items() if pid != importer_pid)
    importer = reps[importer_pid]
    shared = [(e["handle_type"], e["bytes"], e["released"], e["site"]["api"], top_frame(e)["line"]) for e in exporter["exports"]]
    expect(shared == [("ipc", 256 * MiB, True, "cuMemPoolExportPointer", marker_line(SRC, "pool_export_ptr"))],
           f"exporter's exports: {exporter['exports']}")
    st = next(x for x in exporter["steps"] if x["step"] == 1 and not x["label"])
    expect((st["async_pool_reserved_bytes"], st["async_pool_used_bytes"]) == (0, 0), f"exporter's step: {st}")
    expect(st["unattributed_bytes"] >= 256 * MiB and (REAL or st["unattributed_bytes"] == 256 * MiB), f"exporter's step: {st}")
    expect(exporter["leaks"] == [] and exporter["summary"]["leaked_bytes"] == 0, f"exporter's rows: {exporter['leaks']}")
    pools = [(p["origin"], p["device"], top_frame(p)["line"]) for p in importer["pools"] if p["origin"] != "default"]
    expect(pools == [("imported", 0, marker_line(SRC, "pool_import"))], f"importer's pools: {importer['pools']}")
    opened = [(i["handle_type"], i["mapped"], i["released"], i["site"]["api"]) for i in importer["imports"]]
    expect(opened == [("ipc", True, False, "cuMemPoolImportPointer")], f"importer's imports: {importer['imports']}")
    held = [(l["class"], l["kind"], top_frame(l)["line"]) for l in importer["leaks"]]
    expect(held == [("unfreed", "ipc", marker_line(SRC, "pool_import_ptr"))], f"importer's rows: {held}")
    job = os.path.join(tmp, "job.json")
    subprocess.run([CLI, "merge", "-o", job, *reports(tmp)], capture_output=True, text=True, timeout=60)
    pins = [p["bytes"] for p in json.load(open(job))["pinning"]]
    expect(pins == [256 * MiB], f"pinning: {pins}")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
