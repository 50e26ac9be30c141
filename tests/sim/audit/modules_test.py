#!/usr/bin/env python3
"""Modules and libraries the program keeps loaded (modules.cpp).

Usage: modules_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import os
import re
import select
import subprocess
import sys

from audit_common import CLI, REAL, SCENARIOS, run, only_report, marker_line, top_frame, source, expect
from cases import Failure, main, named_cases  # tests/support, on sys.path through audit_common
from sim_neighbour import neighbour

SRC = source("modules.cpp")


def case_jit_modules(tmp):
    """A JIT keeping a module for each of 150 shapes a step, a library and a file's module: every step counts
    the modules live and their images' bytes exactly (the scenario prints what it loaded); each step's 150 kept
    modules raise a modules alarm naming the JIT's load line; the sites are rows of their own with their loads
    and unloads; the refused allocation's record and its stderr block say how many were loaded."""
    proc = run([SCENARIOS, "jit-modules"], tmp)
    out = proc.stdout
    library, file_bytes = map(int, re.search(r"library (\d+) bytes, file (\d+) bytes", out).groups())
    per_step = [int(n) for n in re.findall(r"compiled 150 shapes, (\d+) bytes", out)]
    expect(len(per_step) == 2 and "more than the device: CUDA_ERROR_OUT_OF_MEMORY" in out, out)
    rep = only_report(tmp)
    got = {s["step"]: (s.get("modules_live", 0), s.get("module_image_bytes", 0)) for s in rep["steps"] if not s["label"]}
    jit = per_step[0] + per_step[1]
    expect(got == {0: (0, 0), 1: (152, library + file_bytes + per_step[0]), 2: (302, library + file_bytes + jit),
                   3: (300, jit)}, f"steps: {got}")

    jit_line = marker_line(SRC, "jit_load")
    (alarm,) = rep["alarms"]
    expect((alarm["what"], alarm["owner"], alarm["site"]["api"], top_frame(alarm)["line"]) ==
           ("modules", "audit_scenarios", "cuModuleLoadData", jit_line), f"alarm: {alarm}")
    expect((alarm["count"], alarm["step"], alarm["last_step"], alarm["modules"], alarm["modules_live"]) == (2, 1, 2, 300, 302),
           f"alarm: {alarm}")
    expect(f"step 1: 150 more modules loaded and kept by audit_scenarios (152 live, " in proc.stderr and
           f"most at cuModuleLoadData in (anonymous namespace)::jit_modules(int, char**) ../tests/sim/audit/modules.cpp:{jit_line}"
           in proc.stderr, proc.stderr)

    rows = sorted((m["site"]["api"], top_frame(m)["line"], m["loads"], m["unloads"], m["live"], m["image_bytes"], m["peak_live"])
                  for m in rep["modules"])
    expect(rows == sorted([("cuModuleLoadData", jit_line, 300, 0, 300, jit, 300),
                           ("cuLibraryLoadData", marker_line(SRC, "library_load"), 1, 1, 0, 0, 1),
                           ("cuModuleLoad", marker_line(SRC, "file_load"), 1, 1, 0, 0, 1)]), f"module rows: {rows}")

    (oom,) = rep["oom"]
    expect((oom["modules_live"], oom["module_image_bytes"]) == (302, library + file_bytes + jit), f"oom: {oom}")
    expect(f"modules and libraries loaded: 302 (" in proc.stderr, proc.stderr)


MiB = 1 << 20


def module_code_case(tmp, env, want_steps, want_refused_part):
    """The module-code scenario under one loading mode: each step names the device memory the driver took for
    the module's and the library's code and globals, exactly as the H200 answered the same calls
    (docs/DRIVER.md, "Module code and globals"), and leaves no more unattributed than before the first load;
    the load refused for room is an out-of-memory record whose parts name the library's code still loaded,
    and the stderr block says so; the sites give back what they took when unloaded."""
    proc = run([SCENARIOS, "module-code"], tmp, env=env)
    expect("a load with 16 MiB free: CUDA_ERROR_OUT_OF_MEMORY" in proc.stdout, proc.stdout)
    rep = only_report(tmp)
    steps = {s["step"]: s for s in rep["steps"] if not s["label"]}
    got = {n: steps[n].get("module_code_bytes", 0) // MiB for n in sorted(steps)}
    expect(got == want_steps, f"module code by step (MiB): {got}")
    unattributed = {n: steps[n]["unattributed_bytes"] for n in sorted(steps)}
    expect(len(set(unattributed.values())) == 1, f"unattributed by step: {unattributed}")
    (oom,) = rep["oom"]
    expect((oom["api"], oom["requested_bytes"], top_frame(oom)["line"]) == ("cuModuleLoadData", 0, marker_line(SRC, "code_refused")),
           f"oom: {oom}")
    parts = {p["what"]: p["bytes"] for p in oom["parts"]}
    expect(parts.get("module_code") == want_refused_part * MiB and sum(p["bytes"] for p in oom["parts"]) == oom["driver_used_bytes"],
           f"oom parts: {oom['parts']}")
    expect(f"{want_refused_part}.0 MiB" in proc.stderr and "module code and globals (measured at the loads, first gets and first launches that took them)"
           in proc.stderr, proc.stderr)
    rows = sorted((m["site"]["api"], top_frame(m)["line"], m["loads"], m["unloads"], m["live"], m.get("code_bytes", 0))
                  for m in rep["modules"])
    expect(rows == sorted([("cuModuleLoadData", marker_line(SRC, "code_module_load"), 1, 1, 0, 0),
                           ("cuLibraryLoadData", marker_line(SRC, "code_library_load"), 1, 1, 0, 0)]), f"module rows: {rows}")


def case_module_code(tmp):
    """Lazy loading (the default): the module's globals at its load (32 MiB), its code at the first get of a
    function (2 MiB), the library's nothing until its kernel's function is got in this context (32 MiB: its
    code shares the module's chunk); the module's unload gives back its globals only (the library's code
    keeps the chunk), the library's the rest."""
    module_code_case(tmp, {"CUDA_MODULE_LOADING": "LAZY"}, {0: 0, 1: 32, 2: 34, 3: 34, 4: 66, 5: 34, 6: 0}, 34)


def case_module_code_eager(tmp):
    """Eager loading: each load takes its globals and all its code at once (34 MiB each; the library's code
    crosses into a second chunk), a get takes nothing; the module's unload gives back 32 MiB, the library's 36."""
    module_code_case(tmp, {"CUDA_MODULE_LOADING": "EAGER"}, {0: 0, 1: 34, 2: 34, 3: 68, 4: 68, 5: 36, 6: 0}, 36)


def module_code_launch_case(tmp, loading):
    """CUDA's runtime under lazy loading launches a library's kernel without getting its function: the driver
    loads its code inside the first launch, which also raises the kernel stack. A small kernel's code fits the
    first chunk of the context's code heap, which holds the driver's own code already, so no step names module
    code (the H100 took nothing); the launch's measure takes the stack's growth off, which the context's part
    names: the stack grows by exactly the limit's growth times the device's threads, and the unattributed bytes
    never move."""
    env = {"CUDA_MODULE_LOADING": loading, "CUMEMAUDIT_SIM_CONTEXT": "256MiB", "CUMEMAUDIT_SIM_SMS": "4"}
    run([SCENARIOS, "module-code-launch"], tmp, env=env)
    rep = only_report(tmp)
    steps = {s["step"]: s for s in rep["steps"] if not s["label"]}
    code = {n: steps[n].get("module_code_bytes", 0) // MiB for n in sorted(steps)}
    expect(code == {0: 0, 1: 0, 2: 0, 3: 0, 4: 0}, f"module code by step (MiB): {code}")
    stack = {n: steps[n]["local_memory_bytes"] for n in sorted(steps)}
    (ctx,) = rep["contexts"]
    threads = stack[0] // 1024  # the default limit, 1 KiB a thread
    expect(stack == {0: 1024 * threads, 1: 1024 * threads, 2: 32768 * threads, 3: 32768 * threads, 4: 32768 * threads}
           and ctx["stack_bytes_per_thread"] == 32768, f"kernel stack by step: {stack}, context: {ctx}")
    unattributed = {n: steps[n]["unattributed_bytes"] for n in sorted(steps)}
    expect(len(set(unattributed.values())) == 1, f"unattributed by step: {unattributed}")
    rows = [(m["site"]["api"], top_frame(m)["line"], m["loads"], m["unloads"]) for m in rep["modules"]]
    expect(rows == [("cuLibraryLoadData", marker_line(SRC, "launch_library_load"), 1, 1)], f"module rows: {rows}")


def case_module_code_launch(tmp):
    """Lazy loading: the library's module is made and its code loaded inside the first launch."""
    module_code_launch_case(tmp, "LAZY")


def case_module_code_launch_eager(tmp):
    """Eager loading: the code at the load; the launches take only the stack."""
    module_code_launch_case(tmp, "EAGER")


def case_module_load_beside(tmp):
    """A module loaded while another process on the device allocates 1 GiB: the load compiles its PTX for 3 s
    first (CUMEMAUDIT_SIM_JIT_MS, as a real driver's JIT takes its time) and the other process allocates
    meanwhile. The step after the load names the module's 32 MiB of globals, not the other process's GiB
    (NVML's figure for the other processes, looked at around the load, is taken off), and names that GiB as
    the other process's; the unattributed bytes do not move."""
    if REAL:
        raise Failure("module-load-beside needs the simulated driver: its compile time places the other process inside the load")
    node = f"beside-{os.getpid()}"
    env = {**os.environ, "CUMEMAUDIT_SIM_NODE": node, "CUMEMAUDIT_SIM_JIT_MS": "3000"}
    cmd = [CLI, "run", "--sim", "--report-dir", tmp, "--", SCENARIOS, "module-load-beside"]
    proc = subprocess.Popen(cmd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        line = proc.stdout.readline()
        expect(line.strip() == "module_load_beside: loading", f"the scenario began with {line!r}")
        with neighbour(node, 1 << 30):
            # The neighbour holds its GiB now; had the load already ended, its line would be waiting here.
            if select.select([proc.stdout], [], [], 0)[0]:
                raise Failure("the load ended before the other process allocated: raise CUMEMAUDIT_SIM_JIT_MS")
            out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    expect(proc.returncode == 0 and "module_load_beside: loaded" in out, f"exit {proc.returncode}\n{out}\n{err}")
    rep = only_report(tmp)
    steps = {s["step"]: s for s in rep["steps"] if not s["label"]}
    code = {n: steps[n].get("module_code_bytes", 0) // MiB for n in sorted(steps)}
    expect(code == {0: 0, 1: 32, 2: 0}, f"module code by step (MiB): {code}")
    others = {n: steps[n].get("other_processes_bytes", 0) for n in sorted(steps)}
    expect(others == {0: 0, 1: 1 << 30, 2: 1 << 30}, f"other processes' bytes by step: {others}")
    unattributed = {n: steps[n]["unattributed_bytes"] for n in sorted(steps)}
    expect(len(set(unattributed.values())) == 1, f"unattributed by step: {unattributed}")
    rows = [(m["site"]["api"], top_frame(m)["line"], m["loads"], m["unloads"]) for m in rep["modules"]]
    expect(rows == [("cuModuleLoadData", marker_line(SRC, "beside_load"), 1, 1)], f"module rows: {rows}")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
