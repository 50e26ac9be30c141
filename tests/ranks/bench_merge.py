#!/usr/bin/env python3
"""Benchmark of `cumemaudit merge` (target: 1024 rank reports of 1 MB each in under 30 s on 2 cores, in
bounded memory). Generates the reports (leak rows with deep stacks, steps, exports and imports that join
across ranks), merges them and prints the wall time and the merge's peak RSS. A measurement, never an
assertion: it fails only when the merge itself fails.

Environment: CLI (the cumemaudit binary); BENCH_RANKS and BENCH_REPORT_KB override 1024 and 1024."""
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

CLI = os.environ["CLI"]
RANKS = int(os.environ.get("BENCH_RANKS", "1024"))
REPORT_KB = int(os.environ.get("BENCH_REPORT_KB", "1024"))


def frame(i, depth):
    return {"pc": hex(0x400000 + i * 64 + depth), "offset": hex(0x1000 + i * 64 + depth),
            "object": "/opt/job/lib/libdeep_ep.so", "symbol": f"deep_ep::Buffer::update_buffer_{i}_{depth}(int)",
            "file": f"/src/deep_ep/csrc/buffer_{i % 17}.cpp", "line": 100 + depth, "build_id": "ab" * 20}


def template():
    """One rank's report with placeholders, grown to about REPORT_KB."""
    rep = {"schema": "cumemaudit/report/v1",
           "process": {"pid": 0, "rank": 0, "world_size": RANKS, "host": "node", "argv": ["python", "train.py"],
                       "exit_code": 0, "local_rank": 0},
           "driver": {"version": 13000, "simulated": True},
           "summary": {"leaked_bytes": 0, "leaked_allocations": 0, "leaked_references": 0, "misuse_events": 0,
                       "unfreed_bytes": 0, "peak_tracked_bytes": 0, "intercepted_calls": 123456},
           "leaks": [], "misuse": [], "owners": [{"owner": "deepep", "live_bytes": 1, "peak_bytes": 1}],
           "steps": [], "exports": [], "imports": []}
    site_count = 0
    while len(json.dumps(rep)) < REPORT_KB * 1024 * 0.98:
        i = site_count
        rep["leaks"].append({"class": "unreachable", "bytes": 2 << 20, "allocations": 1, "references": 1,
                             "handle_type": "fabric", "owner": "deepep", "kind": "vmm_physical",
                             "site": {"api": "cuMemCreate", "frames": [frame(i, d) for d in range(24)]}})
        rep["steps"].append({"step": i, "time_ns": i, "by_owner": {"deepep": i << 20, "pytorch": 1 << 30},
                             "driver_used_bytes": 2 << 30, "unattributed_bytes": 0})
        site_count += 1
    rep["summary"]["leaked_bytes"] = site_count * (2 << 20)
    rep["summary"]["leaked_allocations"] = site_count
    rep["summary"]["leaked_references"] = site_count
    return rep


def main():
    tmp = tempfile.mkdtemp(prefix="bench-merge-")
    try:
        base = template()
        t0 = time.time()
        for r in range(RANKS):
            rep = dict(base)
            rep["process"] = {**base["process"], "pid": 1000 + r, "rank": r, "local_rank": r % 8}
            # Each rank exports one buffer; its ring neighbour still holds an import of it.
            rep["exports"] = [{"key": f"{r:016x}:{r:016x}", "handle_type": "fabric", "bytes": 2 << 20,
                               "site": {"api": "cuMemExportToShareableHandle", "frames": []}, "exporter_pid": 1000 + r}]
            peer = (r + 1) % RANKS
            rep["imports"] = [{"key": f"{peer:016x}:{peer:016x}", "handle_type": "fabric", "bytes": 2 << 20,
                               "released": False, "mapped": True,
                               "site": {"api": "cuMemImportFromShareableHandle", "frames": []}}]
            with open(os.path.join(tmp, f"cumemaudit.node.{1000 + r}.r{r}.json"), "w") as f:
                json.dump(rep, f)
        size = sum(os.path.getsize(os.path.join(tmp, n)) for n in os.listdir(tmp))
        print(f"generated {RANKS} reports, {size / RANKS / 1024:.0f} KiB each ({size / 2**20:.0f} MiB) "
              f"in {time.time() - t0:.1f} s")
        job = os.path.join(tmp, "..", os.path.basename(tmp) + "-job.json")
        t0 = time.time()
        proc = subprocess.run([CLI, "merge", tmp, "-o", job], capture_output=True, text=True)
        wall = time.time() - t0
        rss_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        if proc.returncode != 0:
            print(proc.stdout, proc.stderr)
            return 1
        merged = json.load(open(job))
        os.unlink(job)
        print(f"merge: {RANKS} reports in {wall:.2f} s, peak RSS {rss_kib / 1024:.0f} MiB, "
              f"{len(merged['sites'])} sites, {merged['summary']['leaked_bytes']} bytes leaked, "
              f"{len(merged['problems'])} problems (target: under 30 s on 2 cores)")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
