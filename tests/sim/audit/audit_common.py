#!/usr/bin/env python3
"""What the audit scenario tests share. A scenario is NAME.cpp (its calls, in the program audit_scenarios)
beside NAME_test.py (its checks: each runs the program under `cumemaudit run --sim` and asserts exact figures
of its JSON report: bytes, sites as file:line, owners, exit codes). Some tests run other programs
(examples/deepep_fabric_leak.cpp, tests/sim/*.cpp) instead.

Paths come from the environment meson sets: CLI, SCENARIOS, DEEPEP, RUNTIME_USER, NCCL, EXPANDABLE,
DEEPBIND_LIB, HYBRID_EP, VLLM_SLEEP, SOURCE_ROOT. With AUDIT_DRIVER=real the same cases run on the real
driver (tests/gpu runs them there); fabric handles then become POSIX fds, as a GPU without IMEX requires.

    audit_common.py CASE                      runs the case from whichever NAME_test.py holds it (tests/gpu)
    audit_common.py --check-lists FILE=CASE,CASE...   meson's table of cases against the files' own"""
import glob
import importlib.util
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support"))
from cases import Failure, expect, main  # noqa: E402
from report_dir import ReportDir  # noqa: E402

CLI = os.environ["CLI"]
SCENARIOS = os.environ["SCENARIOS"]
DEEPEP = os.environ["DEEPEP"]
RUNTIME_USER = os.environ["RUNTIME_USER"]
SOURCE_ROOT = os.environ["SOURCE_ROOT"]
MiB = 1 << 20
REAL = os.environ.get("AUDIT_DRIVER", "sim") == "real"
BACKEND = os.environ.get("AUDIT_BACKEND", "")  # tests/gpu runs the cases again with the CUPTI backend
HANDLE = "posix" if REAL else "fabric"
DEEPEP_SRC = os.path.join(SOURCE_ROOT, "examples", "deepep_fabric_leak.cpp")


def source(name):
    """A file of this directory in the source tree, as the report's frames name it."""
    return os.path.join(SOURCE_ROOT, "tests", "sim", "audit", name)


def run(argv, report_dir, flags=(), env=None, rc=0, timeout=120):
    cmd = [CLI, "run", *([] if REAL else ["--sim"]), *(["--backend", BACKEND] if BACKEND else []),
           "--report-dir", report_dir, *flags, "--", *argv]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=timeout)
    if rc is not None and proc.returncode != rc:
        raise Failure(f"{' '.join(cmd)}: exit {proc.returncode}, expected {rc}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def reports(report_dir):
    return ReportDir(report_dir).reports()


def only_report(report_dir):
    return ReportDir(report_dir).only()


def line_of(path, pattern):
    for number, text in enumerate(open(path), 1):
        if re.search(pattern, text):
            return number
    raise Failure(f"{pattern!r} not found in {path}")


def marker_line(path, name):
    return line_of(path, rf"// site:{re.escape(name)}\b")


def leaks_by_api(rep, cls="unreachable"):
    return {leak["site"]["api"]: leak for leak in rep["leaks"] if leak["class"] == cls}


def top_frame(leak):
    expect(leak["site"]["frames"], f"no frames in {leak}")
    return leak["site"]["frames"][0]


def expect_summary_block(stderr, title, first_line, source_file, line):
    """The exit summary's first block titled `title` reads `first_line` whole, and its first frame is at `source_file`'s `line`."""
    block = stderr[stderr.find(title):]
    expect(block.startswith(first_line) and f"{source_file}:{line} " in block.splitlines()[1], f"exit summary: {block[:400]}")


def drop_of(stdout):
    m = re.search(r"drop=(\d+)", stdout)
    expect(m is not None, f"no drop= in program output:\n{stdout}")
    return int(m.group(1))


def site_figures(rows):
    """(api, innermost line) -> (bytes, allocations, references) of leak or reclaim rows, summed over the rows
    whose deeper frames differ (VMM sites keep 16 frames by default, so one line reached from two callers is
    two rows)."""
    figures = {}
    for r in rows:
        key = (r["site"]["api"], top_frame(r)["line"])
        b, a, n = figures.get(key, (0, 0, 0))
        figures[key] = (b + r["bytes"], a + r["allocations"], n + r["references"])
    return figures


def run_on_shared_node(argv, tmp, rc=0):
    """A scenario whose processes share one simulated node (the real driver's GPU is shared anyway)."""
    node = f"{argv[-1]}-{os.getpid()}"
    env = {} if REAL else {"CUMEMAUDIT_SIM_NODE": node}
    try:
        return run(argv, tmp, env=env, rc=rc)
    finally:
        if not REAL and os.path.exists(f"/dev/shm/cumemaudit-sim-{node}"):
            os.unlink(f"/dev/shm/cumemaudit-sim-{node}")


def test_modules():
    """Every NAME_test.py of this directory, imported: file name -> module."""
    modules = {}
    for path in sorted(glob.glob(os.path.join(HERE, "*_test.py"))):
        name = os.path.basename(path)
        spec = importlib.util.spec_from_file_location(name[:-3], path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules[name] = module
    return modules


def check_lists(pairs):
    """meson.build's table (FILE=CASE,CASE...) names exactly the files and the cases they hold."""
    listed = {}
    for pair in pairs:
        name, _, cases = pair.partition("=")
        listed[name] = set(cases.split(","))
    found = {name: set(module.CASES) for name, module in test_modules().items()}
    failures = [f"{n}: in meson.build's table, not in this directory" for n in sorted(set(listed) - set(found))]
    failures += [f"{n}: not in meson.build's table" for n in sorted(set(found) - set(listed))]
    # A file that drops its cases' result exits 0 after printing FAIL: meson would call every case passed.
    failures += [f"{n}: does not exit with its cases' result (sys.exit(main(CASES)))" for n in sorted(found)
                 if "sys.exit(main(CASES))" not in open(os.path.join(HERE, n)).read()]
    for name in sorted(set(found) & set(listed)):
        failures += [f"{name}: case {c} is not run by meson" for c in sorted(found[name] - listed[name])]
        failures += [f"{name}: meson runs {c}, which it does not hold" for c in sorted(listed[name] - found[name])]
    print("\n".join(failures) or f"{sum(map(len, found.values()))} cases in {len(found)} files, all run by meson")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--check-lists":
        sys.exit(check_lists(sys.argv[2:]))
    everything = {}
    for module in test_modules().values():
        everything.update(module.CASES)
    sys.exit(main(everything))
