#!/usr/bin/env python3
"""Rank processes on one simulated node: 8 ranks run the DeepEP growth sequence with fabric handles
under `cumemaudit run --sim`, sharing the node named by CUMEMAUDIT_SIM_NODE; each rank's report, the merged
job report and the node's lost memory (rank 0's cuMemGetInfo over all devices, taken while every rank is
still alive) must agree exactly.

Usage: test_ranks.py CASE (paths come from the environment meson sets: CLI, DEEPEP_RANKS)."""
import contextlib
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from cases import expect, main, named_cases  # noqa: E402

CLI = os.environ["CLI"]
DEEPEP_RANKS = os.environ["DEEPEP_RANKS"]
WORLD = 8
MiB = 1 << 20
SIZE_MIB = 2
GROWTHS = 3
# The buffers of one rank: 2, 4 and 6 MiB, each left behind by the unfixed sequence.
OWN = sum(SIZE_MIB * MiB * (g + 1) for g in range(GROWTHS))
APIS = {"cuMemCreate", "cuMemRetainAllocationHandle", "cuMemImportFromShareableHandle"}


def launch(tmp, node, world, program, flags=()):
    """`world` rank processes of `program` (argv, given the exchange directory) under `cumemaudit run --sim`
    on the node, one local rank each."""
    xdir = os.path.join(tmp, "exchange")
    os.makedirs(xdir, exist_ok=True)
    procs = []
    for r in range(world):
        env = {**os.environ, "CUMEMAUDIT_SIM_NODE": node, "RANK": str(r), "WORLD_SIZE": str(world),
               "LOCAL_RANK": str(r)}
        cmd = [CLI, "run", "--sim", "--report-dir", os.path.join(tmp, "reports"), *flags, "--", *program(xdir)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    return procs


def start_ranks(tmp, node, extra=(), flags=()):
    return launch(tmp, node, WORLD, lambda xdir: [DEEPEP_RANKS, "--dir", xdir, "--growths", str(GROWTHS),
                                                  "--size-mib", str(SIZE_MIB), *extra], flags)


def finish(procs, timeout=240):
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=timeout)
        out.append((p.returncode, stdout, stderr))
    return out


def node_drop(results):
    m = re.search(r"node_drop=(-?\d+)", results[0][1])
    expect(m is not None, f"rank 0 printed no node_drop:\n{results[0][1]}\n{results[0][2]}")
    return int(m.group(1))


def rank_reports(tmp):
    reps = {}
    for f in glob.glob(os.path.join(tmp, "reports", "cumemaudit.*.json")):
        rep = json.load(open(f))
        reps[rep["process"]["rank"]] = rep
    return reps


def merge(tmp, rc=0):
    job = os.path.join(tmp, "job.json")
    proc = subprocess.run([CLI, "merge", os.path.join(tmp, "reports"), "-o", job], capture_output=True, text=True)
    expect(proc.returncode == rc, f"merge exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return (json.load(open(job)) if rc == 0 else None), proc.stdout


def check(path):
    return subprocess.run([CLI, "check", path], capture_output=True, text=True)


def unlink_node(node):
    try:
        os.unlink("/dev/shm/cumemaudit-sim-" + node)
    except FileNotFoundError:
        pass


def case_leak(tmp, node):
    results = finish(start_ranks(tmp, node))
    for r, (rc, out, err) in enumerate(results):
        expect(rc == 23, f"rank {r}: exit {rc}, expected 23 (leaks)\n{out}\n{err}")
    drop = node_drop(results)
    expect(drop == WORLD * OWN, f"node lost {drop} bytes, expected {WORLD * OWN} (8 ranks x {OWN})")

    reps = rank_reports(tmp)
    expect(sorted(reps) == list(range(WORLD)), f"ranks reported: {sorted(reps)}")
    for r, rep in reps.items():
        p = rep["process"]
        expect(p["world_size"] == WORLD and p["local_rank"] == r, f"rank {r}: process {p}")
        s = rep["summary"]
        # Its own three buffers plus the 7 peers' three buffers its import references still hold.
        expect(s["leaked_bytes"] == WORLD * OWN, f"rank {r}: leaked {s['leaked_bytes']}, expected {WORLD * OWN}")
        expect(s["leaked_allocations"] == WORLD * GROWTHS, f"rank {r}: {s['leaked_allocations']} allocations")
        rows = {l["site"]["api"]: l for l in rep["leaks"] if l["class"] == "unreachable"}
        expect(set(rows) == APIS, f"rank {r}: leak sites {list(rows)}")
        expect(rows["cuMemCreate"]["bytes"] == OWN, f"rank {r}: create row {rows['cuMemCreate']['bytes']}")
        expect(rows["cuMemImportFromShareableHandle"]["bytes"] == (WORLD - 1) * OWN, f"rank {r}: import row")
        expect(len(rep["exports"]) == GROWTHS and all(e["exporter_pid"] == p["pid"] for e in rep["exports"]),
               f"rank {r}: exports {rep['exports']}")
        imports = [i for i in rep["imports"] if not i["released"]]
        expect(len(imports) == (WORLD - 1) * GROWTHS, f"rank {r}: {len(imports)} unreleased imports")

    job, text = merge(tmp)
    expect(job["schema"] == "cumemaudit/job/v1", f"schema {job['schema']}")
    expect(job["problems"] == [], f"problems: {job['problems']}")
    s = job["summary"]
    expect(s["leaked_bytes"] == drop, f"job leaked {s['leaked_bytes']} != node drop {drop}")
    expect(s["leaked_allocations"] == WORLD * GROWTHS, f"job allocations {s['leaked_allocations']}")
    expect(s["pinned_by_peers_bytes"] == drop, f"pinned {s['pinned_by_peers_bytes']} != node drop {drop}")
    for row in job["ranks"]:
        expect(row["own_leaked_bytes"] == OWN, f"rank {row['rank']}: own {row['own_leaked_bytes']}")
        expect(row["pinned_by_peers_bytes"] == OWN and row["pins_peers_bytes"] == (WORLD - 1) * OWN,
               f"rank {row['rank']}: pinning {row}")
    sites = {x["site"]["api"]: x for x in job["sites"]}
    expect(set(sites) == APIS and len(job["sites"]) == 3, f"job sites {[x['site']['api'] for x in job['sites']]}")
    for api, x in sites.items():
        expect(x["ranks"] == WORLD and x["rank_list"] == list(range(WORLD)), f"{api}: ranks {x['ranks']} {x['rank_list']}")
    expect(sites["cuMemCreate"]["bytes"] == WORLD * OWN, f"create bytes {sites['cuMemCreate']['bytes']}")
    # Every buffer is imported by the 7 other ranks: the import site holds each allocation once, never 7 times.
    imp = sites["cuMemImportFromShareableHandle"]
    expect(imp["bytes"] == WORLD * OWN and imp["allocations"] == WORLD * GROWTHS
           and imp["references"] == WORLD * (WORLD - 1) * GROWTHS, f"import site {imp['bytes']} {imp['allocations']}")
    expect(len(job["pinning"]) == WORLD * (WORLD - 1), f"{len(job['pinning'])} pinning pairs")
    expect(all(p["bytes"] == OWN for p in job["pinning"]), f"pinning rows {job['pinning'][:3]}")
    # The text names the largest pairs and the total; --pinning lists every pair.
    expect(f"cross-rank pinning: {drop // MiB}.0 MiB of exported memory held by peers' unreleased imports, "
           f"{WORLD * (WORLD - 1)} rank pairs; largest:" in text, f"text:\n{text}")
    pinning = subprocess.run([CLI, "merge", os.path.join(tmp, "reports"), "--pinning"], capture_output=True, text=True).stdout
    expect(f"rank 3's imports pin {OWN // MiB}.0 MiB of rank 0's memory" in pinning, f"merge --pinning:\n{pinning}")
    expect(sum(1 for l in pinning.splitlines() if "'s imports pin " in l) == WORLD * (WORLD - 1), f"merge --pinning:\n{pinning}")
    expect("ranks: 8 [0-7]" in text, f"text:\n{text}")
    expect(f"SUMMARY: cumemaudit job: {drop} bytes leaked" in text, f"text:\n{text}")
    c = check(os.path.join(tmp, "job.json"))
    expect(c.returncode == 1 and "FAIL" in c.stdout, f"check of a leaking job: {c.returncode}\n{c.stdout}{c.stderr}")


def case_fixed(tmp, node):
    results = finish(start_ranks(tmp, node, extra=["--fixed"]))
    for r, (rc, out, err) in enumerate(results):
        expect(rc == 0, f"rank {r}: exit {rc}\n{out}\n{err}")
    expect(node_drop(results) == 0, "the fixed sequence loses no memory on the node")
    reps = rank_reports(tmp)
    expect(sorted(reps) == list(range(WORLD)), f"ranks reported: {sorted(reps)}")
    for r, rep in reps.items():
        expect(rep["summary"]["leaked_bytes"] == 0 and rep["leaks"] == [], f"rank {r}: {rep['summary']} {rep['leaks']}")
        # every export stays listed (a peer may have pinned it), but none is still held by its exporter
        expect(rep["imports"] == [] and all(e["released"] for e in rep["exports"]),
               f"rank {r}: shares left {rep['imports']} {rep['exports']}")
    job, text = merge(tmp)
    expect(job["summary"]["leaked_bytes"] == 0 and job["sites"] == [] and job["pinning"] == [], f"job {job['summary']}")
    expect(job["problems"] == [], f"problems {job['problems']}")
    c = check(os.path.join(tmp, "job.json"))
    expect(c.returncode == 0 and "PASS" in c.stdout, f"check of a clean job: {c.returncode}\n{c.stdout}{c.stderr}")


def case_killed(tmp, node):
    victim = 5
    procs = start_ranks(tmp, node, extra=["--hang-rank", str(victim)], flags=["--option", "checkpoint_s=1"])
    report = None
    deadline = time.time() + 200
    line = procs[victim].stdout.readline()
    while "hanging" not in line:
        expect(line != "" and time.time() < deadline, f"rank {victim} ended before hanging")
        line = procs[victim].stdout.readline()
    # A checkpoint written after the teardown: remove what is there and wait for the next one.
    for f in glob.glob(os.path.join(tmp, "reports", f"cumemaudit.*.r{victim}.json")):
        os.unlink(f)
    while report is None:
        expect(time.time() < deadline, f"no checkpoint from rank {victim}")
        time.sleep(0.2)
        found = glob.glob(os.path.join(tmp, "reports", f"cumemaudit.*.r{victim}.json"))
        if found:
            report = found[0]
    procs[victim].send_signal(signal.SIGKILL)
    results = finish(procs)
    expect(results[victim][0] == -signal.SIGKILL, f"rank {victim}: exit {results[victim][0]}")
    for r, (rc, out, err) in enumerate(results):
        if r != victim:
            expect(rc == 23, f"rank {r}: exit {rc}\n{err}")
    rep = json.load(open(report))
    expect(rep["process"]["exit_code"] is None and rep["checkpoint"], f"victim report: {rep['process']}")
    expect(rep["summary"]["leaked_bytes"] == WORLD * OWN, f"victim checkpoint leaked {rep['summary']['leaked_bytes']}")
    job, text = merge(tmp)
    named = [p for p in job["problems"] if p.get("rank") == victim]
    expect(len(named) == 1 and "checkpoint" in named[0]["what"], f"problems {job['problems']}")
    expect(f"rank {victim}" in text and "checkpoint only" in text, f"text:\n{text}")
    expect(f"  rank {victim} left no exit report, only a checkpoint: it died without a word" in text.splitlines(), f"text:\n{text}")
    expect([(e["rank"], e["how"]) for e in job["rank_ends"]] == [(victim, "no_exit_report")], f"rank_ends {job['rank_ends']}")
    expect(job["summary"]["leaked_bytes"] == WORLD * OWN, f"job leaked {job['summary']['leaked_bytes']}")


def case_merge_problems(tmp, node):
    del node
    reports = os.path.join(tmp, "reports")
    os.makedirs(reports)

    def rank_report(rank, world):
        return {"schema": "cumemaudit/report/v1",
                "process": {"pid": 100 + rank, "rank": rank, "world_size": world, "host": "h", "argv": ["p"],
                            "exit_code": 0},
                "driver": {"version": 13000, "simulated": True},
                "summary": {"leaked_bytes": 0, "leaked_allocations": 0, "leaked_references": 0, "misuse_events": 0,
                            "unfreed_bytes": 0, "peak_tracked_bytes": 0, "intercepted_calls": 0},
                "leaks": [], "misuse": [], "owners": [], "steps": [
                    {"step": 1, "time_ns": 0, "by_owner": {"deepep": 10 * (rank + 1)}, "driver_used_bytes": 0,
                     "unattributed_bytes": 0},
                    {"step": 2, "time_ns": 0, "by_owner": {"deepep": 20 * (rank + 1)}, "driver_used_bytes": 0,
                     "unattributed_bytes": 0}]}

    for r in (0, 1, 3):
        json.dump(rank_report(r, 4), open(os.path.join(reports, f"cumemaudit.h.{100 + r}.r{r}.json"), "w"))
    json.dump(rank_report(1, 4), open(os.path.join(reports, "cumemaudit.h.999.r1.json"), "w"))  # duplicate
    json.dump(rank_report(3, 8), open(os.path.join(reports, "cumemaudit.h.998.r3.json"), "w"))  # also mismatched
    text = json.dumps(rank_report(2, 4))
    open(os.path.join(reports, "cumemaudit.h.102.r2.json"), "w").write(text[: len(text) // 2])  # truncated
    job, out = merge(tmp)
    what = " | ".join(p["what"] for p in job["problems"])
    expect("truncated" in what, f"truncated report not named: {what}")
    expect("duplicate rank 1" in what and "duplicate rank 3" in what, f"duplicates not named: {what}")
    expect("rank 2 of 4: no report" in what, f"missing rank not named: {what}")
    expect(job["reports"] == 3, f"merged {job['reports']} reports")
    steps = {s["step"]: s for s in job["steps"]}
    expect(steps[1]["live_bytes"] == 10 + 20 + 40 and steps[2]["growth_bytes"] == 70, f"steps {job['steps']}")
    expect(out.count("PROBLEM:") == len(job["problems"]), f"text:\n{out}")
    c = check(os.path.join(tmp, "job.json"))
    expect(c.returncode == 0, f"check of a clean job with problems: {c.returncode}\n{c.stdout}{c.stderr}")
    empty = os.path.join(tmp, "empty")
    os.makedirs(empty)
    p = subprocess.run([CLI, "merge", empty, "-o", os.path.join(tmp, "none.json")], capture_output=True, text=True)
    expect(p.returncode == 2 and "no rank report" in p.stderr, f"empty merge: {p.returncode} {p.stderr}")


def case_report_dir(tmp, node):
    """%h/%p/%r in report_dir: each rank writes into a directory of its own (a world of one suffices)."""
    env = {**os.environ, "CUMEMAUDIT_SIM_NODE": node, "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}
    xdir = os.path.join(tmp, "x")
    os.makedirs(xdir)
    proc = subprocess.run([CLI, "run", "--sim", "--report-dir", os.path.join(tmp, "out", "rank%r-%h", "p%p"), "--",
                           DEEPEP_RANKS, "--dir", xdir, "--growths", "1", "--fixed"],
                          capture_output=True, text=True, env=env, timeout=120)
    expect(proc.returncode == 0, f"exit {proc.returncode}\n{proc.stderr}")
    found = glob.glob(os.path.join(tmp, "out", "rank0-*", "p*", "cumemaudit.*.r0.json"))
    expect(len(found) == 1, f"reports: {glob.glob(os.path.join(tmp, 'out', '**'), recursive=True)}")
    rep = json.load(open(found[0]))
    expect(f"p{rep['process']['pid']}/" in found[0] and f"rank0-{rep['process']['host']}/" in found[0], f"path {found[0]}")


def case_fd_share(tmp, node):
    """POSIX fds across processes: rank 0 exports an fd, passes it over a Unix socket (SCM_RIGHTS), releases
    and closes everything; rank 1 imports, maps, unmaps, frees the range but keeps its import reference.
    The memory stays allocated though nothing can use it: the merge names rank 1 as pinning rank 0's 1 GiB,
    equal to the node's free-memory drop rank 0 measures."""
    env = {**os.environ, "CUMEMAUDIT_SIM_NODE": node}
    proc = subprocess.run([CLI, "run", "--sim", "--report-dir", os.path.join(tmp, "reports"), "--fail-on", "none",
                           "--", os.environ["FD_SHARE"], "--gib", "1"],
                          capture_output=True, text=True, env=env, timeout=120)
    expect(proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    m = re.search(r"pinned_drop=(\d+)", proc.stdout)
    expect(m is not None and int(m.group(1)) == 1 << 30, f"the node lost 1 GiB while nothing could use it:\n{proc.stdout}")
    reps = rank_reports(tmp)
    expect(sorted(reps) == [0, 1], f"ranks reported: {sorted(reps)}")
    expect(reps[0]["summary"]["leaked_bytes"] == 0, f"the exporter released all it took: {reps[0]['summary']}")
    rows = [(l["class"], l["site"]["api"], l["bytes"], l["handle_type"]) for l in reps[1]["leaks"]]
    expect(rows == [("unreachable", "cuMemImportFromShareableHandle", 1 << 30, "posix_fd")], f"importer's leaks: {rows}")
    job, text = merge(tmp)
    pin = [(p["importer_rank"], p["exporter_rank"], p["bytes"]) for p in job["pinning"]]
    expect(pin == [(1, 0, 1 << 30)], f"pinning: {job['pinning']}")
    expect("rank 1's imports pin 1.0 GiB of rank 0's memory" in text, f"text:\n{text}")


NVLS_RANKS = 4
NVLS_SRC = os.path.join(os.environ.get("SOURCE_ROOT", ""), "tests", "ranks", "nccl_nvls.cpp")


def run_nvls(tmp, node, flags=("--fail-on", "leaks,misuse"), extra=()):
    """NCCL's NVLS set-up (and, unless extra says otherwise, its clean teardown) on 4 local ranks."""
    procs = launch(tmp, node, NVLS_RANKS, lambda xdir: [os.environ["NCCL_NVLS"], "--dir", xdir, *extra], flags)
    results = finish(procs, timeout=120)
    return results, rank_reports(tmp)


def nvls_line(marker):
    for number, text in enumerate(open(NVLS_SRC), 1):
        if f"// site:{marker}" in text:
            return number
    raise AssertionError(marker)


def case_nvls_clean(tmp, node):
    """NCCL's NVLS buffer set up and torn down at ncclCommDestroy: the object's unmap and release are the
    program's own (before multicast was modelled, each was an "unmap of an unmapped range" and the gate
    failed a correct job), nothing leaks, and the node's memory comes back."""
    results, reps = run_nvls(tmp, node)
    for r, (rc, out, err) in enumerate(results):
        expect(rc == 0, f"rank {r}: exit {rc}\n{out}\n{err}")
        expect(f"rank {r}: drop=0" in out, f"rank {r} lost memory:\n{out}")
        expect("uc 6 MiB, mc 512 MiB" in out, f"rank {r} sizes:\n{out}")
    expect(sorted(reps) == list(range(NVLS_RANKS)), f"ranks reported: {sorted(reps)}")
    for r, rep in reps.items():
        s = rep["summary"]
        expect(rep["misuse"] == [] and rep["leaks"] == [], f"rank {r}: misuse {rep['misuse']}, leaks {rep['leaks']}")
        expect(s["leaked_bytes"] == 0 and s.get("leaked_multicast_objects", 0) == 0, f"rank {r}: {s}")


def case_nvls_kept_object(tmp, node):
    """One rank never releases its reference to the multicast object: a leak row of kind multicast at the
    line that took it (the create on local rank 0, the import on the others), no leaked bytes (an object
    holds no memory: the node lost none), and the gate fails that rank alone."""
    for keeper, api, marker in ((0, "cuMulticastCreate", "nvls_create"), (1, "cuMemImportFromShareableHandle", "nvls_import")):
        case_dir = os.path.join(tmp, str(keeper))
        os.makedirs(case_dir)
        results, reps = run_nvls(case_dir, f"{node}-{keeper}", extra=("--keep-object", str(keeper)))
        unlink_node(f"{node}-{keeper}")
        for r, (rc, out, err) in enumerate(results):
            expect(rc == (23 if r == keeper else 0), f"rank {r}: exit {rc}\n{out}\n{err}")
            expect(f"rank {r}: drop=0" in out, f"rank {r} lost memory:\n{out}")
        rep = reps[keeper]
        rows = [(l["class"], l["kind"], l["site"]["api"], l["bytes"], l["allocations"], l["references"], l["handle_type"])
                for l in rep["leaks"]]
        expect(rows == [("unreachable", "multicast", api, 512 * MiB, 1, 1, "posix_fd")], f"rank {keeper}: {rows}")
        frame = rep["leaks"][0]["site"]["frames"][0]
        expect(frame["file"].endswith("nccl_nvls.cpp") and frame["line"] == nvls_line(marker),
               f"rank {keeper}: site {frame['file']}:{frame['line']}, expected nccl_nvls.cpp:{nvls_line(marker)}")
        s = rep["summary"]
        expect(s["leaked_bytes"] == 0 and s["leaked_allocations"] == 0 and s["leaked_multicast_objects"] == 1
               and s["leaked_references"] == 1 and s["misuse_events"] == 0, f"rank {keeper}: {s}")
        err = results[keeper][2]
        expect("Leak of 1 multicast objects (512.0 MiB per device; no memory of their own)" in err
               and "; 1 multicast objects never released" in err, f"rank {keeper} stderr:\n{err}")
        for r, other in reps.items():
            expect(r == keeper or other["leaks"] == [], f"rank {r}: leaks {other['leaks']}")


def case_nvls_no_destroy(tmp, node):
    """The job ends without ncclCommDestroy, as many do: the memory and the object are still mapped, so they
    are held at exit and not leaks; the held bytes are the memory's alone."""
    results, reps = run_nvls(tmp, node, extra=("--no-destroy",))
    for r, (rc, out, err) in enumerate(results):
        expect(rc == 0, f"rank {r}: exit {rc}\n{out}\n{err}")
    for r, rep in reps.items():
        rows = sorted((l["class"], l["kind"], l["site"]["api"], l["bytes"]) for l in rep["leaks"])
        object_api = "cuMulticastCreate" if r == 0 else "cuMemImportFromShareableHandle"
        expect(rows == sorted([("mapped-at-exit", "vmm_physical", "cuMemCreate", 6 * MiB),
                               ("mapped-at-exit", "multicast", object_api, 512 * MiB)]), f"rank {r}: {rows}")
        s = rep["summary"]
        expect(s["mapped_at_exit_bytes"] == 6 * MiB and s["misuse_events"] == 0, f"rank {r}: {s}")


def case_nvls_enforce(tmp, node):
    """mode=enforce hands out virtual handles: the multicast calls get the real ones back, so NCCL's bind
    succeeds (before, it was given enforce's virtual value and NVLS set-up failed) and the run is clean."""
    results, reps = run_nvls(tmp, node, flags=("--mode", "enforce", "--fail-on", "leaks,misuse"))
    for r, (rc, out, err) in enumerate(results):
        expect(rc == 0 and f"rank {r}: drop=0" in out, f"rank {r}: exit {rc}\n{out}\n{err}")
    for r, rep in reps.items():
        s = rep["summary"]
        expect(rep["misuse"] == [] and rep["leaks"] == [] and s.get("reclaimed_references", 0) == 0,
               f"rank {r}: {s}, misuse {rep['misuse']}, leaks {rep['leaks']}")


JOB_WORLD = 64
LEAK_JOB = os.path.join(os.environ.get("SOURCE_ROOT", ""), "tests", "ranks", "leak_job.py")
# leak_job.py's leaking ranks: (first leaking step, MiB leaked at each step from then on), 12 steps (0-11)
JOB_LEAKERS = {5: (3, 2), 17: (6, 4), 42: (9, 10)}
JOB_STEPS = 12
JOB_IMPORTERS = (1, 2, 3)
JOB_SHARED = 4 * MiB
JOB_HELD = 3 * MiB  # per rank: 1 MiB never freed, 2 MiB mapped at exit


def line_of(path, marker):
    hits = [n for n, text in enumerate(open(path), 1) if marker in text]
    assert len(hits) == 1, f"{marker!r} in {path}: {hits}"
    return hits[0]


def run_leak_job(tmp, node, parallel=8):
    """JOB_WORLD real runs of leak_job.py under `cumemaudit run --sim`, `parallel` at a time in rank order
    (ranks 0-3 share a buffer, so they run together)."""
    xdir = os.path.join(tmp, "exchange")
    os.makedirs(xdir)
    env = {**os.environ, "CUMEMAUDIT_SIM_NODE": node, "WORLD_SIZE": str(JOB_WORLD), "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join([os.path.join(os.environ["SOURCE_ROOT"], "tools", "python"),
                                          os.path.join(os.environ["SOURCE_ROOT"], "tests", "pyframes")])}
    env.pop("CUMEMAUDIT_OPTIONS", None)
    running, codes = [], {}
    for r in range(JOB_WORLD):
        while len(running) >= parallel:
            p, rank = running.pop(0)
            codes[rank] = (p.wait(timeout=120), p)
        cmd = [CLI, "run", "--sim", "--report-dir", os.path.join(tmp, "reports"), "--",
               "/usr/bin/python3", LEAK_JOB, "--dir", xdir, "--steps", str(JOB_STEPS)]
        running.append((subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                         env={**env, "RANK": str(r), "LOCAL_RANK": str(r % 8)}), r))
    for p, rank in running:
        codes[rank] = (p.wait(timeout=120), p)
    for r, (rc, p) in sorted(codes.items()):
        leaks = r in JOB_LEAKERS or r in JOB_IMPORTERS
        expect(rc == (23 if leaks else 0), f"rank {r}: exit {rc}\n{p.stderr.read()}")


def cli_ok(*args):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)
    expect(p.returncode == 0 and p.stderr == "", f"cumemaudit {' '.join(args)}: exit {p.returncode}\n{p.stderr}")
    return p.stdout


def case_job_64(tmp, node):
    """64 ranks of a small Python job, each a real run on the simulated driver: three ranks leak from a step of
    their own, ranks 1-3 leak their import of rank 0's buffer (one allocation, three leaked references), and
    every rank holds memory at exit. `merge` says which ranks leak, how much, since which step and at which
    line in at most 60 lines; html, report and trace draw the merged job.json and the directory alike; held
    memory is never counted as leaked."""
    run_leak_job(tmp, node)
    reports = os.path.join(tmp, "reports")
    reps = rank_reports(tmp)
    expect(sorted(reps) == list(range(JOB_WORLD)), f"ranks reported: {sorted(reps)}")
    create_line = line_of(LEAK_JOB, "drv.check(drv.lib.cuMemCreate(")
    import_line = line_of(LEAK_JOB, "# IMPORT")
    leaked = {r: (JOB_STEPS - first) * mib * MiB for r, (first, mib) in JOB_LEAKERS.items()}
    total = sum(leaked.values()) + JOB_SHARED
    allocations = sum(JOB_STEPS - first for first, _ in JOB_LEAKERS.values()) + 1
    for r, rep in reps.items():  # each rank's own report: held memory is held, not leaked
        s = rep["summary"]
        own = leaked.get(r, JOB_SHARED if r in JOB_IMPORTERS else 0)
        expect(s["leaked_bytes"] == own and s["unfreed_bytes"] == 1 * MiB and s["mapped_at_exit_bytes"] == 2 * MiB,
               f"rank {r}: {s}")

    job_path = os.path.join(tmp, "job.json")
    proc = subprocess.run([CLI, "merge", reports, "-o", job_path], capture_output=True, text=True, timeout=120)
    expect(proc.returncode == 0, f"merge exit {proc.returncode}\n{proc.stderr}")
    text = proc.stdout
    lines = text.splitlines()
    expect(len(lines) <= 60, f"merge printed {len(lines)} lines:\n{text}")
    expect(lines[1] == f"job: 76.0 MiB ({total} bytes) leaked in {allocations} allocations, each counted once across ranks",
           f"job line: {lines[1]}")
    # The leaking ranks' steps forecast them to run out: merge leads with the first (docs/FORECAST.md).
    expect(lines[2].startswith("forecast: rank ") and lines[2].endswith(" of 64 ranks forecast to run out)"), f"forecast line: {lines[2]}")
    expect(lines[3].startswith("leaking ranks: 6 of 64,"), f"leaking ranks line: {lines[3]}")
    want_ranks = [
        f"  rank 42      30.0 MiB ({leaked[42]} bytes; own 30.0 MiB)  since step 9  at leak_job.py:{create_line} (create)",
        f"  rank 17      24.0 MiB ({leaked[17]} bytes; own 24.0 MiB)  since step 6  at leak_job.py:{create_line} (create)",
        f"  rank 5       18.0 MiB ({leaked[5]} bytes; own 18.0 MiB)  since step 3  at leak_job.py:{create_line} (create)"]
    want_ranks += [f"  rank {r}        4.0 MiB ({JOB_SHARED} bytes; own 0 B)  since step 0  at leak_job.py:{import_line} (share)"
                   for r in JOB_IMPORTERS]
    expect(lines[4:10] == want_ranks, "leaking ranks:\n" + "\n".join(lines[4:10]))
    expect(f"    72.0 MiB  unreachable    cuMemCreate at leak_job.py:{create_line} (create)  ranks: 3 [5,17,42]" in lines,
           f"top site line missing:\n{text}")
    # One allocation, three leaked references (ranks 1-3): its bytes once.
    expect(f"     4.0 MiB  unreachable    cuMemImportFromShareableHandle at leak_job.py:{import_line} (share)  ranks: 3 [1-3]"
           in lines, f"import site line missing:\n{text}")
    expect(f"held at exit, not leaks: 192.0 MiB ({JOB_WORLD * JOB_HELD} bytes) unfreed or mapped at exit on 64 ranks" in lines,
           f"held line missing:\n{text}")
    expect("cross-rank pinning: 4.0 MiB of exported memory held by peers' unreleased imports, 3 rank pairs; largest:" in lines,
           f"pinning line missing:\n{text}")
    expect(lines[-1] == f"SUMMARY: cumemaudit job: {total} bytes leaked in {allocations} allocations on 64 ranks; 0 problems",
           f"summary: {lines[-1]}")

    job = json.load(open(job_path))
    s = job["summary"]
    expect(s["leaked_bytes"] == total and s["leaked_allocations"] == allocations, f"job summary {s}")
    expect(s["unfreed_bytes"] == JOB_WORLD * MiB and s["mapped_at_exit_bytes"] == JOB_WORLD * 2 * MiB, f"held {s}")
    sites = [(x["class"], x["site"]["api"], x["bytes"], x["allocations"], x["references"], x["rank_list"]) for x in job["sites"]]
    expect(sites == [("unreachable", "cuMemCreate", sum(leaked.values()), allocations - 1, allocations - 1, [5, 17, 42]),
                     ("unreachable", "cuMemImportFromShareableHandle", JOB_SHARED, 1, 3, [1, 2, 3])], f"job sites {sites}")
    ranks = {x["rank"]: x for x in job["ranks"]}
    for r, x in ranks.items():
        first = JOB_LEAKERS[r][0] if r in JOB_LEAKERS else 0 if r in JOB_IMPORTERS else -1
        expect(x["first_leak_step"] == first and x["held_at_exit_bytes"] == JOB_HELD, f"rank {r}: {x}")
        expect([st["step"] for st in x["steps"]] == list(range(JOB_STEPS)), f"rank {r} steps {x['steps']}")
        site = job["sites"][x["top_site"]]["site"]["api"] if x["top_site"] >= 0 else None
        expect(site == ("cuMemCreate" if r in JOB_LEAKERS else "cuMemImportFromShareableHandle" if r in JOB_IMPORTERS
                        else None), f"rank {r}: top site {site}")
    expect([st["leaked_bytes"] for st in ranks[42]["steps"]] == [max(0, step - 8) * 10 * MiB for step in range(JOB_STEPS)],
           f"rank 42 leaked over steps {ranks[42]['steps']}")

    # Details behind flags: every rank, every pinning pair, every step.
    verbose = cli_ok("merge", reports, "-v").splitlines()
    expect(sum(1 for l in verbose if l.startswith("  rank ")) == JOB_WORLD + 3, f"merge -v:\n{verbose[:12]}")
    expect(sum(1 for l in verbose if l.startswith("  step ")) == JOB_STEPS, "merge -v lists every step")

    # report, html and trace take the job.json and the directory alike (the directory merged as merge does).
    expect(cli_ok("report", job_path) == text and cli_ok("report", reports) == text, "report of the job differs from merge")
    pages = {}
    for name, src in (("file", job_path), ("dir", reports)):
        out = os.path.join(tmp, f"job-{name}.html")
        cli_ok("html", src, "-o", out)
        pages[name] = open(out).read()
    expect(pages["file"] == pages["dir"], "the job page of job.json differs from that of the directory")
    page = pages["file"]
    expect(f"<b>6 of 64 ranks leak</b>: 76.0 MiB ({total} bytes) in {allocations} allocations" in page, "verdict missing")
    expect(f"Worst: <b>rank 42</b> holds 30.0 MiB leaked since <b>step 9</b>, largest at <code>leak_job.py:{create_line} "
           "(create)</code> (cuMemCreate)." in page, "worst rank missing from the verdict")
    expect(re.findall(r'<polyline class="rank-line" data-rank="(\d+)"', page) == ["42", "17", "5", "1", "2", "3"],
           "one line per leaking rank, worst first")
    expect('id="job-heatmap"' in page and page.count("<rect") >= JOB_WORLD * JOB_STEPS, "heatmap of every rank by step")
    leaking_rows = re.findall(r'<table class="leaking-ranks">.*?</table>', page, re.S)[0]
    expect(re.findall(r'<tr><td class="num" data-sort="(\d+)"', leaking_rows) == ["42", "17", "5", "1", "2", "3"],
           "the leaking ranks table holds only the leaking ranks")
    traces = {}
    for name, src in (("file", job_path), ("dir", reports)):
        out = os.path.join(tmp, f"trace-{name}.json")
        cli_ok("trace", src, "-o", out)
        traces[name] = json.load(open(out))
    expect(traces["file"] == traces["dir"], "the trace of job.json differs from that of the directory")
    events = traces["file"]["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    expect(len(names) == JOB_WORLD and names[42].startswith("rank 42 "), f"trace processes {list(names.values())[:3]}")
    leaked42 = [e["args"]["bytes"] for e in events if e["pid"] == 42 and e["name"] == "leaked so far"]
    expect(max(leaked42) == leaked[42], f"rank 42 leaked counter {leaked42}")
    begins = [e["name"] for e in events if e["name"].startswith("leak begins")]
    expect(f"leak begins: step 9 at leak_job.py:{create_line} (create)" in begins and len(begins) == 6, f"{begins}")

    # Held at exit is never leaked: a rank that only holds memory, in the trace and diff of its report.
    holder = glob.glob(os.path.join(reports, "cumemaudit.*.r10.json"))[0]
    trace10 = os.path.join(tmp, "trace10.json")
    cli_ok("trace", holder, "-o", trace10)
    instants = [e["name"] for e in json.load(open(trace10))["traceEvents"] if e.get("cat") in ("leak", "held")]
    expect(len(instants) == 2 and all(n.startswith("held at exit: ") for n in instants), f"rank 10 trace {instants}")
    d = cli_ok("diff", holder, glob.glob(os.path.join(reports, "cumemaudit.*.r42.json"))[0])
    row = [l for l in d.splitlines() if l.startswith("leaked  ")]
    expect(row == [f"leaked                            0 B      30.0 MiB  +30.0 MiB (+{leaked[42]})"], f"diff:\n{d}")


OOM_JOB = os.path.join(os.environ.get("SOURCE_ROOT", ""), "tests", "ranks", "oom_job.py")
OOM_WORLD = 4


def case_oom_job(tmp, node):
    """4 ranks of a small Python job, each a real run on a simulated device of 64 MiB: rank 1 leaks 2 MiB a step
    from step 12 until the 16 MiB workspace asked at step 34 is refused and it exits 1; rank 2 exits 3 after
    step 40; rank 3 is sent SIGTERM after step 45; rank 0 ends cleanly. merge's text, job.json's rank_ends and
    the job page say how each ended, with the refusal's step, call, request and what of the used memory was
    leaked."""
    del node  # a device of its own per rank: no shared node
    reports = os.path.join(tmp, "reports")
    env = {**os.environ, "WORLD_SIZE": str(OOM_WORLD), "CUMEMAUDIT_SIM_MEMORY": "64MiB", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join([os.path.join(os.environ["SOURCE_ROOT"], "tools", "python"),
                                          os.path.join(os.environ["SOURCE_ROOT"], "tests", "pyframes")])}
    env.pop("CUMEMAUDIT_OPTIONS", None)
    env.pop("CUMEMAUDIT_SIM_NODE", None)
    procs = [subprocess.Popen([CLI, "run", "--sim", "--report-dir", reports, "--", "/usr/bin/python3", OOM_JOB],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env={**env, "RANK": str(r), "LOCAL_RANK": str(r)}) for r in range(OOM_WORLD)]
    results = finish(procs, timeout=120)
    codes = [rc for rc, _, _ in results]
    expect(codes == [0, 1, 3, -signal.SIGTERM], f"exit codes {codes}\n" + "\n".join(err for _, _, err in results))
    expect("CUDA error 2" in results[1][2], f"rank 1 stderr:\n{results[1][2]}")
    reps = rank_reports(tmp)
    expect(sorted(reps) == list(range(OOM_WORLD)), f"ranks reported: {sorted(reps)}")
    expect(reps[3]["process"].get("signal") == "SIGTERM" and reps[3]["checkpoint"] and reps[3]["process"]["exit_code"] is None,
           f"rank 3: {reps[3]['process']}")
    expect(all(reps[r]["process"].get("signal", "") == "" for r in range(3)), "a rank no signal ended names one")
    workspace_line = line_of(OOM_JOB, "# WORKSPACE")
    where = f"oom_job.py:{workspace_line} (eval_workspace)"

    job_path = os.path.join(tmp, "job.json")
    proc = subprocess.run([CLI, "merge", reports, "-o", job_path], capture_output=True, text=True, timeout=120)
    expect(proc.returncode == 0, f"merge exit {proc.returncode}\n{proc.stderr}")
    lines = proc.stdout.splitlines()
    expect(lines[0] == "cumemaudit merge: 4 rank reports, world size 4", f"first line: {lines[0]}")
    want = ["ranks that did not end cleanly: 3 of 4",
            f"  rank 1 ran out of memory at step 34: cuMemCreate 16.0 MiB at {where}, 44.0 MiB of 58.0 MiB used was "
            "leaked; exit code 1",
            "  rank 2 exited with code 3 after step 40",
            "  rank 3 was killed by SIGTERM after step 45"]
    expect(lines[2].startswith("forecast: rank 1 runs out of memory first, at step ≈ ") and
           lines[2].endswith(" (1 of 4 ranks forecast to run out)"), f"forecast line: {lines[2]}")
    expect(lines[3:7] == want, "merge's ends:\n" + "\n".join(lines[3:7]) + "\n\nall:\n" + proc.stdout)

    job = json.load(open(job_path))
    ends = job["rank_ends"]
    expect([(e["rank"], e["how"]) for e in ends] == [(1, "out_of_memory"), (2, "exit"), (3, "signal")], f"rank_ends {ends}")
    oom = ends[0]
    expect((oom["step"], oom["api"], oom["requested_bytes"], oom["leaked_bytes"], oom["used_bytes"], oom["exit_code"])
           == (34, "cuMemCreate", 16 * MiB, 44 * MiB, 58 * MiB, 1), f"rank 1's end {oom}")
    expect(oom["pid"] == reps[1]["process"]["pid"], f"rank 1's pid {oom['pid']}")
    frame = oom["site"]["python_frames"][oom["site"]["user_frame"]]
    expect(os.path.basename(frame["file"]) == "oom_job.py" and frame["line"] == workspace_line, f"rank 1's site {frame}")
    expect((ends[1]["step"], ends[1]["exit_code"]) == (40, 3), f"rank 2's end {ends[1]}")
    expect((ends[2]["step"], ends[2]["signal"]) == (45, "SIGTERM") and "exit_code" not in ends[2], f"rank 3's end {ends[2]}")
    ranks = {x["rank"]: x for x in job["ranks"]}
    expect(ranks[0]["end"] == {"how": "clean", "exit_code": 0, "signal": "", "step": 49, "api": "", "requested_bytes": 0,
                               "used_bytes": 0, "leaked_bytes": 0, "replaced_by_exec": ""}, f"rank 0's end {ranks[0]['end']}")
    expect({k: v for k, v in ranks[1]["end"].items()} == {k: v for k, v in oom.items() if k not in ("rank", "pid")},
           f"rank 1's end in ranks {ranks[1]['end']}")
    # Marked as each step begins: the leak of step 12 is first seen at the mark of step 13.
    expect(ranks[1]["leaked_bytes"] == 44 * MiB and ranks[1]["first_leak_step"] == 13, f"rank 1 {ranks[1]}")
    expect(cli_ok("report", job_path) == proc.stdout, "report of the job differs from merge")

    page_path = os.path.join(tmp, "job.html")
    cli_ok("html", job_path, "-o", page_path)
    page = open(page_path).read()
    expect("<p class=\"rank-ends\"><b>3 of 4 ranks did not end cleanly</b>:</p>" in page, "the verdict does not name the ends")
    expect(f"<li data-rank=\"1\"><b>rank 1</b> ran out of memory at step 34: cuMemCreate 16.0 MiB at {where}, 44.0 MiB "
           "of 58.0 MiB used was leaked; exit code 1</li>" in page, "the verdict does not name rank 1's end")
    cards = re.findall(r'<div class="card bad rank-end" data-rank="(\d+)" data-end="(\w+)">rank \d+<b>([^<]*)</b>', page)
    expect(cards == [("1", "out_of_memory", "out of memory at step 34"), ("2", "exit", "exit code 3"),
                     ("3", "signal", "killed by SIGTERM")], f"end cards {cards}")
    marks = re.findall(r'<path class="rank-end" data-rank="(\d+)" data-end="(\w+)"', page)
    expect(marks == [("1", "out_of_memory"), ("2", "exit"), ("3", "signal")], f"chart end marks {marks}")
    expect("ran out of memory</text>" in page and "or died here</text>" in page, "the ✕ is not in the chart's legend")
    expect("world size 4;" in page and "world size -1" not in page, "world size")

    trace_path = os.path.join(tmp, "trace.json")
    cli_ok("trace", job_path, "-o", trace_path)
    trace_ends = sorted((e["pid"], e["name"]) for e in json.load(open(trace_path))["traceEvents"] if e.get("cat") == "end")
    expect(trace_ends == [(1, "end: " + want[1][len("  rank 1 "):]), (2, "end: exited with code 3 after step 40"),
                          (3, "end: was killed by SIGTERM after step 45")], f"trace ends {trace_ends}")


HELD_JOB = os.path.join(os.environ.get("SOURCE_ROOT", ""), "tests", "ranks", "held_job.py")
HELD_STEPS = 6
HELD_LEAK_FROM = 3  # rank 1 leaks 2 MiB a step from this step on; rank 0 only makes handles ahead of their use


def case_held_unmapped(tmp, node):
    """Two ranks make VMM handles ahead of their maps and release them before exit; rank 1 also leaks from step
    3. At a mark, a handle held and never mapped is held_unmapped_bytes, never leaked: rank 0 has no leak alarm,
    no "since step", no "leak begins" and passes check; rank 1's leak is reported at step 3 at its own line."""
    env = {**os.environ, "CUMEMAUDIT_SIM_NODE": node, "WORLD_SIZE": "2", "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPATH": os.pathsep.join([os.path.join(os.environ["SOURCE_ROOT"], "tools", "python"),
                                          os.path.join(os.environ["SOURCE_ROOT"], "tests", "pyframes")])}
    env.pop("CUMEMAUDIT_OPTIONS", None)
    reports = os.path.join(tmp, "reports")
    runs = {}
    for r, extra in ((0, []), (1, ["--leak-from", str(HELD_LEAK_FROM)])):
        cmd = [CLI, "run", "--sim", "--report-dir", reports, "--", "/usr/bin/python3", HELD_JOB,
               "--steps", str(HELD_STEPS), *extra]
        runs[r] = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                                 env={**env, "RANK": str(r), "LOCAL_RANK": str(r)})
    expect(runs[0].returncode == 0, f"rank 0: exit {runs[0].returncode}\n{runs[0].stderr}")
    expect(runs[1].returncode == 23, f"rank 1: exit {runs[1].returncode}\n{runs[1].stderr}")
    expect("a leak" not in runs[0].stderr and "warning" not in runs[0].stderr, f"rank 0 stderr:\n{runs[0].stderr}")
    leak_line = line_of(HELD_JOB, "# LEAK")
    alarm_lines = [l for l in runs[1].stderr.splitlines() if "a leak" in l]
    expect(len(alarm_lines) == 1 and "step 3: unreachable VMM memory grew by 2.0 MiB (now 2.0 MiB): a leak" in alarm_lines[0]
           and f"held_job.py:{leak_line}" in alarm_lines[0], f"rank 1 alarms: {alarm_lines}\n{runs[1].stderr}")

    reps = rank_reports(tmp)
    expect(sorted(reps) == [0, 1], f"ranks reported: {sorted(reps)}")
    # 8 MiB ahead of its map (steps 0-1), 4 MiB never mapped until its release after the last mark.
    want_held = [12 * MiB, 12 * MiB, 4 * MiB, 4 * MiB, 4 * MiB, 4 * MiB]
    for r, rep in reps.items():
        steps = [s for s in rep["steps"] if not s.get("label")]
        expect([s["step"] for s in steps] == list(range(HELD_STEPS)), f"rank {r} steps {steps}")
        expect([s.get("held_unmapped_bytes", 0) for s in steps] == want_held, f"rank {r} held {steps}")
        want_leaked = [max(0, n - HELD_LEAK_FROM + 1) * 2 * MiB if r == 1 else 0 for n in range(HELD_STEPS)]
        expect([s.get("leaked_bytes", 0) for s in steps] == want_leaked, f"rank {r} leaked {steps}")
    expect(reps[0]["summary"]["leaked_bytes"] == 0 and reps[0].get("alarms", []) == [], f"rank 0: {reps[0]['summary']}")
    expect(reps[1]["summary"]["leaked_bytes"] == (HELD_STEPS - HELD_LEAK_FROM) * 2 * MiB, f"rank 1: {reps[1]['summary']}")
    alarms = reps[1]["alarms"]
    expect(len(alarms) == 1 and alarms[0]["what"] == "leak" and alarms[0]["step"] == HELD_LEAK_FROM
           and alarms[0]["last_step"] == HELD_STEPS - 1 and alarms[0]["count"] == HELD_STEPS - HELD_LEAK_FROM
           and alarms[0]["bytes"] == (HELD_STEPS - HELD_LEAK_FROM) * 2 * MiB, f"rank 1 alarms {alarms}")
    py = alarms[0]["site"]["python_frames"][alarms[0]["site"]["user_frame"]]
    expect(py["file"].endswith("held_job.py") and py["line"] == leak_line, f"rank 1 alarm site {alarms[0]['site']}")

    job, text = merge(tmp)
    ranks = {x["rank"]: x for x in job["ranks"]}
    expect(ranks[0]["first_leak_step"] == -1 and ranks[1]["first_leak_step"] == HELD_LEAK_FROM, f"{job['ranks']}")
    expect("since step 0" not in text and f"since step {HELD_LEAK_FROM}" in text, f"merge:\n{text}")
    p = subprocess.run([CLI, "check", reports], capture_output=True, text=True, timeout=120)
    lines = p.stdout.splitlines()
    expect(p.returncode == 1 and len(lines) == 2, f"check: exit {p.returncode}\n{p.stdout}{p.stderr}")
    expect(any(l.startswith("PASS ") and ".r0.json" in l for l in lines), f"check:\n{p.stdout}")
    expect(any(l.startswith("FAIL ") and ".r1.json" in l and f"held_job.py:{leak_line}" in l for l in lines), f"check:\n{p.stdout}")
    out = os.path.join(tmp, "trace.json")
    cli_ok("trace", reports, "-o", out)
    events = json.load(open(out))["traceEvents"]
    begins = [(e["pid"], e["name"]) for e in events if e["name"].startswith("leak begins")]
    expect(len(begins) == 1 and begins[0][0] == 1 and begins[0][1].startswith(f"leak begins: step {HELD_LEAK_FROM} at held_job.py:{leak_line}"),
           f"trace: {begins}")


CASES = named_cases(globals())


@contextlib.contextmanager
def fresh_node(name):
    """A simulated node of the case's own, unlinked afterwards whatever happened."""
    node = f"test-{name}-{uuid.uuid4().hex[:12]}"
    try:
        yield node
    finally:
        unlink_node(node)


if __name__ == "__main__":
    sys.exit(main(CASES, around=fresh_node))
