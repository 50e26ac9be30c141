#!/usr/bin/env python3
"""The gate's exit codes, signals, checkpoints, the options' warnings, and a process without CUDA (gate.cpp).

Usage: gate_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import os
import signal
import subprocess
import sys
import tempfile
import time

from audit_common import CLI, SCENARIOS, SOURCE_ROOT, MiB, REAL, run, reports, only_report, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common


def case_gate(tmp):
    def sub():
        return tempfile.mkdtemp(dir=tmp)
    run([SCENARIOS, "exit", "0"], sub(), rc=23)
    run([SCENARIOS, "exit", "0"], sub(), flags=["--fail-on", "none"], rc=0)
    run([SCENARIOS, "exit", "0"], sub(), flags=["--exitcode", "42"], rc=42)
    run([SCENARIOS, "exit", "3"], sub(), rc=3)  # a failing program keeps its own code
    # exit(256) reads as 0 to the parent: the gate is not lost under it, and passes it through when clean.
    run([SCENARIOS, "exit", "256"], sub(), rc=23)
    run([SCENARIOS, "exit", "256"], sub(), flags=["--fail-on", "none"], rc=0)
    run([SCENARIOS, "exit", "0"], sub(), env={"CUMEMAUDIT_OPTIONS": "exitcode=7"}, rc=7)
    d = sub()
    run([SCENARIOS, "exit", "3"], d, rc=3)
    expect(only_report(d)["process"]["exit_code"] == 3, "exit code recorded")


def case_sigterm(tmp):
    cmd = [CLI, "run", *([] if REAL else ["--sim"]), "--report-dir", tmp, "--", SCENARIOS, "wait"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    expect(line.strip() == "ready", f"program did not start: {line!r}")
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    expect(proc.returncode == -signal.SIGTERM, f"the default disposition still kills it: rc {proc.returncode}")
    rep = only_report(tmp)
    expect(rep["summary"]["leaked_bytes"] == 2 * MiB, f"report after SIGTERM: {rep['summary']}")


def case_sigusr2_and_samples(tmp):
    """SIGUSR2 marks the timeline and the program goes on; sample_ms adds periodic samples."""
    cmd = [CLI, "run", *([] if REAL else ["--sim"]), "--report-dir", tmp, "--option", "sample_ms=100", "--", SCENARIOS, "wait"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    expect(proc.stdout.readline().strip() == "ready", "program did not start")
    time.sleep(0.2)
    proc.send_signal(signal.SIGUSR2)
    time.sleep(0.6)
    expect(proc.poll() is None, "SIGUSR2 must not end the program")
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    rep = only_report(tmp)
    labels = [s["label"] for s in rep["steps"]]
    expect(labels.count("SIGUSR2") == 1, f"one SIGUSR2 mark: {labels}")
    expect(labels.count("sample") >= 4, f"samples every 100 ms for ~0.8 s: {labels}")
    usr2 = next(s for s in rep["steps"] if s["label"] == "SIGUSR2")
    expect(usr2["by_kind"].get("vmm_physical") == 2 * MiB, f"the mark sees the 2 MiB held: {usr2}")


def case_checkpoint_timer(tmp):
    cmd = [CLI, "run", *([] if REAL else ["--sim"]), "--report-dir", tmp, "--option", "checkpoint_s=1", "--", SCENARIOS, "wait"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.readline()
    deadline = time.time() + 20
    while time.time() < deadline and not reports(tmp):
        time.sleep(0.2)
    proc.kill()  # SIGKILL: no handler runs; the periodic report is what is left
    proc.wait()
    rep = only_report(tmp)
    expect(rep["summary"]["leaked_bytes"] == 2 * MiB, f"periodic report: {rep['summary']}")


def case_checkpoint_api(tmp):
    proc = run([SCENARIOS, "checkpoint"], tmp, rc=-signal.SIGKILL)
    expect("checkpoint api: found" in proc.stdout, proc.stdout)
    rep = only_report(tmp)
    expect(rep["checkpoint"] is True and rep["process"]["exit_code"] is None, "a checkpoint, not an exit report")
    expect(rep["summary"]["leaked_bytes"] == 2 * MiB, f"checkpoint figures: {rep['summary']}")


def case_leave(tmp):
    # _exit, _Exit and quick_exit skip exit()'s handlers: the exit report, the summary and the gate still come.
    for way in ("_exit", "_Exit", "quick_exit"):
        d = tempfile.mkdtemp(dir=tmp)
        proc = run([SCENARIOS, "leave", way, "0"], d, rc=23)
        rep = only_report(d)
        expect(rep["checkpoint"] is False and rep["process"]["exit_code"] == 0, f"{way}: an exit report {rep['process']}")
        expect(rep["summary"]["leaked_bytes"] == 2 * MiB, f"{way}: {rep['summary']}")
        expect(f"SUMMARY: cumemaudit: {2 * MiB} bytes leaked in 1 allocations" in proc.stderr, f"{way}: the summary\n{proc.stderr}")
        d = tempfile.mkdtemp(dir=tmp)
        run([SCENARIOS, "leave", way, "3"], d, rc=3)
        expect(only_report(d)["process"]["exit_code"] == 3, f"{way}: the program's own code")


def case_options(tmp):
    proc = run([SCENARIOS, "exit", "0"], tmp, env={"CUMEMAUDIT_OPTIONS": "bogus=1:stack_depth=abc:nonsense:fail_on=none"}, rc=0)
    for needle in ("unknown option 'bogus'", "stack_depth='abc'", "malformed option 'nonsense'"):
        expect(needle in proc.stderr, f"warning {needle!r} missing:\n{proc.stderr}")
    only_report(tmp)
    # Out of bounds: warned, and the report echoes the value in effect (the default), not the one asked for.
    d = tempfile.mkdtemp(dir=tmp)
    proc = run([SCENARIOS, "exit", "0"], d, env={"CUMEMAUDIT_OPTIONS": "fail_on=none:stack_depth=256:exitcode=256:growth_alarm=inf:mode=enforcd"}, rc=0)
    for needle in ("option stack_depth='256' in CUMEMAUDIT_OPTIONS is not an integer from 1 to 64; using 1",
                   "option exitcode='256' in CUMEMAUDIT_OPTIONS is not an integer from 0 to 255; using 23",
                   "option growth_alarm='inf' in CUMEMAUDIT_OPTIONS is not a size such as 268435456, 256MiB or 1GiB; using 256MiB",
                   "option mode='enforcd' in CUMEMAUDIT_OPTIONS is not audit or enforce; using audit"):
        expect(needle in proc.stderr, f"warning {needle!r} missing:\n{proc.stderr}")
    echoed = only_report(d)["options"]
    expect((echoed["stack_depth"], echoed["exitcode"], echoed["growth_alarm"], echoed["mode"]) == ("1", "23", "256MiB", "audit"),
           f"options in effect {echoed}")


def case_no_cuda(tmp):
    proc = run(["bash", "-c", "true"], tmp, rc=0)
    expect(reports(tmp) == {} and proc.stderr == "", f"a process without CUDA writes nothing: {proc.stderr}")
    run([sys.executable, "-c", "pass"], tmp, rc=0)
    expect(reports(tmp) == {}, "python without CUDA writes nothing")
    # The Python helper's marks (the pytest plugin's, at every test) start nothing either: no thread, no
    # report, and nothing held.
    probe = ("import os, cumemaudit.accounting as a\n"
             "m = a.leak_mark()\n"
             "h = a.held_since(m)\n"
             "print(m is not None, h.leaked_bytes, h.unfreed_bytes, len(os.listdir('/proc/self/task')))\n")
    proc = run([sys.executable, "-c", probe], tmp, env={"PYTHONPATH": os.path.join(SOURCE_ROOT, "tools", "python")}, rc=0)
    expect(proc.stdout.split() == ["True", "0", "0", "1"], f"marks without CUDA: {proc.stdout!r}\n{proc.stderr}")
    expect(reports(tmp) == {}, "marks without CUDA wrote a report")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
