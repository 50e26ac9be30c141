#!/usr/bin/env python3
"""The reservation probe on the simulated driver, set up as an H200, against the H200's answers: every key of
every fact the H200 run printed must read the same on the simulated driver (CUresult names, limits, and MiB of
used memory moved), but for the few keys listed below as not modelled, each printed with its reason and held
to the simulated driver's own answer so that a change to the model is noticed.

Usage: test_reservations.py [--facts NAME,...] [--env VAR=VALUE]... RESERVATION_PROBE H200_RESERVATIONS_TXT...
(the simulated libcuda.so.1 and its NVML first on LD_LIBRARY_PATH). Several runs' files: a fact a later run
measured again is taken from it. --facts runs the probe with those facts only (as the H200 run did, for facts
it runs only when named); --env sets a variable for the probe as the H200 run had it (CUDA_MODULE_LOADING,
unset otherwise, as in the runs that did not name it). With --facts, only those facts of the files are held to."""
import argparse
import os
import re
import subprocess
import sys

# The simulated driver as an H200 (docs/SIMULATED_DRIVER.md): cuMemGetInfo's total there, its multiprocessors,
# and a context's fixed part. A half MiB, because the probe reads whole MiB before and after, and only a
# reservation off the MiB boundary rounds to the H200's readings (docs/DRIVER.md, "Contexts, kernel stacks and
# launches", says which).
H200 = {"CUMEMAUDIT_SIM_MEMORY": "143771287552", "CUMEMAUDIT_SIM_SMS": "132", "CUMEMAUDIT_SIM_CONTEXT": "259.5MiB"}

# (fact, key): why the simulated driver does not model it, and what it answers instead ("0" unless said).
NOT_MODELLED = {
    ("context_primary", "launch_mib"):
        ("what the H200 took across the context's first small cuMemAlloc and first launch; the simulated driver "
         "charges the allocation in 512-byte units and a launch within the stack limit nothing", "0"),
    ("stack_oom", "launch_mib"):
        ("the H200 gave the refusing context's whole stack back (264 MiB at 1 KiB per thread) and 150 MiB of its "
         "own besides; the simulated driver gives the stack back", "-264"),
    ("stack_oom", "plain_after_mib"):
        ("the next launch took both back on the H200 (264 + 150 MiB); the simulated driver takes the stack back", "264"),
}


def facts(text):
    return {m[0]: dict(kv.split("=", 1) for kv in m[1].split()) for m in re.findall(r"^fact (\w+)((?: \S+=\S+)*)$", text, re.M)}


parser = argparse.ArgumentParser()
parser.add_argument("--facts", help="comma-separated fact names to run (all but the named-only ones if absent)")
parser.add_argument("--env", action="append", default=[], metavar="VAR=VALUE", help="set for the probe")
parser.add_argument("probe")
parser.add_argument("measured_files", nargs="+")
args = parser.parse_args()
wanted = args.facts.split(",") if args.facts else []
measured = {}
for path in args.measured_files:
    measured.update(facts(open(path).read()))
if wanted:  # a run's file may hold facts measured for another purpose
    measured = {fact: answers for fact, answers in measured.items() if fact in wanted}
measured_file = " and ".join(args.measured_files)
env = {k: v for k, v in os.environ.items() if not k.startswith("CUMEMAUDIT_SIM_") and k != "CUDA_MODULE_LOADING"}
env.update(H200)
env.update(kv.split("=", 1) for kv in args.env)
proc = subprocess.run([args.probe] + wanted, capture_output=True, text=True, timeout=120, env=env)
simulated = facts(proc.stdout)
failures = []
if proc.returncode != 0:
    failures.append(f"the probe exited {proc.returncode}: {proc.stdout.strip()[-400:]} {proc.stderr.strip()[-400:]}")
compared = 0
for fact, answers in measured.items():
    if fact not in simulated:
        failures.append(f"{fact}: not printed on the simulated driver ({proc.stdout.strip()[:200]})")
        continue
    for key, value in answers.items():
        got = simulated[fact].get(key)
        if (fact, key) in NOT_MODELLED:
            why, instead = NOT_MODELLED[fact, key]
            print(f"not modelled: {fact} {key}: the H200 {value}, simulated {got} ({why})")
            if got != instead:
                failures.append(f"{fact} {key}: not modelled, so the simulated driver should answer {instead}, not {got}")
            continue
        compared += 1
        if got != value:
            failures.append(f"{fact} {key}: the simulated driver answers {got}, the GPU {value}")
failures += [f"{fact}: printed on the simulated driver but not measured in {measured_file}" for fact in simulated
             if fact not in measured]
failures += [f"{fact} {key}: listed as not modelled but not measured" for fact, key in NOT_MODELLED
             if (not wanted or fact in wanted) and key not in measured.get(fact, {})]
if not measured:
    failures.append(f"no facts in {measured_file}")
print("\n".join(failures) or f"{compared} answers of {len(measured)} facts agree with the measured ones")
sys.exit(1 if failures else 0)
