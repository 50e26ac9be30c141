#!/usr/bin/python3
"""Prints `VERSION PATH` for each other CPython found here that runs (on PATH, or under ~/.pyenv/versions
or /opt/python), one per minor version, for meson to run the interpreter-dependent cases on."""
import glob
import os
import shutil
import subprocess

found = {}
for minor in ("3.10", "3.12", "3.13", "3.14"):
    candidates = [shutil.which("python" + minor)]
    candidates += sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{minor}.*/bin/python{minor}")))
    candidates += sorted(glob.glob(f"/opt/python/cp{minor.replace('.', '')}*/bin/python{minor}"))
    for exe in filter(None, candidates):
        try:
            got = subprocess.run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=20).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            continue
        if got == minor:
            found[minor] = exe
            break
for minor, exe in found.items():
    print(minor, exe)
