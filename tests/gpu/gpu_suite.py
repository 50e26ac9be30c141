#!/usr/bin/env python3
"""The GPU suite: what the auditor catches and what it costs, on a real GPU, real driver, PyTorch and NCCL.
Run by scripts/gpu on a machine with a GPU; writes results.json and RESULTS.md (a dated markdown table)
into --out. Every check runs in its own subprocess with a timeout, so one failure never loses the rest.

  gpu_suite.py --build BUILD_DIR --out DIR [--parts env,audit,torch,overhead,pysites,detect]
"""
import argparse
import datetime
import glob
import json
import os
import re
import statistics
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MiB = 1 << 20


class Suite:
    def __init__(self, build, out):
        self.build = os.path.abspath(build)
        self.out = out
        self.cli = os.path.join(self.build, "tools", "cumemaudit", "cumemaudit")
        self.deepep = os.path.join(self.build, "examples", "deepep_fabric_leak")
        self.checks = []
        self.facts = {}
        self.log = open(os.path.join(out, "log.txt"), "a")

    def say(self, *parts):
        line = " ".join(str(p) for p in parts)
        print(line, flush=True)
        self.log.write(line + "\n")
        self.log.flush()

    def sh(self, cmd, env=None, timeout=300, cwd=None):
        t0 = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                               env={**os.environ, **(env or {})})
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, out, err = 124, e.stdout or "", (e.stderr or "") + f"\n(timed out after {timeout}s)"
            out = out if isinstance(out, str) else out.decode(errors="replace")
            err = err if isinstance(err, str) else err.decode(errors="replace")
        self.log.write(f"$ {' '.join(cmd)}  [rc {rc}, {time.time() - t0:.1f}s]\n{out[-4000:]}\n{err[-4000:]}\n")
        return rc, out, err

    def check(self, name, ok, **details):
        self.checks.append({"name": name, "ok": bool(ok), **details})
        self.say(("PASS " if ok else "FAIL ") + name, json.dumps(details)[:400])
        self.save()

    def save(self):
        with open(os.path.join(self.out, "results.json"), "w") as f:
            json.dump({"facts": self.facts, "checks": self.checks}, f, indent=1)

    def audited(self, argv, report_dir, flags=(), env=None, timeout=300):
        return self.sh([self.cli, "run", "--report-dir", report_dir, *flags, "--", *argv], env=env, timeout=timeout)

    @staticmethod
    def report(report_dir):
        files = sorted(glob.glob(os.path.join(report_dir, "cumemaudit.*.json")))
        return [json.load(open(f)) for f in files]


def part_env(s):
    _, smi, _ = s.sh(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"])
    s.facts["gpus"] = [l.strip() for l in smi.splitlines() if l.strip()]
    _, tv, _ = s.sh([sys.executable, "-c", "import torch;print(torch.__version__, torch.version.cuda, "
                     "'.'.join(map(str, torch.cuda.nccl.version())), torch.cuda.device_count())"])
    s.facts["torch"] = tv.strip()
    _, csv, _ = s.sh(["compute-sanitizer", "--version"])
    s.facts["compute_sanitizer"] = (csv.strip().splitlines() or ["absent"])[-1]
    _, ld, _ = s.sh(["bash", "-c", "ldconfig -p | grep -c libdw.so.1 || true"])
    s.facts["libdw_on_machine"] = ld.strip()
    s.facts["date"] = datetime.date.today().isoformat()
    s.say("facts:", json.dumps(s.facts))
    s.save()


AUDIT_CASES = ["deepep", "deepep-fixed", "door-direct", "door-dlsym", "door-procaddress-v1", "door-procaddress-v2",
               "door-cudart", "nccl", "expandable", "misuse", "reuse", "open-export", "threads", "fork", "gate",
               "sigterm", "checkpoint-timer", "classic", "runtime", "options", "suppressions", "no-cuda",
               "deepbind", "checkpoint-api", "deep-stacks", "enforce-deepep", "enforce-clean", "enforce-misuse",
               "held-export", "capture-free", "held-headings", "hybrid-ep", "enforce-hybrid-ep", "vllm-sleep",
               "context-reset", "ipc-dmabuf", "host-register", "pool-idle", "graph-memory", "arrays", "pool-ipc", "external-memory", "leave",
               "jit-modules", "module-code", "module-code-eager", "module-code-launch", "module-code-launch-eager",
               "device-heap"]


def part_audit(s):
    """The simulated-driver scenarios, unchanged, on the real driver (POSIX fds where they use fabric)."""
    b = s.build
    env = {"AUDIT_DRIVER": "real", "CLI": s.cli,
           "SCENARIOS": f"{b}/tests/sim/audit/audit_scenarios", "DEEPEP": s.deepep,
           "RUNTIME_USER": f"{b}/tests/sim/audit/runtime_user", "NCCL": f"{b}/tests/sim/nccl_pattern",
           "CUMEMAUDIT_SHIM": f"{b}/src/shim/libcumemaudit.so",
           "EXPANDABLE": f"{b}/tests/sim/expandable_segments", "SOURCE_ROOT": ROOT,
           "DEEPBIND_LIB": f"{b}/tests/sim/audit/libdeepbind_lib.so",
           "HYBRID_EP": f"{b}/tests/sim/hybrid_ep_job", "VLLM_SLEEP": f"{b}/tests/sim/vllm_sleep"}
    for case in AUDIT_CASES:
        rc, out, err = s.sh([sys.executable, f"{ROOT}/tests/sim/audit/audit_common.py", case], env=env, timeout=180)
        s.check(f"audit {case} (real driver)", rc == 0, why=(err.strip().splitlines() or [""])[0][:300])
    # The headline figure: the DeepEP sequence's leak against the drop in cuMemGetInfo.
    for handle_args in (["--handle", "posix"],):
        d = tempfile.mkdtemp()
        rc, out, err = s.audited([s.deepep, *handle_args, "--steps", "3", "--size-mib", "1024"], d)
        m = re.search(r"drop=(\d+)", out)
        reps = s.report(d)
        leaked = reps[0]["summary"]["leaked_bytes"] if reps else None
        drop = int(m.group(1)) if m else None
        s.facts["deepep_real"] = {"drop": drop, "leaked_bytes": leaked, "exit": rc,
                                  "sites": [l["site"]["api"] for l in reps[0]["leaks"]] if reps else []}
        s.check("DeepEP posix 1+2+3 GiB: leaked bytes equal the cuMemGetInfo drop", leaked == drop and rc == 23,
                drop=drop, leaked=leaked, rc=rc)


TORCH_CASES = [
    ("pytorch caching allocator", ["caching"], {}),
    ("pytorch without caching", ["caching"], {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}),
    ("pytorch expandable segments", ["expandable"], {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}),
    ("pytorch CUDA graph capture", ["graph"], {}),
    ("triton kernel", ["triton"], {}),
    ("nccl all-reduce, 1 process", ["nccl", "--world", "1"], {}),
]


def run_clean(s, name, argv, env, ranks=1):
    """Plain run vs audited run: same result line, zero leaks, zero misuse, driver calls counted."""
    wl = [sys.executable, f"{HERE}/torch_workloads.py"]
    if ranks == 1:
        rc0, plain, err0 = s.sh(wl + argv, env=env)
        d = tempfile.mkdtemp()
        rc1, audited, err1 = s.audited(wl + argv, d, env=env)
    else:
        def launch(cmd_prefix, d=None):
            procs = []
            for r in range(ranks):
                e = {**os.environ, **env, "RANK": str(r), "WORLD_SIZE": str(ranks), "MASTER_PORT": "29544" if d else "29543"}
                cmd = cmd_prefix + wl + argv + ["--rank", str(r), "--world", str(ranks)]
                procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e))
            outs = [p.communicate(timeout=300) for p in procs]
            return max(p.returncode for p in procs), "".join(o for o, _ in outs[:1]), "".join(e for _, e in outs)
        rc0, plain, err0 = launch([])
        d = tempfile.mkdtemp()
        rc1, audited, err1 = launch([s.cli, "run", "--report-dir", d, "--"], d)
    res0 = re.findall(r"^result: .*$", plain, re.M)
    res1 = re.findall(r"^result: .*$", audited, re.M)
    reps = s.report(d)
    summ = [r["summary"] for r in reps]
    owners = sorted({o["owner"] for r in reps for o in r["owners"]})
    ok = (rc0 == 0 and rc1 == 0 and res0 and res0 == res1 and len(reps) == ranks
          and all(x["leaked_bytes"] == 0 and x["misuse_events"] == 0 and x["intercepted_calls"] > 0 for x in summ))
    s.check(f"{name}: same output, zero leaks, zero misuse under the shim", ok, rc=[rc0, rc1], result=[res0, res1],
            calls=[x["intercepted_calls"] for x in summ], unfreed=[x["unfreed_bytes"] for x in summ], owners=owners,
            misuse=[m["what"] for r in reps for m in r["misuse"]][:5],
            leaks=[(l["class"], l["site"]["api"], l["bytes"]) for r in reps for l in r["leaks"] if l["class"] in ("unreachable", "open-export")][:5],
            err=(err1.strip().splitlines() or [""])[-1][:300])


def part_torch(s):
    for name, argv, env in TORCH_CASES:
        run_clean(s, name, argv, env)
    if int((s.facts.get("torch", "0 0 0 1").split() or ["1"])[-1]) >= 2:
        run_clean(s, "nccl all-reduce, 2 processes", ["nccl"], {}, ranks=2)
    else:
        s.check("nccl all-reduce, 2 processes", False, why="one GPU: NCCL refuses two ranks on one device")


CALL_PATTERNS = {"alloc_free": "cuMemAlloc+cuMemFree 4 KiB", "async": "cuMemAllocAsync+cuMemFreeAsync 4 KiB",
                 "table": "cudaMalloc-style table call (cuGetProcAddress pointers)",
                 "vmm": "VMM create+map+access+unmap+release 2 MiB"}


def part_overhead(s):
    """Same binary, same inputs, modes interleaved over rounds (the GPU's clocks drift between runs):
    plain vs cumemaudit vs compute-sanitizer per call pattern, then a PyTorch training step."""
    bench = os.path.join(s.build, "tests", "bench", "bench_calls")
    modes = (("plain", []), ("cumemaudit", None),
             ("compute-sanitizer", ["compute-sanitizer", "--tool", "memcheck", "--leak-check", "full"]))
    results = {}
    for _ in range(3):
        for label, prefix in modes:
            d = tempfile.mkdtemp()
            cmd = ([s.cli, "run", "--report-dir", d, "--fail-on", "none", "--"] if prefix is None else prefix) + \
                  [bench, "--child", "--iters", "20000", "--repeats", "1", "--depth", "40"]
            rc, out, err = s.sh(cmd, env={"CUMEMAUDIT_OPTIONS": "summary=0"}, timeout=300)
            for m in re.finditer(r"^RESULT (\w+) (\d) ([\d.]+)$", out, re.M):
                cell = results.setdefault((m.group(1), int(m.group(2))), {})
                cell[label] = min(cell.get(label, float("inf")), float(m.group(3)))
            if rc != 0:
                s.check(f"overhead run {label}", False, rc=rc, err=err[-300:])
    rows = ["| pattern | threads | plain ns/call | cumemaudit | added | compute-sanitizer | added |",
            "|---|---|---|---|---|---|---|"]
    for (pattern, threads), r in sorted(results.items()):
        plain = r.get("plain", 0)
        def added(k):
            return f"{(r[k] / plain - 1) * 100:+.1f}%" if k in r and plain else "—"
        rows.append(f"| {CALL_PATTERNS.get(pattern, pattern)} | {threads} | {plain:.0f} | {r.get('cumemaudit', 0):.0f} | "
                    f"{added('cumemaudit')} | {r.get('compute-sanitizer', 0):.0f} | {added('compute-sanitizer')} |")
    s.facts["calls_table"] = "\n".join(rows) + "\n\nBest of 3 interleaved rounds of 20,000 iterations each."
    s.facts["calls_raw"] = {f"{p} {t}": r for (p, t), r in results.items()}
    s.say(s.facts["calls_table"])
    s.save()
    for caching in (True, False):
        env = {} if caching else {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
        steps = "300" if caching else "150"
        times = {"plain": [], "cumemaudit": []}
        for _ in range(3):
            for label in ("plain", "cumemaudit"):
                wl = [sys.executable, f"{HERE}/torch_workloads.py", "train", "--steps", steps]
                d = tempfile.mkdtemp()
                cmd = wl if label == "plain" else [s.cli, "run", "--report-dir", d, "--"] + wl
                rc, out, err = s.sh(cmd, env=env, timeout=300)
                m = re.search(r"step_median_us=([\d.]+)", out)
                if m:
                    times[label].append(float(m.group(1)))
        key = "train_caching" if caching else "train_no_caching"
        s.facts[key] = times
        s.say(key, times)
    s.save()


def part_ncclpool(s):
    """NCCL's allocator giving memory to its caller: the 256 MiB ncclMemAlloc gives a Python script (through
    ctypes) are the script's, not nccl's, and leave with ncclMemFree."""
    d = tempfile.mkdtemp()
    env = {"PYTHONPATH": f"{ROOT}/tools/python"}
    script = f"{HERE}/nccl_mempool.py"
    rc, out, err = s.audited([sys.executable, script], d, env=env, flags=["--fail-on", "none"])
    reps = s.report(d)
    steps = {x["step"]: x for x in (reps[0]["steps"] if reps else []) if not x.get("label")}
    if rc != 0 or any(n not in steps for n in (1, 2, 3)):
        s.check("ncclMemAlloc under the shim", False, rc=rc, err=err[:1500], out=out[-300:])
        return
    owners = [steps[n]["by_owner"] for n in (1, 2, 3)]
    grew = {k: owners[1].get(k, 0) - owners[0].get(k, 0) for k in set(owners[0]) | set(owners[1])}
    gone = {k: owners[2].get(k, 0) - owners[1].get(k, 0) for k in set(owners[1]) | set(owners[2])}
    s.facts["ncclpool"] = {"steps": owners, "grew": grew, "gone": gone, "out": out.strip()[-200:]}
    me = os.path.basename(script)
    s.check("ncclMemAlloc: the 256 MiB it gives the script are the script's, nccl's bytes stay, ncclMemFree ends them",
            grew.get(me, 0) == 256 * MiB and grew.get("nccl", 0) == 0 and gone.get(me, 0) == -256 * MiB,
            grew=grew, gone=gone)


def part_managed(s):
    """Managed memory on the real driver (the audit scenario managed-resident): 1 GiB allocated, touched by a
    memset, prefetched back to the host, freed. The steps name what the device holds within 2 MiB of the
    measured 1 GiB, and leave at most max(64 MiB, 1%) unattributed."""
    d = tempfile.mkdtemp()
    rc, out, err = s.audited([f"{s.build}/tests/sim/audit/audit_scenarios", "managed-resident"], d, flags=["--fail-on", "none"])
    reps = s.report(d)
    steps = {x["step"]: x for x in (reps[0]["steps"] if reps else []) if not x.get("label")}
    if rc != 0 or any(n not in steps for n in range(5)):
        s.check("managed-resident under the shim", False, rc=rc, err=err[-800:], out=out[-300:])
        return
    rows = {n: {k: steps[n].get(k, 0) for k in ("driver_used_bytes", "process_used_bytes", "managed_resident_bytes",
                                                  "unattributed_bytes", "context_bytes", "local_memory_bytes")} for n in range(5)}
    s.facts["managed"] = {"steps": rows, "out": out.strip()[-200:]}
    want = {0: 0, 1: 0, 2: 1024 * MiB, 3: 1024 * MiB, 4: 0}
    s.check("managed memory: each step names what the device holds within 2 MiB (0, 0, 1 GiB, 1 GiB, 0)",
            all(abs(rows[n]["managed_resident_bytes"] - want[n]) <= 2 * MiB for n in want),
            named={n: rows[n]["managed_resident_bytes"] for n in rows})
    s.check("managed memory: every step leaves at most max(64 MiB, 1% of driver-used) unattributed",
            all(r["unattributed_bytes"] <= max(64 * MiB, r["driver_used_bytes"] // 100) for r in rows.values()),
            unattributed={n: rows[n]["unattributed_bytes"] for n in rows})


def module_rows(rep):
    """The report's module rows as (api, owner, top frame, loads, live, image bytes), most loads first."""
    rows = []
    for m in rep.get("modules", []):
        frames = m["site"].get("python_frames") or m["site"].get("frames") or [{}]
        top = frames[0]
        rows.append((m["site"]["api"], m["owner"], f"{os.path.basename(top.get('file', '') or '')}:{top.get('line', 0)}",
                     m["loads"], m["live"], m["image_bytes"]))
    return sorted(rows, key=lambda r: -r[3])


def part_modules(s):
    """Modules a JIT keeps (the audit scenario jit-modules: 300 PTX kernels the driver compiles, a library and a
    file's module): the steps count them and their images as the program loaded them; what their code costs
    the device is the growth of driver-used memory from step 0 to step 2, which stays unattributed (the driver
    says nothing of it per load) and must stay within the bound. Then the module loads a Triton kernel and
    PyTorch's training loop make, by site (facts: what the runtime loads through the driver)."""
    d = tempfile.mkdtemp()
    rc, out, err = s.audited([f"{s.build}/tests/sim/audit/audit_scenarios", "jit-modules"], d, flags=["--fail-on", "none"])
    reps = s.report(d)
    steps = {x["step"]: x for x in (reps[0]["steps"] if reps else []) if not x.get("label")}
    if rc != 0 or any(n not in steps for n in range(4)):
        s.check("jit-modules under the shim", False, rc=rc, err=err[-800:], out=out[-300:])
        return
    keys = ("driver_used_bytes", "unattributed_bytes", "modules_live", "module_image_bytes", "context_bytes", "local_memory_bytes")
    rows = {n: {k: steps[n].get(k, 0) for k in keys} for n in range(4)}
    code = rows[2]["driver_used_bytes"] - rows[0]["driver_used_bytes"]
    s.facts["modules_jit"] = {"steps": rows, "code_bytes_300": code, "rows": module_rows(reps[0]), "out": out.strip()[-300:]}
    s.check("300 JIT modules: steps count 0, 152, 302, 300 modules live",
            [rows[n]["modules_live"] for n in range(4)] == [0, 152, 302, 300], live=[rows[n]["modules_live"] for n in range(4)])
    s.check("300 JIT modules: every step leaves at most max(64 MiB, 1% of driver-used) unattributed",
            all(r["unattributed_bytes"] <= max(64 * MiB, r["driver_used_bytes"] // 100) for r in rows.values()),
            unattributed={n: rows[n]["unattributed_bytes"] for n in rows}, code_bytes=code)
    for name, argv, env in (("triton", ["triton"], {}),
                            ("loop", ["loop", "--steps", "4"], {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})):
        d = tempfile.mkdtemp()
        rc, out, err = s.audited([sys.executable, f"{HERE}/torch_workloads.py", *argv], d,
                                 env={**env, "PYTHONPATH": f"{ROOT}/tools/python"}, flags=["--fail-on", "none"])
        reps = s.report(d)
        rep = reps[0] if reps else {}
        marks = [(x["step"], x.get("modules_live", 0), x.get("unattributed_bytes", 0)) for x in rep.get("steps", []) if not x.get("label")]
        s.facts[f"modules_{name}"] = {"rc": rc, "rows": module_rows(rep)[:12], "steps": marks,
                                     "alarms": [a for a in rep.get("alarms", []) if a["what"] == "modules"]}
        s.check(f"{name}: runs under the shim with its module loads booked", rc == 0 and bool(reps), rc=rc, err=err[-300:])


def part_arenas(s):
    """CuPy and JAX under the audit, marked as steps: what each step leaves unattributed (the issue's bound:
    max(64 MiB, 1% of driver-used)), with the parts the audit names."""
    for which in ("cupy", "jax"):
        d = tempfile.mkdtemp()
        env = {"PYTHONPATH": f"{ROOT}/tools/python"}
        rc, out, err = s.audited([sys.executable, f"{HERE}/arena_workloads.py", which], d, env=env, flags=["--fail-on", "none"])
        reps = s.report(d)
        steps = [x for x in (reps[0]["steps"] if reps else []) if not x.get("label")]
        rows = [{k: x.get(k, 0) for k in ("step", "driver_used_bytes", "process_used_bytes", "unattributed_bytes",
                                           "context_bytes", "local_memory_bytes")} | {"by_owner": x["by_owner"]} for x in steps]
        s.facts[f"arena_{which}"] = {"rc": rc, "steps": rows, "out": out.strip()[-300:], "err": err[-300:] if rc else ""}
        s.check(f"{which}: every step leaves at most max(64 MiB, 1% of driver-used) unattributed",
                rc == 0 and bool(rows) and all(r["unattributed_bytes"] <= max(64 * MiB, r["driver_used_bytes"] // 100) for r in rows),
                rc=rc, unattributed=[r["unattributed_bytes"] for r in rows], used=[r["driver_used_bytes"] for r in rows])


def part_pysites(s):
    """Leaks made through cuda-python name the Python line (cuda.bindings'
    cuMemCreate never released; cuda.core's VirtualMemoryResource allocate/close), and what the new default
    VMM sites cost (16 native frames and the Python frames) against plain and against the old default
    (vmm_stack_depth=1:python_frames=none): a VMM cycle from C++ (bench_calls) and from Python (ctypes),
    interleaved over 5 rounds."""
    script = os.path.join(HERE, "python_sites.py")
    lines = {w: next(i for i, t in enumerate(open(script), 1) if f"# {w.upper()} LEAK" in t) for w in ("bindings", "core")}
    for what, expect_bytes in (("bindings", 64 * MiB), ("core", 4 * 64 * MiB)):
        d = tempfile.mkdtemp()
        rc, out, err = s.audited([sys.executable, script, what], d, flags=["--fail-on", "none"])
        reps = s.report(d)
        rows = [r for r in (reps[0]["leaks"] if reps else []) if r["class"] == "unreachable"]
        named = [r for r in rows if any(f["file"] == script and f["line"] == lines[what]
                                        for f in r["site"].get("python_frames", []))]
        s.facts[f"pysites_{what}"] = {"rc": rc, "rows": [{"bytes": r["bytes"], "api": r["site"]["api"], "owner": r["owner"],
                                                         "python_frames": r["site"].get("python_frames", [])[:3]}
                                                        for r in rows]}
        s.check(f"cuda-python {what}: the leak's site names {os.path.basename(script)}:{lines[what]}",
                rc == 0 and sum(r["bytes"] for r in named) == expect_bytes,
                rc=rc, leaked=[r["bytes"] for r in rows], named=[r["bytes"] for r in named], err=err[-300:])
        if what == "bindings":  # past cuda.bindings' Cython module, the calling script owns the leak
            s.check("cuda-python bindings: the leak's owner is the calling script, not the bindings",
                    bool(named) and {r["owner"] for r in named} == {os.path.basename(script)},
                    owners=sorted({r["owner"] for r in rows}))
    old = "vmm_stack_depth=1:python_frames=none"
    bench = os.path.join(s.build, "tests", "bench", "bench_calls")
    modes = (("plain", None), ("old default", old), ("new default", ""))
    native, python = {m: [] for m, _ in modes}, {m: [] for m, _ in modes}
    for _ in range(5):
        for label, opts in modes:
            d = tempfile.mkdtemp()
            pre = [] if opts is None else [s.cli, "run", "--report-dir", d, "--fail-on", "none", "--"]
            env = {} if opts is None else {"CUMEMAUDIT_OPTIONS": "summary=0" + (":" + opts if opts else "")}
            _, out, _ = s.sh(pre + [bench, "--child", "--iters", "20000", "--repeats", "1", "--depth", "40"], env=env)
            m = re.search(r"^RESULT vmm 1 ([\d.]+)$", out, re.M)
            if m:
                native[label].append(float(m.group(1)) * 5 / 1000)  # ns per call, 5 calls a cycle -> us a cycle
            _, out, _ = s.sh(pre + [sys.executable, script, "cycle", "--iters", "2000"], env=env)
            m = re.search(r"cycle_us=([\d.]+)", out)
            if m:
                python[label].append(float(m.group(1)))
    s.facts["pysites_cost"] = {"native": native, "python": python}
    s.say("pysites cost (us per VMM cycle)", json.dumps(s.facts["pysites_cost"]))
    s.check("VMM cycle timed in every mode, 5 rounds each",
            all(len(v) == 5 for v in list(native.values()) + list(python.values())), cost=s.facts["pysites_cost"])


def part_timeline(s):
    """The step timeline on a real job: a training loop (expandable segments, a CUDA graph, an NCCL group)
    marked with cumemaudit.torch_step; each step's parts must add up to driver-used memory."""
    d = tempfile.mkdtemp()
    env = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "PYTHONPATH": f"{ROOT}/tools/python"}
    rc, out, err = s.audited([sys.executable, f"{HERE}/torch_workloads.py", "loop", "--steps", "12"], d, env=env,
                             flags=["--fail-on", "none"])
    reps = s.report(d)
    if not reps:
        s.check("training loop under the shim with torch_step marks", False, rc=rc, err=err[-500:])
        return
    rep = reps[0]
    steps = [x for x in rep["steps"] if not x.get("label")]
    table, worst = [], 0.0
    for x in steps:
        used = x["driver_used_bytes"]
        pt_alloc, pt_reserved = x.get("pytorch_allocated_bytes", 0), x.get("pytorch_reserved_bytes", 0)
        others = sum(v for k, v in x["by_owner"].items() if k != "pytorch")
        reserved = x.get("context_bytes", 0) + x.get("local_memory_bytes", 0) + x.get("malloc_heap_bytes", 0)  # what the contexts reserve
        parts = pt_reserved + others + reserved + x.get("module_code_bytes", 0) + x["unattributed_bytes"]
        err_pct = abs(parts - used) / used * 100 if used else 100.0
        worst = max(worst, err_pct)
        table.append({"step": x["step"], "driver_used": used, "pytorch_allocated": pt_alloc,
                      "pytorch_cached_free": pt_reserved - pt_alloc, "others": others,
                      "unattributed": x["unattributed_bytes"], "tracked_pytorch": x["by_owner"].get("pytorch", 0),
                      "contexts": x.get("context_bytes", 0), "kernel_stacks": x.get("local_memory_bytes", 0),
                      "module_code": x.get("module_code_bytes", 0),
                      "process_used": x.get("process_used_bytes", 0), "parts_vs_used_pct": round(err_pct, 3)})
    owners = sorted({o["owner"] for o in rep["owners"]})
    s.facts["timeline_steps"] = table
    s.facts["timeline_graphs"] = rep.get("graphs", [])
    s.facts["timeline_owners"] = owners
    s.facts["timeline_alarms"] = rep.get("alarms", [])
    s.check("training loop: every step's parts add up to driver-used within 1%", steps and worst <= 1.0,
            steps=len(steps), worst_pct=round(worst, 3), rc=rc)
    nvml = [(x["step"], x["process_used"], x["driver_used"]) for x in table]
    s.check("training loop: NVML's figure for this process in every step, at most driver-used",
            bool(nvml) and all(0 < p <= u for _, p, u in nvml), first_steps=nvml[:3])
    s.check("training loop: owners pytorch and nccl named", {"pytorch", "nccl"} <= set(owners), owners=owners)
    loose = [(x["step"], x["unattributed"], x["driver_used"]) for x in table
             if x["unattributed"] > max(64 * MiB, x["driver_used"] // 100)]
    s.check("training loop: with contexts and kernel stacks named, every step leaves at most max(64 MiB, 1% of "
            "driver-used) unattributed", bool(table) and not loose and all(x["contexts"] > 0 for x in table),
            over=loose[:4], first=table[:1])
    s.check("training loop: the CUDA graph and its instantiate cost listed",
            bool(rep.get("graphs")) and rep["graphs"][0]["instantiations"] >= 1, graphs=rep.get("graphs"))


def part_longjob(s):
    """The long Python job on the real driver (tests/longjob/slow_leak_job.py through ctypes, 2,000 steps:
    199 VMM buffers leaked from the loop's growth, 1 before it): the leaked bytes equal cuMemGetInfo's drop, the
    owner is the script, every step kept carries its leaked bytes, the stderr stays short, and check's FAIL
    line names the script's line."""
    job = os.path.join(ROOT, "tests", "longjob", "slow_leak_job.py")
    leak_line = next(i for i, t in enumerate(open(job), 1) if "# LEAK" in t)
    d = tempfile.mkdtemp()
    env = {"PYTHONPATH": f"{ROOT}/tools/python:{ROOT}/tests/pyframes"}
    rc, out, err = s.audited([sys.executable, job, "2000"], d, env=env, timeout=300)
    reps = s.report(d)
    rep = reps[0] if reps else {}
    rows = [r for r in rep.get("leaks", []) if r["class"] == "unreachable"]
    steps = [x for w in rep.get("step_history", []) for x in w["steps"]] + rep.get("steps", [])
    s.facts["longjob"] = {"rc": rc, "stderr_lines": len(err.splitlines()), "rows": [(r["bytes"], r["owner"]) for r in rows],
                          "summary": {k: rep.get("summary", {}).get(k) for k in ("leaked_bytes", "steps_marked")}}
    s.check("long Python job: 200 buffers of 2 MiB leaked, owned by the script, at its line",
            rc == 23 and sum(r["bytes"] for r in rows) == 200 * 2 * MiB and {r["owner"] for r in rows} == {"slow_leak_job.py"}
            and all(r["site"].get("python_frames", [{}])[0].get("line") == leak_line for r in rows),
            rc=rc, rows=s.facts["longjob"]["rows"], err=err[-600:])
    s.check("long Python job: every step's leaked bytes, 2 MiB per 10 steps; at most 60 stderr lines",
            rep.get("summary", {}).get("steps_marked") == 2001 and steps and all(x["leaked_bytes"] == x["step"] // 10 * 2 * MiB for x in steps)
            and len(err.splitlines()) <= 60, steps=len(steps), stderr_lines=len(err.splitlines()))
    files = glob.glob(os.path.join(d, "cumemaudit.*.json"))
    crc, cout, _ = s.sh([s.cli, "check", *files])
    s.check("long Python job: check's FAIL line names the script's line",
            crc == 1 and f"slow_leak_job.py:{leak_line} (Buffer.__init__)" in cout, rc=crc, out=cout[-400:])


def part_oom(s):
    """The out-of-memory moment on a real GPU. A VMM buffer outside PyTorch, the GPU filled by a
    plain allocation, graphs captured over growing batch sizes into one pool until PyTorch raises: the oom
    record names the failed request, the outside buffer's owner, PyTorch's pools and every graph's cost,
    and its parts add up to driver-used memory within 1%."""
    d = tempfile.mkdtemp()
    env = {"PYTHONPATH": f"{ROOT}/tools/python"}
    rc, out, err = s.audited([sys.executable, f"{HERE}/oom_workload.py"], d, env=env, timeout=180,
                             flags=["--fail-on", "none", "--option", "owner_rules=oom_workload.py=outside_vmm"])
    reps = s.report(d)
    try:
        seen = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        seen = {}
    if not reps or not reps[0].get("oom"):
        s.check("oom: the program met an OutOfMemoryError and the report has an oom record", False, rc=rc,
                err=err[-1500:], out=out[-500:])
        return
    rep = reps[0]
    ooms = rep["oom"]
    joined = [o for o in ooms if o.get("pytorch_pools")]
    o = joined[-1] if joined else ooms[-1]
    parts_sum = sum(p["bytes"] for p in o["parts"])
    used = o["driver_used_bytes"]
    pct = abs(parts_sum - used) / used * 100 if used else 100.0
    outside = [p for p in o["parts"] if p.get("owner") == "outside_vmm" and p.get("kind") == "vmm_physical"]
    graphs = rep.get("graphs", [])
    s.facts["oom_record"] = {k: o[k] for k in ("api", "result", "requested_bytes", "driver_used_bytes",
                                                "driver_free_bytes", "driver_total_bytes", "leaked_bytes",
                                                "unattributed_bytes", "recovered", "step")}
    s.facts["oom_parts"] = [(p["what"], p.get("owner", ""), p.get("kind", ""), p.get("graph", 0), p["bytes"]) for p in o["parts"]]
    s.facts["oom_pytorch_pools"] = o.get("pytorch_pools", [])
    s.facts["oom_graphs"] = [{k: g.get(k) for k in ("id", "bytes", "allocations", "instantiate_cost_bytes", "held_instantiate_bytes")}
                             for g in graphs]
    s.facts["oom_program"] = seen
    s.facts["oom_records"] = len(ooms)
    s.say("oom record:", json.dumps(s.facts["oom_record"]))
    for part in s.facts["oom_parts"]:
        s.say("  part", part)
    s.say("  PyTorch pools at the OOM:", json.dumps(s.facts["oom_pytorch_pools"]))
    # Per graph: what the shim saw reserved during each capture beside PyTorch's own graph-pool growth.
    prev = 0
    for i, g in enumerate(graphs):
        pools = seen.get("captured", [])[i]["pools"] if i < len(seen.get("captured", [])) else []
        graph_pool = sum(p["reserved_bytes"] for p in pools if p["pool"] != "default")
        s.say(f"  graph {g['id']}: shim new {fmt_bytes(g['bytes'])}, instantiate {fmt_bytes(g['instantiate_cost_bytes'])}; "
              f"PyTorch graph pools reserved {fmt_bytes(graph_pool)} (+{fmt_bytes(max(graph_pool - prev, 0))})")
        prev = graph_pool or prev
    s.check("oom: the record names the failed request (an allocation API, bytes asked, CUDA_ERROR_OUT_OF_MEMORY)",
            o["result"] == "CUDA_ERROR_OUT_OF_MEMORY" and o["requested_bytes"] > 0 and o["api"].startswith("cu"),
            api=o["api"], requested=o["requested_bytes"], free=o["driver_free_bytes"], error=seen.get("error"))
    s.check("oom: the outside VMM buffer is a part, under its owner, at its size",
            len(outside) == 1 and outside[0]["bytes"] == 1024 * MiB, outside=outside)
    s.check("oom: PyTorch's pools joined the record (default and a graph pool, allocated <= reserved)",
            bool(joined) and {"default"} < {p["pool"] for p in o["pytorch_pools"]}
            and all(p["allocated_bytes"] <= p["reserved_bytes"] for p in o["pytorch_pools"]),
            pools=o.get("pytorch_pools"))
    s.check("oom: every captured graph listed with its capture bytes and instantiate cost",
            len(graphs) >= len(seen.get("captured", [])) >= 2 and all(g["instantiations"] >= 1 for g in graphs[:len(seen["captured"])]),
            graphs=len(graphs), captured=len(seen.get("captured", [])))
    s.check("oom: the parts add up to driver-used memory within 1%", pct <= 1.0, parts=parts_sum, used=used,
            pct=round(pct, 4), unattributed=o["unattributed_bytes"])
    after = seen.get("after_error", {})
    if after:
        s.say(f"  cuMemGetInfo after the error: used {fmt_bytes(after['total'] - after['free'])}; record: {fmt_bytes(used)}")
    s.check("oom: the OOM block reached stderr", "Out of memory:" in err, tail=err[-600:])


def part_reservations(s):
    """What contexts reserve besides allocations, on the real driver (tests/sim/oom's launch-stack scenario,
    run plain): the primary context and a second one made through cuCtxCreate at version 3020, a stack limit
    set, a kernel with 32 KiB of local memory launched, a mark; then the device filled and a kernel with
    64 KiB refused. The step names each context's own part (measured at its creation) and the kernel stacks
    (the limit × the threads the device holds), so what is left unattributed is small; the OOM record names
    the kernel and the stack it needed. The driver's own answers (tests/gpu/reservation_probe) go beside."""
    rc, out, err = s.sh([os.path.join(s.build, "tests", "gpu", "reservation_probe")], timeout=120)
    with open(os.path.join(s.out, "reservations.txt"), "w") as f:
        f.write(out)
    s.check("reservations: the probe ran on the real driver", rc == 0, tail=(out + err)[-800:])
    d = tempfile.mkdtemp()
    rc, out, err = s.audited([os.path.join(s.build, "tests", "sim", "oom", "oom_scenarios"), "launch-stack"], d,
                             flags=["--fail-on", "none"], timeout=180)
    reps = s.report(d)
    seen = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", out)}
    if rc != 0 or not reps or not reps[0].get("oom") or "threads" not in seen:
        s.check("reservations: the scenario ran, was refused at the launch, and wrote a report", False, rc=rc,
                out=out[-600:], err=err[-1500:])
        return
    rep, threads = reps[0], seen["threads"]
    step1 = [x for x in rep["steps"] if x["step"] == 1 and not x.get("label")]
    o = rep["oom"][-1]
    contexts = sorted(rep.get("contexts", []), key=lambda c: not c["primary"])
    s.facts["reservations"] = {"threads": threads, "step1": step1[0] if step1 else None,
                               "contexts": [{k: c[k] for k in ("primary", "measured", "fixed_bytes", "stack_bytes_per_thread",
                                                                "local_memory_bytes")} for c in contexts],
                               "oom": {k: o.get(k) for k in ("api", "requested_bytes", "kernel", "kernel_local_bytes_per_thread",
                                                             "driver_used_bytes", "unattributed_bytes")},
                               "oom_parts": [(p["what"], p.get("owner", ""), p["bytes"]) for p in o["parts"]]}
    s.say("reservations:", json.dumps(s.facts["reservations"]))
    st = step1[0] if step1 else {}
    allowed = max(64 * MiB, st.get("driver_used_bytes", 0) // 100)
    s.check("reservations: step 1 names the kernel stacks exactly (32 KiB and 1 KiB per thread × the device's threads)",
            st.get("local_memory_bytes") == (32768 + 1024) * threads and st.get("stack_bytes_per_thread") == 32768, step=st)
    s.check("reservations: both contexts' own parts measured at creation, each within 16 MiB of the driver's 259.5 MiB",
            len(contexts) == 2 and all(c["measured"] and abs(c["fixed_bytes"] - 259.5 * MiB) <= 16 * MiB for c in contexts),
            contexts=s.facts["reservations"]["contexts"])
    s.check("reservations: step 1 leaves at most max(64 MiB, 1% of driver-used) unattributed",
            bool(st) and st["unattributed_bytes"] <= allowed, unattributed=st.get("unattributed_bytes"), allowed=allowed)
    s.check("reservations: the refused launch's OOM record names the kernel, its local memory and the stack it needed",
            (o["api"], o.get("kernel"), o.get("kernel_local_bytes_per_thread"), o["requested_bytes"]) ==
            ("cuLaunchKernel", "local_huge", 65536, seen["request"]), record=s.facts["reservations"]["oom"])
    # The driver gave the refusing context's stack back before refusing, and 150 MiB of its own besides (run k10's
    # stack_oom): the parts may exceed driver-used by that much.
    total = sum(p["bytes"] for p in o["parts"])
    s.check("reservations: the OOM record's parts add up to driver-used within 1%, at most max(64 MiB, 1%) unattributed",
            abs(total - o["driver_used_bytes"]) <= o["driver_used_bytes"] // 100
            and o["unattributed_bytes"] <= max(64 * MiB, o["driver_used_bytes"] // 100), parts=s.facts["reservations"]["oom_parts"],
            total=total, used=o["driver_used_bytes"], before=seen.get("used"), after=seen.get("after"))
    s.check("reservations: the stderr block names the kernel", "kernel local_huge needs 64.0 KiB of local memory per thread" in err,
            tail=err[-800:])


def part_neighbour(s):
    """Another process holds 70% of the GPU; the audited one fills the rest until a 2 MiB request is refused.
    The OOM record and the step name the neighbour by pid and command name at NVML's figure for it, and what
    is left unattributed is this process's own (its context: well under 1 GiB)."""
    d = tempfile.mkdtemp()
    workload = f"{HERE}/neighbour_workload.py"
    holder = subprocess.Popen([sys.executable, workload, "hold", "0.7"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        words = holder.stdout.readline().split()
        if len(words) != 3 or words[0] != "holding":
            s.check("neighbour: the holder took 70% of the GPU", False, said=words)
            return
        pid, held = int(words[1]), int(words[2])
        rc, out, err = s.audited([sys.executable, workload, "fill"], d, env={"PYTHONPATH": f"{ROOT}/tools/python"},
                                 flags=["--fail-on", "none"], timeout=300)
    finally:
        holder.communicate("", timeout=60)
    reps = s.report(d)
    if rc != 0 or not reps or not reps[0].get("oom"):
        s.check("neighbour: the filler was refused and the report has oom records", False, rc=rc, err=err[-1500:])
        return
    rep = reps[0]
    o = rep["oom"][-1]
    others = [p for p in o["parts"] if p["what"] == "other_process"]
    step2 = [x for x in rep["steps"] if x["step"] == 2 and not x.get("label")]
    s.facts["neighbour"] = {"holder_pid": pid, "holder_alloc": held, "oom_requested": o["requested_bytes"],
                            "oom_parts": [(p["what"], p.get("owner", ""), p.get("pid", 0), p.get("process", ""), p["bytes"])
                                          for p in o["parts"]],
                            "oom_unattributed": o["unattributed_bytes"], "driver_used": o["driver_used_bytes"],
                            "step2": {k: step2[0].get(k) for k in ("driver_used_bytes", "other_processes_bytes",
                                                                     "process_used_bytes", "unattributed_bytes", "context_bytes", "local_memory_bytes")} if step2 else None}
    s.say("neighbour:", json.dumps(s.facts["neighbour"]))
    s.check("neighbour: the last refusal is a 2 MiB request", o["requested_bytes"] == 2 * MiB, requested=o["requested_bytes"])
    s.check("neighbour: the OOM record names the holder by pid and command name, at least its allocation and within "
            "1 GiB of it (its context)", o.get("processes_listed") is True and len(others) == 1 and others[0]["pid"] == pid
            and others[0]["process"].startswith("python") and held <= others[0]["bytes"] <= held + 1024 * MiB, others=others)
    s.check("neighbour: unattributed is this process's own, under 1 GiB; the parts add up to driver-used",
            o["unattributed_bytes"] < 1024 * MiB and sum(p["bytes"] for p in o["parts"]) == o["driver_used_bytes"],
            unattributed=o["unattributed_bytes"])
    s.check("neighbour: step 2 names the holder's bytes as other processes' and leaves under 1 GiB unattributed",
            bool(step2) and bool(others) and step2[0].get("other_processes_bytes") == others[0]["bytes"]
            and step2[0]["unattributed_bytes"] < 1024 * MiB,
            step=step2[0] if step2 else None)
    s.check("neighbour: the stderr block names the other process", f"other process {pid} (" in err, tail=err[-800:])
    s.check("neighbour: with the context measured, step 2 leaves at most max(64 MiB, 1% of driver-used) unattributed",
            bool(step2) and step2[0]["unattributed_bytes"] <= max(64 * MiB, step2[0]["driver_used_bytes"] // 100)
            and step2[0].get("context_bytes", 0) > 0, step=step2[0] if step2 else None)


def part_phases(s):
    """A training loop's phases (tests/gpu/unattributed_phases.py: CUDA init, a matmul, NCCL's init and first
    all-reduce, a backward pass, a CUDA graph), each followed by a mark, under lazy and eager module loading:
    what each phase leaves unattributed once module code is measured, and the code the audit named."""
    for mode in ("LAZY", "EAGER"):
        d = tempfile.mkdtemp()
        env = {"PYTHONPATH": f"{ROOT}/tools/python", "CUDA_MODULE_LOADING": mode}
        rc, out, err = s.audited([sys.executable, f"{HERE}/unattributed_phases.py"], d, env=env, flags=["--fail-on", "none"])
        reps = s.report(d)
        marks = [x for x in (reps[0]["steps"] if reps else []) if x.get("label")]
        rows = [{"phase": x["label"], "driver_used": x["driver_used_bytes"], "unattributed": x["unattributed_bytes"],
                 "module_code": x.get("module_code_bytes", 0), "modules_live": x.get("modules_live", 0),
                 "contexts": x.get("context_bytes", 0), "local_memory": x.get("local_memory_bytes", 0),
                 "stack_per_thread": x.get("stack_bytes_per_thread", 0), "malloc_heap": x.get("malloc_heap_bytes", 0)} for x in marks]
        printed = out.strip().splitlines()[-1] if out.strip() else ""  # the script's own per-phase figures
        s.facts[f"phases_{mode.lower()}"] = {"rc": rc, "rows": rows, "printed": printed[:4000], "err": err[-600:] if rc else ""}
        s.check(f"phases ({mode.lower()} loading): every phase leaves at most max(64 MiB, 1% of driver-used) unattributed",
                rc == 0 and bool(rows) and all(r["unattributed"] <= max(64 * MiB, r["driver_used"] // 100) for r in rows),
                rows=[(r["phase"], r["unattributed"] >> 20, r["module_code"] >> 20) for r in rows])


def part_firstlaunch(s):
    """A capture (global mode) holding kernels' first launches, which the audit measures: the program must be
    unchanged (the capture succeeds and replays); the marks before and after say what was named."""
    d = tempfile.mkdtemp()
    rc, out, err = s.audited([sys.executable, f"{HERE}/first_launch_capture.py"], d,
                             env={"PYTHONPATH": f"{ROOT}/tools/python"}, flags=["--fail-on", "none"])
    reps = s.report(d)
    marks = {x["label"]: x for x in (reps[0]["steps"] if reps else []) if x.get("label")}
    figures = {label: {k: x.get(k, 0) for k in ("driver_used_bytes", "module_code_bytes", "malloc_heap_bytes",
                                                  "unattributed_bytes")} for label, x in marks.items()}
    s.facts["first_launch_capture"] = figures
    s.check("a capture holding kernels' first launches succeeds and replays under the audit",
            rc == 0 and "capture ok, replay ok" in out, rc=rc, err=err[-600:], marks=figures)


def part_ranks(s):
    """Ranks on the GPU: two processes, a POSIX fd over a Unix socket; the importer's unreleased import
    pins the exporter's memory, and the merge says so, matching cuMemGetInfo."""
    d = tempfile.mkdtemp()
    rc, out, err = s.audited([os.path.join(s.build, "tests", "ranks", "fd_share"), "--gib", "2"], d)
    m = re.search(r"pinned_drop=(\d+)", out)
    rc2, mout, merr = s.sh([s.cli, "merge", d, "-o", os.path.join(d, "job.json")])
    job = json.load(open(os.path.join(d, "job.json"))) if os.path.exists(os.path.join(d, "job.json")) else {}
    pin = job.get("pinning", [])
    drop = int(m.group(1)) if m else None
    s.facts["ranks_fd_share"] = {"pinned_drop": drop, "pinning": pin, "merge_text": mout[-1500:], "rc": rc}
    s.check("two processes, POSIX fd over a Unix socket: the merge's pinning equals the cuMemGetInfo drop",
            drop is not None and len(pin) == 1 and pin[0]["bytes"] == drop and pin[0]["importer_rank"] == 1
            and pin[0]["exporter_rank"] == 0, drop=drop, pinning=pin, rc=rc, err=err[-300:])


def part_pool(s):
    """The pool on the GPU: the DeepEP sequence on the pool is leak-free; growth vs reallocation."""
    d = tempfile.mkdtemp()
    pool_example = os.path.join(s.build, "examples", "deepep_pool")
    rc, out, err = s.audited([pool_example, "--handle", "posix", "--steps", "4", "--size-mib", "512"], d)
    reps = s.report(d)
    summ = reps[0]["summary"] if reps else {}
    s.check("pool: DeepEP sequence on the pool, POSIX fds, zero leaks and misuse, drop 0",
            rc == 0 and "drop=0" in out and summ.get("leaked_bytes") == 0 and summ.get("misuse_events") == 0,
            rc=rc, summary=summ, out=out[-300:], err=err[-300:])
    bench = os.path.join(s.build, "tests", "sim", "pool", "bench_pool_growth")
    rc, out, err = s.sh([bench, "--handle", "posix"], timeout=300)
    s.facts["pool_bench"] = out[-3000:]
    s.say(out[-3000:])
    s.save()


def part_mempool(s):
    """The MemPool on the GPU: capture-time temporaries in the default pool vs in a cumemaudit pool MemPool
    (tests/gpu/pool_capture.py, about 3 minutes), side by side, each mode also under the auditor."""
    out = os.path.join(s.out, "mempool.json")
    rc, text, err = s.sh([sys.executable, f"{HERE}/pool_capture.py", "bench", "--cli", s.cli,
                          "--pool-lib", os.path.join(s.build, "src", "pool", "libcumemaudit_pool.so"),
                          "--json-out", out], timeout=600)
    s.say(text[-4000:])
    if not os.path.exists(out):
        s.check("mempool: the capture benchmark ran", False, rc=rc, err=err[-600:])
        return
    res = json.load(open(out))
    s.facts["mempool"] = res
    s.save()
    for mode, m in res["modes"].items():
        a = m["audit"]
        s.check(f"mempool {mode}: captures under the auditor with zero leaks and zero misuse",
                a["rc"] == 0 and a["leaked_bytes"] == 0 and a["misuse_events"] == 0 and a["reports"] == 1, **a)
    c = res["modes"]["cumemaudit"]
    s.check("mempool cumemaudit: every warm-up segment back to the driver after the captures",
            (c["free"].get("pool") or {}).get("reserved_bytes") == 0 and c["free"].get("failed_at") is None,
            pool=c["free"].get("pool"), failed_at=c["free"].get("failed_at"), error=c["free"].get("error"))


def part_enforce(s):
    """Enforce mode on the GPU: the unfixed DeepEP sequence (POSIX fds, 1+2+3 GiB) keeps free memory
    flat under mode=enforce, where audit mode shows it falling."""
    argv = [s.deepep, "--handle", "posix", "--steps", "3", "--size-mib", "1024"]
    out_of = {}
    for mode in ("audit", "enforce"):
        d = tempfile.mkdtemp()
        rc, out, err = s.audited(argv, d, flags=["--option", f"mode={mode}"])
        reps = s.report(d)
        m = re.search(r"drop=(\d+)", out)
        out_of[mode] = {"rc": rc, "drop": int(m.group(1)) if m else None,
                        "free_by_step_mib": [int(x) for x in re.findall(r"free now (\d+) MiB", out)],
                        "reclaimed_bytes": reps[0]["summary"].get("reclaimed_bytes") if reps else None,
                        "leaked_bytes": reps[0]["summary"]["leaked_bytes"] if reps else None}
    s.facts["enforce"] = out_of
    e, a = out_of["enforce"], out_of["audit"]
    # Exit 23 under enforce too: fail_on=leaks fails on what enforce reclaimed, as on what stays leaked.
    s.check("enforce: the unfixed DeepEP sequence keeps free memory flat (drop 0, 6 GiB reclaimed, gate fails), "
            "audit shows 6 GiB lost",
            e["drop"] == 0 and e["rc"] == 23 and e["reclaimed_bytes"] == 6 << 30 and a["drop"] == 6 << 30, **out_of)


def part_probe(s):
    """Each misuse's answer from the real driver beside the simulated driver's (tests/gpu/misuse_probe.cpp);
    docs/DRIVER.md's pending rows are filled from the real column of this part's facts."""
    probe = f"{s.build}/tests/gpu/misuse_probe"
    answers = {}
    for driver, env in (("real", {}), ("simulated", {"LD_LIBRARY_PATH": f"{s.build}/src/simdriver/sim"})):
        rc, out, err = s.sh([probe], env=env, timeout=120)
        answers[driver] = dict(re.findall(r"^probe (\w+) (\S+)$", out, re.M))
    s.facts["misuse_probe"] = {case: {"real": real, "simulated": answers["simulated"].get(case)}
                               for case, real in answers["real"].items()}
    for case, pair in s.facts["misuse_probe"].items():
        s.say(f"probe {case}: real {pair['real']}, simulated {pair['simulated']}")
    differ = {c: p for c, p in s.facts["misuse_probe"].items() if p["real"] != p["simulated"]}
    s.check("misuse probe: the simulated driver answers every misuse as the real one",
            answers["real"] and not differ, differ=differ, cases=len(answers["real"]))


CUPTI_CASES = ["deepep", "deepep-fixed", "door-direct", "door-dlsym", "door-procaddress-v2", "door-cudart", "nccl",
               "expandable", "misuse", "reuse", "open-export", "classic", "gate"]


def part_cupti(s):
    """The CUPTI backend on the GPU: the scenarios again with --backend cupti (same reports), proof that
    CUPTI did the recording, torch.profiler beside each backend, and the CUPTI backend's cost."""
    b = s.build
    env = {"AUDIT_DRIVER": "real", "AUDIT_BACKEND": "cupti", "CLI": s.cli,
           "SCENARIOS": f"{b}/tests/sim/audit/audit_scenarios", "DEEPEP": s.deepep,
           "RUNTIME_USER": f"{b}/tests/sim/audit/runtime_user", "NCCL": f"{b}/tests/sim/nccl_pattern",
           "CUMEMAUDIT_SHIM": f"{b}/src/shim/libcumemaudit.so",
           "EXPANDABLE": f"{b}/tests/sim/expandable_segments", "SOURCE_ROOT": ROOT,
           "DEEPBIND_LIB": f"{b}/tests/sim/audit/libdeepbind_lib.so"}
    for case in CUPTI_CASES:
        rc, out, err = s.sh([sys.executable, f"{ROOT}/tests/sim/audit/audit_common.py", case], env=env, timeout=180)
        s.check(f"audit {case} (real driver, --backend cupti)", rc == 0, why=(err.strip().splitlines() or [""])[0][:300])
    d = tempfile.mkdtemp()
    rc, out, err = s.audited([s.deepep, "--handle", "posix"], d, flags=["--backend", "cupti", "--option", "log_level=info"])
    s.check("--backend cupti: CUPTI subscribed and recorded (the wrappers stood by)",
            "subscribed to CUPTI" in err and rc == 23, rc=rc, err=err[-600:])
    d = tempfile.mkdtemp()
    rc, out, err = s.audited([f"{b}/tests/sim/audit/audit_scenarios", "async-growth"], d,
                             flags=["--backend", "cupti", "--fail-on", "none"])
    reps = s.report(d)
    pools = [(x["step"], x.get("async_pool_reserved_bytes", 0), x.get("async_pool_used_bytes", 0))
             for x in (reps[0]["steps"] if reps else [])]
    s.facts["cupti_pool_steps"] = pools
    s.check("--backend cupti: cuMemAllocAsync pool growth appears in the step records",
            len(pools) == 4 and all(p[2] >= 64 * MiB * p[0] for p in pools) and pools[-1][1] >= 256 * MiB,
            steps=pools, rc=rc, err=err[-300:])
    prof = {}
    for backend in ("preload", "cupti"):
        d = tempfile.mkdtemp()
        rc, out, err = s.audited([sys.executable, f"{HERE}/torch_workloads.py", "profile"], d,
                                 flags=["--backend", backend, "--fail-on", "none"])
        m = re.search(r"cuda_events=(\d+)", out)
        reps = s.report(d)
        prof[backend] = {"rc": rc, "cuda_events": int(m.group(1)) if m else None,
                         "fallback_message": next((l for l in err.splitlines()
                                                   if "CUPTI is held by" in l or "CUPTI is left to it" in l), ""),
                         "calls": reps[0]["summary"]["intercepted_calls"] if reps else None}
    s.facts["cupti_profiler"] = prof
    s.check("torch.profiler keeps its CUDA events under the preload backend",
            prof["preload"]["rc"] == 0 and (prof["preload"]["cuda_events"] or 0) > 0, **prof["preload"])
    s.check("torch.profiler beside --backend cupti: the profile keeps its events, with one clear fallback message",
            prof["cupti"]["rc"] == 0 and (prof["cupti"]["cuda_events"] or 0) > 0 and bool(prof["cupti"]["fallback_message"])
            and (prof["cupti"]["calls"] or 0) > 0, **prof["cupti"])
    bench = os.path.join(s.build, "tests", "bench", "bench_calls")
    costs = {}
    for label, flags in (("plain", None), ("preload", ["--backend", "preload"]), ("cupti", ["--backend", "cupti"])):
        d = tempfile.mkdtemp()
        cmd = ([s.cli, "run", "--report-dir", d, "--fail-on", "none", *flags, "--"] if flags else []) + \
              [bench, "--child", "--iters", "20000", "--repeats", "1", "--depth", "40"]
        rc, out, err = s.sh(cmd, env={"CUMEMAUDIT_OPTIONS": "summary=0"}, timeout=300)
        for m in re.finditer(r"^RESULT (\w+) 1 ([\d.]+)$", out, re.M):
            costs.setdefault(m.group(1), {})[label] = float(m.group(2))
    s.facts["cupti_costs"] = costs
    s.say("cupti costs", costs)
    s.save()


RELIABILITY_CASES = ["sigterm-in-locks", "sa-restart", "non-utf8", "dlclose-reload", "suppressions-fifo",
                     "c-api-only", "options-bounds", "transient-samples", "threads-32", "sigterm-16",
                     "stderr-reader-gone", "file-size-limit", "report-unwritable",
                     "cancel-in-checkpoint", "late-rank", "stderr-reused", "terminal-escapes", "early-step",
                     "suppressions-at-start", "views-agree"]


def part_reliability(s):
    """The reliability cases on the real driver. Left out: fork (CUDA does not support a fork child using its parent's context),
    closed-fds (closing every fd takes the real driver's own, and it keeps eventfds of its own), longjmp-out (a fault
    inside the real driver may leave its own locks held), report-not-replaced (pid namespaces) and exit-in-handler:
    on the real driver an exit() from a handler that interrupted a driver call hangs about 1 run in 80 without the
    shim too, inside the driver (tests/gpu/exit_in_handler.sh compares the two)."""
    b = s.build
    env = {"RELIABILITY_DRIVER": "real", "CLI": s.cli, "CUMEMAUDIT_SHIM": f"{b}/src/shim/libcumemaudit.so",
           "CUMEMAUDIT_SIM_DIR": f"{b}/src/simdriver/sim", "HOSTILE": f"{b}/tests/reliability/hostile",
           "RELOAD": f"{b}/tests/reliability/reload", "SCENARIOS": f"{b}/tests/sim/audit/audit_scenarios",
           "BUILD_ROOT": b}
    figures = []
    for case in RELIABILITY_CASES:
        rc, out, err = s.sh([sys.executable, f"{ROOT}/tests/reliability/test_reliability.py", case], env=env, timeout=300)
        figures += [l for l in out.splitlines() if l.startswith("figure ")]
        s.check(f"reliability {case} (real driver)", rc == 0, why=(err.strip().splitlines() or [""])[-1][:300])
    s.facts["reliability_real"] = figures
    s.say("reliability:", "\n".join(figures))
    s.save()


def part_detect(s):
    """The DeepEP sequence under both tools: bytes each reports against the cuMemGetInfo drop."""
    argv = [s.deepep, "--handle", "posix", "--steps", "3", "--size-mib", "1024"]
    rc, out, err = s.sh(["compute-sanitizer", "--tool", "memcheck", "--leak-check", "full", *argv], timeout=300)
    m = re.search(r"LEAK SUMMARY: (\d+) bytes leaked in (\d+) allocations", out + err)
    drop = re.search(r"drop=(\d+)", out)
    s.facts["detect_compute_sanitizer"] = {"rc": rc, "leak_summary": m.group(0) if m else (out + err)[-600:],
                                           "drop": int(drop.group(1)) if drop else None}
    d = tempfile.mkdtemp()
    rc2, out2, err2 = s.audited(argv, d)
    reps = s.report(d)
    drop2 = re.search(r"drop=(\d+)", out2)
    s.facts["detect_cumemaudit"] = {"rc": rc2, "leaked_bytes": reps[0]["summary"]["leaked_bytes"] if reps else None,
                                    "drop": int(drop2.group(1)) if drop2 else None}
    s.say("detect:", s.facts["detect_compute_sanitizer"], s.facts["detect_cumemaudit"])
    s.save()


def fmt_bytes(n):
    return "—" if n is None else f"{n} ({n / MiB:.0f} MiB)"


def render(results):
    """results.json → RESULTS.md: the dated facts, the headline figures, then every check."""
    f, checks = results["facts"], results["checks"]
    lines = [f"# GPU results ({f.get('date', '?')})", "",
             "Written by `scripts/gpu` (tests/gpu/gpu_suite.py) on the lent GPU machine; regenerate with the same",
             "command. Every row is a check the suite made; figures are as measured, not edited.", "",
             f"- GPUs: {', '.join(f.get('gpus', [])) or '?'}",
             f"- PyTorch, CUDA, NCCL, device count: {f.get('torch', '?')}",
             f"- compute-sanitizer: {f.get('compute_sanitizer', '?')}", ""]
    if "deepep_real" in f:
        d = f["deepep_real"]
        lines += ["## The DeepEP sequence on the real driver (POSIX-fd handles, buffers of 1, 2 and 3 GiB)", "",
                  "| cuMemGetInfo drop | cumemaudit leaked_bytes | exit code | leak sites |", "|---|---|---|---|",
                  f"| {fmt_bytes(d['drop'])} | {fmt_bytes(d['leaked_bytes'])} | {d['exit']} | {', '.join(d['sites'])} |", ""]
    if "detect_cumemaudit" in f or "detect_compute_sanitizer" in f:
        a, c = f.get("detect_cumemaudit", {}), f.get("detect_compute_sanitizer", {})
        lines += ["## Detection side by side (the same DeepEP sequence)", "",
                  "| tool | what it reports | cuMemGetInfo drop |", "|---|---|---|",
                  f"| cumemaudit | {fmt_bytes(a.get('leaked_bytes'))} leaked | {fmt_bytes(a.get('drop'))} |",
                  f"| compute-sanitizer memcheck --leak-check full | {c.get('leak_summary', '—')} | {fmt_bytes(c.get('drop'))} |", ""]
    for key, title in (("train_caching", "caching allocator"), ("train_no_caching", "PYTORCH_NO_CUDA_MEMORY_CACHING=1")):
        t = f.get(key)
        if not t or not isinstance(t.get("plain"), list) or not t["plain"] or not t["cumemaudit"]:
            continue
        med = {k: sorted(v)[len(v) // 2] for k, v in t.items()}
        spread = (max(t["plain"]) / min(t["plain"]) - 1) * 100
        lines += [f"## PyTorch training step, {title} (median µs per step of each run, runs interleaved)", "",
                  "| plain runs | cumemaudit runs | added (median vs median) | spread of the plain runs |",
                  "|---|---|---|---|",
                  f"| {', '.join(f'{x:.0f}' for x in t['plain'])} | {', '.join(f'{x:.0f}' for x in t['cumemaudit'])} | "
                  f"{(med['cumemaudit'] / med['plain'] - 1) * 100:+.2f}% | {spread:.1f}% |", ""]
    if "oom_record" in f:
        o = f["oom_record"]
        lines += ["## The out-of-memory moment (VMM buffer outside PyTorch, filled GPU, graph capture loop)", "",
                  f"Refused: `{o['api']}` of {fmt_bytes(o['requested_bytes'])} ({o['result']}) at step {o['step']}; "
                  f"driver used {fmt_bytes(o['driver_used_bytes'])}, free {fmt_bytes(o['driver_free_bytes'])}; "
                  f"recovered: {o['recovered']}; {f.get('oom_records', 0)} oom rows.", "",
                  "| part | owner | kind | graph | bytes |", "|---|---|---|---|---|"]
        lines += [f"| {w} | {ow} | {k} | {g or ''} | {fmt_bytes(b)} |" for w, ow, k, g, b in f.get("oom_parts", [])]
        lines += ["", "| PyTorch pool at the OOM | allocated | reserved | reserved but unallocated |", "|---|---|---|---|"]
        lines += [f"| {p['pool']} | {fmt_bytes(p['allocated_bytes'])} | {fmt_bytes(p['reserved_bytes'])} | "
                  f"{fmt_bytes(p['fragmentation_bytes'])} |" for p in f.get("oom_pytorch_pools", [])]
        captured = f.get("oom_program", {}).get("captured", [])
        lines += ["", "| graph | batch | shim: new during capture | shim: instantiate cost | PyTorch graph pools reserved after it |",
                  "|---|---|---|---|---|"]
        for i, g in enumerate(f.get("oom_graphs", [])):
            c = captured[i] if i < len(captured) else {}
            pool = sum(p["reserved_bytes"] for p in c.get("pools", []) if p["pool"] != "default") if c else None
            lines.append(f"| {g['id']} | {c.get('batch', '—')} | {fmt_bytes(g['bytes'])} | "
                         f"{fmt_bytes(g['instantiate_cost_bytes'])} | {fmt_bytes(pool)} |")
        lines.append("")
    if "timeline_steps" in f:
        lines += ["## Training loop with torch_step marks (expandable segments, a CUDA graph, NCCL)", "",
                  f"Owners: {', '.join(f.get('timeline_owners', []))}. Bytes per step; parts = PyTorch reserved "
                  "(allocated + cached free) + other owners + unattributed.", "",
                  "| step | driver used | this process (NVML) | PyTorch allocated | PyTorch cached free | other owners | unattributed | parts vs used |",
                  "|---|---|---|---|---|---|---|---|"]
        for x in f["timeline_steps"]:
            lines.append(f"| {x['step']} | {x['driver_used']} | {x.get('process_used', '—')} | {x['pytorch_allocated']} | "
                         f"{x['pytorch_cached_free']} | {x['others']} | {x['unattributed']} | {x['parts_vs_used_pct']:+.3f}% |")
        for g in f.get("timeline_graphs", []):
            lines.append(f"\nCUDA graph {g['id']}: {g['bytes']} bytes allocated during capture "
                         f"({g['bytes_by_owner']}), instantiated {g['instantiations']}×, instantiate cost "
                         f"{g['instantiate_cost_bytes']} bytes of driver-used memory.")
        lines.append("")
    if "ranks_fd_share" in f:
        r = f["ranks_fd_share"]
        lines += ["## Two processes, a POSIX fd over a Unix socket", "",
                  f"cuMemGetInfo drop while nothing could use the memory: {fmt_bytes(r['pinned_drop'])}; "
                  f"`cumemaudit merge` pinning: {r['pinning']}", ""]
    if "enforce" in f:
        lines += ["## mode=enforce on the unfixed DeepEP sequence (POSIX fds, 1+2+3 GiB)", "",
                  "| mode | exit code | free MiB after each step | cuMemGetInfo drop | reclaimed | leaked |", "|---|---|---|---|---|---|"]
        for mode, x in f["enforce"].items():
            lines.append(f"| {mode} | {x['rc']} | {x['free_by_step_mib']} | {fmt_bytes(x['drop'])} | "
                         f"{fmt_bytes(x['reclaimed_bytes'])} | {fmt_bytes(x['leaked_bytes'])} |")
        lines.append("")
    if "cupti_costs" in f:
        lines += ["## The CUPTI backend beside the preload one (ns per call, one thread, one round)", "",
                  "| pattern | plain | preload | cupti |", "|---|---|---|---|"]
        for pattern, c in sorted(f["cupti_costs"].items()):
            lines.append(f"| {CALL_PATTERNS.get(pattern, pattern)} | {c.get('plain', 0):.0f} | {c.get('preload', 0):.0f} | "
                         f"{c.get('cupti', 0):.0f} |")
        lines += ["", f"torch.profiler beside each backend: {f.get('cupti_profiler')}", "",
                  f"Stream-ordered pool per step (step, reserved, used) from CUPTI activity records: "
                  f"{f.get('cupti_pool_steps')}", ""]
    if "mempool" in f:
        sys.path.insert(0, HERE)
        import pool_capture
        lines += ["## Capture-time temporaries: default pool vs cumemaudit pool (tests/gpu/pool_capture.py)", "",
                  pool_capture.table(f["mempool"]), ""]
    if "pool_bench" in f:
        lines += ["## Pool growth vs release-and-reallocate (POSIX fds)", "", "```", f["pool_bench"].strip(), "```", ""]
    if "calls_table" in f:
        lines += ["## Added cost per call (same binary, same inputs)", "", f["calls_table"], ""]
    if "calls_rounds" in f:
        lines += ["## Added cost per call, plain vs cumemaudit only, 5 interleaved rounds", "",
                  "Every round's figure (ns per call), so the spread between rounds shows; best and median each.", "",
                  "| pattern | threads | plain | cumemaudit | added (best) | added (median) |", "|---|---|---|---|---|---|"]
        for key, r in sorted(f["calls_rounds"].items()):
            pattern, threads = key.split()
            p, c = r["plain"], r["cumemaudit"]
            best = (min(c) / min(p) - 1) * 100
            med = (statistics.median(c) / statistics.median(p) - 1) * 100
            lines.append(f"| {CALL_PATTERNS.get(pattern, pattern)} | {threads} | {', '.join(f'{x:.0f}' for x in p)} | "
                         f"{', '.join(f'{x:.0f}' for x in c)} | {best:+.1f}% ({min(c) - min(p):+.0f} ns) | {med:+.1f}% |")
        lines.append("")
    if "pysites_cost" in f:
        lines += ["## Python frames and deep stacks at VMM calls (µs per create+map+access+unmap+release cycle)", "",
                  "Old default: vmm_stack_depth=1, python_frames=none. New default: 16 native frames and up to 8 "
                  "Python frames at VMM calls. 5 interleaved rounds; every round's figure, then the median.", "",
                  "| driven from | plain | old default | new default | new vs plain (median) |", "|---|---|---|---|---|"]
        for where, r in f["pysites_cost"].items():
            med = {k: statistics.median(v) if v else 0 for k, v in r.items()}
            cells = [", ".join(f"{x:.1f}" for x in r[k]) + f" (median {med[k]:.1f})" for k in ("plain", "old default", "new default")]
            added = f"{(med['new default'] / med['plain'] - 1) * 100:+.1f}%" if med["plain"] else "—"
            lines.append(f"| {'C++ (bench_calls)' if where == 'native' else 'Python (ctypes)'} | {' | '.join(cells)} | {added} |")
        for what in ("bindings", "core"):
            if f"pysites_{what}" in f:
                lines.append(f"\ncuda-python {what}: {json.dumps(f[f'pysites_{what}'])[:600]}")
        lines.append("")
    passed = sum(c["ok"] for c in checks)
    lines += [f"## Checks: {passed} passed, {len(checks) - passed} failed", "", "| check | result | details |",
              "|---|---|---|"]
    for c in checks:
        details = {k: v for k, v in c.items() if k not in ("name", "ok") and v not in ("", [], None)}
        text = json.dumps(details)[:300].replace("|", "\\|")
        lines.append(f"| {c['name']} | {'pass' if c['ok'] else 'FAIL'} | {text} |")
    return "\n".join(lines) + "\n"


def part_wheel(s):
    """The wheel (scripts/wheel; carried in dist/ or named by CUMEMAUDIT_WHEEL) pip-installed into a venv made
    with --system-site-packages, then `pytest --cumemaudit` over torch_pytest.py from that venv: exactly
    test_cuda_python_leak fails, with the test, the bytes and the site in its message."""
    wheels = [os.environ["CUMEMAUDIT_WHEEL"]] if os.environ.get("CUMEMAUDIT_WHEEL") else \
        sorted(glob.glob(os.path.join(ROOT, "dist", "cumemaudit-*.whl")))
    if not wheels:
        s.check("wheel: a wheel to install (dist/cumemaudit-*.whl)", False, why="none; build it with scripts/wheel")
        return
    venv = tempfile.mkdtemp(prefix="cumemaudit-venv.")
    rc, out, err = s.sh([sys.executable, "-m", "venv", "--system-site-packages", venv])
    if rc != 0:  # no ensurepip in the image: the system's pip, seen through the system site packages, installs
        rc, out, err = s.sh([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", venv])
    py = os.path.join(venv, "bin", "python")
    # When the image's python3 is itself a venv (/opt/torch/.venv there), --system-site-packages reaches only the
    # base interpreter's packages, not torch and pytest: a .pth file adds the parent environment's, as a user
    # in that situation would.
    if sys.prefix != sys.base_prefix:
        import site
        _, purelib, _ = s.sh([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
        with open(os.path.join(purelib.strip(), "_parent_env.pth"), "w") as f:
            f.write("\n".join(site.getsitepackages()) + "\n")
    rc, out, err = s.sh([py, "-m", "pip", "install", "--no-index", "--no-deps", "--disable-pip-version-check", wheels[-1]])
    s.check("wheel: pip install into a --system-site-packages venv", rc == 0, wheel=os.path.basename(wheels[-1]),
            tail=(out + err)[-300:])
    if rc != 0:
        return
    reports = os.path.join(s.out, "wheel-reports")
    shutil.rmtree(reports, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "PYTHONPATH", "CUMEMAUDIT_OPTIONS")}
    env["PATH"] = os.path.join(venv, "bin") + ":" + env.get("PATH", "/usr/bin:/bin")
    t0 = time.time()
    p = subprocess.run([py, "-m", "pytest", "-p", "no:cacheprovider", "-v", "--cumemaudit", "--cumemaudit-dir", reports,
                        os.path.join(HERE, "torch_pytest.py")], capture_output=True, text=True, timeout=600, env=env,
                       cwd=venv)
    s.log.write(f"$ pytest --cumemaudit torch_pytest.py [rc {p.returncode}, {time.time() - t0:.1f}s]\n{p.stdout}\n{p.stderr[-4000:]}\n")
    outcome = dict(re.findall(r"::(test_\w+) (PASSED|FAILED|ERROR)", p.stdout))
    expected = {"test_clean_training_step": "PASSED", "test_cuda_python_leak": "FAILED",
                "test_expandable_segments_and_graph": "PASSED"}
    s.check("wheel: pytest --cumemaudit fails exactly test_cuda_python_leak", outcome == expected and p.returncode == 1,
            outcome=outcome, rc=p.returncode, seconds=round(time.time() - t0, 1))
    message = re.search(r"cumemaudit: \S+::test_cuda_python_leak: .*", p.stdout)
    s.check("wheel: the failure names the test, 67108864 bytes, 1 reference and the cuMemCreate site",
            bool(message) and ": 67108864 bytes leaked in 1 allocation(s) (1 unreleased reference(s)), 0 allowed; "
            "leaking site: cuMemCreate in " in message.group(0), message=message.group(0)[:400] if message else None)
    reps = Suite.report(reports)
    s.check("wheel: one session report holding the 64 MiB leak", len(reps) == 1 and
            reps[0]["summary"]["leaked_bytes"] == 64 * MiB,
            reports=len(reps), leaked=[r["summary"]["leaked_bytes"] for r in reps])


# Every part_NAME function is the part NAME: a new part is one function, no list to keep in step.
PARTS = {name[len("part_"):]: fn for name, fn in list(globals().items()) if name.startswith("part_")}


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--render":
        sys.stdout.write(render(json.load(open(sys.argv[2]))))
        return 0
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--parts", default="env,probe,audit,torch,timeline,ranks,pool,mempool,enforce,cupti,oom,overhead,pysites,detect")
    a = p.parse_args()
    unknown = [x for x in a.parts.split(",") if x not in PARTS]
    if unknown:
        p.error(f"unknown part(s) {', '.join(unknown)}; the parts are {', '.join(PARTS)}")
    os.makedirs(a.out, exist_ok=True)
    for k, v in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}.items():
        os.environ[k] = v
    s = Suite(a.build, a.out)
    for part in a.parts.split(","):
        t0 = time.time()
        try:
            PARTS[part](s)
        except Exception as e:  # one part's failure must not lose the others' results
            s.check(f"part {part} crashed", False, why=repr(e))
        s.say(f"part {part}: {time.time() - t0:.0f}s")
    with open(os.path.join(a.out, "RESULTS.md"), "w") as f:
        f.write(render({"facts": s.facts, "checks": s.checks}))
    failed = [c["name"] for c in s.checks if not c["ok"]]
    s.say(f"{len(s.checks) - len(failed)} passed, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
