#!/usr/bin/python3
"""A running job's live view (docs/LIVE.md), on the simulated driver: the summary and the report's path on
stderr when SIGTERM or SIGINT ends a job, `cumemaudit snapshot PID` and its exit codes, and the metrics file
written beside the report. The job is tests/live/live_job.cpp under `cumemaudit run --sim`, which execs it:
the pid is the job's, and its exit status reaches the test unchanged.

Usage: test_live.py CASE   (paths from the environment meson sets: CLI, LIVE_JOB)."""
import glob
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from cases import Failure, expect, main, named_cases  # noqa: E402
from report_dir import ReportDir  # noqa: E402

CLI = os.environ["CLI"]
LIVE_JOB = os.environ["LIVE_JOB"]
MiB = 1 << 20
LEAK = 2 * MiB  # one live_job leak
# live::request_signal(): glibc's SIGRTMIN + 6.
REQUEST_SIGNAL = signal.SIGRTMIN + 6


class Job:
    """live_job under `cumemaudit run --sim`, driven through its stdin."""

    def __init__(self, tmp, leaks, options=(), args=(), env=None):
        flags = [f for o in options for f in ("--option", o)]
        self.proc = subprocess.Popen([CLI, "run", "--sim", "--report-dir", tmp, *flags, "--", LIVE_JOB, str(leaks), *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env={**os.environ, **(env or {})})
        self.pid = self.proc.pid
        expect(self.readline() == "ready", "the job did not start")

    def readline(self):
        return self.proc.stdout.readline().strip()

    def say(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.readline()

    def finish(self, sig=None, line=None, timeout=30):
        if sig is not None:
            self.proc.send_signal(sig)
        if line is not None:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        try:
            _, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise Failure(f"the job still runs {timeout} s after {sig or line}")
        return self.proc.returncode, err

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def reports(tmp):
    return ReportDir(tmp).files()


def only_report(tmp):
    path = ReportDir(tmp).only_file()
    return path, ReportDir.read(path)


def summary_line(s):
    """The SUMMARY line as report/text.cpp writes it, from a report's summary."""
    return (f"SUMMARY: cumemaudit: {s['leaked_bytes']} bytes leaked in {s['leaked_allocations']} allocations "
            f"({s['leaked_references']} references); {s['misuse_events']} misuse events; {s['unfreed_bytes']} bytes "
            f"unfreed at exit")


def lines(err, prefix):
    return [l for l in err.splitlines() if l.startswith(prefix)]


def site_line(name):
    """The line of live_job.cpp marked `// site:NAME`."""
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "live_job.cpp")) as f:
        for n, text in enumerate(f, 1):
            if f"// site:{name}" in text:
                return n
    raise Failure(f"no site:{name} in live_job.cpp")


def snapshot(pid, *flags, rc=0):
    proc = subprocess.run([CLI, "snapshot", str(pid), *flags], capture_output=True, text=True, timeout=60)
    expect(rc is None or proc.returncode == rc, f"snapshot {pid}: exit {proc.returncode}, expected {rc}\nstdout: {proc.stdout}\n"
                                  f"stderr: {proc.stderr}")
    return proc


# ---- the summary when a signal ends the job ------------------------------------------------------------

def signal_summary(tmp, sig):
    job = Job(tmp, 3)
    rc, err = job.finish(sig=sig)
    expect(rc == -sig, f"the default disposition still ends the job: exit {rc}, expected {-sig}\n{err}")
    path, rep = only_report(tmp)
    expect(rep["summary"]["leaked_bytes"] == 3 * LEAK, f"report at {signal.Signals(sig).name}: {rep['summary']}")
    expect(lines(err, "SUMMARY:") == [summary_line(rep["summary"])], f"one SUMMARY line, the report's:\n{err}")
    expect(lines(err, "cumemaudit: report:") == [f"cumemaudit: report: {path}"], f"the report's path:\n{err}")
    expect(err.index("SUMMARY:") < err.index("cumemaudit: report:"), f"the path comes last, as at exit:\n{err}")
    # The report names the signal that ended the process, so a job's merge says it was killed by it.
    expect(rep["process"].get("signal") == signal.Signals(sig).name and rep["checkpoint"], f"{rep['process']}")


def case_sigterm_summary(tmp):
    signal_summary(tmp, signal.SIGTERM)


def case_sigint_summary(tmp):
    signal_summary(tmp, signal.SIGINT)


def case_sigterm_summary_off(tmp):
    job = Job(tmp, 1, options=["summary=0"])
    rc, err = job.finish(sig=signal.SIGTERM)
    expect(rc == -signal.SIGTERM, f"exit {rc}")
    _, rep = only_report(tmp)
    expect(rep["summary"]["leaked_bytes"] == LEAK, f"{rep['summary']}")
    expect("SUMMARY" not in err and "cumemaudit: report" not in err, f"summary=0 prints nothing:\n{err}")


def case_sigterm_own_exit(tmp):
    # The program's own SIGTERM handler calls exit(7): the summary comes once, at that exit, and the exit
    # code is the program's.
    job = Job(tmp, 2, args=["--exit-on-term", "7"])
    rc, err = job.finish(sig=signal.SIGTERM)
    expect(rc == 7, f"the program's handler exits 7: exit {rc}\n{err}")
    path, rep = only_report(tmp)
    expect(rep["process"]["exit_code"] == 7 and not rep["checkpoint"], f"the exit report: {rep['process']}")
    # Its handler, not the signal, ended it: the exit report names no signal.
    expect(rep["process"].get("signal", "") == "", f"the exit report: {rep['process']}")
    expect(lines(err, "SUMMARY:") == [summary_line(rep["summary"])], f"one SUMMARY line:\n{err}")
    expect(lines(err, "cumemaudit: report:") == [f"cumemaudit: report: {path}"], f"{err}")


def self_signal_summary(tmp, rc, err, sig):
    """A job that ended itself with `sig` at its default: the summary and the path once, the report's."""
    expect(rc == -sig, f"the signal still ends the job: exit {rc}, expected {-sig}\n{err}")
    path, rep = only_report(tmp)
    expect(rep["summary"]["leaked_bytes"] == LEAK, f"{rep['summary']}")
    expect(lines(err, "SUMMARY:") == [summary_line(rep["summary"])], f"one SUMMARY line, the report's:\n{err}")
    expect(lines(err, "cumemaudit: report:") == [f"cumemaudit: report: {path}"], f"the report's path:\n{err}")
    expect(err.index("SUMMARY:") < err.index("cumemaudit: report:"), f"the path comes last, as at exit:\n{err}")
    return path, rep


def case_reraise_after_own_handler(tmp):
    # The program's SIGTERM handler sets the default and raises it again: the process dies of it past every
    # exit handler, and the summary comes once, before.
    job = Job(tmp, 1, args=["--reraise-on-term", "1"])
    rc, err = job.finish(sig=signal.SIGTERM)
    self_signal_summary(tmp, rc, err, signal.SIGTERM)


def case_kill_self_default(tmp):
    job = Job(tmp, 1)
    rc, err = job.finish(line=f"kill {int(signal.SIGINT)}")
    self_signal_summary(tmp, rc, err, signal.SIGINT)


def case_raise_self_default(tmp):
    job = Job(tmp, 1)
    rc, err = job.finish(line=f"raise {int(signal.SIGTERM)}")
    self_signal_summary(tmp, rc, err, signal.SIGTERM)


def case_signal_self_handled(tmp):
    # A signal to itself that the program's own handler takes ends nothing: no summary until the exit.
    job = Job(tmp, 1, args=["--own-handler", str(int(signal.SIGUSR1))])
    expect(job.say(f"signal {int(signal.SIGUSR1)}") == f"signalled {int(signal.SIGUSR1)}", "the job went on")
    expect(job.say("handled") == "handled 1", "the program's handler ran once")
    rc, err = job.finish(line="exit 0")
    expect(rc == 23, f"the gate fails the leak at exit: exit {rc}\n{err}")
    path, rep = only_report(tmp)
    expect(rep["process"]["exit_code"] == 0 and not rep["checkpoint"], f"the exit report: {rep['process']}")
    expect(lines(err, "SUMMARY:") == [summary_line(rep["summary"])], f"one SUMMARY line, at exit:\n{err}")


def case_python_ctrl_c(tmp):
    # Python takes SIGINT itself (KeyboardInterrupt), prints its traceback, and ends by kill(getpid(), SIGINT)
    # at the default disposition: the summary and the path come after the traceback, the status stays 130.
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ctrl_c.py")
    pyframes = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pyframes")
    env = {**os.environ, "PYTHONPATH": pyframes, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("CUMEMAUDIT_OPTIONS", None)
    proc = subprocess.Popen([CLI, "run", "--sim", "--report-dir", tmp, "--", "/usr/bin/python3", script],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    pid = proc.pid  # `run` execs the script: the pid is Python's
    expect(proc.stdout.readline().strip() == "ready", "the script did not start")
    os.kill(pid, signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise Failure("the script still runs 60 s after SIGINT")
    # Died of SIGINT: a shell's status 130 (128 + 2).
    status = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
    expect(proc.returncode == -signal.SIGINT and status == 130, f"exit status {status}, expected 130\n{err}")
    path, rep = only_report(tmp)
    expect(rep["summary"]["leaked_bytes"] == LEAK and rep["summary"]["leaked_allocations"] == 1, f"{rep['summary']}")
    expect(rep["leaks"][0]["site"]["api"] == "cuMemCreate", f"{rep['leaks']}")
    # The report says what ended it, so a job view reads "killed by SIGINT", not "died without a word".
    expect(rep["process"].get("signal") == "SIGINT", f"the report's process: {rep['process']}")
    expect(err.startswith("Traceback (most recent call last):\n"), f"Python's traceback first:\n{err}")
    expect("\nKeyboardInterrupt\n" in err, f"KeyboardInterrupt:\n{err}")
    expect("cumemaudit" in err and err.index("\nKeyboardInterrupt\n") < err.index("cumemaudit"),
           f"the audit's lines after the traceback:\n{err}")
    expect(lines(err, "SUMMARY:") == [summary_line(rep["summary"])], f"one SUMMARY line, the report's:\n{err}")
    expect(lines(err, "cumemaudit: report:") == [f"cumemaudit: report: {path}"], f"the report's path:\n{err}")
    expect(err.endswith(f"cumemaudit: report: {path}\n"), f"the path comes last:\n{err}")


# ---- cumemaudit snapshot --------------------------------------------------------------------------------

ANSWERS = f"/tmp/cumemaudit-{os.geteuid()}"


def answers_left(before):
    return sorted(set(glob.glob(os.path.join(ANSWERS, "*"))) - before)


def case_snapshot(tmp):
    before = set(glob.glob(os.path.join(ANSWERS, "*")))
    job = Job(tmp, 2, options=["checkpoint_s=0"])
    try:
        expect(reports(tmp) == [], "no report before it is asked for (checkpoint_s=0)")
        path = snapshot(job.pid).stdout.strip()
        expect(os.path.isabs(path) and reports(tmp) == [path], f"printed {path!r}; reports {reports(tmp)}")
        with open(path) as f:
            rep = json.load(f)
        expect(rep["summary"]["leaked_bytes"] == 2 * LEAK and rep["summary"]["leaked_allocations"] == 2,
               f"first snapshot: {rep['summary']}")
        expect(rep["checkpoint"] and rep["process"]["exit_code"] is None and rep["process"]["pid"] == job.pid,
               f"a checkpoint of the running process: {rep['process']}")
        expect(job.proc.poll() is None, "the job still runs")
        expect(job.say("leak") == f"leaked {3 * LEAK}", "the job goes on after the snapshot")
        again = snapshot(job.pid, "--timeout", "20").stdout.strip()
        expect(again == path, f"the same report, rewritten: {again} vs {path}")
        with open(path) as f:
            rep = json.load(f)
        expect(rep["summary"]["leaked_bytes"] == 3 * LEAK, f"second snapshot: {rep['summary']}")
        expect(answers_left(before) == [], f"the CLI removes the answer: {answers_left(before)}")
        expect(glob.glob(os.path.join(tmp, "*.prom")) == [], "no metrics file unless asked for")
        rc, err = job.finish(line="exit 5")
        expect(rc == 5, f"the job exits with its own code: {rc}\n{err}")
        _, rep = only_report(tmp)
        expect(rep["process"]["exit_code"] == 5 and rep["summary"]["leaked_bytes"] == 3 * LEAK, f"{rep['summary']}")
    finally:
        job.kill()


def case_snapshot_forecast(tmp):
    """A job that holds 2 MiB more at each step: after 12 steps `snapshot` prints the report's path alone on stdout,
    and where the job is heading on stderr: the device's forecast as the report has it (growing, not leak: the
    handles are held, never mapped), with the rate and the line that drives it."""
    job = Job(tmp, 2, options=["checkpoint_s=0"])
    try:
        expect(job.say("steps 12") == "stepped 12", "the job did not step")
        proc = snapshot(job.pid)
        path = proc.stdout.strip()
        expect(proc.stdout == path + "\n" and reports(tmp) == [path], f"stdout: {proc.stdout!r}")
        with open(path) as f:
            (fc,) = json.load(f)["forecasts"]
        expect((fc["trend"], fc["step"], fc["rate_bytes_per_step"], fc["owner"]) == ("growing", 12, 2 * MiB, "live_job"), f"{fc}")
        grouped = lambda n: f"{n:,}"
        want = (re.escape(f"cumemaudit snapshot: forecast: device 0 runs out of memory at step ≈ {grouped(fc['oom_step'])} "
                          f"({grouped(fc['oom_step_low'])}–{grouped(fc['oom_step_high'])}), {grouped(fc['oom_step'] - 12)} steps "
                          "after step 12, in about ") + r"\d+ (s|min)" +
                re.escape(f": memory of live_job grows 2.0 MiB per step, most at cuMemCreate in live_job.cpp:{site_line('live_leak')} "
                          "((anonymous namespace)::leak_one())"))
        expect(re.fullmatch(want, proc.stderr.rstrip("\n")) is not None, f"stderr: {proc.stderr!r}\nwanted: {want}")
    finally:
        job.kill()


def case_snapshot_answer_dir(tmp):
    # Before: the answer lay in /tmp itself; its temporary name gave the request number away, and a link
    # raced into the answer's name was followed. Now answers live in a directory of the user's alone.
    # This case changes that shared directory's owner and mode, so it runs alone (meson.build), and it
    # removes the answers its refused requests leave: the job may answer once the CLI has given up.
    before = set(glob.glob(os.path.join(ANSWERS, "*")))
    job = Job(tmp, 1, options=["checkpoint_s=0"])
    try:
        path = snapshot(job.pid).stdout.strip()
        st = os.lstat(ANSWERS)
        expect(stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid(),
               f"{ANSWERS}: mode {stat.S_IMODE(st.st_mode):o}, uid {st.st_uid}")
        expect(os.path.isfile(path), "the snapshot's report")
        if os.geteuid() == 0:
            # Another user's directory, or one others may enter, is refused by both sides.
            os.chown(ANSWERS, 4321, 4321)
            try:
                proc = snapshot(job.pid, "--timeout", "3", rc=None)
                expect(proc.returncode != 0 and "not a directory of the process's user alone" in proc.stderr,
                       f"another user's answer directory: exit {proc.returncode} {proc.stderr!r}")
            finally:
                os.chown(ANSWERS, 0, 0)
            os.chmod(ANSWERS, 0o777)
            try:
                proc = snapshot(job.pid, "--timeout", "3", rc=None)
                expect(proc.returncode != 0, f"an answer directory others may enter: exit {proc.returncode}")
            finally:
                os.chmod(ANSWERS, 0o700)
        expect(snapshot(job.pid).stdout.strip() == path, "a snapshot works again once the directory is the user's alone")
        rc, err = job.finish(line="exit 0")
        expect(rc == 23, f"{rc}\n{err}")
    finally:
        job.kill()
        for stray in answers_left(before):
            os.unlink(stray)


def case_snapshot_not_audited(tmp):
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        proc = snapshot(sleeper.pid, rc=4)
        expect(proc.stderr == f"cumemaudit snapshot: process {sleeper.pid} is not audited (libcumemaudit.so is not "
                              f"loaded there)\n", f"{proc.stderr!r}")
        expect(proc.stdout == "", f"nothing on stdout: {proc.stdout!r}")
        time.sleep(0.2)
        expect(sleeper.poll() is None, "the process is left alone")
    finally:
        sleeper.kill()
        sleeper.wait()


def case_snapshot_before_cuda(tmp):
    # The shim is loaded, but no CUDA call started the audit: nothing could answer.
    sleeper = subprocess.Popen([CLI, "run", "--sim", "--report-dir", tmp, "--", "sleep", "60"])
    try:
        deadline = time.time() + 10
        while time.time() < deadline and "libcumemaudit" not in open(f"/proc/{sleeper.pid}/maps").read():
            time.sleep(0.05)
        proc = snapshot(sleeper.pid, rc=4)
        expect(proc.stderr == f"cumemaudit snapshot: process {sleeper.pid} has the shim loaded but has not started "
                              f"its audit (no CUDA call yet)\n", f"{proc.stderr!r}")
        expect(sleeper.poll() is None, "the process is left alone")
    finally:
        sleeper.kill()
        sleeper.wait()


def case_snapshot_no_process(tmp):
    gone = subprocess.Popen(["true"])
    gone.wait()
    proc = snapshot(gone.pid, rc=3)
    expect(proc.stderr == f"cumemaudit snapshot: no process {gone.pid}\n", f"{proc.stderr!r}")
    bad = subprocess.run([CLI, "snapshot", "0"], capture_output=True, text=True)
    expect(bad.returncode == 2, f"pid 0 is a usage error: {bad.returncode} {bad.stderr}")
    # A zombie (exited, not reaped) still has its /proc entry: it is no process to ask, not an unaudited one.
    zombie = subprocess.Popen(["true"])
    deadline = time.time() + 10
    while time.time() < deadline and open(f"/proc/{zombie.pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
        time.sleep(0.02)
    proc = snapshot(zombie.pid, rc=3)
    expect("has exited (a zombie, not yet reaped)" in proc.stderr, f"{proc.stderr!r}")
    zombie.wait()


def case_snapshot_own_handler(tmp):
    # The job handles the very signal number the request uses: a snapshot never runs its handler (the
    # request goes to the shim's thread alone), while the same signal sent to the process still does.
    job = Job(tmp, 1, options=["checkpoint_s=0"], args=["--own-handler", str(int(REQUEST_SIGNAL))])
    try:
        path = snapshot(job.pid).stdout.strip()
        with open(path) as f:
            expect(json.load(f)["summary"]["leaked_bytes"] == LEAK, "the snapshot's report")
        expect(job.say("handled") == "handled 0", "a snapshot ran the program's own handler")
        os.kill(job.pid, REQUEST_SIGNAL)
        deadline = time.time() + 10
        handled = job.say("handled")
        while handled != "handled 1" and time.time() < deadline:
            time.sleep(0.05)
            handled = job.say("handled")
        expect(handled == "handled 1", f"the program's handler still gets the signal sent to it: {handled}")
        rc, err = job.finish(line="exit 0")
        expect(rc == 23, f"a clean exit with a leak fails the gate as usual: {rc}\n{err}")
    finally:
        job.kill()


def case_own_signals(tmp):
    # The program blocks the request's signal number and uses it itself (queued to itself, a POSIX timer):
    # every one reaches the program, none becomes a report or an answer, and a snapshot still works.
    before = set(glob.glob(os.path.join(ANSWERS, "*")))
    job = Job(tmp, 1, options=["checkpoint_s=0"])
    try:
        for line, answer in [("queue 3", "queued 3 of 3"), ("timer 50", "timer 50 of 50"), ("queue 3", "queued 3 of 3")]:
            got = job.say(line)
            expect(got == answer, f"the program's own signals ({line}): {got!r}, not {answer!r}")
        expect(reports(tmp) == [], f"a signal of the program's own wrote a report: {reports(tmp)}")
        expect(answers_left(before) == [], f"answers nobody asked for: {answers_left(before)}")
        path = snapshot(job.pid).stdout.strip()
        with open(path) as f:
            expect(json.load(f)["summary"]["leaked_bytes"] == LEAK, "the snapshot's report")
        rc, err = job.finish(line="exit 0")
        expect(rc == 23, f"a clean exit with a leak fails the gate as usual: {rc}\n{err}")
    finally:
        job.kill()


def case_snapshot_abandoned_answers(tmp):
    # An answer that came after its CLI gave up is removed at a later snapshot once it is ten minutes old;
    # a younger answer (a CLI may still take it), a file of another name and a link stay.
    names = {k: os.path.join(ANSWERS, f"snapshot.{os.urandom(8).hex()}") for k in ("old", "young", "link")}
    other = os.path.join(ANSWERS, f"notes.{os.urandom(4).hex()}")
    job = Job(tmp, 1, options=["checkpoint_s=0"])
    try:
        snapshot(job.pid)  # makes the directory if this is the first snapshot here
        for path in (names["old"], names["young"], other):
            with open(path, "w") as f:
                f.write('{"report": "/nowhere"}\n')
        os.symlink("/etc/hostname", names["link"])
        hour_ago = time.time() - 3600
        for path in (names["old"], other):
            os.utime(path, (hour_ago, hour_ago))
        os.utime(names["link"], (hour_ago, hour_ago), follow_symlinks=False)
        path = snapshot(job.pid).stdout.strip()
        expect(os.path.isfile(path), "the snapshot's report")
        expect(not os.path.exists(names["old"]), "an answer an hour old is removed")
        expect(os.path.exists(names["young"]), "an answer of a moment ago stays")
        expect(os.path.exists(other) and os.path.islink(names["link"]), "a file of another name and a link stay")
        rc, err = job.finish(line="exit 0")
        expect(rc == 23, f"{rc}\n{err}")
    finally:
        job.kill()
        for p in (*names.values(), other):
            if os.path.lexists(p):
                os.unlink(p)


def case_snapshot_timeout(tmp):
    # A stopped process cannot answer: exit 5 after --timeout, and the process is left as it was.
    job = Job(tmp, 1, options=["checkpoint_s=0"])
    try:
        os.kill(job.pid, signal.SIGSTOP)
        start = time.monotonic()
        proc = snapshot(job.pid, "--timeout", "0.5", rc=5)
        expect(time.monotonic() - start < 20, "the timeout bounds the wait")
        expect(proc.stderr.startswith(f"cumemaudit snapshot: no answer from process {job.pid} within 0.5 s"), f"{proc.stderr!r}")
    finally:
        job.proc.send_signal(signal.SIGKILL)  # before SIGCONT: the pending request is never answered
        job.kill()


def case_snapshot_not_permitted(tmp):
    if os.geteuid() != 0:
        print("skipped: needs root to run the CLI as another user")
        sys.exit(77)
    job = Job(tmp, 1, options=["checkpoint_s=0"])
    try:
        proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", CLI, "snapshot",
                               str(job.pid)], capture_output=True, text=True, timeout=60)
        expect(proc.returncode == 6, f"another user: exit {proc.returncode}\n{proc.stderr}")
        expect(proc.stderr == f"cumemaudit snapshot: not permitted to signal process {job.pid} (another user's)\n",
               f"{proc.stderr!r}")
        expect(job.proc.poll() is None and reports(tmp) == [], "the job is left alone")
    finally:
        job.kill()


# ---- the metrics file ------------------------------------------------------------------------------------

def metric_lines(path):
    with open(path) as f:
        text = f.read()
    expect(text.endswith("# EOF\n"), f"{path} ends with # EOF:\n{text}")
    return {l.rsplit(" ", 1)[0]: l.rsplit(" ", 1)[1] for l in text.splitlines() if not l.startswith("#")}


def wait_for_metric(path, name, value, timeout=20):
    deadline = time.time() + timeout
    seen = None
    while time.time() < deadline:
        if os.path.exists(path):
            seen = metric_lines(path).get(name)
            if seen == value:
                return
        time.sleep(0.1)
    raise Failure(f"{name} in {path}: {seen}, expected {value}")


def case_metrics(tmp):
    # A running job of rank 1: the metrics file beside its report carries the exact leaked bytes at every
    # checkpoint, and the final figures at exit.
    job = Job(tmp, 2, options=["checkpoint_s=1", "metrics=1"], env={"RANK": "1", "WORLD_SIZE": "2"})
    try:
        deadline = time.time() + 20
        while time.time() < deadline and not reports(tmp):
            time.sleep(0.1)
        report_path, rep = only_report(tmp)
        prom = report_path[:-len(".json")] + ".prom"
        expect(report_path.endswith(".r1.json"), f"{report_path}")
        wait_for_metric(prom, 'cumemaudit_leaked_allocations{rank="1"}', "2")
        owners = [o for o in rep["owners"] if o["leaked_bytes"]]
        expect(len(owners) == 1 and owners[0]["leaked_bytes"] == 2 * LEAK, f"one owner leaked 4 MiB: {rep['owners']}")
        owner = owners[0]["owner"]
        wait_for_metric(prom, f'cumemaudit_leaked_bytes{{owner="{owner}",rank="1"}}', str(2 * LEAK))
        m = metric_lines(prom)
        expect(m[f'cumemaudit_live_bytes{{owner="{owner}",rank="1"}}'] == str(owners[0]["live_bytes"]), f"{m}")
        expect(m[f'cumemaudit_peak_bytes{{owner="{owner}",rank="1"}}'] == str(owners[0]["peak_bytes"]), f"{m}")
        expect(m['cumemaudit_steps_marked_total{rank="1"}'] == "0", f"{m}")
        expect(abs(float(m['cumemaudit_report_time_seconds{rank="1"}']) - time.time()) < 60, f"{m}")
        expect(os.stat(prom).st_mode & 0o777 == 0o644, f"mode {oct(os.stat(prom).st_mode)}")
        expect(job.say("leak") == f"leaked {3 * LEAK}", "one more leak")
        wait_for_metric(prom, f'cumemaudit_leaked_bytes{{owner="{owner}",rank="1"}}', str(3 * LEAK))
        wait_for_metric(prom, 'cumemaudit_leaked_allocations{rank="1"}', "3")
        rc, err = job.finish(line="exit 4")
        expect(rc == 4, f"exit {rc}\n{err}")
        m = metric_lines(prom)
        expect(m[f'cumemaudit_leaked_bytes{{owner="{owner}",rank="1"}}'] == str(3 * LEAK), f"at exit: {m}")
        expect(sorted(os.listdir(tmp)) == sorted([os.path.basename(report_path), os.path.basename(prom)]),
               f"the report and its metrics, no temporary left: {os.listdir(tmp)}")
    finally:
        job.kill()


if __name__ == "__main__":
    sys.exit(main(named_cases(globals())))
