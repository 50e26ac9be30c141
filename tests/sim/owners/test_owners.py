#!/usr/bin/env python3
"""Who grew, and when, on the simulated driver: owner attribution by library, exact per-step figures, growth
alarms at the right step (and none for a steady job), unreachable-VMM leak alarms, CUDA graph tallies.

Usage: test_owners.py CASE (paths from meson: CLI, OWNERS_JOB, STANDIN_LIBS, SOURCE_ROOT)."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from cases import Failure, expect, main, named_cases  # noqa: E402
from sim_neighbour import neighbour  # noqa: E402

CLI = os.environ["CLI"]
JOB = os.environ["OWNERS_JOB"]
LIBS = os.environ["STANDIN_LIBS"].split(":")
SRC = os.path.join(os.environ["SOURCE_ROOT"], "tests", "sim", "owners", "standin_lib.cpp")
MiB = 1 << 20


def job(tmp, mode, options=(), rc=0):
    flags = [x for o in options for x in ("--option", o)]
    cmd = [CLI, "run", "--sim", "--report-dir", tmp, "--fail-on", "none", *flags, "--", JOB, mode, *LIBS]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    expect(p.returncode == rc, f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    files = glob.glob(os.path.join(tmp, "cumemaudit.*.json"))
    expect(len(files) == 1, f"one report expected, found {files}")
    return json.load(open(files[0])), p.stderr


def site_line(name):
    for n, text in enumerate(open(SRC), 1):
        if f"// site:{name}" in text:
            return n
    raise Failure(f"no site:{name} in {SRC}")


def numbered(rep):
    return {s["step"]: s for s in rep["steps"] if not s.get("label")}


def case_attribution(tmp):
    rep, _ = job(tmp, "steady")
    owners = {o["owner"]: o for o in rep["owners"]}
    expect({"pytorch", "nccl", "deepep"} <= set(owners), f"owners: {sorted(owners)}")
    expect(owners["pytorch"]["live_bytes"] == 60 * MiB and owners["pytorch"]["peak_bytes"] == 160 * MiB,
           f"pytorch keeps 10 MiB a step over 6 steps, peaks with a 100 MiB scratch: {owners['pytorch']}")
    expect(owners["nccl"]["live_bytes"] == 64 * MiB and owners["nccl"]["live_by_kind"] == {"classic": 64 * MiB},
           f"nccl: {owners['nccl']}")
    expect(owners["deepep"]["live_bytes"] == 32 * MiB, f"deepep: {owners['deepep']}")
    unfreed = {l["owner"]: l for l in rep["leaks"] if l["class"] == "unfreed"}
    expect(unfreed["nccl"]["site"]["frames"][0]["line"] == site_line("standin_alloc"), "site inside the library")


def case_nccl_mem_alloc(tmp):
    """ncclMemAlloc passes memory on: what it allocates for PyTorch's allocator (a MemPool over NCCL's
    allocator) is pytorch's, what the program asks of it directly is the program's, and NCCL's own allocations
    stay nccl's; so a step counts a MemPool segment once, with PyTorch's reserved memory. ncclMemFree gives
    both back, and the frees are no misuse."""
    rep, _ = job(tmp, "nccl-mem-alloc")
    steps = numbered(rep)
    expect(steps[1]["by_owner"] == {"pytorch": 64 * MiB, "owners_job": 32 * MiB, "nccl": 64 * MiB, "deepep": 32 * MiB},
           f"step 1: {steps[1]['by_owner']}")
    expect(steps[1]["unattributed_bytes"] == 0, f"step 1: {steps[1]}")
    expect(steps[2]["by_owner"] == {"pytorch": 0, "owners_job": 0, "nccl": 64 * MiB, "deepep": 32 * MiB},
           f"step 2: {steps[2]['by_owner']}")
    expect(rep["misuse"] == [] and [l for l in rep["leaks"] if l["class"] != "unfreed"] == [], f"{rep['leaks']} {rep['misuse']}")


def case_steady(tmp):
    rep, err = job(tmp, "steady")
    steps = numbered(rep)
    expect(sorted(steps) == list(range(7)), f"steps 0..6: {sorted(steps)}")
    for n, s in steps.items():
        expect(s["by_owner"].get("pytorch", 0) == 10 * MiB * n, f"step {n}: pytorch {s['by_owner']}")
        expect(s["by_owner"]["nccl"] == 64 * MiB and s["by_owner"]["deepep"] == 32 * MiB, f"step {n}: {s['by_owner']}")
        tracked = sum(s["by_owner"].values())
        expect(s["driver_used_bytes"] == tracked and s["unattributed_bytes"] == 0,
               f"step {n}: the simulated driver's used memory is exactly what was tracked: {s}")
        expect(s["process_used_bytes"] == tracked, f"step {n}: NVML charges this process all of it: {s}")
        # Each step's 100 MiB scratch buffer came and went between two marks: only the peak shows it.
        expect(s["peak_tracked_bytes"] == tracked + (100 * MiB if n else 0), f"step {n}: peak {s['peak_tracked_bytes']}")
    page = os.path.join(tmp, "page.html")
    report_file = glob.glob(os.path.join(tmp, "cumemaudit.*.json"))[0]
    p = subprocess.run([CLI, "html", "-o", page, report_file], capture_output=True, text=True, timeout=60)
    html = open(page).read() if p.returncode == 0 else p.stderr
    expect('<path class="peak"' in html and "peak since the previous mark: 206.0 MiB" in html,
           "the chart draws the peaks between marks (step 1: 96 + 10 MiB kept, 100 MiB scratch)")
    expect(rep.get("alarms", []) == [] and "grew" not in err, f"a steady job raises no alarm: {rep.get('alarms')}\n{err}")


def case_growth_alarm(tmp):
    rep, err = job(tmp, "nccl-leak")
    alarms = rep["alarms"]
    # One site grew at steps 3, 4 and 5: one alarm, counted three times.
    expect([(a["step"], a["last_step"], a["count"], a["what"], a["owner"], a["bytes"], a["live_bytes"]) for a in alarms] ==
           [(3, 5, 3, "growth", "nccl", 900 * MiB, 964 * MiB)], f"alarms: {alarms}")
    expect(all(a["site"]["api"] == "cuMemAlloc" and a["site"]["frames"][0]["line"] == site_line("standin_alloc")
               for a in alarms), f"alarm sites: {[a['site'] for a in alarms]}")
    # Logged once: the repeats come within alarm_interval_s (60 s by default).
    expect(err.count("memory outside PyTorch grew by 300.0 MiB in nccl") == 1, f"log lines:\n{err}")
    expect(re.search(r"step 3: memory outside PyTorch grew by 300\.0 MiB in nccl \(now 364\.0 MiB\), most at cuMemAlloc "
                     r"in standin_alloc .*standin_lib\.cpp:\d+", err), f"the line names owner, site and bytes:\n{err}")
    # pytorch grows 10 MiB a step too, and never alarms: its own statistics see it
    expect(all(a["owner"] != "pytorch" for a in alarms), "no pytorch alarm")


def case_alarm_repeats_logged(tmp):
    """With alarm_interval_s=0 every repeat of an alarm is logged, with its count; max_alarms caps the sites kept."""
    rep, err = job(tmp, "nccl-leak", options=["alarm_interval_s=0"])
    expect(err.count("memory outside PyTorch grew by 300.0 MiB in nccl") == 3, f"log lines:\n{err}")
    expect("(3 times since step 3)" in err, f"the repeat names its count:\n{err}")
    rep, _ = job(tempfile.mkdtemp(dir=tmp), "nccl-leak", options=["max_alarms=0"])
    expect(rep["alarms"] == [] and rep["summary"]["alarms_dropped"] == 3, f"capped: {rep['alarms']} {rep['summary']}")


def case_warmup(tmp):
    rep, _ = job(tmp, "nccl-leak", options=["warmup_steps=5"])
    expect([a["step"] for a in rep["alarms"]] == [5], f"alarms only after 5 warm-up marks: {rep['alarms']}")
    rep, _ = job(tempfile.mkdtemp(dir=tmp), "nccl-leak", options=["growth_alarm=1GiB"])
    expect(rep["alarms"] == [], f"below the threshold: {rep['alarms']}")


def case_vmm_leak_alarm(tmp):
    rep, err = job(tmp, "vmm-leak")
    leaks = [a for a in rep["alarms"] if a["what"] == "leak"]
    expect([(a["step"], a["last_step"], a["count"], a["owner"], a["bytes"], a["live_bytes"]) for a in leaks] ==
           [(2, 4, 2, "deepep", 4 * MiB, 4 * MiB)], f"leak alarms: {rep['alarms']}")
    expect(leaks[0]["site"]["api"] == "cuMemCreate" and leaks[0]["site"]["frames"][0]["line"] == site_line("standin_vmm"),
           f"named at the reference's site: {leaks[0]['site']}")
    expect("step 2: unreachable VMM memory grew by 2.0 MiB" in err, err)
    # Each step says how much has leaked so far, in all and by owner: a leak's growth apart from use.
    steps = numbered(rep)
    expect([steps[n]["leaked_bytes"] for n in range(7)] == [0, 0, 2 * MiB, 2 * MiB, 4 * MiB, 4 * MiB, 4 * MiB],
           f"leaked at steps: {[(n, s.get('leaked_bytes')) for n, s in sorted(steps.items())]}")
    expect(steps[6]["leaked_by_owner"] == {"deepep": 4 * MiB} and steps[1]["leaked_by_owner"] == {},
           f"by owner: {steps[6].get('leaked_by_owner')}")
    expect(steps[6]["leaked_bytes"] == rep["summary"]["leaked_bytes"], f"the last step agrees: {rep['summary']}")
    # The page draws it: a line of its own, and each mark's tooltip names it.
    page = os.path.join(tmp, "page.html")
    report_file = glob.glob(os.path.join(tmp, "cumemaudit.*.json"))[0]
    p = subprocess.run([CLI, "html", "-o", page, report_file], capture_output=True, text=True, timeout=60)
    expect(p.returncode == 0, f"html: {p.stderr}")
    html = open(page).read()
    expect('class="leaked"' in html and "leaked so far: 4.0 MiB" in html and "(leaked so far 4.0 MiB)" in html,
           "the chart draws the leak")


def case_slow_leak_bounded(tmp):
    """A 20,000-step job leaking 2 MiB every 10th step costs what a short one does: a report under 2 MiB with the
    last 1,000 steps whole and the older ones in at most 256 windows that keep their extremes, every step
    counted; one leak alarm with its count; a few stderr lines; and a leak that grows step by step."""
    rep, err = job(tmp, "slow-leak")
    size = os.path.getsize(glob.glob(os.path.join(tmp, "cumemaudit.*.json"))[0])
    expect(size <= 2 * MiB, f"report of {size} bytes")
    expect(len(err.splitlines()) <= 60, f"{len(err.splitlines())} stderr lines:\n{err[:2000]}")
    steps = rep["steps"]
    expect(len(steps) == 1000 and steps[0]["step"] == 19001 and steps[-1]["step"] == 20000, f"{len(steps)} recent steps")
    windows = rep["step_history"]
    expect(0 < len(windows) <= 256 and all(len(w["steps"]) <= 4 for w in windows), f"{len(windows)} windows")
    expect(rep["summary"]["steps_marked"] == 20001 and sum(w["marks"] for w in windows) + len(steps) == 20001,
           f"every mark counted (step 0 too): {rep['summary']['steps_marked']}")
    expect(windows[0]["first_step"] == 0 and windows[-1]["last_step"] == 19000, f"windows span the old steps: {windows[-1]}")
    # Leaked so far grows with the job: 2 MiB per 10 steps, at the folded marks as at the recent ones.
    for s in [x for w in windows for x in w["steps"]] + steps:
        expect(s["leaked_bytes"] == s["step"] // 10 * 2 * MiB, f"step {s['step']}: leaked {s['leaked_bytes']}")
    expect(rep["summary"]["leaked_bytes"] == 4000 * MiB, f"summary: {rep['summary']}")
    leaks = [a for a in rep["alarms"] if a["what"] == "leak"]
    expect(len(leaks) == 1 and leaks[0]["count"] == 2000 and leaks[0]["last_step"] == 20000, f"alarms: {rep['alarms']}")


def case_graph(tmp):
    rep, _ = job(tmp, "capture")
    graphs = rep["graphs"]
    expect(len(graphs) == 1, f"graphs: {graphs}")
    g = graphs[0]
    expect(g["id"] == 1 and g["step"] == 0 and g["allocations"] == 1 and g["bytes"] == 48 * MiB
           and g["bytes_by_owner"] == {"pytorch": 48 * MiB} and g["instantiations"] == 1, f"graph: {g}")
    expect(g["instantiate_cost_bytes"] == 0, "the simulated driver charges nothing to instantiate")


def case_process_figure(tmp):
    """Another process on the same simulated node holds 256 MiB: cuMemGetInfo counts it, NVML's per-process
    figure does not, so a step tells this process's memory from its neighbours'."""
    node = f"owners-{os.getpid()}"
    with neighbour(node, 256 * MiB):
        os.environ["CUMEMAUDIT_SIM_NODE"] = node
        try:
            rep, _ = job(tmp, "steady")
        finally:
            os.environ.pop("CUMEMAUDIT_SIM_NODE", None)
    for n, s in numbered(rep).items():
        tracked = sum(s["by_owner"].values())
        expect(s["process_used_bytes"] == tracked, f"step {n}: NVML's figure is this process's alone: {s}")
        expect(s["driver_used_bytes"] == tracked + 256 * MiB, f"step {n}: cuMemGetInfo sees the neighbour: {s}")
        # The neighbour's memory is named as such, so nothing is left unattributed.
        expect(s["other_processes_bytes"] == 256 * MiB and s["unattributed_bytes"] == 0,
               f"step {n}: the neighbour named: {s['other_processes_bytes']} other, {s['unattributed_bytes']} unattributed")


def case_owner_rules(tmp):
    rep, _ = job(tmp, "steady", options=["owner_rules=libnccl*=comms,deep_ep*=moe"])
    owners = {o["owner"] for o in rep["owners"]}
    expect({"comms", "moe", "pytorch"} <= owners and "nccl" not in owners, f"user rules first: {sorted(owners)}")


# Where real libraries live (a wheel's package directory, NVIDIA's nvidia/<lib>/lib, a system directory) and
# the owner each must get. The stand-in library is copied to each path, so only the path differs.
LAYOUT = [
    ("site-packages/deep_ep/_C.cpython-312-x86_64-linux-gnu.so", "deepep"),
    ("site-packages/torch/_C.cpython-312-x86_64-linux-gnu.so", "pytorch"),
    ("site-packages/torch/lib/libc10_cuda.so", "pytorch"),
    ("site-packages/hybrid_ep_cpp.cpython-312-x86_64-linux-gnu.so", "deepep"),
    ("site-packages/cuda/bindings/_bindings/cydriver.cpython-312-x86_64-linux-gnu.so", "cuda-python"),
    ("site-packages/cupy_backends/cuda/api/_driver.cpython-312-x86_64-linux-gnu.so", "cupy"),
    ("site-packages/jax_plugins/xla_cuda12/xla_cuda_plugin.so", "jax"),
    ("site-packages/vllm/cumem_allocator.abi3.so", "vllm"),
    ("site-packages/nvidia/nvshmem/lib/libnvshmem_host.so.3", "nvshmem"),
    ("dist-packages/nvidia/nccl/lib/libnccl.so.2", "nccl"),
    ("site-packages/nvidia/cublas/lib/libcublasLt.so.12", "cublas"),
    ("site-packages/nvidia/cudnn/lib/libcudnn_engines_precompiled.so.9", "cudnn"),
    ("site-packages/triton/backends/nvidia/lib/cuda_utils.so", "triton"),
    ("site-packages/mylib/_ext.cpython-312-x86_64-linux-gnu.so", "mylib"),
    ("site-packages/nvidia/cufile/lib/libcufile.so.0", "cufile"),
    ("site-packages/flat_module.cpython-312-x86_64-linux-gnu.so", "flat_module"),
    ("usr/lib/libmystery.so.1", "libmystery.so.1"),
]


def layout_job(tmp, options=(), paths=None):
    paths = paths or [p for p, _ in LAYOUT]
    root = os.path.join(tmp, "venv")
    argv = []
    for rel in paths:
        dest = os.path.join(root, "lib", "python3.12", rel) if "-packages/" in rel else os.path.join(root, rel)
        os.makedirs(os.path.dirname(os.path.normpath(dest)), exist_ok=True)
        os.makedirs(os.path.dirname(dest), exist_ok=True)  # "lib/../x.so" needs lib/ to exist
        shutil.copy(LIBS[0], os.path.normpath(dest))
        argv.append(dest)  # as written: dladdr reports it so, and the shim normalises it
    flags = [x for o in options for x in ("--option", o)]
    cmd = [CLI, "run", "--sim", "--report-dir", tmp, "--fail-on", "none", *flags, "--", JOB, "layout", *argv]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    expect(p.returncode == 0, f"{' '.join(cmd)}: exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    return {o["owner"]: o["live_bytes"] for o in only(tmp)["owners"] if o["live_bytes"]}


def only(tmp):
    files = glob.glob(os.path.join(tmp, "cumemaudit.*.json"))
    expect(len(files) == 1, f"one report expected, found {files}")
    return json.load(open(files[0]))


def case_owner_layouts(tmp):
    """The same library file, placed where real libraries live, gets the owner of that place: deep_ep/_C
    and torch/_C differ only by directory. The i-th path allocates i + 1 MiB."""
    want = {}
    for i, (_, owner) in enumerate(LAYOUT):
        want[owner] = want.get(owner, 0) + (i + 1) * MiB
    got = layout_job(tmp)
    expect(got == want, f"owners by path:\n got {sorted(got.items())}\nwant {sorted(want.items())}")


def case_owner_path_rules(tmp):
    """A user rule with a '/' matches the whole normalised path (no 'lib/../'), before the built-in rules;
    a checkout named like a package does not capture the libraries inside its virtual environment."""
    paths = ["site-packages/torch/lib/../_C.cpython-312-x86_64-linux-gnu.so", "site-packages/mylib/_ext.so",
             "site-packages/torch/lib/libc10_cuda.so"]
    got = layout_job(tmp, options=["owner_rules=*/site-packages/torch/_C.*=torch-python,*/mylib/*=mine"], paths=paths)
    expect(got == {"torch-python": 1 * MiB, "mine": 2 * MiB, "pytorch": 3 * MiB}, f"user path rules: {got}")
    d = os.path.join(tmp, "vllm")
    os.makedirs(d)
    got = layout_job(d, paths=["site-packages/torch/lib/libc10_cuda.so", "site-packages/vllm/_C.abi3.so"])
    expect(got == {"pytorch": 1 * MiB, "vllm": 2 * MiB}, f"a checkout called vllm: {got}")


def rank_job(tmp, skew):
    """64 ranks of owners_job ranks (pytorch differing by a few MiB per rank), rank `skew` (if any) holding 1 GiB
    more nccl memory from step 3; merged to job.json, with its printout and its page."""
    for rank in range(64):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="64")
        if skew is not None:
            env["SKEW_RANK"] = str(skew)
        cmd = [CLI, "run", "--sim", "--report-dir", tmp, "--fail-on", "none", "--", JOB, "ranks", *LIBS]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
        expect(p.returncode == 0, f"rank {rank}: exit {p.returncode}\n{p.stderr}")
    job_file, page = os.path.join(tmp, "job.json"), os.path.join(tmp, "job.html")
    merged = subprocess.run([CLI, "merge", "-o", job_file, tmp], capture_output=True, text=True, timeout=120)
    expect(merged.returncode == 0, f"merge: exit {merged.returncode}\n{merged.stderr}")
    drawn = subprocess.run([CLI, "html", "-o", page, job_file], capture_output=True, text=True, timeout=120)
    expect(drawn.returncode == 0, f"html: exit {drawn.returncode}\n{drawn.stderr}")
    return json.load(open(job_file)), merged.stdout, open(page).read()


def case_rank_outliers(tmp):
    """Why is this rank different? Of 64 ranks, rank 17 holds 1 GiB more nccl memory from step 3: merge names it,
    nccl, the excess and the line that holds it in one line of its printout, the job keeps one row with the
    figures, and the job page lists it and draws the excess. The same job with every rank alike (but for a few
    MiB of pytorch) flags nothing; a floor above the excess flags nothing either."""
    job_rep, text, page = rank_job(tmp, 17)
    line = (f"  rank 17: +1.0 GiB over the median at step 3, nccl +1.0 GiB at cuMemAlloc in standin_lib.cpp:{site_line('standin_alloc')} "
            "(standin_alloc) (at 4 of 7 steps, 3–6)")
    lines = text.splitlines()
    expect(lines[2:4] == ["ranks that stand out: 1 of 64 (an owner's live bytes over the job's median by more than 5 median "
                          "absolute deviations and at least 256.0 MiB):", line], f"merge:\n{text}")
    (o,) = job_rep["outliers"]
    expect((o["rank"], o["owner"], o["step"], o["first_step"], o["last_step"], o["steps"], o["steps_checked"], o["excess_bytes"],
            o["live_bytes"], o["median_bytes"], o["site_bytes"], o["site_excess_bytes"], o["site"]["frames"][0]["line"]) ==
           (17, "nccl", 3, 3, 6, 4, 7, 1024 * MiB, 1088 * MiB, 64 * MiB, 1088 * MiB, 1024 * MiB, site_line("standin_alloc")),
           f"outlier: {o}")
    expect(job_rep["outlier_pairs"] == 1 and job_rep["outlier_rule"] == {"mads": 5.0, "floor_bytes": 256 * MiB}, f"{job_rep['outlier_rule']}")
    row = re.search(r'<tr data-rank="17">(.*?)</tr>', page)
    expect(row is not None and "<td>nccl</td>" in row.group(1) and "standin_lib.cpp:" in row.group(1), "job page: rank 17's row")
    expect(page.count("<tr data-rank=") == 1 and 'id="job-excess-heatmap"' in page, "job page: one row, the excess heatmap")
    expect(re.search(r'<text class="ylabel excess"[^>]*>rank 17</text>', page) is not None, "heatmap: rank 17 labelled")
    floor = subprocess.run([CLI, "merge", "--outlier-floor", "2GiB", tmp],
                           capture_output=True, text=True, timeout=120)
    expect(floor.returncode == 0 and "stand out" not in floor.stdout, f"a 2 GiB floor: {floor.stdout}")

    even = os.path.join(tmp, "even")
    os.mkdir(even)
    job_rep, text, page = rank_job(even, None)
    expect(job_rep["outliers"] == [] and job_rep["outlier_pairs"] == 0 and "stand out" not in text, f"symmetric job:\n{text}")
    expect("No rank stands out" in page and 'id="job-excess-heatmap"' not in page, "symmetric job page")


CASES = named_cases(globals())


if __name__ == "__main__":
    sys.exit(main(CASES))
