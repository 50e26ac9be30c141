#!/usr/bin/env python3
"""Memory booked once and where it lives, at steps and out-of-memory moments (books.cpp).

Usage: books_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import glob
import json
import os
import subprocess
import sys

from audit_common import CLI, SCENARIOS, MiB, run, only_report, marker_line, top_frame, source, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("books.cpp")
GiB = 1024 * MiB


def steps_of(rep):
    return {s["step"]: s for s in rep["steps"] if not s["label"]}


def check_nvls(tmp, how):
    run([SCENARIOS, "nvls-step", how], tmp)
    rep = only_report(tmp)
    st = steps_of(rep)[2]
    # The object is not memory: the 64 MiB bound to it is, once, and every figure of the step agrees.
    expect(st["by_kind"] == {"vmm_physical": 64 * MiB}, f"{how}: by_kind {st['by_kind']}")
    expect(st["by_owner"] == {"audit_scenarios": 64 * MiB}, f"{how}: by_owner {st['by_owner']}")
    expect((st["driver_used_bytes"], st["unattributed_bytes"]) == (64 * MiB, 0), f"{how}: {st}")
    expect(steps_of(rep)[3]["by_kind"] == {}, f"{how}: after the teardown {steps_of(rep)[3]}")
    expect(rep["leaks"] == [] and rep["misuse"] == [], f"{how}: {rep['leaks']} {rep['misuse']}")


def case_nvls_step(tmp):
    """NCCL's NVLS set-up on one rank (object, memory bound by handle, both mapped) marked as a step: the step's
    live bytes by kind and by owner are the bound 64 MiB, as driver-used memory is; nothing unattributed."""
    check_nvls(tmp, "by-handle")


def case_nvls_step_by_address(tmp):
    """The same set-up bound by address (cuMulticastBindAddr, PyTorch's symmetric memory path): the same figures."""
    check_nvls(tmp, "by-address")


def case_dmabuf_step(tmp):
    """1 GiB of classic memory and 1 GiB of VMM memory freed while a dma-buf fd of each is open (a network
    plugin that never closes them): the step names the classic GiB as kept by dma-buf fds (the VMM GiB is
    still its owner's, pinned by the fd), nothing is unattributed nor leaked yet; the refused allocation's
    out-of-memory record names the fd's line; once the fds close, the next step holds nothing."""
    proc = run([SCENARIOS, "dmabuf-step"], tmp)
    expect("79 GiB: CUDA_ERROR_OUT_OF_MEMORY" in proc.stdout, proc.stdout)
    rep = only_report(tmp)
    st = steps_of(rep)
    two = st[2]
    expect((two["dma_buf_pinned_bytes"], two["unattributed_bytes"], two["leaked_bytes"]) == (GiB, 0, 0), f"step 2: {two}")
    expect(two["by_kind"] == {"vmm_physical": GiB} and two["driver_used_bytes"] == 2 * GiB, f"step 2: {two}")
    three = st[3]
    expect((three["dma_buf_pinned_bytes"], three["driver_used_bytes"], three["by_kind"]) == (0, 0, {}), f"step 3: {three}")
    (oom,) = rep["oom"]
    parts = [(p["what"], p.get("owner", ""), p.get("kind", ""), p["bytes"]) for p in oom["parts"]]
    expect(sorted(parts) == sorted([("dma_buf_pinned", "audit_scenarios", "classic", GiB),
                                    ("live", "audit_scenarios", "vmm_physical", GiB)]), f"parts: {parts}")
    pinned = next(p for p in oom["parts"] if p["what"] == "dma_buf_pinned")
    expect(top_frame(pinned)["line"] == marker_line(SRC, "dmabuf_classic"), f"pinned part's site: {pinned['site']}")
    expect(oom["unattributed_bytes"] == 0, f"oom: {oom}")
    expect(f"audit_scenarios classic freed, kept by an open dma-buf fd from books.cpp:{marker_line(SRC, 'dmabuf_classic')}"
           in proc.stderr, proc.stderr)


def case_pool_getters(tmp):
    """The host's pinned pool and the managed pool with no location, reached through CUDA 13's getters (RMM's
    and cuda.core's pinned and managed resources): 1.5 GiB of each by step 3, none of it on the device. Steps
    book them as host and managed memory, the device's figures hold nothing, and no growth alarm is raised;
    the pools are rows of their locations at the getters' lines."""
    proc = run([SCENARIOS, "pool-getters"], tmp)
    expect("pool_getters: device used 0 MiB" in proc.stdout, proc.stdout)
    rep = only_report(tmp)
    three = steps_of(rep)[3]
    expect(three["by_kind"] == {"async_pool_host": 1536 * MiB, "managed": 1536 * MiB}, f"step 3: {three['by_kind']}")
    expect((three["driver_used_bytes"], three["unattributed_bytes"]) == (0, 0), f"step 3: {three}")
    expect(three["async_pool_reserved_bytes"] == 0, f"step 3: {three}")
    expect(rep["alarms"] == [], f"alarms: {rep['alarms']}")
    expect("grew by" not in proc.stderr, proc.stderr)
    rows = sorted((p["origin"], p["location"], p["site"]["api"], top_frame(p)["line"]) for p in rep["pools"] if p["location"] != "device 0")
    expect(rows == sorted([("default", "host", "cuMemGetDefaultMemPool", marker_line(SRC, "pinned_pool")),
                           ("default", "managed", "cuMemGetMemPool", marker_line(SRC, "managed_pool"))]), f"pools: {rows}")


def case_managed_resident(tmp):
    """1 GiB of managed memory: nothing on the device until a memset touches it there, then 1 GiB named as
    managed memory the device holds (NVML charges it to no process), kept after a prefetch back to the host,
    as the H200 keeps it; the refused allocation's record names it; freed, it leaves. Nothing unattributed."""
    proc = run([SCENARIOS, "managed-resident"], tmp)
    expect("79.5 GiB: CUDA_ERROR_OUT_OF_MEMORY" in proc.stdout, proc.stdout)
    rep = only_report(tmp)
    st = steps_of(rep)
    got = {n: (st[n]["driver_used_bytes"], st[n]["managed_resident_bytes"], st[n]["unattributed_bytes"]) for n in (1, 2, 3, 4)}
    expect(got == {1: (0, 0, 0), 2: (GiB, GiB, 0), 3: (GiB, GiB, 0), 4: (0, 0, 0)}, f"steps: {got}")
    expect(st[2]["by_kind"] == {"managed": GiB} and st[2]["process_used_bytes"] == 0, f"step 2: {st[2]}")
    (oom,) = rep["oom"]
    parts = [(p["what"], p["bytes"]) for p in oom["parts"]]
    expect(parts == [("managed_resident", GiB)] and oom["unattributed_bytes"] == 0, f"oom parts: {parts}")
    expect("managed memory on the device (touched there; NVML charges it to no process)" in proc.stderr, proc.stderr)
    # The views name it too: trace as a counter, diff --steps as a total.
    (report_file,) = glob.glob(os.path.join(tmp, "cumemaudit.*.json"))
    trace_file = os.path.join(tmp, "trace.json")
    subprocess.run([CLI, "trace", "-o", trace_file, report_file], check=True, capture_output=True, timeout=60)
    events = json.load(open(trace_file))
    events = events["traceEvents"] if isinstance(events, dict) else events
    counted = [e["args"]["bytes"] for e in events if e.get("ph") == "C" and e["name"] == "managed memory on the device"]
    expect(counted == [GiB, GiB], f"trace counters: {counted}")
    diff = subprocess.run([CLI, "diff", "--steps", "1", "2", report_file], capture_output=True, text=True, timeout=60).stdout
    expect("managed memory on the device           0 B       1.0 GiB  +1.0 GiB (+1073741824)" in diff, diff)


def case_managed_prefetch(tmp):
    """Managed memory prefetched onto the device names the line that moved it: the out-of-memory record's
    managed part (1.625 GiB: 1 GiB prefetched whole, 512 MiB touched by a memset, and the upper 128 MiB of 256 MiB
    prefetched through CUDA 12's form, which moves only those pages, as the H100 did) names the weights' prefetch
    and its 1 GiB. Once the weights are freed, the next record names the other prefetch's line and its 128 MiB. After a device
    reset freed the rest without a call, managed memory only a memset touched names no line (the reset's
    allocations' prefetches went with them)."""
    proc = run([SCENARIOS, "managed-prefetch"], tmp)
    expect(proc.stdout.count("CUDA_ERROR_OUT_OF_MEMORY") == 3, proc.stdout)
    rep = only_report(tmp)
    got = []
    for oom in rep["oom"]:
        (part,) = [p for p in oom["parts"] if p["what"] == "managed_resident"]
        api = part.get("site", {}).get("api", "")
        got.append((part["bytes"], part.get("prefetched_bytes", 0), api, top_frame(part)["line"] if api else None))
    want = [(1664 * MiB, GiB, "cuMemPrefetchAsync", marker_line(SRC, "prefetch_weights")),
            (640 * MiB, 128 * MiB, "cuMemPrefetchAsync", marker_line(SRC, "prefetch_cache")),
            (256 * MiB, 0, "", None)]
    expect(got == want, f"managed parts: {got}, expected {want}")
    expect(f"managed memory on the device (touched there; NVML charges it to no process), 1.0 GiB of it prefetched "
           f"there by cuMemPrefetchAsync at books.cpp:{marker_line(SRC, 'prefetch_weights')} (" in proc.stderr, proc.stderr)


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
