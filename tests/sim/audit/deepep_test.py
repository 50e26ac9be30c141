#!/usr/bin/env python3
"""The DeepEP allocator's sequence (examples/deepep_fabric_leak.cpp): its leak through every door and
with either handle type, fixed, under suppressions, with deep stacks, and under mode=enforce.

Usage: deepep_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import os
import re
import subprocess
import sys
import tempfile

from audit_common import (CLI, DEEPEP, MiB, REAL, HANDLE, run, only_report, line_of, leaks_by_api,
    top_frame, drop_of, site_figures, DEEPEP_SRC, expect)
from cases import main, named_cases  # tests/support, on sys.path through audit_common


DEEPEP_APIS = {"cuMemCreate", "cuMemRetainAllocationHandle", "cuMemImportFromShareableHandle"}


def check_deepep(tmp, extra_args=(), handle=HANDLE):
    proc = run([DEEPEP, "--handle", handle, *extra_args], tmp, rc=23)
    rep = only_report(tmp)
    drop = drop_of(proc.stdout)
    expect(drop > 0, "the unfixed sequence must lose memory")
    s = rep["summary"]
    expect(s["leaked_bytes"] == drop, f"leaked_bytes {s['leaked_bytes']} != cuMemGetInfo drop {drop}")
    expect(s["misuse_events"] == 0, f"misuse in the DeepEP sequence: {rep['misuse']}")
    rows = leaks_by_api(rep)
    expect(set(rows) == DEEPEP_APIS and len(rep["leaks"]) == 3, f"leak sites: {[(l['class'], l['site']['api']) for l in rep['leaks']]}")
    for api, leak in rows.items():
        expect(leak["bytes"] == drop, f"{api}: {leak['bytes']} bytes, expected {drop}")
        expect(leak["handle_type"] == ("fabric" if handle == "fabric" else "posix_fd"), f"{api}: handle type {leak['handle_type']}")
        expect(leak["owner"] == "deepep_fabric_leak", f"{api}: owner {leak['owner']}")
        frame = top_frame(leak)
        want = line_of(DEEPEP_SRC, rf"r = d_\.{api}\(")
        expect(frame["file"].endswith("deepep_fabric_leak.cpp") and frame["line"] == want,
               f"{api}: site {frame['file']}:{frame['line']}, expected deepep_fabric_leak.cpp:{want}")
    expect("SUMMARY: cumemaudit: %d bytes leaked in" % drop in proc.stderr, f"no SUMMARY line:\n{proc.stderr}")
    return rep


def case_deepep(tmp):
    rep = check_deepep(tmp)
    expect(rep["driver"]["simulated"] is not REAL, "driver.simulated")
    expect(rep["summary"]["leaked_allocations"] == 3, f"3 steps leave 3 buffers: {rep['summary']}")


def case_deepep_posix(tmp):
    check_deepep(tmp, handle="posix")


def case_deepep_fixed(tmp):
    run([DEEPEP, "--fixed", "--handle", HANDLE], tmp, rc=0)
    rep = only_report(tmp)
    s = rep["summary"]
    expect(s["leaked_bytes"] == 0 and s["misuse_events"] == 0 and rep["leaks"] == [],
           f"fixed sequence: {s}, leaks {rep['leaks']}")
    expect(s["intercepted_calls"] > 20, f"calls counted: {s['intercepted_calls']}")


def make_door_case(door):
    def case(tmp):
        check_deepep(tmp, ["--door", door])
    return case


def case_suppressions(tmp):
    supp = os.path.join(tmp, "supp.txt")
    with open(supp, "w") as f:
        f.write("# DeepEP's known leaks\nleak:*allocate*\n")
    d = tempfile.mkdtemp(dir=tmp)
    run([DEEPEP, "--handle", HANDLE], d, flags=["--suppressions", supp], rc=23)
    rep = only_report(d)
    apis = {l["site"]["api"] for l in rep["leaks"]}
    expect("cuMemCreate" not in apis and len(apis) == 2, f"allocate's site suppressed: {apis}")
    expect(rep["suppressions"] and rep["suppressions"][0]["hits"] == 1, f"suppressions used: {rep.get('suppressions')}")
    bad = os.path.join(tmp, "bad.txt")
    with open(bad, "w") as f:
        f.write("leak:ok\nthis is not a rule\n")
    d = tempfile.mkdtemp(dir=tmp)
    # Under `run` the file is read before the program starts: exit 2, the line named, nothing run.
    proc = run([DEEPEP, "--handle", HANDLE], d, flags=["--suppressions", bad], rc=2)
    expect("bad.txt:2" in proc.stderr and "the program was not started" in proc.stderr and not os.listdir(d),
           f"malformed suppression refused before the program:\n{proc.stderr}\n{os.listdir(d)}")
    # Preloaded without `run`, the shim reads it: the line named, the audit goes on, the leak fails the gate.
    d = tempfile.mkdtemp(dir=tmp)
    env = dict(os.environ, LD_PRELOAD=os.environ["CUMEMAUDIT_SHIM"], CUMEMAUDIT_OPTIONS=f"report_dir={d}:suppressions={bad}")
    if not REAL:
        env["LD_LIBRARY_PATH"] = ":".join(filter(None, [os.environ["CUMEMAUDIT_SIM_DIR"], env.get("LD_LIBRARY_PATH")]))
    proc = subprocess.run([DEEPEP, "--handle", HANDLE], capture_output=True, text=True, env=env, timeout=120)
    expect(proc.returncode == 23 and "bad.txt:2" in proc.stderr and len(os.listdir(d)) == 1,
           f"preloaded: exit {proc.returncode}, malformed suppression named with its line:\n{proc.stderr}")


def case_deep_stacks(tmp):
    run([DEEPEP, "--handle", HANDLE], tmp, flags=["--stack-depth", "32"], rc=23)
    rep = only_report(tmp)
    for api, leak in leaks_by_api(rep).items():
        frames = leak["site"]["frames"]
        expect(len(frames) >= 3, f"{api}: a full stack with stack_depth=32, got {len(frames)} frames")
        expect(frames[0]["line"] == line_of(DEEPEP_SRC, rf"r = d_\.{api}\("), f"{api}: innermost frame {frames[0]}")
        expect(any(f["symbol"] == "main" for f in frames), f"{api}: main on the stack: {[f['symbol'] for f in frames]}")


def case_enforce_deepep(tmp):
    """The unfixed DeepEP sequence under mode=enforce: free memory stays flat, the program sees every call
    succeed as without the shim, and the report lists what was reclaimed, one row per site that took the
    references, with exactly the figures the audit run reports as unreachable leaks."""
    proc = run([DEEPEP, "--handle", HANDLE], tmp, flags=["--option", "mode=enforce"], rc=23)
    expect(drop_of(proc.stdout) == 0, f"enforce keeps free memory flat:\n{proc.stdout}")
    check = subprocess.run([CLI, "check", tmp], capture_output=True, text=True)
    expect(check.returncode == 1 and "402653184 bytes reclaimed by mode=enforce in 3 allocations (9 references" in
           check.stdout + check.stderr, f"the gate is not blind to what enforce reclaimed:\n{check.stdout}{check.stderr}")
    frees = [int(x) for x in re.findall(r"free now (\d+) MiB", proc.stdout)]
    expect(frees == sorted(frees, reverse=True) and frees[0] - frees[-1] == 128,
           f"each step holds only the current buffer (64, 128, 192 MiB): {frees}")
    rep = only_report(tmp)
    s = rep["summary"]
    expect(s["leaked_bytes"] == 0 and s["misuse_events"] == 0, f"nothing leaked: {s}")
    expect((s["reclaimed_bytes"], s["reclaimed_allocations"], s["reclaimed_references"]) == ((64 + 128 + 192) * MiB, 3, 9),
           f"reclaimed {s}")
    sized = (64 + 128 + 192) * MiB
    expect(site_figures(rep["reclaimed"]) == {
        ("cuMemCreate", line_of(DEEPEP_SRC, r"r = d_\.cuMemCreate\(")): (sized, 3, 3),
        ("cuMemRetainAllocationHandle", line_of(DEEPEP_SRC, r"r = d_\.cuMemRetainAllocationHandle\(")): (sized, 3, 3),
        ("cuMemImportFromShareableHandle", line_of(DEEPEP_SRC, r"r = d_\.cuMemImportFromShareableHandle\(")): (sized, 3, 3),
    }, f"reclaimed: {rep['reclaimed']}")
    logged = [line for line in proc.stderr.splitlines() if "mode=enforce: reclaimed" in line]
    expect(len(logged) == 3, f"one log line per reclaim:\n{proc.stderr}")
    expect(all(re.search(r"taken by cuMemCreate .*; cuMemRetainAllocationHandle .*; cuMemImportFromShareableHandle ", line)
               for line in logged), f"each log line names every site:\n{proc.stderr}")
    audit = tempfile.mkdtemp(dir=tmp)
    proc = run([DEEPEP, "--handle", HANDLE], audit, rc=23)
    expect(drop_of(proc.stdout) == (64 + 128 + 192) * MiB, "audit mode shows the same program losing memory")
    audit_rep = only_report(audit)
    expect(site_figures(audit_rep["leaks"]) == site_figures(rep["reclaimed"]) and
           audit_rep["summary"]["leaked_references"] == s["reclaimed_references"],
           f"enforce reclaims exactly what the audit reports: {audit_rep['leaks']}")


CASES = named_cases(globals())
for door in ("direct", "dlsym", "procaddress-v1", "procaddress-v2", "cudart"):
    CASES["door-" + door] = make_door_case(door)

if __name__ == "__main__":
    sys.exit(main(CASES))
