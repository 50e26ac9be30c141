#!/usr/bin/env python3
"""Allocators of real projects on the simulated driver: HybridEP's (tests/sim/hybrid_ep) in audit and enforce
mode, and vLLM's sleep mode (tests/sim/vllm_sleep.cpp).

Usage: allocators_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import os
import sys
import tempfile

from audit_common import (SOURCE_ROOT, MiB, HANDLE, run, only_report, marker_line, top_frame, drop_of, site_figures,
    expect)
from cases import main, named_cases  # tests/support, on sys.path through audit_common


HEP_SRC = os.path.join(SOURCE_ROOT, "tests", "sim", "hybrid_ep", "allocator.cpp")


VLLM_SRC = os.path.join(SOURCE_ROOT, "tests", "sim", "vllm_sleep.cpp")


HEP_LEAKED = (2 + 8 + 16 + 24) * MiB  # the test buffer and three growths of the dispatch buffer


def hybrid_ep(tmp, flags=(), fixed=False, rc=0):
    argv = [os.environ["HYBRID_EP"], "--handle", HANDLE, "--buffers", "3", "--size-mib", "8"] + (["--fixed"] if fixed else [])
    return run(argv, tmp, flags=flags, rc=rc)


def case_hybrid_ep(tmp):
    """HybridEP's allocator as shipped: each buffer keeps its creation and get_handle references (2 each, 4
    buffers, 50 MiB), named at their lines inside the deepep module; free()'s own retain is never blamed.
    Fixed, nothing leaks."""
    proc = hybrid_ep(tmp, rc=23)
    expect(drop_of(proc.stdout) == HEP_LEAKED, proc.stdout)
    rep = only_report(tmp)
    expect(site_figures(rep["leaks"]) == {
        ("cuMemCreate", marker_line(HEP_SRC, "hep_create")): (HEP_LEAKED, 4, 4),
        ("cuMemRetainAllocationHandle", marker_line(HEP_SRC, "hep_retain")): (HEP_LEAKED, 4, 4),
    }, f"leaks: {rep['leaks']}")
    expect({l["owner"] for l in rep["leaks"]} == {"deepep"}, f"owner from hybrid_ep_cpp.cpython-312-*.so: {rep['leaks']}")
    # The default deep VMM stack tells the two callers of allocate() apart: the constructor's test buffer
    # and main's three growths.
    callers = sorted((r["bytes"], r["site"]["frames"][1]["symbol"].split("(")[0]) for r in rep["leaks"]
                     if r["site"]["api"] == "cuMemCreate")
    expect(callers == [(2 * MiB, "HybridAllocator::HybridAllocator"), (HEP_LEAKED - 2 * MiB, "main")], f"callers: {callers}")
    expect(rep["summary"]["leaked_references"] == 8 and rep["misuse"] == [], f"{rep['summary']} {rep['misuse']}")
    d = tempfile.mkdtemp(dir=tmp)
    proc = hybrid_ep(d, fixed=True)
    expect(drop_of(proc.stdout) == 0 and only_report(d)["leaks"] == [], f"fixed: {proc.stdout}")


def case_enforce_hybrid_ep(tmp):
    """Enforce on HybridEP: on the fixed allocator it reclaims nothing (free() releases its retain right
    after the range free, and that release succeeds); on the shipped one it reclaims exactly the audit's
    unreleasable references, site by site, and free memory comes back."""
    proc = hybrid_ep(tmp, flags=["--option", "mode=enforce"], fixed=True)
    rep = only_report(tmp)
    expect(drop_of(proc.stdout) == 0 and rep.get("reclaimed", []) == [] and "mode=enforce: reclaimed" not in proc.stderr
           and rep["misuse"] == [] and rep["leaks"] == [], f"fixed under enforce: {rep.get('reclaimed')}\n{proc.stderr}")
    d = tempfile.mkdtemp(dir=tmp)
    proc = hybrid_ep(d, flags=["--option", "mode=enforce"], rc=23)
    rep = only_report(d)
    expect(drop_of(proc.stdout) == 0, f"memory comes back: {proc.stdout}")
    s = rep["summary"]
    expect((s["reclaimed_bytes"], s["reclaimed_allocations"], s["reclaimed_references"], s["leaked_bytes"]) ==
           (HEP_LEAKED, 4, 8, 0), f"reclaimed: {s}")
    expect(site_figures(rep["reclaimed"]) == {
        ("cuMemCreate", marker_line(HEP_SRC, "hep_create")): (HEP_LEAKED, 4, 4),
        ("cuMemRetainAllocationHandle", marker_line(HEP_SRC, "hep_retain")): (HEP_LEAKED, 4, 4),
    }, f"rows: {rep['reclaimed']}")


def case_vllm_sleep(tmp):
    """vLLM's free while asleep: the unmap of the unmapped range succeeds (as on the H200) and is recorded
    as misuse with that answer, the release of the released handle is refused, and the wake that stops
    after cuMemCreate leaves 128 MiB unreachable at the create line."""
    proc = run([os.environ["VLLM_SLEEP"]], tmp, rc=23)
    expect("free while asleep: unmap=CUDA_SUCCESS release=CUDA_ERROR_INVALID_VALUE" in proc.stdout and
           f"wake: stale=CUDA_ERROR_INVALID_VALUE mapped=0 held={128 * MiB}" in proc.stdout, proc.stdout)
    rep = only_report(tmp)
    misuse = sorted((m["api"], m["result"], m["what"], m["count"], top_frame(m)["line"]) for m in rep["misuse"])
    expect(misuse == [("cuMemRelease", "CUDA_ERROR_INVALID_VALUE", "release of a handle already released", 1,
                       marker_line(VLLM_SRC, "vllm_release")),
                      ("cuMemUnmap", "CUDA_SUCCESS", "unmap of an unmapped range", 1, marker_line(VLLM_SRC, "vllm_unmap"))],
           f"misuse: {rep['misuse']}")
    expect(site_figures(rep["leaks"]) == {("cuMemCreate", marker_line(VLLM_SRC, "vllm_create")): (128 * MiB, 1, 1)},
           f"leaks: {rep['leaks']}")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
