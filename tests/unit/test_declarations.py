#!/usr/bin/env python3
"""A made-up entry point through the real wrapper (declarations/made_up_entry.cpp): its correct declaration
compiles, and each way of forgetting or contradicting a part of it fails to compile with a message that
names the part. Usage: test_declarations.py SOURCE_ROOT CUDA_INCLUDE CXX [CXX_ARGS...]"""
import concurrent.futures
import os
import subprocess
import sys

root, cuda_include, cxx = sys.argv[1], sys.argv[2], sys.argv[3:]
source = os.path.join(root, "tests", "unit", "declarations", "made_up_entry.cpp")
flags = ["-std=c++20", "-fsyntax-only", "-DFMT_HEADER_ONLY", "-DSPDLOG_FMT_EXTERNAL",
         "-I", os.path.join(root, "src"), "-I", os.path.join(root, "include"), "-isystem", cuda_include]

# case: (what is wrong, a phrase the compiler's message must contain); case 0 must compile.
CASES = {
    0: ("nothing: the row and its functions agree", None),
    1: ("a column left out of the row", "CUMEMAUDIT_DECLARE_EVENT"),
    2: ("records, with no record() of its parameters", "the row's record column disagrees"),
    3: ("a record() the row does not promise", "the row's record column disagrees"),
    4: ("translates, with no enforce_before()", "the row's enforce column (translates) disagrees"),
    5: ("follows up, with no enforce_after()", "the row's enforce column (follows_up) disagrees"),
    6: ("watches refusals of no allocation", "a row that watches refusals must say what bytes were requested"),
    7: ("ends the life of an out-pointer", "the row's order names an argument of the wrong type"),
    8: ("reads the bytes from an out-pointer", "the row's requested bytes name an argument that is not a size"),
    9: ("prepares, with no prepare()", "the row's prepare column disagrees"),
    10: ("orders on an argument that does not exist", "the row's order names an argument of the wrong type"),
    11: ("a hook row naming an event with no row", "NoSuchEvent"),
}


def build(case):
    r = subprocess.run(cxx + flags + [f"-DCASE={case}", source], capture_output=True, text=True)
    return case, r.returncode, r.stdout + r.stderr


failures = []
with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
    for case, rc, out in sorted(pool.map(build, CASES)):
        what, phrase = CASES[case]
        if phrase is None:
            ok = rc == 0
            detail = "" if ok else out[-3000:]
        else:
            ok = rc != 0 and phrase in out
            detail = "" if ok else ("it compiled" if rc == 0 else f"no '{phrase}' in:\n{out[-3000:]}")
        print(f"case {case:2}: {what}: {'as expected' if ok else 'NOT as expected'}")
        if not ok:
            failures.append(f"case {case} ({what}): {detail}")
print("\n".join(failures))
print(f"{len(CASES) - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
