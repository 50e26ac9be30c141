#!/usr/bin/python3
"""Python frames in sites, and deep native stacks at VMM calls, on the simulated driver. Each case runs
a program under `cumemaudit run --sim` and asserts exact report figures: the Python file, line and
function of each leak, the classes and bytes, the text summary's lines, what suppressions match, and what
diff and merge take as one site. The program under test runs on PYTHON (the interpreter meson names; the
script itself runs on Debian's /usr/bin/python3). Paths come from the environment meson sets: CLI,
PYTHON, LAZY_DRIVER, CEXT_DIR."""
import glob
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from cases import expect, main, named_cases  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.environ["CLI"]
PYTHON = os.environ.get("PYTHON", "/usr/bin/python3")
MiB = 1 << 20


def line_of(path, marker):
    with open(path) as f:
        hits = [i for i, text in enumerate(f, 1) if marker in text]
    assert len(hits) == 1, f"{marker!r} in {path}: {hits}"
    return hits[0]


def src(name):
    return os.path.join(HERE, name)


def run(tmp, argv, options=(), rc=23, env_extra=None, timeout=60):
    env = dict(os.environ)
    env.pop("CUMEMAUDIT_OPTIONS", None)
    env["PYTHONPATH"] = os.pathsep.join([HERE] + ([os.environ["CEXT_DIR"]] if os.environ.get("CEXT_DIR") else []))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(env_extra or {})
    cmd = [CLI, "run", "--sim", "--report-dir", tmp]
    for o in options:
        cmd += ["--option", o]
    p = subprocess.run(cmd + ["--"] + argv, capture_output=True, text=True, env=env, timeout=timeout)
    expect(p.returncode == rc, f"{argv}: exit {p.returncode}, expected {rc}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
    reports = glob.glob(os.path.join(tmp, "cumemaudit.*.json"))
    expect(len(reports) == 1, f"one report, got {reports}")
    with open(reports[0]) as f:
        return json.load(f), p, reports[0]


def leak_rows(rep, cls="unreachable"):
    return {r["bytes"]: r for r in rep["leaks"] if r["class"] == cls}


def py(file, line, function):
    return {"file": file, "line": line, "function": function}


def expected_ctypes_frames():
    """The Python frames of leak_ctypes.py's leak, innermost first."""
    script = src("leak_ctypes.py")
    return [py(src("driver.py"), line_of(src("driver.py"), "# CREATE"), "Driver.create"),
            py(script, line_of(script, "# GROW"), "Buffer.grow"),
            py(script, line_of(script, "# MAIN"), "main"),
            py(script, line_of(script, "main()  # ENTRY"), "<module>")]


def check_ctypes_leak(tmp, extra_args=()):
    rep, p, _ = run(tmp, [PYTHON, src("leak_ctypes.py"), *extra_args])
    rows = leak_rows(rep)
    expect(set(rows) == {2 * MiB}, f"one 2 MiB unreachable row: {rep['leaks']}")
    got = rows[2 * MiB]["site"].get("python_frames")
    expect(got == expected_ctypes_frames(), f"python frames:\n{got}\nexpected\n{expected_ctypes_frames()}")
    expect(rows[2 * MiB]["references"] == 1 and rows[2 * MiB]["site"]["api"] == "cuMemCreate", f"{rows}")
    f0 = expected_ctypes_frames()[0]
    expect(f"    py#0 in Driver.create {f0['file']}:{f0['line']}\n" in p.stderr, f"text summary:\n{p.stderr}")
    # A classic call that ctypes made takes its Python frames too (one native frame, libffi's): named and
    # owned by the Python caller a person fixes, the script, never libffi.
    unfreed = leak_rows(rep, "unfreed")
    script, driver = src("leak_ctypes.py"), src("driver.py")
    expect(set(unfreed) == {1 * MiB} and len(unfreed[MiB]["site"]["frames"]) == 1 and
           unfreed[MiB]["site"]["python_frames"][:2] == [py(driver, line_of(driver, "# ALLOC"), "Driver.alloc"),
                                                         py(script, line_of(script, "# CLASSIC"), "main")] and
           unfreed[MiB]["site"]["user_frame"] == 1, f"classic site: {unfreed}")
    owners = {r["owner"] for r in rep["leaks"]}
    expect(owners == {"leak_ctypes.py"}, f"owners of the leak and the classic allocation: {owners}")
    expect(rep["summary"]["leaked_bytes"] == 2 * MiB, f"{rep['summary']}")


def case_ctypes_leak(tmp):
    """ctypes.CDLL: the GIL is released around the driver call."""
    check_ctypes_leak(tmp)


def case_ctypes_keep_gil(tmp):
    """ctypes.PyDLL: the thread keeps the GIL across the driver call."""
    check_ctypes_leak(tmp, ["--keep-gil"])


def case_classic_when_asked(tmp):
    rep, _, _ = run(tmp, [PYTHON, src("leak_ctypes.py")], options=["python_frames=all"])
    got = leak_rows(rep, "unfreed")[MiB]["site"].get("python_frames", [])
    expect(got[:1] == [py(src("driver.py"), line_of(src("driver.py"), "# ALLOC"), "Driver.alloc")], f"{got}")


def case_none(tmp):
    rep, p, _ = run(tmp, [PYTHON, src("leak_ctypes.py")], options=["python_frames=none"])
    expect(all(not r["site"].get("python_frames") for r in rep["leaks"]), f"{rep['leaks']}")
    expect("py#" not in p.stderr, p.stderr)


def case_depth(tmp):
    rep, _, _ = run(tmp, [PYTHON, src("leak_ctypes.py")], options=["python_depth=2"])
    got = leak_rows(rep)[2 * MiB]["site"]["python_frames"]
    expect(got == expected_ctypes_frames()[:2], f"{got}")


def case_threads(tmp):
    """Eight threads leak at once while the main thread computes with the GIL: no deadlock (the run must
    end within the timeout) and each row names its own thread's line."""
    rep, p, _ = run(tmp, [PYTHON, src("leak_threads.py")], timeout=60)
    expect("joined True" in p.stdout, p.stdout)
    rows = leak_rows(rep)
    path = src("leak_threads.py")
    expect(set(rows) == {4 * 2 * MiB, 4 * 4 * MiB}, f"two rows of four allocations: {rep['leaks']}")
    even, odd = rows[8 * MiB], rows[16 * MiB]
    expect(even["allocations"] == 4 and odd["allocations"] == 4, f"{even} {odd}")
    create = py(src("driver.py"), line_of(src("driver.py"), "# CREATE"), "Driver.create")
    expect(even["site"]["python_frames"] == [create, py(path, line_of(path, "# EVEN"), "worker_even")] +
           even["site"]["python_frames"][2:], f"{even['site'].get('python_frames')}")
    expect(odd["site"]["python_frames"][:2] == [create, py(path, line_of(path, "# ODD"), "worker_odd")],
           f"{odd['site'].get('python_frames')}")
    expect(rep["summary"]["misuse_events"] == 0, f"{rep['summary']}")


def case_subinterpreter(tmp):
    rep, _, _ = run(tmp, [PYTHON, src("leak_subinterpreter.py")])
    rows = leak_rows(rep)
    path = src("leak_subinterpreter.py")
    expect(set(rows) == {4 * MiB, 2 * MiB}, f"{rep['leaks']}")
    expect(not rows[4 * MiB]["site"].get("python_frames"), f"sub-interpreter: no frames, got {rows[4 * MiB]['site']}")
    expect(rows[2 * MiB]["site"]["python_frames"][1] == py(path, line_of(path, "# MAIN INTERPRETER"), "<module>"),
           f"{rows[2 * MiB]['site']}")


def case_c_extension(tmp):
    rep, _, _ = run(tmp, [PYTHON, src("leak_cext.py")])
    rows = leak_rows(rep)
    path = src("leak_cext.py")
    expect(set(rows) == {2 * MiB, 4 * MiB, 8 * MiB}, f"{rep['leaks']}")
    expect(not rows[8 * MiB]["site"].get("python_frames"), f"a native thread: {rows[8 * MiB]['site']}")
    expect(rows[2 * MiB]["site"]["python_frames"] == [py(path, line_of(path, "# WITH GIL"), "<module>")],
           f"with the GIL: {rows[2 * MiB]['site']}")
    expect(rows[4 * MiB]["site"]["python_frames"] == [py(path, line_of(path, "# WITHOUT GIL"), "<module>")],
           f"without the GIL: {rows[4 * MiB]['site']}")
    expect(os.path.basename(rows[4 * MiB]["site"]["frames"][0]["object"]).startswith("cext."),
           f"the extension calls the driver: {rows[4 * MiB]['site']['frames'][0]}")


def case_unsupported_python(tmp):
    """An interpreter older than 3.11: the leak is reported, with no Python frames."""
    rep, _, _ = run(tmp, [PYTHON, src("leak_ctypes.py")])
    rows = leak_rows(rep)
    expect(set(rows) == {2 * MiB} and not rows[2 * MiB]["site"].get("python_frames"), f"{rep['leaks']}")


def case_fork(tmp):
    """Twenty forks after sites were captured: each child's report names the child's
    line and the parent's names the parent's."""
    env = dict(os.environ, PYTHONPATH=HERE, PYTHONDONTWRITEBYTECODE="1")
    env.pop("CUMEMAUDIT_OPTIONS", None)
    p = subprocess.run([CLI, "run", "--sim", "--report-dir", tmp, "--fail-on", "none", "--", PYTHON, src("leak_fork.py")],
                       capture_output=True, text=True, env=env, timeout=120)
    expect(p.returncode == 0, f"exit {p.returncode}\n{p.stderr}")
    path = src("leak_fork.py")
    reps = []
    for name in glob.glob(os.path.join(tmp, "cumemaudit.*.json")):
        with open(name) as f:
            reps.append(json.load(f))
    lines = sorted((r["bytes"], r["site"]["python_frames"][1]["line"]) for rep in reps for r in rep["leaks"]
                   if r["class"] == "unreachable")
    expect(len(reps) == 21, f"21 reports (parent and 20 children), got {len(reps)}")
    expect(lines == [(2 * MiB, line_of(path, "# PARENT"))] + [(4 * MiB, line_of(path, "# CHILD"))] * 20, f"{lines}")


def children_of(tmp, method):
    env = dict(os.environ, PYTHONPATH=HERE, PYTHONDONTWRITEBYTECODE="1")
    env.pop("CUMEMAUDIT_OPTIONS", None)
    p = subprocess.run([CLI, "run", "--sim", "--report-dir", tmp, "--fail-on", "none", "--", PYTHON,
                        src("leak_multiprocessing.py"), method], capture_output=True, text=True, env=env, timeout=120)
    expect(p.returncode == 0 and f"{method}: 3 children" in p.stdout, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}")
    reps = []
    for name in glob.glob(os.path.join(tmp, "cumemaudit.*.json")):
        with open(name) as f:
            reps.append(json.load(f))
    leaks = sorted((r["bytes"], r["site"]["python_frames"][1]["line"]) for rep in reps for r in rep["leaks"]
                   if r["class"] == "unreachable")
    line = line_of(src("leak_multiprocessing.py"), "# CHILD")
    expect(leaks == [(4 * MiB, line)] * 3, f"{method}: each child's leak at its line: {leaks}")
    exits = sorted(rep["process"]["exit_code"] for rep in reps if rep["leaks"])
    expect(exits == [0, 0, 0], f"{method}: exit reports, not checkpoints: {exits}")


def case_multiprocessing_fork(tmp):
    children_of(tmp, "fork")


def case_multiprocessing_forkserver(tmp):
    children_of(tmp, "forkserver")


def case_suppressions(tmp):
    for rule in [f"leak:leak_ctypes.py:{line_of(src('leak_ctypes.py'), '# GROW')}", "leak:Buffer.grow"]:
        supp = os.path.join(tmp, "supp.txt")
        with open(supp, "w") as f:
            f.write(rule + "\n")
        for old in glob.glob(os.path.join(tmp, "cumemaudit.*.json")):
            os.remove(old)
        rep, _, _ = run(tmp, [PYTHON, src("leak_ctypes.py")], options=[f"suppressions={supp}"], rc=0)
        s = rep["summary"]
        expect(s["leaked_bytes"] == 0 and s["suppressed_leaks"] == 1, f"{rule}: {s}")
        expect(rep["suppressions"] == [{"rule": rule, "hits": 1}], f"{rep['suppressions']}")


def moved(report_path, out_path, line):
    """The report with its leak's innermost Python line changed, as if the code moved."""
    with open(report_path) as f:
        rep = json.load(f)
    for r in rep["leaks"]:
        if r["site"].get("python_frames"):
            r["site"]["python_frames"][0]["line"] = line
    rep["process"]["pid"] += 1
    rep["process"]["rank"], rep["process"]["world_size"] = 1, 2
    with open(out_path, "w") as f:
        json.dump(rep, f)
    return rep


def case_diff_and_merge(tmp):
    """Two reports whose only difference is the Python line of the leak: diff and merge see two sites;
    identical Python frames are one site."""
    a_dir = os.path.join(tmp, "a")
    os.mkdir(a_dir)
    _, _, a = run(a_dir, [PYTHON, src("leak_ctypes.py")])
    b = os.path.join(tmp, "b.json")
    moved(a, b, 999)
    p = subprocess.run([CLI, "diff", "--match-lines", a, b], capture_output=True, text=True)
    f0, f1 = expected_ctypes_frames()[:2]
    page = os.path.join(tmp, "page.html")
    h = subprocess.run([CLI, "html", a, "-o", page], capture_output=True, text=True)
    expect(h.returncode == 0, f"html: {h.stderr}")
    with open(page) as f:
        html = f.read()
    expect(f"<li>Driver.create {f0['file']}:{f0['line']}</li>" in html, "the html page lists the Python frames")
    # Named by the caller of the program's ctypes helper, the helper's line beside it: the lines part them.
    old = f"cuMemCreate at leak_ctypes.py:{f1['line']} (Buffer.grow) via driver.py:{f0['line']} "
    new = f"cuMemCreate at leak_ctypes.py:{f1['line']} (Buffer.grow) via driver.py:999 "
    expect(old in p.stdout and new in p.stdout, f"diff names both Python lines:\n{p.stdout}\n{p.stderr}")
    # Without --match-lines a moved line is the same site (an edit above it): one row, no change.
    p = subprocess.run([CLI, "diff", a, b], capture_output=True, text=True)
    rows = p.stdout.split("leaked bytes by site", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    expect(len(rows) == 1 and rows[0].startswith(old) and rows[0].endswith(" 0"), f"diff without --match-lines:\n{p.stdout}")
    same = os.path.join(tmp, "same.json")
    moved(a, same, f0["line"])
    for other, sites in [(b, 2), (same, 1)]:
        out = os.path.join(tmp, "job.json")
        m = subprocess.run([CLI, "merge", "-o", out, a, other], capture_output=True, text=True)
        expect(m.returncode in (0, 23), f"merge: {m.returncode}\n{m.stderr}")
        with open(out) as f:
            job = json.load(f)
        unreachable = [s for s in job["sites"] if s["class"] == "unreachable"]
        expect(len(unreachable) == sites, f"{sites} unreachable site(s), got {json.dumps(unreachable)[:2000]}")
        expect(all(s["site"]["python_frames"][0]["function"] == "Driver.create" for s in unreachable), f"{unreachable}")


def case_native_program(tmp):
    """A program with no Python: its report has no Python frames, and the default VMM site is deep enough
    to name the caller of a dlsym wrapper (DeepEP main's lazy_driver.hpp shape)."""
    exe = os.environ["LAZY_DRIVER"]
    code = src("lazy_driver_user.cpp")
    rep, p, _ = run(tmp, [exe], options=["python_frames=all"])
    rows = leak_rows(rep)
    expect(set(rows) == {2 * MiB}, f"{rep['leaks']}")
    site = rows[2 * MiB]["site"]
    expect(not site.get("python_frames"), f"{site}")
    frames = site["frames"]
    expect(frames[0]["line"] == line_of(code, "// WRAPPER LINE") and frames[0]["file"].endswith("lazy_driver_user.cpp"),
           f"innermost: the wrapper: {frames[0]}")
    expect(frames[1]["line"] == line_of(code, "// CALLER LINE"), f"next: the wrapper's caller: {frames[1]}")
    expect(any(f["symbol"] == "main" for f in frames), f"{[f['symbol'] for f in frames]}")
    expect(p.stdout == "", f"the program's own output is unchanged: {p.stdout!r}")


def case_vmm_depth_one(tmp):
    """vmm_stack_depth=1 gives the old one-frame site: the wrapper's line alone."""
    rep, _, _ = run(tmp, [os.environ["LAZY_DRIVER"]], options=["vmm_stack_depth=1"])
    frames = leak_rows(rep)[2 * MiB]["site"]["frames"]
    expect(len(frames) == 1 and frames[0]["line"] == line_of(src("lazy_driver_user.cpp"), "// WRAPPER LINE"), f"{frames}")


if __name__ == "__main__":
    sys.exit(main(named_cases(globals())))
