#!/usr/bin/env python3
"""The README's worked example against a real run (and no README link leaves the repository): `cumemaudit run --sim -- build/examples/deepep_fabric_leak`
must print exactly the README's transcript and exit code, and its report must hold every figure the README's
JSON excerpt shows. Only what differs between runs and machines is masked: pids, the host name, addresses,
offsets and build ids, and the build directory's location.

Usage: test_readme_example.py SOURCE_ROOT CLI DEEPEP_BINARY"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

root, cli, deepep = sys.argv[1], sys.argv[2], sys.argv[3]
readme = open(os.path.join(root, "README.md")).read()
section = readme.split("## A real leak and its report", 1)[1].split("\n## ", 1)[0]
COMMAND = "$ cumemaudit run --sim -- build/examples/deepep_fabric_leak"
transcript = section.split(COMMAND + "\n", 1)[1].split("$ echo $?\n", 1)
shown_lines, shown_rc = transcript[0].splitlines(), int(transcript[1].split("\n", 1)[0])
excerpt = json.loads(section.split("```json\n", 1)[1].split("```", 1)[0])

tmp = tempfile.mkdtemp()
proc = subprocess.run([cli, "run", "--sim", "--", deepep], capture_output=True, text=True, cwd=tmp, timeout=120)
files = glob.glob(os.path.join(tmp, "cumemaudit.*.json"))
host = os.uname().nodename


def masked(text):
    text = text.replace(deepep, "build/examples/deepep_fabric_leak")
    text = re.sub(r"==\d+==", "==PID==", text)
    text = re.sub(r"cumemaudit\.[^.\s]+\.\d+\.json", "cumemaudit.HOST.PID.json", text)
    text = re.sub(r"\(host [^),]+", "(host HOST", text)
    text = re.sub(r"0x[0-9a-f]+", "0xADDR", text)
    return text


failures = [f"README links outside the repository: {link}" for link in re.findall(r"\]\((\.\./[^)]*)\)", readme)]
if not files:
    failures.append(f"the run wrote no report:\n{proc.stderr}")
if proc.returncode != shown_rc:
    failures.append(f"the README shows exit {shown_rc}, the run exits {proc.returncode}")
actual = masked(proc.stdout + proc.stderr).splitlines()
readme_lines = masked("\n".join(shown_lines)).splitlines()
if actual != readme_lines:
    for i, (want, got) in enumerate(zip(readme_lines + [""] * len(actual), actual + [""] * len(readme_lines))):
        if want != got:
            failures.append(f"transcript line {i + 1}:\n  README: {want}\n  run:    {got}")
            break

VARIES = {"pid", "host", "pc", "offset", "build_id"}


def compare(want, got, where):
    if want == "...":
        return
    if isinstance(want, dict):
        if not isinstance(got, dict):
            failures.append(f"{where}: README shows an object, the report has {got!r}")
            return
        for k, v in want.items():
            if k == "...":
                continue
            if k not in got:
                failures.append(f"{where}.{k}: in the README, not in the report")
            elif k not in VARIES:
                compare(v, got[k], f"{where}.{k}")
    elif isinstance(want, list):
        if not isinstance(got, list) or len(got) < len(want):
            failures.append(f"{where}: README shows {len(want)} entries, the report has {got!r}")
            return
        for i, v in enumerate(want):
            compare(v, got[i], f"{where}[{i}]")
    else:
        got = masked(got) if isinstance(got, str) else got
        if want != got:
            failures.append(f"{where}: README says {want!r}, the report {got!r}")


if files:
    rep = json.load(open(files[0]))
    rep["process"]["argv"] = [masked(a) for a in rep["process"]["argv"]]
    compare(excerpt, rep, "report")
print("\n".join(failures) or "README example matches a real run")
sys.exit(1 if failures else 0)
