#!/usr/bin/env python3
"""Host memory: NCCL's host buffers and memory the program registers (host_memory.cpp).

Usage: host_memory_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import os
import sys

from audit_common import REAL, SCENARIOS, MiB, run, only_report, marker_line, top_frame, source, expect
from cases import Failure, main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("host_memory.cpp")


def case_nccl_host_buffers(tmp):
    """NCCL's host buffers are cuMemCreate memory on a host NUMA node: host memory, never device memory.
    Three steps each add 512 MiB of it: no growth alarm (before, each step raised one, and the OOM parts
    and "unattributed" counted the host bytes as device memory); the one left unreleased is a leak row of
    kind vmm_host at host NUMA 0, at its cuMemCreate line."""
    proc = run([SCENARIOS, "nccl-host"], tmp, rc=23)
    expect("device_drop=0" in proc.stdout, f"host memory moved the device's free memory:\n{proc.stdout}")
    rep = only_report(tmp)
    rows = [(l["class"], l["kind"], l.get("location"), l["site"]["api"], l["bytes"], l["references"]) for l in rep["leaks"]]
    expect(rows == [("unreachable", "vmm_host", "host NUMA 0", "cuMemCreate", 512 * MiB, 1)], f"leaks: {rows}")
    frame = top_frame(rep["leaks"][0])
    want = marker_line(SRC, "nccl_host_create")
    expect(frame["line"] == want, f"site line {frame['line']}, expected {want}")
    expect(rep["summary"]["leaked_bytes"] == 512 * MiB, f"summary: {rep['summary']}")
    expect(not [a for a in rep.get("alarms", []) if a["what"] == "growth"], f"growth alarms: {rep.get('alarms')}")
    steps = [s for s in rep["steps"] if not s.get("label")]
    expect([s["step"] for s in steps] == [1, 2, 3], f"steps: {[s['step'] for s in steps]}")
    for n, s in enumerate(steps, 1):
        expect(s["by_kind"] == {"vmm_host": n * 512 * MiB}, f"step {n} by kind: {s['by_kind']}")
        expect(s["unattributed_bytes"] == s["driver_used_bytes"], f"step {n}: {s}")
    expect("[unreachable, posix_fd, audit_scenarios, host NUMA 0] taken by cuMemCreate" in proc.stderr,
           f"text row:\n{proc.stderr}")


def case_host_register(tmp):
    """Registered host memory: a range of kind host_registered until unregistered, never device memory; a
    second registration and an unregister of what is not registered are misuse with the driver's answer (both
    went unrecorded before); what stays registered at exit is held, so the gate fails only with unfreed."""
    proc = run([SCENARIOS, "host-register"], tmp, flags=("--fail-on", "leaks,misuse,unfreed"), rc=23)
    rep = only_report(tmp)
    misuse = sorted((m["api"], m["result"], m["what"], top_frame(m)["line"]) for m in rep["misuse"])
    expect(misuse == sorted([
        ("cuMemHostRegister", "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "register of host memory already registered",
         marker_line(SRC, "register_twice")),
        ("cuMemHostUnregister", "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "unregister of host memory not registered",
         marker_line(SRC, "unregister_twice"))]), f"misuse: {misuse}")
    rows = [(l["class"], l["kind"], l["site"]["api"], l["bytes"], top_frame(l)["line"]) for l in rep["leaks"]]
    expect(rows == [("unfreed", "host_registered", "cuMemHostRegister", 64 * MiB, marker_line(SRC, "left_registered"))],
           f"held at exit: {rows}")
    s = rep["summary"]
    expect(s["unfreed_bytes"] == 64 * MiB and s["leaked_bytes"] == 0 and s["misuse_events"] == 2, f"summary: {s}")
    owners = {o["owner"]: o for o in rep["owners"]}
    expect(owners["audit_scenarios"]["peak_bytes"] == 512 * MiB, f"owners: {rep['owners']}")


def case_io_register(tmp):
    """I/O memory registered for kernels to write (a network card's send queue and doorbells) is neither host
    nor device memory: its rows are of kind io_registered and hold 0 bytes, where the 64 KiB queue and the
    doorbells counted as registered host memory before. The receive queue, ordinary host memory, keeps its
    4 KiB; its registration as I/O memory is refused first and books nothing. A doorbell still registered at exit
    is held (the gate fails only with unfreed) at its line. The card's BAR is the simulated driver's stand-in, a
    mapped file."""
    if REAL:
        raise Failure("io-register needs the simulated driver: its BAR is a file the simulated driver takes as one")
    env = {"CUMEMAUDIT_SIM_BAR": os.path.join(tmp, "bar")}
    proc = run([SCENARIOS, "io-register"], tmp, flags=("--fail-on", "leaks,misuse,unfreed"), env=env, rc=23)
    rep = only_report(tmp)
    rows = [(l["class"], l["kind"], l["site"]["api"], l["bytes"], top_frame(l)["line"]) for l in rep["leaks"]]
    expect(rows == [("unfreed", "io_registered", "cuMemHostRegister", 0, marker_line(SRC, "sq_doorbell"))],
           f"held at exit: {rows}")
    s = rep["summary"]
    expect(s["unfreed_bytes"] == 0 and s["unfreed_allocations"] == 1 and s["leaked_bytes"] == 0, f"summary: {s}")
    owners = {o["owner"]: o for o in rep["owners"]}
    expect(owners["audit_scenarios"]["peak_bytes"] == 4096, f"owners: {rep['owners']}")
    steps = [st for st in rep["steps"] if not st.get("label")]
    expect([st["by_kind"] for st in steps] == [{"host_registered": 4096}], f"steps by kind: {[st['by_kind'] for st in steps]}")
    expect("Leak of 1 I/O memory registrations (another device's memory; none of the host's or the GPU's) "
           "[unfreed, audit_scenarios] taken by cuMemHostRegister at:" in proc.stderr, f"text row:\n{proc.stderr}")
    expect("0 bytes unfreed at exit in 1 allocations" in proc.stderr, f"summary line:\n{proc.stderr}")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
