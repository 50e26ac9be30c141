#!/usr/bin/env python3
"""The `oom` record on the simulated driver: each case drives a program into
CUDA_ERROR_OUT_OF_MEMORY under `cumemaudit run --sim` with a small CUMEMAUDIT_SIM_MEMORY and asserts the
record exactly: the request, its site (file:line), the driver's figures at the refusal, and parts that add
up to the simulated driver's used memory to the byte (the simulated driver has no context or module cost,
so nothing is unattributed).

Usage: test_oom.py CASE   (paths from the environment meson sets: CLI, OOM_SCENARIOS, SOURCE_ROOT)."""
import json
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support"))
from cases import Failure, expect, main, named_cases  # noqa: E402
from report_dir import ReportDir  # noqa: E402
from sim_neighbour import neighbour  # noqa: E402

CLI = os.environ["CLI"]
PROGRAM = os.environ["OOM_SCENARIOS"]
SOURCE_ROOT = os.environ["SOURCE_ROOT"]
SOURCE = os.path.join(SOURCE_ROOT, "tests", "sim", "oom", "oom_scenarios.cpp")
HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20


def run(argv, report_dir, memory, options=(), env=None, rc=0):
    cmd = [CLI, "run", "--sim", "--report-dir", report_dir, *[f for o in options for f in ("--option", o)],
           "--", *argv]
    full_env = {**os.environ, "CUMEMAUDIT_SIM_MEMORY": memory, **(env or {})}
    full_env.pop("CUMEMAUDIT_OPTIONS", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=100)
    if proc.returncode != rc:
        raise Failure(f"{' '.join(cmd)}: exit {proc.returncode}, expected {rc}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def only_report(report_dir):
    return ReportDir(report_dir).only()


def figures(stdout):
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", stdout)}


def marker_line(name):
    for number, text in enumerate(open(SOURCE), 1):
        if re.search(rf"// site:{re.escape(name)}\b", text):
            return number
    raise Failure(f"site:{name} not found in {SOURCE}")


def expect_site(site, api, name):
    expect(site["api"] == api, f"site api {site['api']}, expected {api}")
    top = site["frames"][0]
    expect(os.path.basename(top["file"]) == "oom_scenarios.cpp" and top["line"] == marker_line(name),
           f"site {top['file']}:{top['line']}, expected oom_scenarios.cpp:{marker_line(name)} ({name})")


def expect_adds_up(oom, used):
    """The parts sum to the driver's used memory at the refusal, exactly, and nothing is unattributed."""
    total = sum(p["bytes"] for p in oom["parts"])
    expect(oom["driver_used_bytes"] == used, f"driver_used_bytes {oom['driver_used_bytes']}, the driver said {used}")
    expect(total == used, f"parts add up to {total}, driver used {used}: {oom['parts']}")
    expect(oom["unattributed_bytes"] == 0, f"unattributed {oom['unattributed_bytes']} on the simulated driver")
    expect(oom["driver_free_bytes"] + used == oom["driver_total_bytes"], f"free + used != total: {oom}")
    sizes = [p["bytes"] for p in oom["parts"]]
    expect(sizes == sorted(sizes, reverse=True), f"parts not largest first: {sizes}")


def case_deepep_leak(tmp):
    """A DeepEP-shaped buffer grows by 64 MiB a step and leaks each old one (creation and get_handle
    references never released) until cuMemCreate is refused; the program is killed at once, so the report on
    disk is the one written at the refusal. Its largest holder is the leak, named by its create site."""
    proc = run([PROGRAM, "deepep-leak"], tmp, "1GiB", rc=-signal.SIGKILL)
    seen = figures(proc.stdout)
    expect(seen["step"] == 6 and seen["request"] == 384 * MiB, f"program saw {seen}")
    rep = only_report(tmp)
    expect(rep["checkpoint"] is True, "the report on disk is the one written at the refusal")
    expect(len(rep["oom"]) == 1 and rep["summary"]["oom_events"] == 1, f"oom rows: {rep['oom']}")
    oom = rep["oom"][0]
    expect((oom["api"], oom["result"], oom["requested_bytes"]) == ("cuMemCreate", "CUDA_ERROR_OUT_OF_MEMORY", 384 * MiB),
           f"the failed request: {oom['api']} {oom['result']} {oom['requested_bytes']}")
    expect(oom["step"] == 5, f"refused after step 5 was marked, got step {oom['step']}")
    expect_site(oom["site"], "cuMemCreate", "deepep_create")
    expect(oom["recovered"] is False, "nothing retried")
    expect_adds_up(oom, seen["used"])
    leaked = (64 + 128 + 192 + 256 + 320) * MiB
    expect(oom["leaked_bytes"] == leaked, f"leaked {oom['leaked_bytes']}, expected {leaked}")
    top = oom["parts"][0]
    expect((top["what"], top["kind"], top["bytes"]) == ("leaked", "vmm_physical", leaked), f"largest holder: {top}")
    expect_site(top["site"], "cuMemCreate", "deepep_create")
    side = [p for p in oom["parts"] if p["what"] == "live"]
    expect([(p["kind"], p["bytes"]) for p in side] == [("classic", 32 * MiB)], f"live parts: {side}")
    block = proc.stderr
    expect("Out of memory: cuMemCreate of 402653184 bytes (384.0 MiB) returned CUDA_ERROR_OUT_OF_MEMORY at step 5" in block,
           f"stderr block:\n{block}")
    expect(re.search(r"960\.0 MiB\s+96\.8%\s+LEAKED \S+ vmm_physical from cuMemCreate at \S*oom_scenarios.cpp:"
                     + str(marker_line("deepep_create")), block), f"the leak leads the stderr block:\n{block}")


def case_alloc_recover(tmp):
    """cuMemAlloc refused while 160 MiB is cached; the program frees the cache and retries the same
    request, which succeeds: the record says recovered, and its breakdown is the cache."""
    proc = run([PROGRAM, "alloc-recover"], tmp, "256MiB", rc=0)
    seen = figures(proc.stdout)
    rep = only_report(tmp)
    expect(rep["checkpoint"] is False, "the exit report")
    expect(len(rep["oom"]) == 1, f"oom rows: {rep['oom']}")
    oom = rep["oom"][0]
    expect((oom["api"], oom["requested_bytes"]) == ("cuMemAlloc", seen["request"]), f"request: {oom}")
    expect_site(oom["site"], "cuMemAlloc", "refused_alloc")
    expect(oom["recovered"] is True and oom["recovered_time_ns"] >= oom["time_ns"], f"recovered: {oom}")
    expect_adds_up(oom, seen["used"])
    expect([(p["what"], p["kind"], p["bytes"]) for p in oom["parts"]] == [("live", "classic", 160 * MiB)],
           f"parts: {oom['parts']}")
    expect("recovered by a later retry" in proc.stderr, f"the exit summary says recovered:\n{proc.stderr}")


def case_graph_loop(tmp):
    """A capture loop over three batch sizes, largest first; each instantiation holds 48 MiB
    (CUMEMAUDIT_SIM_GRAPH_EXEC) and the third is refused: the record lists each graph's instantiate cost,
    and the graph table gives per-graph and cumulative cost."""
    proc = run([PROGRAM, "graph-loop"], tmp, "256MiB", env={"CUMEMAUDIT_SIM_GRAPH_EXEC": "48MiB"}, rc=0)
    seen = figures(proc.stdout)
    expect(seen["graph"] == 3, f"the third instantiation is refused: {proc.stdout}")
    rep = only_report(tmp)
    oom = rep["oom"][0]
    expect((oom["api"], oom["requested_bytes"]) == ("cuGraphInstantiateWithFlags", 0), f"request: {oom}")
    expect_site(oom["site"], "cuGraphInstantiateWithFlags", "instantiate")
    expect_adds_up(oom, seen["used"])
    parts = sorted((p["what"], p.get("graph", 0), p["bytes"]) for p in oom["parts"])
    expect(parts == [("graph", 1, 48 * MiB), ("graph", 2, 48 * MiB), ("live", 0, 144 * MiB)], f"parts: {parts}")
    graphs = [(g["id"], g["bytes"], g["instantiate_cost_bytes"]) for g in rep["graphs"]]
    expect(graphs == [(1, 96 * MiB, 48 * MiB), (2, 32 * MiB, 48 * MiB), (3, 16 * MiB, 0)], f"graphs: {graphs}")
    text = subprocess.run([CLI, "report", ReportDir(tmp).only_file()],
                          capture_output=True, text=True, check=True).stdout
    rows = re.findall(r"^\s+(\d+)\s+\d+\s+(\S+ \S+)\s+(\S+ \S+)\s+(\S+ \S+)\s+(\S+ \S+)$", text, re.M)
    expect(rows == [("1", "96.0 MiB", "0 B", "48.0 MiB", "144.0 MiB"),
                    ("2", "32.0 MiB", "96.0 MiB", "48.0 MiB", "224.0 MiB"),
                    ("3", "16.0 MiB", "128.0 MiB", "0 B", "240.0 MiB")], f"graph table rows {rows} in:\n{text}")


def case_bad_graph_exec(tmp):
    """A CUMEMAUDIT_SIM_GRAPH_EXEC that is not a size: cuInit refuses, with one line naming variable and value."""
    proc = run([PROGRAM, "graph-loop"], tmp, "256MiB", env={"CUMEMAUDIT_SIM_GRAPH_EXEC": "48 apples"}, rc=99)
    expect("cumemaudit-sim: CUMEMAUDIT_SIM_GRAPH_EXEC='48 apples' is not a size (expected e.g. 2MiB, 0 or a byte count)"
           in proc.stderr, proc.stderr)
    expect("cuInit(0) returned CUDA_ERROR_INVALID_VALUE, expected CUDA_SUCCESS" in proc.stderr, proc.stderr)


def case_rate_limit(tmp):
    """Five refusals in a row, then SIGKILL: with oom_interval_s=3600 only the first wrote a report (the one on
    disk holds one record) and one block reached stderr; with 0 every refusal wrote."""
    slow = os.path.join(tmp, "slow")
    proc = run([PROGRAM, "storm", "5"], slow, "256MiB", options=["oom_interval_s=3600"], rc=-signal.SIGKILL)
    rep = only_report(slow)
    expect(len(rep["oom"]) == 1 and rep["summary"]["oom_events"] == 1, f"one written: {rep['summary']}")
    expect(len(re.findall(r"cumemaudit:\nOut of memory", proc.stderr)) == 1, f"one block:\n{proc.stderr}")
    fast = os.path.join(tmp, "fast")
    proc = run([PROGRAM, "storm", "5"], fast, "256MiB", options=["oom_interval_s=0"], rc=-signal.SIGKILL)
    rep = only_report(fast)
    expect(len(rep["oom"]) == 5 and rep["summary"]["oom_events"] == 5, f"five written: {rep['summary']}")
    expect(len(re.findall(r"cumemaudit:\nOut of memory", proc.stderr)) == 5, f"five blocks:\n{proc.stderr}")
    for oom in rep["oom"]:
        expect_adds_up(oom, figures(proc.stdout)["used"])


def case_neighbour(tmp):
    """Another process holds 800 MiB of the 1 GiB device, as a test worker beside this one did: this process
    holds 160 MiB and its 128 MiB request is refused. The record names the neighbour by pid and command name,
    and what is left unattributed is this process's own (none on the simulated driver)."""
    node = f"oom-{os.getpid()}"
    with neighbour(node, 800 * MiB, env={"CUMEMAUDIT_SIM_MEMORY": "1GiB"}) as holder:
        proc = run([PROGRAM, "alloc-recover"], tmp, "1GiB", env={"CUMEMAUDIT_SIM_NODE": node}, rc=0)
        name = open(f"/proc/{holder.pid}/comm").read().strip()
    seen = figures(proc.stdout)
    oom, = only_report(tmp)["oom"]
    expect_adds_up(oom, seen["used"])
    expect(seen["used"] == 960 * MiB and oom["processes_listed"] is True, f"the driver saw {seen}; {oom}")
    expect([(p["what"], p["pid"], p["process"], p["bytes"]) for p in oom["parts"]] ==
           [("other_process", holder.pid, name, 800 * MiB), ("live", 0, "", 160 * MiB)], f"parts: {oom['parts']}")
    block = proc.stderr
    expect(re.search(rf"800\.0 MiB\s+83\.3%\s+other process {holder.pid} \({re.escape(name)}\)\n", block),
           f"the stderr block names the neighbour:\n{block}")
    # Without NVML's list the same memory is unattributed, and the block says it may be another process's.
    tmp2 = os.path.join(tmp, "no-nvml")
    os.makedirs(tmp2)
    with neighbour(node, 800 * MiB, env={"CUMEMAUDIT_SIM_MEMORY": "1GiB"}):
        proc = run([PROGRAM, "alloc-recover"], tmp2, "1GiB", env={"CUMEMAUDIT_SIM_NODE": node, "CUMEMAUDIT_SIM_NVML": "0"},
                   rc=0)
    oom, = only_report(tmp2)["oom"]
    expect(oom["processes_listed"] is False and oom["unattributed_bytes"] == 800 * MiB, f"without NVML: {oom}")
    expect("unattributed (what no measured call took, a context not measured, other processes)" in proc.stderr, f"without NVML:\n{proc.stderr}")


def case_context_refused(tmp):
    """A context the device has no room for (a second process's first CUDA call on a full GPU, or a library's
    own context): the driver refuses cuCtxCreate for memory, and that is an OOM record like a refused
    allocation's, at the creating line, with every part of the memory that was there: the primary context's
    own part and stack, and the buffer that filled the device."""
    env = {"CUMEMAUDIT_SIM_CONTEXT": "256MiB", "CUMEMAUDIT_SIM_SMS": "4"}
    proc = run([PROGRAM, "context-refused"], tmp, "1GiB", env=env)
    seen = figures(proc.stdout)
    expect((seen["used"], seen["buffer"]) == (924 * MiB, 660 * MiB), f"the simulated driver: {seen}")
    oom, = only_report(tmp)["oom"]
    expect((oom["api"], oom["result"], oom["requested_bytes"]) == ("cuCtxCreate", "CUDA_ERROR_OUT_OF_MEMORY", 0), f"{oom}")
    expect_site(oom["site"], "cuCtxCreate", "refused_context")
    expect_adds_up(oom, seen["used"])
    expect([(p["what"], p["bytes"]) for p in oom["parts"]] ==
           [("live", 660 * MiB), ("context", 256 * MiB), ("local_memory", 8 * MiB)], f"parts: {oom['parts']}")
    expect("Out of memory: cuCtxCreate returned CUDA_ERROR_OUT_OF_MEMORY at step 0" in proc.stderr, proc.stderr)


def case_first_context_refused(tmp):
    """A process's first context refused (the device full before its first CUDA call, as a second process on
    a taken GPU finds it): no context is current, so the driver cannot be asked; the record still names the
    call and its line, and the text says the figures are unknown rather than printing zeros."""
    proc = run([PROGRAM, "first-context-refused"], tmp, "1GiB", env={"CUMEMAUDIT_SIM_CONTEXT": "2GiB"})
    oom, = only_report(tmp)["oom"]
    expect((oom["api"], oom["requested_bytes"], oom["driver_total_bytes"], oom["parts"]) ==
           ("cuDevicePrimaryCtxRetain", 0, 0, []), f"{oom}")
    expect_site(oom["site"], "cuDevicePrimaryCtxRetain", "refused_primary")
    expect("Out of memory: cuDevicePrimaryCtxRetain returned CUDA_ERROR_OUT_OF_MEMORY at step 0" in proc.stderr and
           "  driver: its figures unknown (no context was current to ask); 0 B leaked" in proc.stderr, proc.stderr)


def case_launch_stack(tmp):
    """Contexts reserve memory no allocation call names: each its own part (256 MiB here) and its kernel stack
    (the stack limit × the 8192 threads of the simulated device). The audit measures each context's part at
    its creation, reads each one's stack limit at the mark, and names both: nothing is unattributed. A launch
    whose kernel needs 64 KiB of local memory per thread, when the stack cannot grow to it, leaves an OOM
    record naming the kernel, the bytes it needed and every part; the refusing context's stack is not among
    them, since the driver gave it back before refusing."""
    env = {"CUMEMAUDIT_SIM_CONTEXT": "256MiB", "CUMEMAUDIT_SIM_SMS": "4"}
    proc = run([PROGRAM, "launch-stack"], tmp, "1GiB", env=env)
    seen = figures(proc.stdout)
    report = only_report(tmp)
    step, = [s for s in report["steps"] if s["step"] == 1]
    # primary: 256 MiB + its stack raised to 32 KiB per thread (256 MiB); the second: 256 MiB + 1 KiB (8 MiB); the
    # kernels' code fits the chunk the driver's own code holds (docs/DRIVER.md, "Module code and globals")
    expect(seen["marked"] == 840 * MiB, f"the simulated driver's used memory at the mark: {seen}")
    expect((step["driver_used_bytes"], step["context_bytes"], step["local_memory_bytes"], step["stack_bytes_per_thread"],
            step["unattributed_bytes"]) == (840 * MiB, 512 * MiB, 264 * MiB, 32768, 0), f"step 1: {step}")
    contexts = sorted(report["contexts"], key=lambda c: not c["primary"])
    expect([(c["primary"], c["measured"], c["fixed_bytes"], c["stack_bytes_per_thread"], c["local_memory_bytes"])
            for c in contexts] == [(True, True, 256 * MiB, 32768, 256 * MiB), (False, True, 256 * MiB, 1024, 8 * MiB)],
           f"contexts: {contexts}")
    expect(contexts[0]["stack_set_bytes_per_thread"] == 4096, f"the limit set: {contexts[0]}")
    expect_site(contexts[0]["stack_set_site"], "cuCtxSetLimit", "set_limit")
    expect_site(contexts[1]["site"], "cuCtxCreate", "second_context")
    oom, = report["oom"]
    # The driver gives the refusing context's whole stack back before it refuses (measured on the H200): the
    # record names the second context's stack only.
    expect((seen["used"], seen["after"]) == (990 * MiB, 734 * MiB), f"the driver's used memory around the refusal: {seen}")
    expect_adds_up(oom, seen["after"])
    expect((oom["api"], oom["result"], oom["requested_bytes"], oom["kernel"], oom["kernel_local_bytes_per_thread"]) ==
           ("cuLaunchKernel", "CUDA_ERROR_OUT_OF_MEMORY", seen["request"], "local_huge", 65536), f"the record: {oom}")
    expect_site(oom["site"], "cuLaunchKernel", "refused_launch")
    expect([(p["what"], p["bytes"]) for p in oom["parts"]] ==
           [("context", 512 * MiB), ("live", 214 * MiB), ("local_memory", 8 * MiB)],
           f"parts: {oom['parts']}")
    block = proc.stderr
    expect("kernel local_huge needs 64.0 KiB of local memory per thread" in block, f"the stderr block:\n{block}")
    expect(re.search(r"8\.0 MiB\s+1\.1%\s+kernel stacks", block), f"the stderr block names the stacks:\n{block}")
    # Room made, the 32 KiB kernel launched again: the stack is back, and step 2 names it.
    step2, = [s for s in report["steps"] if s["step"] == 2]
    expect(seen["again"] == 840 * MiB and
           (step2["driver_used_bytes"], step2["local_memory_bytes"], step2["unattributed_bytes"]) == (seen["again"], 264 * MiB, 0),
           f"step 2 (used {seen['again']}): {step2}")
    expect(re.search(r"Kernel stacks of the primary context on device 0: 256\.0 MiB \(32\.0 KiB per thread, raised by a "
                     r"launch of a kernel with that much local memory\)\n", block), f"the summary names the raised stack:\n{block}")


def case_launch_heap(tmp):
    """A kernel that calls malloc, its context's heap limit at 1 GiB and 512 MiB free: the driver refuses its
    first launch with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (as the H100 did), and the audit writes an OOM record
    naming the kernel, the heap limit and the bytes the launch needed, with every part; the refusing context
    keeps its stack, so the parts still add up."""
    env = {"CUMEMAUDIT_SIM_CONTEXT": "256MiB", "CUMEMAUDIT_SIM_SMS": "4", "CUMEMAUDIT_SIM_HEAP_CODE": "138MiB"}
    proc = run([PROGRAM, "launch-heap"], tmp, "2GiB", env=env)
    seen = figures(proc.stdout)
    report = only_report(tmp)
    oom, = report["oom"]
    # The primary context: 256 MiB and its 1 KiB stack (8 MiB); the heap module's load took what malloc brings
    # (138 MiB; its small kernel's code fits the chunk the driver's code holds); a 4 KiB buffer and the filler.
    expect(seen["used"] == seen["after"] == 2048 * MiB - 512 * MiB, f"the driver's used memory around the refusal: {seen}")
    expect_adds_up(oom, seen["used"])
    expect((oom["api"], oom["result"], oom["requested_bytes"], oom["kernel"], oom["kernel_heap_bytes"],
            oom["kernel_local_bytes_per_thread"]) ==
           ("cuLaunchKernel", "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", 1026 * MiB, "heap_user", 1024 * MiB, 0),
           f"the record: {oom}")
    expect_site(oom["site"], "cuLaunchKernel", "heap_launch")
    expect([(p["what"], p["bytes"]) for p in oom["parts"]] ==
           [("live", seen["filler"] + 4096), ("context", 256 * MiB), ("module_code", 138 * MiB), ("local_memory", 8 * MiB)],
           f"parts: {oom['parts']}")
    block = proc.stderr
    expect("Out of memory: cuLaunchKernel of 1075838976 bytes (1.0 GiB) returned CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" in block,
           f"the stderr block names the refusal:\n{block}")
    expect("kernel heap_user calls malloc: its first launch could not reserve its context's device heap "
           "(a 1.0 GiB CU_LIMIT_MALLOC_HEAP_SIZE, and the driver's own chunk)" in block, f"the stderr block names the heap:\n{block}")
    # Room again: the launch took the heap, 1 GiB and 2 MiB.
    expect(seen["again"] == seen["used"] - seen["filler"] + 1026 * MiB, f"the heap reserved at the next launch: {seen}")


def case_green_context(tmp):
    """A green context's creation is measured and booked as a context of its own, with its site and no stack;
    its destroy leaves its cost and the buffer allocated in it where they were (the driver keeps both, as the
    H200 did); every step and the OOM record name every byte."""
    env = {"CUMEMAUDIT_SIM_CONTEXT": "256MiB", "CUMEMAUDIT_SIM_SMS": "16", "CUMEMAUDIT_SIM_GREEN_CONTEXT": "6MiB"}
    proc = run([PROGRAM, "green-context"], tmp, "1GiB", env=env)
    seen = figures(proc.stdout)
    report = only_report(tmp)
    # The primary context: 256 MiB and 1 KiB of stack for 16 x 2048 threads (32 MiB); the green context 6 MiB;
    # the buffer 64 MiB.
    expect((seen["marked"], seen["destroyed"], seen["used"]) == (358 * MiB, 358 * MiB, 358 * MiB), f"used memory: {seen}")
    for n in (1, 2):
        s, = [s for s in report["steps"] if s["step"] == n]
        expect((s["driver_used_bytes"], s["context_bytes"], s["local_memory_bytes"], s["by_owner"], s["unattributed_bytes"]) ==
               (358 * MiB, 262 * MiB, 32 * MiB, {"oom_scenarios": 64 * MiB}, 0), f"step {n}: {s}")
    contexts = sorted(report["contexts"], key=lambda c: not c["primary"])
    expect([(c["primary"], c.get("green", False), c.get("destroyed", False), c["measured"], c["fixed_bytes"],
             c["local_memory_bytes"]) for c in contexts] ==
           [(True, False, False, True, 256 * MiB, 32 * MiB), (False, True, True, True, 6 * MiB, 0)], f"contexts: {contexts}")
    expect_site(contexts[1]["site"], "cuGreenCtxCreate", "green_create")
    expect(not report.get("teardowns"), f"the destroy freed nothing: {report.get('teardowns')}")
    oom, = report["oom"]
    expect_adds_up(oom, seen["used"])
    expect([(p["what"], p["bytes"]) for p in oom["parts"]] ==
           [("context", 262 * MiB), ("live", 64 * MiB), ("local_memory", 32 * MiB)], f"parts: {oom['parts']}")
    expect_site(oom["site"], "cuMemAlloc", "refused_after_green")


def case_torch_observer(tmp):
    """With a fake torch imported, the helper registers PyTorch's out-of-memory observer: the pools of
    torch.cuda.memory_snapshot() join the oom record of the driver's refusal, and torch_step records them."""
    env = {"PYTHONPATH": os.pathsep.join([os.path.join(SOURCE_ROOT, "tools", "python"), os.path.join(HERE, "fake_torch")])}
    proc = run([sys.executable, os.path.join(HERE, "torch_oom_user.py")], tmp, "256MiB", env=env, rc=0)
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    expect(seen == {"observers": 1, "raised": True}, f"the helper attached one observer: {seen}")
    rep = only_report(tmp)
    want = [{"pool": "default", "allocated_bytes": 100 * MiB, "reserved_bytes": 160 * MiB, "fragmentation_bytes": 60 * MiB,
             "free_blocks": 3, "largest_free_block_bytes": 24 * MiB},
            {"pool": "graph (1, 1)", "allocated_bytes": 2 * MiB, "reserved_bytes": 4 * MiB, "fragmentation_bytes": 2 * MiB,
             "free_blocks": 1, "largest_free_block_bytes": 2 * MiB}]
    expect(rep["steps"][0]["pytorch_pools"] == want, f"torch_step pools: {rep['steps'][0].get('pytorch_pools')}")
    expect(len(rep["oom"]) == 1, f"the observer joined the driver's record: {rep['oom']}")
    oom = rep["oom"][0]
    expect((oom["api"], oom["requested_bytes"]) == ("cuMemAlloc", 128 * MiB), f"request: {oom}")
    expect(oom["pytorch_pools"] == want, f"oom pools: {oom['pytorch_pools']}")
    expect("PyTorch pool default: 100.0 MiB allocated, 160.0 MiB reserved, 60.0 MiB reserved but unallocated in 3 free blocks, "
           "the largest 24.0 MiB < 128.0 MiB asked: no free block fits\n" in proc.stderr, proc.stderr)


def case_views(tmp):
    """`trace` puts the refusal on the timeline with its breakdown; `html` shows it and the graph table."""
    run([PROGRAM, "graph-loop"], tmp, "256MiB", env={"CUMEMAUDIT_SIM_GRAPH_EXEC": "48MiB"}, rc=0)
    path = ReportDir(tmp).only_file()
    trace = os.path.join(tmp, "t.json")
    subprocess.run([CLI, "trace", path, "-o", trace], check=True, capture_output=True)
    events = json.load(open(trace))["traceEvents"]
    ooms = [e for e in events if e.get("cat") == "oom"]
    expect(len(ooms) == 1, f"one oom event: {ooms}")
    expect(ooms[0]["name"] == "OOM: cuGraphInstantiateWithFlags of 0 B", ooms[0]["name"])
    expect(ooms[0]["args"]["parts"]["graph 1 (instantiate)"] == 48 * MiB, f"{ooms[0]['args']}")
    graphs = [e for e in events if e.get("cat") == "graph"]
    expect([e["args"]["cumulative_bytes"] for e in graphs] == [144 * MiB, 224 * MiB, 240 * MiB], f"{graphs}")
    html = os.path.join(tmp, "r.html")
    subprocess.run([CLI, "html", path, "-o", html], check=True, capture_output=True)
    page = open(html).read()
    expect("Out of memory: cuGraphInstantiateWithFlags" in page, "the html names the refusal")
    expect("graph 1 (instantiate)" in page and "240.0 MiB" in page, "the html shows the breakdown and graph table")


if __name__ == "__main__":
    sys.exit(main(named_cases(globals())))
