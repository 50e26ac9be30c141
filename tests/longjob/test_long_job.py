#!/usr/bin/python3
"""A long job costs what a short one does, and its slow leak reads as one: a Python training loop that leaks
2 MiB of VMM memory every 10th step for 20,000 steps, run under `cumemaudit run --sim`, and a million step
marks. Exact figures: the leak's bytes, owner and Python line, leaked bytes at every step kept; caps on
stderr lines, report and page sizes, and on the memory the marks add.

Usage: test_long_job.py CASE (paths from meson: CLI, SOURCE_ROOT)."""
import glob
import json
import os
import re
import resource
import subprocess
import sys
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from cases import expect, main, named_cases  # noqa: E402

CLI = os.environ["CLI"]
ROOT = os.environ["SOURCE_ROOT"]
JOB = os.path.join(HERE, "slow_leak_job.py")
MiB = 1 << 20


def line_of(path, marker):
    hits = [n for n, text in enumerate(open(path), 1) if marker in text]
    expect(len(hits) == 1, f"{marker!r} in {path}: {hits}")
    return hits[0]


def run_job(tmp, steps, grow_every=10, rc=23, options=()):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "tools", "python"),
                                                       os.path.join(ROOT, "tests", "pyframes")]),
               PYTHONDONTWRITEBYTECODE="1")
    env.pop("CUMEMAUDIT_OPTIONS", None)
    cmd = [CLI, "run", "--sim", "--report-dir", tmp, *[x for o in options for x in ("--option", o)], "--",
           "/usr/bin/python3", JOB, str(steps),
           "--grow-every", str(grow_every)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    expect(p.returncode == rc and f"trained {steps} steps" in p.stdout,
           f"{' '.join(cmd)}: exit {p.returncode}, expected {rc}\n{p.stdout}\n{p.stderr[-3000:]}")
    files = glob.glob(os.path.join(tmp, "cumemaudit.*.json"))
    expect(len(files) == 1, f"one report expected, found {files}")
    return files[0], json.load(open(files[0])), p.stderr


def case_python_slow_leak(tmp):
    path, rep, err = run_job(tmp, 20000)
    lines = err.splitlines()
    expect(len(lines) <= 60, f"{len(lines)} stderr lines:\n{err[:3000]}")
    size = os.path.getsize(path)
    expect(size <= 2 * MiB, f"report of {size} bytes")
    # Two sites, both at the line that created each buffer whose release was forgotten: 1,999 buffers from
    # the growth in the loop, and the first buffer, made before it.
    leak_line, grow_line, first_line = line_of(JOB, "# LEAK"), line_of(JOB, "# GROW"), line_of(JOB, "# FIRST")
    rows = sorted((r for r in rep["leaks"] if r["class"] == "unreachable"), key=lambda r: -r["bytes"])
    shape = [(r["bytes"], r["allocations"], r["references"], r["site"]["api"], r["site"]["python_frames"][:2])
             for r in rows]
    expect(shape == [(1999 * 2 * MiB, 1999, 1999, "cuMemCreate",
                      [{"file": JOB, "line": leak_line, "function": "Buffer.__init__"},
                       {"file": JOB, "line": grow_line, "function": "main"}]),
                     (2 * MiB, 1, 1, "cuMemCreate",
                      [{"file": JOB, "line": leak_line, "function": "Buffer.__init__"},
                       {"file": JOB, "line": first_line, "function": "main"}])],
           f"leak sites (bytes, allocations, references, api, Python frames): {shape}")
    row = rows[0]
    # The owner is the script that called through ctypes, not libffi or the interpreter.
    expect([r["owner"] for r in rows] == ["slow_leak_job.py"] * 2, f"owners {[r['owner'] for r in rows]}")
    owners = {o["owner"]: o for o in rep["owners"]}
    expect(owners["slow_leak_job.py"]["leaked_bytes"] == 4000 * MiB and
           not any(name.startswith(("libffi", "_ctypes", "libpython", "python")) for name in owners),
           f"owners: {sorted(owners)}")
    # The text summary shows the Python line first, right under the row's heading.
    at = next(i for i, text in enumerate(lines) if text.startswith(f"Leak of {1999 * 2 * MiB} bytes"))
    expect(lines[at + 1] == f"    py#0 in Buffer.__init__ {JOB}:{leak_line}", f"first frame line: {lines[at:at + 3]}")
    # Under the Python lines, the interpreter's and libffi's frames are counted, not shown; --native shows them.
    block = lines[at + 1:lines.index("", at)]
    expect(len(block) == 4 and all(x.startswith("    py#") for x in block[:3]) and
           re.fullmatch(r"    \(\d+ interpreter and binding frames not shown; cumemaudit report --native shows them\)",
                        block[3]), f"the block: {block}")
    native = subprocess.run([CLI, "report", "--native", path], capture_output=True, text=True, timeout=60).stdout
    expect("libffi.so" in native and "not shown" not in native, f"report --native:\n{native[:2000]}")
    # The leak's growth, step by step: 2 MiB per 10 steps at every mark kept, whole or in a window.
    steps = rep["steps"]
    folded = [s for w in rep["step_history"] for s in w["steps"]]
    for s in folded + steps:
        expect(s["leaked_bytes"] == s["step"] // 10 * 2 * MiB and
               s["leaked_by_owner"] == ({"slow_leak_job.py": s["leaked_bytes"]} if s["leaked_bytes"] else {}),
               f"step {s['step']}: leaked {s['leaked_bytes']} {s.get('leaked_by_owner')}")
    middle = [w for w in rep["step_history"] if w["first_step"] <= 10000 <= w["last_step"]]
    expect(len(middle) == 1, f"step 10,000 lies in one window: {middle}")
    expect(steps[-1]["step"] == 20000 and steps[-1]["leaked_bytes"] == rep["summary"]["leaked_bytes"] == 4000 * MiB,
           f"the last step agrees with the summary: {steps[-1]['leaked_bytes']} {rep['summary']['leaked_bytes']}")
    # CI reads the line: check's FAIL line and the JUnit failure name the Python line that leaked.
    junit = os.path.join(tmp, "junit.xml")
    p = subprocess.run([CLI, "check", path, "--junit", junit], capture_output=True, text=True, timeout=60)
    where = f"{os.path.basename(JOB)}:{leak_line} (Buffer.__init__)"
    want = f"top site: 3.9 GiB [unreachable] cuMemCreate at {where}"
    expect(p.returncode == 1 and p.stdout.startswith(f"FAIL {path}: ") and want in p.stdout,
           f"check: exit {p.returncode}\n{p.stdout}{p.stderr}")
    failures = ET.parse(junit).getroot().findall(".//testcase/failure")
    expect(len(failures) == 1 and where in failures[0].get("message", ""),
           f"junit failure: {[f.attrib for f in failures]}")
    # The page of a week-long job is the page of a short one.
    page = os.path.join(tmp, "page.html")
    p = subprocess.run([CLI, "html", "-o", page, path], capture_output=True, text=True, timeout=120)
    expect(p.returncode == 0, f"html: {p.stderr}")
    expect(os.path.getsize(page) <= 3 * MiB, f"page of {os.path.getsize(page)} bytes")


def case_python_owner_whole_stack(tmp):
    """A stack deep enough to reach the interpreter's own callers (main, libc's start) still names the script:
    frames past the first Python binding never own (on the H200 a 16-frame stack reached libc.so.6)."""
    _, rep, _ = run_job(tmp, 100, options=["vmm_stack_depth=64"])
    rows = [r for r in rep["leaks"] if r["class"] == "unreachable"]
    objects = {os.path.basename(f["object"]) for r in rows for f in r["site"]["frames"]}
    expect("libc.so.6" in objects, f"the stack reaches libc: {sorted(objects)}")
    expect(sum(r["bytes"] for r in rows) == 10 * 2 * MiB and {r["owner"] for r in rows} == {"slow_leak_job.py"},
           f"owners {[(r['owner'], r['bytes']) for r in rows]}")


def peak_rss_of_job(tmp, marks):
    """The job's peak resident memory, in bytes, report writing at exit included (no leak: nothing grows)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    path, rep, _ = run_job(tmp, marks, grow_every=10 ** 9, rc=0)
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    expect(after >= before and rep["summary"]["steps_marked"] == marks + 1, f"{marks} marks: {rep['summary']}")
    return after * 1024, os.path.getsize(path)


def case_million_marks(tmp):
    """A million marks cost at most 64 MiB more than a thousand, and their report stays under 8 MiB."""
    os.makedirs(os.path.join(tmp, "short"))
    os.makedirs(os.path.join(tmp, "long"))
    short_rss, _ = peak_rss_of_job(os.path.join(tmp, "short"), 1000)
    long_rss, size = peak_rss_of_job(os.path.join(tmp, "long"), 1000000)
    print(f"peak RSS: 1,000 marks {short_rss / MiB:.1f} MiB, 1,000,000 marks {long_rss / MiB:.1f} MiB; "
          f"report {size} bytes")
    expect(long_rss - short_rss <= 64 * MiB, f"a million marks added {(long_rss - short_rss) / MiB:.1f} MiB")
    expect(size <= 8 * MiB, f"report of {size} bytes")


if __name__ == "__main__":
    sys.exit(main(named_cases(globals())))
