#!/usr/bin/env python3
"""Writes sample_report.json: a realistic rank of a training job, 40 steps, for the views' tests and the
README screenshot. PyTorch warms up to a plateau, NCCL takes its buffers once, DeepEP's fabric allocator
leaks one buffer per growth (the DeepEP issue 799 pattern), a CUDA graph is captured at step 5, and the
shim's growth alarm fires at the first leak after warm-up. Run it again to regenerate the file."""
import json
import os

GiB, MiB = 1 << 30, 1 << 20
T0 = 1_700_000_000_000_000_000
STEP_NS = 1_500_000_000
LEAK = 1 * GiB  # one fabric buffer lost per growth, every third step after step 10


def frame(pc, obj, sym, file, line):
    return {"pc": hex(pc), "offset": hex(pc & 0xFFFFF), "object": obj, "symbol": sym, "file": file, "line": line,
            "build_id": ""}


DEEPEP_SITE = {"api": "cuMemCreate", "frames": [
    frame(0x7F3A10012345, "/opt/deep_ep/deep_ep_cpp.so", "deep_ep::FabricAllocator::grow(unsigned long)",
          "csrc/kernels/fabric.cu", 118),
    frame(0x7F3A10013456, "/opt/deep_ep/deep_ep_cpp.so", "deep_ep::Buffer::ensure_capacity(int)",
          "csrc/deep_ep.cpp", 402),
    frame(0x7F3A20001111, "/usr/lib/python3.11/lib-dynload/_ctypes.so", "", "", 0)]}
NCCL_SITE = {"api": "cuMemCreate", "frames": [
    frame(0x7F3B00021000, "/usr/lib/libnccl.so.2", "ncclCuMemAlloc", "src/include/alloc.h", 151),
    frame(0x7F3B00022000, "/usr/lib/libnccl.so.2", "ncclProxyConnect", "src/proxy.cc", 1020)]}


def owners_at(step):
    pytorch = min(step, 4) * 14 * GiB + (step >= 5) * 3 * GiB
    nccl = 2 * GiB if step >= 1 else 0
    nccl += 256 * MiB if step >= 5 else 0
    deepep = 1 * GiB + (max(0, step - 10) // 3) * LEAK if step >= 1 else 0
    cublas = 32 * MiB if step >= 1 else 0
    return {"pytorch": pytorch, "nccl": nccl, "deepep": deepep, "cublas": cublas}


def main():
    steps = []
    for n in range(40):
        by_owner = owners_at(n)
        tracked = sum(by_owner.values())
        unattributed = 540 * MiB + (n >= 5) * 310 * MiB
        step = {"step": n, "time_ns": T0 + n * STEP_NS, "by_owner": by_owner, "driver_used_bytes": tracked + unattributed,
                "unattributed_bytes": unattributed, "label": "",
                "by_kind": {"vmm_physical": tracked - by_owner["cublas"], "classic": by_owner["cublas"]},
                "driver_total_bytes": 141 * GiB, "pytorch_allocated_bytes": int(by_owner["pytorch"] * 0.82),
                "pytorch_reserved_bytes": by_owner["pytorch"], "graph_mem_used_bytes": 0,
                "graph_mem_reserved_bytes": 0}
        steps.append(step)
        if n == 5:
            for label, dt in (("capture:begin", 200_000_000), ("capture:end", 900_000_000)):
                mark = dict(step, label=label, time_ns=step["time_ns"] + dt)  # a mark carries the last step
                steps.append(mark)
    last = owners_at(39)
    leaked_deepep = last["deepep"] - 1 * GiB
    report = {
        "schema": "cumemaudit/report/v1",
        "process": {"pid": 48213, "rank": 0, "world_size": 8, "host": "h200-node07",
                    "argv": ["python", "train.py", "--model", "moe-16b"], "exit_code": 0},
        "driver": {"version": 13000, "simulated": False},
        "summary": {"leaked_bytes": leaked_deepep, "leaked_allocations": leaked_deepep // LEAK,
                    "leaked_references": leaked_deepep // LEAK, "misuse_events": 1, "unfreed_bytes": 32 * MiB,
                    "peak_tracked_bytes": sum(last.values()), "intercepted_calls": 182_344,
                    "unfreed_allocations": 1, "mapped_at_exit_bytes": 0, "live_bytes": sum(last.values()),
                    "suppressed_leaks": 0, "suppressed_misuse": 0},
        "leaks": [
            {"class": "unreachable", "bytes": leaked_deepep, "allocations": leaked_deepep // LEAK,
             "references": leaked_deepep // LEAK, "handle_type": "fabric", "owner": "deepep",
             "kind": "vmm_physical", "site": DEEPEP_SITE},
            {"class": "unfreed", "bytes": 32 * MiB, "allocations": 1, "references": 0, "handle_type": "none",
             "owner": "cublas", "kind": "classic", "site": {"api": "cuMemAlloc_v2", "frames": [
                 frame(0x7F3C00001000, "/usr/lib/libcublasLt.so.13", "cublasLtCreate", "", 0)]}}],
        "misuse": [{"api": "cuMemRelease", "result": "CUDA_ERROR_INVALID_VALUE",
                    "what": "release of a handle already released", "count": 1, "owner": "nccl",
                    "site": {"api": "cuMemRelease", "frames": [
                        frame(0x7F3B00023000, "/usr/lib/libnccl.so.2", "ncclCuMemFree", "src/include/alloc.h", 210)]}}],
        "owners": [
            {"owner": "pytorch", "live_bytes": last["pytorch"], "peak_bytes": last["pytorch"], "leaked_bytes": 0,
             "live_by_kind": {"vmm_physical": last["pytorch"]}},
            {"owner": "deepep", "live_bytes": last["deepep"], "peak_bytes": last["deepep"],
             "leaked_bytes": leaked_deepep, "live_by_kind": {"vmm_physical": last["deepep"]}},
            {"owner": "nccl", "live_bytes": last["nccl"], "peak_bytes": last["nccl"], "leaked_bytes": 0,
             "live_by_kind": {"vmm_physical": last["nccl"]}},
            {"owner": "cublas", "live_bytes": last["cublas"], "peak_bytes": last["cublas"], "leaked_bytes": 0,
             "live_by_kind": {"classic": last["cublas"]}}],
        "steps": steps,
        "suppressions": [],
        "alarms": [{"step": 13, "time_ns": T0 + 13 * STEP_NS, "what": "leak", "owner": "deepep", "bytes": 5 * LEAK,
                    "live_bytes": owners_at(25)["deepep"], "site": DEEPEP_SITE, "count": 5, "last_step": 25,
                    "last_time_ns": T0 + 25 * STEP_NS}],
        "graphs": [{"id": 1, "step": 5, "allocations": 6, "bytes": 3 * GiB + 256 * MiB,
                    "bytes_by_owner": {"pytorch": 3 * GiB, "nccl": 256 * MiB}, "instantiations": 1,
                    "instantiate_cost_bytes": 310 * MiB}],
        "options": {}, "checkpoint": False, "time_ns": T0 + 40 * STEP_NS}
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sample_report.json")
    with open(out, "w") as f:
        json.dump(report, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
