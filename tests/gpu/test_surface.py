#!/usr/bin/env python3
"""The surface probe on the simulated driver against the H200's answers: every fact the H200 run printed must
read the same on the simulated driver, key by key (CUresult names, and MiB of used memory moved).

Usage: test_surface.py SURFACE_PROBE H200_SURFACE_TXT... [--pending FACT,...]   (the simulated libcuda.so.1
first on LD_LIBRARY_PATH). Several runs' files: a fact a later run measured again is taken from it.
--pending names facts whose probe changed after the last run that measured them: printed, not compared,
until the next GPU run measures them again (docs/DRIVER.md says which)."""
import argparse
import os
import re
import subprocess
import sys


def facts(text):
    return {m[0]: dict(kv.split("=", 1) for kv in m[1].split()) for m in re.findall(r"^fact (\w+)((?: \S+=\S+)*)$", text, re.M)}


parser = argparse.ArgumentParser()
parser.add_argument("probe")
parser.add_argument("measured", nargs="+")
parser.add_argument("--pending", default="")
args = parser.parse_args()
probe, pending = args.probe, set(filter(None, args.pending.split(",")))
measured = {}
for measured_file in args.measured:
    measured.update(facts(open(measured_file).read()))
measured = {k: v for k, v in measured.items() if k not in pending}
measured_file = " and ".join(args.measured)
# One simulated node for the probe and the importer it forks (legacy IPC crosses processes).
env = dict(os.environ, CUMEMAUDIT_SIM_NODE=f"surface-{os.getpid()}")
try:
    out = subprocess.run([probe], capture_output=True, text=True, timeout=120, env=env).stdout
finally:
    if os.path.exists(f"/dev/shm/cumemaudit-sim-surface-{os.getpid()}"):
        os.unlink(f"/dev/shm/cumemaudit-sim-surface-{os.getpid()}")
simulated = facts(out)
failures = []
for fact, answers in measured.items():
    if fact not in simulated:
        failures.append(f"{fact}: not printed on the simulated driver ({out.strip()[:200]})")
        continue
    for key, value in answers.items():
        if simulated[fact].get(key) != value:
            failures.append(f"{fact} {key}: the simulated driver answers {simulated[fact].get(key)}, the H200 {value}")
failures += [f"{fact}: printed on the simulated driver but not measured in {measured_file}" for fact in simulated
             if fact not in measured and fact not in pending]
for fact in sorted(pending):
    print(f"pending: {fact} (re-measure on the GPU): simulated {simulated.get(fact)}")
if not measured:
    failures.append(f"no facts in {measured_file}")
print("\n".join(failures) or f"{sum(map(len, measured.values()))} answers of {len(measured)} facts agree with the H200's")
sys.exit(1 if failures else 0)
