#!/usr/bin/env python3
"""The fence at the C boundary: with every allocation of the shim's bookkeeping failing (failing_malloc,
preloaded before the shim and armed by fence_program), the program gets the same return codes and the same
out-parameters as without the shim, byte for byte, and the same exit code; the shim says so once.

Run by meson (tests/sim/fence/meson.build) with /usr/bin/python3 or whichever python3 meson found."""
import os
import re
import subprocess
import sys
import tempfile

SHIM = os.environ["CUMEMAUDIT_SHIM"]
SIM = os.environ["CUMEMAUDIT_SIM_DIR"]
FAILING = os.environ["FAILING_MALLOC"]
PROGRAM = os.environ["FENCE_PROGRAM"]


def run(preload, report_dir):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "CUMEMAUDIT_OPTIONS")}
    env["LD_LIBRARY_PATH"] = SIM
    if preload:
        env["LD_PRELOAD"] = ":".join(preload)
        env["CUMEMAUDIT_OPTIONS"] = f"report_dir={report_dir}:checkpoint_s=0"
    return subprocess.run([PROGRAM], capture_output=True, text=True, env=env, timeout=30)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        plain = run([], tmp)
        audited = run([SHIM], tmp)
        failing = run([FAILING, SHIM], tmp)
    problems = []
    if plain.returncode != 0 or "cuMemCreate rc=0" not in plain.stdout:
        problems.append(f"the program fails without the shim: exit {plain.returncode}\n{plain.stdout}{plain.stderr}")
    for name, p in (("shim", audited), ("shim with failing bookkeeping", failing)):
        if p.returncode != plain.returncode:
            problems.append(f"{name}: exit {p.returncode}, without the shim {plain.returncode}\n{p.stderr}")
        if p.stdout != plain.stdout:
            problems.append(f"{name}: answers differ from the driver's own\n--- without the shim\n{plain.stdout}"
                            f"--- {name}\n{p.stdout}")
    refused = re.search(r"armed=1, shim allocations refused: (\d+)", failing.stderr)
    if not refused or int(refused.group(1)) == 0:
        problems.append(f"no allocation of the shim was refused, so nothing was tested:\n{failing.stderr}")
    warnings = re.findall(r"warning: bookkeeping of \S+ failed", failing.stderr)
    if len(warnings) != 1:
        problems.append(f"expected one bookkeeping warning, got {len(warnings)}:\n{failing.stderr}")
    if re.search(r"warning: bookkeeping", audited.stderr):
        problems.append(f"a warning without any failure:\n{audited.stderr}")
    if problems:
        print("FAIL\n" + "\n".join(problems), file=sys.stderr)
        return 1
    print(f"ok: {plain.stdout.count(chr(10))} answers identical, {refused.group(1)} shim allocations refused, one warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
