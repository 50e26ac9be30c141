#!/usr/bin/python3
"""The reliability suite: one case per finding numbered in tests/RELIABILITY.md, each reproducing what a
hostile or unlucky program did to the shim (the comment says what the code before the fix did), plus the
stress figures: the CLI fuzzer, 50 SIGKILLs, 32 threads with exact totals, SIGTERM at random moments.
Figures are printed as `figure NAME: ...` lines; tests/RELIABILITY.md records them.

Usage: test_reliability.py CASE   (paths from the environment meson sets: CLI, CUMEMAUDIT_SHIM,
CUMEMAUDIT_SIM_DIR, HOSTILE, RELOAD, SCENARIOS, BUILD_ROOT)."""
import glob
import json
import os
import random
import re
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from cases import Failure, expect, main, named_cases  # noqa: E402
from report_dir import ReportDir  # noqa: E402

CLI = os.environ["CLI"]
SHIM = os.environ["CUMEMAUDIT_SHIM"]
SIM = os.environ["CUMEMAUDIT_SIM_DIR"]
HOSTILE = os.environ["HOSTILE"]
RELOAD = os.environ["RELOAD"]
SCENARIOS = os.environ["SCENARIOS"]
BUILD = os.environ["BUILD_ROOT"]
MiB = 1 << 20
# tests/gpu runs the cases that make sense there on the real driver (RELIABILITY_DRIVER=real).
REAL = os.environ.get("RELIABILITY_DRIVER", "sim") == "real"


def shim_env(report_dir, options="", extra=None):
    """The environment `cumemaudit run --sim` builds, set by hand so the test controls the process."""
    opts = f"report_dir={report_dir}:summary=0" + (":" + options if options else "")
    lib = {} if REAL else {"LD_LIBRARY_PATH": SIM}
    return {**os.environ, "LD_PRELOAD": SHIM, **lib, "CUMEMAUDIT_OPTIONS": opts, **(extra or {})}


def sim_env(extra=None):
    return {**os.environ, "LD_LIBRARY_PATH": SIM, **(extra or {})}


def run(argv, env, timeout=60, rc=0):
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise Failure(f"{argv}: still running after {timeout} s (a hang)\nstderr:\n{(e.stderr or b'').decode(errors='replace')}")
    if rc is not None and proc.returncode != rc:
        raise Failure(f"{argv}: exit {proc.returncode}, expected {rc}\nstdout:\n{proc.stdout.decode(errors='replace')}"
                      f"\nstderr:\n{proc.stderr.decode(errors='replace')}")
    return proc


def figures(stdout):
    return {k: v for k, v in re.findall(r"(\w+)=(-?\w+)", stdout.decode(errors="replace"))}


def report_files(report_dir):
    return ReportDir(report_dir).files()


def only_report(report_dir):
    return ReportDir(report_dir).only()


# ---- case 1: closed fds are reused ------------------------------------------------------------------

def case_closed_fds(tmp):
    # Before: the checkpoint thread read 8 of the pipe's 16 bytes, SIGUSR2 wrote 8 binary bytes into the
    # log, and with the fd closed the thread spun (2-3 s of CPU per 3 s idle).
    log = os.path.join(tmp, "program.log")
    out = figures(run([HOSTILE, "close-fds", log], shim_env(tmp, "checkpoint_s=1")).stdout)
    print(f"figure closed-fds: shim eventfd {out['shim_eventfd']}, pipe bytes left {out['pipe_bytes_left']}/16, "
          f"log bytes {os.path.getsize(log)}, idle CPU {out['idle_cpu_ms']} ms over 2000 ms")
    expect(out["shim_eventfd"] == "-1", f"the shim holds an eventfd: {out}")
    expect(out["pipe_bytes_left"] == "16", f"the shim read the program's pipe: {out}")
    expect(os.path.getsize(log) == 0, "the shim wrote into the program's log file")
    expect(int(out["idle_cpu_ms"]) < 500, f"the checkpoint thread spins on a closed fd: {out}")


# ---- case 2 and the SIGTERM figure: signals in the middle of the shim's locks ------------------------

def signal_runs(tmp, runs, handler, threads=16, sig=signal.SIGTERM):
    """Starts the churning program `runs` times, signals it at a random moment, returns (worst exit s,
    reports written, runs that hung)."""
    worst, written, hung = 0.0, 0, 0
    rng = random.Random(12)
    for i in range(runs):
        d = os.path.join(tmp, f"{handler}-{int(sig)}-{i}")
        os.mkdir(d)
        proc = subprocess.Popen([HOSTILE, "churn-until-signal", str(threads), handler], env=shim_env(d, "checkpoint_s=0"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc.stdout.readline()  # "ready": the threads are in their loops
        time.sleep(rng.uniform(0.05, 0.4))
        start = time.monotonic()
        proc.send_signal(sig)
        try:
            proc.communicate(timeout=30)  # a generous hang bound; the figure is the time itself
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            hung += 1
        worst = max(worst, time.monotonic() - start)
        files = report_files(d)
        if files:
            with open(files[0]) as f:
                json.load(f)
            written += 1
    return worst, written, hung


def case_sigterm_in_locks(tmp):
    # Before: 3 of 16 runs took 20.3 s to die with no report; with a handler calling exit(), 2 of 12 hung
    # forever (the signal waited on the checkpoint thread, which waited on a lock the signalled thread held).
    for handler, sig in (("none", signal.SIGTERM), ("exit", signal.SIGTERM), ("exit", signal.SIGINT)):
        worst, written, hung = signal_runs(tmp, 6, handler, sig=sig)
        print(f"figure sigterm-in-locks ({handler}, {signal.Signals(sig).name}): 6 runs, {written} reports, "
              f"{hung} hung, slowest exit {worst:.2f} s")
        expect(hung == 0 and written == 6, f"{handler}: {hung} hung, {written}/6 reports")


def case_sigterm_16(tmp):
    worst, written, hung = signal_runs(tmp, 16, "none")
    print(f"figure sigterm-16: 16 threads, 16 SIGTERMs at random moments: {written}/16 reports written, "
          f"{hung} hung, slowest exit {worst:.2f} s")
    expect(hung == 0 and written == 16, f"{hung} hung, {written}/16 reports")


# ---- case 3: SA_RESTART -------------------------------------------------------------------------------

def case_sa_restart(tmp):
    # Before: the shim's handler carried SA_RESTART, so the read was restarted and returned the byte a
    # thread wrote 3 s later (read=1) instead of -1/EINTR.
    out = figures(run([HOSTILE, "eintr"], shim_env(tmp)).stdout)
    expect(out == {"read": "-1", "errno": "EINTR"}, f"read after SIGINT under the shim: {out}")
    # Python's Ctrl-C during os.read(): KeyboardInterrupt, as without the shim (ctypes makes the CUDA call).
    code = ("import ctypes,os,signal,threading,time\n"
            "cu=ctypes.CDLL('libcuda.so.1'); assert cu.cuInit(0)==0\n"
            "d=ctypes.c_int(); cu.cuDeviceGet(ctypes.byref(d),0); c=ctypes.c_void_p()\n"
            "cu.cuDevicePrimaryCtxRetain(ctypes.byref(c),d); cu.cuCtxSetCurrent(c)\n"
            "p=ctypes.c_uint64(); assert cu.cuMemAlloc_v2(ctypes.byref(p),4096)==0; cu.cuMemFree_v2(p)\n"
            "r,w=os.pipe(); threading.Timer(0.2,lambda: signal.pthread_kill(threading.main_thread().ident,signal.SIGINT)).start()\n"
            "threading.Timer(3,lambda: os.write(w,b'x')).start()\n"
            "try:\n  os.read(r,1); print('no-interrupt')\nexcept KeyboardInterrupt:\n  print('KeyboardInterrupt')\n")
    out = run(["/usr/bin/python3", "-c", code], shim_env(tmp)).stdout.decode().strip()
    expect(out == "KeyboardInterrupt", f"Python under the shim printed {out!r}")


# ---- case 4: bytes that are not UTF-8 -----------------------------------------------------------------

def case_non_utf8(tmp):
    # Before: type_error.316, "could not write the report", for every report of the process.
    d = os.path.join(tmp.encode(), b"r\xe9ports")
    run([HOSTILE.encode(), b"mark-label", b"arg\xe9"], {**shim_env("x"), "CUMEMAUDIT_OPTIONS": b"summary=0:report_dir=" + d})
    files = glob.glob(os.path.join(glob.escape(d), b"cumemaudit.*.json"))
    expect(len(files) == 1, f"reports in {d!r}: {files}")
    rep = json.loads(open(files[0], "rb").read().decode("utf-8"))  # strict UTF-8: it must decode
    expect(rep["process"]["argv"][-1] == "arg\ufffd", f"argv: {rep['process']['argv']}")
    expect(rep.get("encoding") == "bytes that were not UTF-8 are replaced by U+FFFD", f"no note: {rep.get('encoding')}")
    labels = [s.get("label") for s in rep["steps"]]
    expect("caf\ufffd" in labels, f"labels: {labels}")
    run([CLI, "report", files[0]], os.environ)  # read back by the CLI


# ---- case 5: fork while another thread holds a shim lock ----------------------------------------------

def case_fork_in_locks(tmp):
    # Before: 11 of 12 children hung at their first CUDA call or at exit (0 of 50 without the shim).
    out = figures(run([HOSTILE, "fork", "24"], shim_env(tmp, "checkpoint_s=0"), timeout=120).stdout)
    print(f"figure fork-in-locks: 24 children forked under 4 churning threads: {out}")
    expect(out == {"children_ok": "24", "hung": "0", "failed": "0"}, f"children: {out}")


# ---- cases 6 and 12: dlclose + dlopen, and the simulated driver alone ----------------------------------

def case_dlclose_reload(tmp):
    # Before: SIGSEGV (rc 139) in a wrapper at the second load: real entry points were cached once.
    out = figures(run([RELOAD, "20"], shim_env(tmp, "checkpoint_s=0")).stdout)
    print(f"figure dlclose-reload (shim): {out}")
    # A real libcuda may stay loaded after dlclose (then nothing moves); the simulated one is unloaded.
    expect(out["cycles_ok"] == "20" and (REAL or int(out["moved"]) >= 10), f"under the shim: {out}")


def case_simdriver_fork_reload(tmp):
    # Before: the simulated driver stopped initialising after about 10 dlopen/dlclose cycles (each load
    # reserved 64 TiB of address space and never gave it back), and a forked child deadlocked on the
    # state's lock another parent thread held.
    out = figures(run([RELOAD, "40"], sim_env()).stdout)
    print(f"figure simdriver reload: {out}")
    expect(out["cycles_ok"] == "40", f"simulated driver alone: {out}")
    out = figures(run([HOSTILE, "fork", "24"], sim_env(), timeout=120).stdout)
    print(f"figure simdriver fork: {out}")
    expect(out == {"children_ok": "24", "hung": "0", "failed": "0"}, f"children: {out}")


# ---- case 7: suppressions from a FIFO or /dev/zero; fail closed ----------------------------------------

def case_suppressions_fifo(tmp):
    # Before: a FIFO hung the program at exit forever; /dev/zero read without bound (12 GB in 60 s).
    fifo = os.path.join(tmp, "supp.fifo")
    os.mkfifo(fifo)
    for source in (fifo, "/dev/zero"):
        d = os.path.join(tmp, "reports-" + os.path.basename(source))
        os.mkdir(d)
        proc = run([HOSTILE, "threads-exact", "1", "1"], shim_env(d, f"suppressions={source}"), timeout=30, rc=23)
        err = proc.stderr.decode()
        expect("not a regular file" in err, f"{source}: no warning naming it:\n{err}")
        expect(only_report(d)["summary"]["leaked_bytes"] == 2 * MiB, f"{source}: leak not in the report")
    # The gate fails closed when no report can be written: report_dir owned by another user, mode 0777.
    if os.geteuid() == 0:
        d = os.path.join(tmp, "foreign")
        os.mkdir(d)
        os.chown(d, 4321, 4321)
        os.chmod(d, 0o777)
        proc = run([HOSTILE, "c-api-only"], shim_env(d), rc=0)  # never CUDA: no report, nothing to gate
        proc = subprocess.run([HOSTILE, "transient-handles"], env=shim_env(d), capture_output=True, timeout=60)
        err = proc.stderr.decode()
        expect("writable by others" in err and "failed closed" in err, f"no refusal named:\n{err}")
        # 125, not 23: nothing leaked that the process knew of; no report is the audit's failure, not a leak.
        expect(proc.returncode == 125, f"clean program, no report possible: exit {proc.returncode}, expected 125")
        expect(report_files(d) == [], "a report was written into a foreign world-writable directory")


# ---- case 8: report file names and modes --------------------------------------------------------------

def case_report_names(tmp):
    # Before: sethostname("x/../../escaped") wrote outside report_dir, and reports were 0644.
    if os.geteuid() != 0 or subprocess.run(["unshare", "--uts", "true"], capture_output=True).returncode != 0:
        print("report-names: no UTS namespace here; the host name rule is in tests/unit (report_path)")
        return
    inner = os.path.join(tmp, "a", "b")
    os.makedirs(inner)
    run(["unshare", "--uts", "/usr/bin/python3", "-c",
         f"import os,socket; socket.sethostname('x/../../escaped'); os.execv({HOSTILE!r}, [{HOSTILE!r}, 'threads-exact', '1', '1'])"],
        shim_env(inner), rc=23)
    files = report_files(inner)
    expect(len(files) == 1 and "x_.._.._escaped" in files[0], f"reports: {files}")
    expect(not glob.glob(os.path.join(tmp, "escaped*")) and not glob.glob(os.path.join(tmp, "a", "escaped*")),
           "a report escaped report_dir")
    expect(stat.S_IMODE(os.stat(files[0]).st_mode) == 0o600, f"mode {oct(os.stat(files[0]).st_mode)}")


# ---- case 9: the CLI on hostile reports ---------------------------------------------------------------

def sample_report(tmp):
    d = os.path.join(tmp, "sample")
    os.makedirs(d, exist_ok=True)
    run([HOSTILE, "threads-exact", "2", "3"], shim_env(d, "stack_depth=4"), rc=23)
    return report_files(d)[0]


def cli(args, timeout=30):
    try:
        return subprocess.run([CLI, *args], capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise Failure(f"cumemaudit {' '.join(args)}: hangs")


def case_cli_hostile(tmp):
    good = sample_report(tmp)
    nested = os.path.join(tmp, "nested.json")
    with open(nested, "w") as f:
        f.write("[" * 100000 + "]" * 100000)
    for sub in (["check"], ["report"], ["merge", "-o", os.path.join(tmp, "m.json")], ["html", "-o", os.path.join(tmp, "h.html")],
                ["trace", "-o", os.path.join(tmp, "t.json")], ["diff", good]):
        # Before: a stack overflow (SIGSEGV) in every subcommand.
        p = cli(sub + [nested])
        expect(p.returncode == 2 and nested in p.stderr.decode(), f"{sub}: exit {p.returncode}: {p.stderr[-300:]!r}")
    huge = os.path.join(tmp, "cumemaudit.h.1.r0.json")
    rep = json.load(open(good))
    rep["process"]["world_size"] = 2**31 - 1
    rep["process"]["rank"] = 0
    json.dump(rep, open(huge, "w"))
    p = cli(["merge", "-o", os.path.join(tmp, "merged.json"), huge])  # before: 8.6 GB allocated, then abort
    expect(p.returncode == 2 and huge in p.stderr.decode() and "world_size" in p.stderr.decode(),
           f"merge of world_size 2^31-1: exit {p.returncode}: {p.stderr[-300:]!r}")
    d = os.path.join(tmp, "dir")
    os.mkdir(d)
    os.mkfifo(os.path.join(d, "cumemaudit.h.2.json"))  # before: `check DIR` blocked on it forever
    p = cli(["check", d])
    expect(p.returncode == 2 and "cumemaudit.h.2.json" in p.stderr.decode() and "not a regular file" in p.stderr.decode(),
           f"check DIR with a FIFO: exit {p.returncode}: {p.stderr[-300:]!r}")
    big = os.path.join(tmp, "overflow.json")
    open(big, "w").write(open(good).read().replace('"leaked_bytes": ', '"leaked_bytes": 1' + "0" * 30, 1))
    p = cli(["check", big])  # before: the overflow message did not name the file
    expect(p.returncode == 2 and big in p.stderr.decode(), f"overflow: exit {p.returncode}: {p.stderr[-300:]!r}")


# ---- case 10: C API only, option bounds, transient handles in samples ---------------------------------

def case_c_api_only(tmp):
    # Before: the C API alone started the auditor thread and wrote a report.
    out = figures(run([HOSTILE, "c-api-only"], shim_env(tmp)).stdout)
    expect(out == {"threads": "1"}, f"threads in a process that never touched CUDA: {out}")
    expect(report_files(tmp) == [], f"a report from a process without CUDA: {report_files(tmp)}")


def case_options_bounds(tmp):
    # Before: stack_depth=99999 was clamped to 64 while the report said 99999; a 1 MB value was echoed whole (60 KB here: one environment string is at most 128 KiB).
    # The typed options table bounds stack_depth (1 to 64): a value above keeps the default, and the report says what the capture uses.
    proc = run([HOSTILE, "threads-exact", "1", "1"], shim_env(tmp, "stack_depth=99999:log_level=" + "q" * 60000), rc=23)
    rep = only_report(tmp)
    expect(rep["options"]["stack_depth"] == "1", f"report says stack_depth={rep['options']['stack_depth']}")
    expect(b"stack_depth='99999'" in proc.stderr and b"from 1 to 64; using 1" in proc.stderr,
           f"no warning naming the bound: {proc.stderr[:500]!r}")
    expect(len(proc.stderr) < 2000, f"{len(proc.stderr)} bytes of warnings for one long value")


def case_transient_samples(tmp):
    # Before: 103 "unreachable VMM memory grew" warnings for handles only between two calls.
    proc = run([HOSTILE, "transient-handles"], shim_env(tmp, "sample_ms=5:checkpoint_s=0"))
    n = proc.stderr.decode().count("unreachable VMM memory grew")
    samples = sum(1 for s in only_report(tmp)["steps"] if s.get("label") == "sample")
    print(f"figure transient-samples: {samples} samples, {n} leak warnings")
    expect(samples > 20 and n == 0, f"{samples} samples, {n} leak warnings for transient handles")


# ---- case 11: glibc 2.28 ------------------------------------------------------------------------------

def case_glibc_2_28(tmp):
    # Before: the shim needed GLIBC_2.36 (arc4random, from libstdc++'s random_device), the CLI 2.34.
    # Every ELF file the install and the wheel ship: the demo program (libexec) too.
    binaries = [SHIM, os.path.join(SIM, "libcuda.so.1"), os.path.join(SIM, "libnvidia-ml.so.1"), CLI,
                *glob.glob(os.path.join(BUILD, "src", "pool", "libcumemaudit_pool*.so")),
                os.path.join(BUILD, "examples", "deepep_fabric_leak")]
    worst = {}
    for b in binaries:
        out = subprocess.run(["objdump", "-T", b], capture_output=True, text=True, check=True).stdout
        too_new = sorted({m for m in re.findall(r"GLIBC_(2\.\d+)", out) if int(m.split(".")[1]) > 28})
        syms = sorted({l.split()[-1] for l in out.splitlines() if re.search(r"GLIBC_2\.(29|[3-9]\d)\b", l)})
        worst[os.path.basename(b)] = max(re.findall(r"GLIBC_(2\.\d+)", out), key=lambda v: int(v.split(".")[1]))
        expect(not too_new, f"{b} needs GLIBC {too_new}: {syms}")
    print(f"figure glibc: newest GLIBC version needed: {worst}")


# ---- the stress figures -------------------------------------------------------------------------------

def mutate(text, rng):
    ops = [
        lambda t: t[:rng.randrange(len(t))],                                          # truncated
        lambda t: (lambda i: t[:i] + chr(rng.randrange(1, 256)) + t[i + 1:])(rng.randrange(len(t))),  # one byte
        lambda t: re.sub(r"\d+", lambda m: rng.choice(["-1", "1e999", "18446744073709551616", "0", "2147483647",
                                                       "\"x\"", "null", "[]", "{}", m.group(0)]), t, count=rng.randrange(1, 6)),
        lambda t: re.sub(r"\"[a-z_]+\": ", lambda m: rng.choice([m.group(0), "\"zz\": ", m.group(0) + "["]), t, count=3),
        lambda t: t.replace("[", "[" * rng.randrange(1, 3000), 1),
        lambda t: (lambda i, j: t[:i] + t[j:])(*sorted((rng.randrange(len(t)), rng.randrange(len(t))))),
        lambda t: t.replace("\"", "\\\"", rng.randrange(1, 4)),
        lambda t: t + t[:rng.randrange(200)],
    ]
    return rng.choice(ops)(text)


def case_fuzz_cli(tmp):
    good = sample_report(tmp)
    text = open(good, encoding="utf-8").read()
    rng = random.Random(20261201)
    subs = ["check", "report", "merge", "html", "trace", "diff"]
    n, crashes, hangs, codes = 2000, 0, 0, {}
    bad = []
    for i in range(n):
        path = os.path.join(tmp, f"cumemaudit.f.{i % 8}.r0.json")
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(mutate(text, rng))
        for sub in subs:  # every mutation through every subcommand
            args = {"merge": ["merge", "-o", os.path.join(tmp, "m.json"), path],
                    "html": ["html", "-o", os.path.join(tmp, "h.html"), path],
                    "trace": ["trace", "-o", os.path.join(tmp, "t.json"), path], "diff": ["diff", good, path]}.get(sub, [sub, path])
            try:
                p = subprocess.run([CLI, *args], capture_output=True, timeout=20)
            except subprocess.TimeoutExpired:
                hangs += 1
                bad.append((sub, "hang"))
                continue
            codes[p.returncode] = codes.get(p.returncode, 0) + 1
            if p.returncode not in (0, 1, 2):
                crashes += 1
                bad.append((sub, p.returncode, p.stderr[-200:]))
    print(f"figure fuzz-cli: {n} mutations, each through {', '.join(subs)} ({n * len(subs)} runs): {crashes} crashes, {hangs} hangs, exit codes {codes}")
    expect(crashes == 0 and hangs == 0, f"{bad[:5]}")


def case_sigkill_50(tmp):
    rng = random.Random(50)
    valid, absent, invalid = 0, 0, []
    batch = 5
    for start in range(0, 50, batch):
        procs = []
        for i in range(start, start + batch):
            d = os.path.join(tmp, f"k{i}")
            os.mkdir(d)
            procs.append((d, rng.uniform(1.1, 3.0), time.monotonic(),
                          subprocess.Popen([HOSTILE, "checkpointing"], env=shim_env(d, "checkpoint_s=1"),
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        for d, at, t0, p in sorted(procs, key=lambda x: x[1]):
            time.sleep(max(0.0, t0 + at - time.monotonic()))
            p.kill()
            p.wait()
            files = report_files(d)
            if not files:
                absent += 1
                continue
            try:
                json.load(open(files[0]))
                valid += 1
            except ValueError as e:
                invalid.append((files[0], str(e)))
    print(f"figure sigkill-50: 50 SIGKILLs 1.1-3.0 s into a program checkpointing every second: {valid} valid "
          f"reports, {len(invalid)} invalid, {absent} killed before their first checkpoint")
    expect(not invalid, f"invalid reports: {invalid[:3]}")
    expect(valid >= 40, f"only {valid} reports on disk")


def case_threads_32(tmp):
    threads, rounds = (32, 100000) if not REAL else (32, 300)  # several seconds of churn either way
    start = time.monotonic()
    run([HOSTILE, "threads-exact", str(threads), str(rounds)], shim_env(tmp, "checkpoint_s=1"), timeout=150, rc=23)
    took = time.monotonic() - start
    rep = only_report(tmp)
    s = rep["summary"]
    # Per round: cuMemAlloc, cuMemFree, create, reserve, map, unmap, address free, release; then create + alloc;
    # and the one cuDevicePrimaryCtxRetain (init and the other context calls are not intercepted).
    calls = threads * (rounds * 8 + 2) + 1
    print(f"figure threads-32: {threads} threads x {rounds} rounds in {took:.1f} s: leaked {s['leaked_bytes']}, "
          f"unfreed {s['unfreed_bytes']}, intercepted {s['intercepted_calls']}")
    expect(s["leaked_bytes"] == threads * 2 * MiB and s["leaked_allocations"] == threads, f"leaks: {s}")
    expect(s["unfreed_bytes"] == threads * 4096, f"unfreed: {s}")
    expect(s["misuse_events"] == 0, f"misuse: {s}")
    expect(s["intercepted_calls"] == calls, f"intercepted {s['intercepted_calls']}, expected {calls}")


# ---- the program's behaviour is the program's: signals, pipes, limits, cancellation, non-local exits ---------

def case_exit_in_handler(tmp):
    # Before: exit(3) from the program's SIGUSR1 handler, while the main thread churned, hung about 1 run in 4:
    # the exit report waited on a ledger spin lock the same thread held, interrupted inside the VMM model.
    # Then about 1 run in 200 crashed (SIGSEGV): the exit report allocated from the C heap while the driver
    # call the signal interrupted was halfway through a malloc on this thread. Then no run whose signal
    # interrupted a driver call wrote a report (0 in 24 runs of a suite outside the project): the checkpoint
    # thread writes it now, while the interrupted thread waits. Only a signal that interrupted the shim's own
    # bookkeeping (which may hold a lock any report needs) leaves none, and says so. Then about 1 run in 2,000
    # on a loaded machine hung for the report's bound: the signal interrupted the shim's first look-up of an
    # entry point, inside the dynamic loader, and the report waited on the loader's lock that thread held.
    runs = int(os.environ.get("EXIT_IN_HANDLER_RUNS", "1000"))
    hangs, codes, reports, in_shim, lost = 0, {}, 0, 0, []
    for seed in range(1, runs + 1):
        d = os.path.join(tmp, str(seed))
        os.makedirs(d)
        try:
            proc = subprocess.run([HOSTILE, "exit-in-handler", str(seed)], env=shim_env(d), capture_output=True, timeout=10)
        except subprocess.TimeoutExpired:
            hangs += 1
            continue
        codes[proc.returncode] = codes.get(proc.returncode, 0) + 1
        exits = [r for r in ReportDir(d).reports().values() if not r["checkpoint"]]
        said_in_shim = b"shim's own bookkeeping was interrupted" in proc.stderr
        reports += bool(exits)
        in_shim += said_in_shim
        if not said_in_shim and not (len(exits) == 1 and exits[0]["process"]["exit_code"] == 3):
            lost.append((seed, proc.returncode, proc.stderr.decode(errors="replace")[-300:]))
    print(f"figure exit-in-handler: {runs} runs, {hangs} hangs, exit codes {dict(sorted(codes.items()))}, "
          f"{reports} with an exit report, {in_shim} interrupted inside the shim (no report, said so)")
    expect(hangs == 0, f"{hangs} of {runs} runs hung")
    # 3: the program's own code; 23: a report was written and the churn it interrupted left a leak.
    expect(set(codes) <= {3, 23}, f"exit codes {codes}")
    expect(not lost, f"{len(lost)} runs neither wrote the exit report nor said why: {lost[:3]}")


def case_stderr_reader_gone(tmp):
    # Before: a stderr pipe whose reader had gone (| head, a dead log collector) killed a leaking program with
    # SIGPIPE (-13) instead of exit 23, and a clean one with a malformed option at its first CUDA call.
    for prog, options, want in (("leaky", "summary=1", 23), ("clean", "summary=1:no_such_option=1", 0)):
        r, w = os.pipe()
        os.close(r)  # the reader is gone before the program starts
        proc = subprocess.run([HOSTILE, prog], env=shim_env(tmp, options), stdout=subprocess.DEVNULL, stderr=w,
                              timeout=60)
        os.close(w)
        expect(proc.returncode == want, f"{prog} with {options}, stderr a broken pipe: exit {proc.returncode}, "
                                        f"expected {want}")


def limited(bytes_):
    import resource
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (bytes_, bytes_))


def case_file_size_limit(tmp):
    # Before: RLIMIT_FSIZE below the report's size killed the program with SIGXFSZ (exit 153, no report, a
    # temp file left behind) after it had done its work.
    proc = subprocess.run([HOSTILE, "leaky"], env=shim_env(tmp, "summary=1"), capture_output=True, timeout=60,
                          preexec_fn=limited(512))
    err = proc.stderr.decode(errors="replace")
    expect(proc.returncode == 23, f"leaky under ulimit -f: exit {proc.returncode}\n{err}")
    expect("report not written" in err, f"no word that the report was not written:\n{err}")
    expect(not [f for f in os.listdir(tmp) if f.endswith(".tmp")], f"temp files left: {os.listdir(tmp)}")
    # A clean program whose report cannot be written fails the gate closed rather than pass unchecked, with
    # the code of a missing report (125), never the leak gate's 23.
    proc = subprocess.run([HOSTILE, "clean"], env=shim_env(tmp), capture_output=True, timeout=60,
                          preexec_fn=limited(512))
    expect(proc.returncode == 125, f"clean under ulimit -f: exit {proc.returncode}")


def case_report_unwritable(tmp):
    # Before: a report that could not be written at exit (report_dir under /dev/null) let a clean program
    # exit 0, and the summary printed `report: PATH` for a file that did not exist.
    # 125 since the exit code of a missing report is its own: 23 would read as a leak.
    env = shim_env("/dev/null/sub", "summary=1")
    proc = run([HOSTILE, "clean"], env, rc=125)
    err = proc.stderr.decode(errors="replace")
    expect("cumemaudit: report not written" in err and "cumemaudit: report: /dev/null" not in err, err)
    expect("the leak gate failed closed (no report to check): exit 125" in err, err)
    # A leak the process knew of is still the gate's 23, report or not.
    proc = run([HOSTILE, "leaky"], env, rc=23)
    expect("cumemaudit: report not written" in proc.stderr.decode(errors="replace"), proc.stderr)
    # Through `cumemaudit run`, the same directory is refused before the program starts.
    proc = subprocess.run([CLI, "run", "--sim", "--report-dir", "/dev/null/sub", "--", HOSTILE, "clean"],
                          env={**sim_env(), "CUMEMAUDIT_SHIM": SHIM, "CUMEMAUDIT_SIM_DIR": SIM}, capture_output=True, timeout=60)
    expect((proc.returncode, proc.stdout, proc.stderr.decode()) ==
           (2, b"", "cumemaudit run: report_dir /dev/null/sub: cannot make it (/dev/null/sub: Not a directory); "
                    "the program was not started\n"), f"run: exit {proc.returncode} {proc.stdout!r} {proc.stderr!r}")


def case_cancel_in_checkpoint(tmp):
    # Before: pthread_cancel of a thread inside cumemaudit_checkpoint() aborted the process (exit 134): open,
    # write and fsync are cancellation points inside the noexcept report writer.
    for i in range(10):
        run([HOSTILE, "cancel-checkpoint"], shim_env(os.path.join(tmp, str(i))), timeout=60, rc=0)


def case_longjmp_out(tmp):
    # Before: after a siglongjmp out of a driver call that faulted on a bad out-pointer, every later call of the
    # thread went unrecorded (its driver depth stayed raised): a 2 MiB leak was missed and the gate passed.
    proc = run([HOSTILE, "longjmp-out"], shim_env(tmp), rc=23)
    expect(figures(proc.stdout).get("faults") == "1", f"the bad pointer did not fault: {proc.stdout}")
    s = only_report(tmp)["summary"]
    expect(s["leaked_bytes"] == 2 * MiB and s["leaked_allocations"] == 1, f"leaks after the longjmp: {s}")


def case_late_rank(tmp):
    # Before: a checkpoint written before RANK was set stayed beside the final report (the identity was read
    # again at every write); merge then counted 6 MiB for a process that leaked 4 MiB, plus a phantom process.
    run([HOSTILE, "late-rank"], shim_env(tmp), rc=23)
    files = report_files(tmp)
    expect(len(files) == 1, f"one process, reports {files}")
    rep = only_report(tmp)
    expect(rep["summary"]["leaked_bytes"] == 4 * MiB, f"leaked {rep['summary']}")


def case_report_not_replaced(tmp):
    # Before: a report already at this process's name (pid reuse in a long-lived report directory, or
    # containers sharing a host name, each with its own pid 1) was silently replaced; `check` passed.
    if os.geteuid() != 0 or subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True).returncode != 0:
        print("report-not-replaced: no pid namespace here")
        return
    for prog, rc in (("leaky", 23), ("clean", 0)):
        run(["unshare", "--pid", "--fork", HOSTILE, prog], shim_env(tmp), rc=rc)
    files = report_files(tmp)
    expect(len(files) == 2, f"two processes with pid 1, reports: {files}")
    leaked = sorted(json.load(open(f))["summary"]["leaked_bytes"] for f in files)
    expect(leaked == [0, 2 * MiB], f"leaked bytes of the two reports: {leaked}")
    check = subprocess.run([CLI, "check", tmp], capture_output=True, timeout=30)
    expect(check.returncode == 1, f"check of both: exit {check.returncode} (1: a report fails)")


def case_report_dir_rules(tmp):
    # Before: a root-owned 0777 directory and another user's sticky 1777 one were accepted (the other user
    # renames a passing report over the real one); directories made under umask(0) were 0777; a process
    # whose every predictable name was planted replaced one of them; `check DIR` passed on the planted ones.
    def leaky(d):
        return subprocess.run([HOSTILE, "leaky"], env=shim_env(d), capture_output=True, timeout=60)

    if os.geteuid() == 0:
        for mode, owner, why in ((0o777, 0, "root's, no sticky bit"), (0o1777, 4321, "another user's, sticky")):
            d = os.path.join(tmp, f"shared-{mode:o}-{owner}")
            os.mkdir(d)
            os.chown(d, owner, owner)
            os.chmod(d, mode)
            proc = leaky(d)
            err = proc.stderr.decode()
            expect("writable by others" in err and proc.returncode == 23, f"{why}: not refused:\n{err}")
            expect(report_files(d) == [], f"{why}: a report was written there")
        d = os.path.join(tmp, "like-tmp")
        os.mkdir(d)
        os.chmod(d, 0o1777)  # root's and sticky, as /tmp is: fine
        expect(leaky(d).returncode == 23 and len(report_files(d)) == 1, "a root-owned sticky directory is refused")
    # Made by the shim under umask(0): 0755, not 0777 (which it would then refuse itself).
    nested = os.path.join(tmp, "made", "by", "shim")
    proc = subprocess.run(["sh", "-c", 'umask 0 && exec "$0" "$@"', HOSTILE, "leaky"], env=shim_env(nested), capture_output=True,
                          timeout=60)
    expect(proc.returncode == 23 and len(report_files(nested)) == 1, f"no report under umask 0: {proc.stderr.decode()}")
    for part in ("made", "made/by", "made/by/shim"):
        got = stat.S_IMODE(os.stat(os.path.join(tmp, part)).st_mode)
        expect(got == 0o755, f"{part}: mode {got:o}, expected 755")
    # Every name a process may take, planted (as another user of a shared directory could, reading the pid
    # and start time): the report takes a random name of its own, and `check DIR` fails on it.
    planted = os.path.join(tmp, "planted")
    os.mkdir(planted)
    passing = json.dumps({"schema": "cumemaudit/report/v1", "process": {"pid": 1, "rank": -1, "world_size": 0, "host": "h",
                          "argv": ["x"], "exit_code": 0}, "driver": {"version": 0, "simulated": True},
                          "summary": {"leaked_bytes": 0, "leaked_allocations": 0, "leaked_references": 0, "misuse_events": 0,
                                      "unfreed_bytes": 0, "peak_tracked_bytes": 0, "intercepted_calls": 0},
                          "leaks": [], "misuse": [], "owners": [], "steps": []})
    proc = subprocess.Popen(["sh", "-c", 'read go && exec "$0" leaky', HOSTILE], env=shim_env(planted), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    host = socket.gethostname()
    with open(f"/proc/{proc.pid}/stat") as f:
        start = f.read().rsplit(")", 1)[1].split()[19]
    stem = os.path.join(planted, f"cumemaudit.{host}.{proc.pid}")
    names = [stem + ".json", f"{stem}.t{start}.json"] + [f"{stem}.t{start}-{n}.json" for n in range(2, 8)]
    for name in names:
        with open(name, "w") as f:
            f.write(passing)
    proc.communicate(b"go\n", timeout=60)
    expect(proc.returncode == 23, f"planted names: exit {proc.returncode}")
    ours = [f for f in report_files(planted) if f not in names]
    expect(len(ours) == 1 and ".x" in os.path.basename(ours[0]), f"no random name of its own: {report_files(planted)}")
    expect(json.load(open(ours[0]))["summary"]["leaked_bytes"] == 2 * MiB, "the leak is in our report")
    for name in names:
        expect(open(name).read() == passing, f"{name} was replaced")
    check = subprocess.run([CLI, "check", planted], capture_output=True, timeout=30)
    expect(check.returncode == 1, f"check of the planted directory: exit {check.returncode} (1: ours fails)")
    if os.geteuid() == 0:
        os.chown(names[0], 4321, 4321)
        check = subprocess.run([CLI, "check", planted], capture_output=True, timeout=30)
        expect(f"{names[0]} belongs to uid 4321" in check.stderr.decode(), f"no warning of another's report:\n{check.stderr.decode()}")


def case_no_threads(tmp):
    # Before: where no thread could be made (a seccomp filter, RLIMIT_NPROC 0 for a user), the audit switched
    # itself off and a leaking program exited 0 with no report: the gate did not fail closed.
    proc = run([HOSTILE, "no-threads"], shim_env(tmp), rc=23)
    expect(b"threads refused" in proc.stdout, f"the filter did not refuse threads: {proc.stdout!r}")
    expect(b"no checkpoint thread" in proc.stderr, f"no warning:\n{proc.stderr.decode(errors='replace')}")
    rep = only_report(tmp)
    expect(rep["checkpoint"] is False and rep["summary"]["leaked_bytes"] == 2 * MiB, f"exit report: {rep['summary']}")


def case_small_stack(tmp):
    # Before: a worker thread with a 64 KiB stack that asked for a checkpoint, or exited, after a leak died of
    # SIGSEGV in libdw's line tables (the report's symbolizing ran on its stack); so did a main thread
    # under `ulimit -s 160`.
    proc = run([HOSTILE, "small-stack"], shim_env(tmp), rc=23)
    expect(b"checkpoint written" in proc.stdout, f"the worker's checkpoint: {proc.stdout!r}")
    rep = only_report(tmp)
    expect(rep["checkpoint"] is False and rep["summary"]["leaked_bytes"] == 2 * MiB, f"exit report: {rep['summary']}")
    frames = [f for l in rep["leaks"] for f in l["site"]["frames"] if f.get("file", "").endswith("hostile.cpp")]
    expect(frames and all(f["line"] > 0 for f in frames), "the leak's frames are symbolized to hostile.cpp lines")
    d = os.path.join(tmp, "ulimit")
    os.mkdir(d)
    proc = subprocess.run(["sh", "-c", 'ulimit -s 160 && exec "$0" leaky', HOSTILE], env=shim_env(d, "summary=1"), capture_output=True,
                          timeout=60)
    expect(proc.returncode == 23, f"ulimit -s 160: exit {proc.returncode}\n{proc.stderr.decode(errors='replace')}")
    expect(only_report(d)["summary"]["leaked_bytes"] == 2 * MiB, "ulimit -s 160: the leak")


def case_exec_same_pid(tmp):
    # Before: after a checkpoint, an execve in the same pid left one image's figures in place of the other's.
    # Each image keeps its own report: the first's written at the exec (its handle held as at exit, the
    # program named), the second's at its exit; an exec that fails leaves the first image's audit going.
    proc = run([HOSTILE, "exec-self"], shim_env(tmp, "summary=1"), rc=23)
    reps = sorted(ReportDir(tmp).reports().values(), key=lambda r: r["process"]["exit_code"] is not None)
    expect(len(reps) == 2, f"reports: {report_files(tmp)}")
    first, second = reps
    expect(first["process"]["pid"] == second["process"]["pid"], "one pid, two images")
    expect(first["process"]["replaced_by_exec"] == "/proc/self/exe" and first["process"]["exit_code"] is None
           and first["checkpoint"] is False, f"the first image's report: {first['process']}, checkpoint {first['checkpoint']}")
    expect(second["process"]["replaced_by_exec"] == "" and second["process"]["exit_code"] == 0,
           f"the second image's report: {second['process']}")
    leaked = [r["summary"]["leaked_bytes"] for r in reps]
    expect(leaked == [2 * MiB, 4 * MiB], f"leaked bytes of the two images: {leaked}")
    err = proc.stderr.decode(errors="replace")
    # A summary per exec begun (the failed one's followed by a warning that the process goes on), one at exit.
    expect(err.count("cumemaudit: report: ") == 3, f"a summary per exec and at exit:\n{err}")
    expect("the exec of /nonexistent/program failed (No such file or directory)" in err, f"the failed exec:\n{err}")
    check = cli(["check", tmp])
    expect(check.returncode == 1, f"check of both images: exit {check.returncode} (1: a report fails)")
    merged = os.path.join(tmp, "job.json")
    cli(["merge", "-o", merged, tmp])
    job = json.load(open(merged))
    expect(job["summary"]["leaked_bytes"] == 6 * MiB, f"the job's leaked bytes: {job['summary']['leaked_bytes']}")
    expect(not [p for p in job.get("problems", []) if "checkpoint" in p.get("what", "")],
           f"an image an exec replaced is no checkpoint: {job.get('problems')}")


def case_stderr_reused(tmp):
    # Before: a daemon that closed fd 2 and opened its own data file there got the leak summary in that file.
    data = os.path.join(tmp, "data.txt")
    run([HOSTILE, "reuse-stderr", data], shim_env(tmp, "summary=1"), rc=23)
    with open(data, "rb") as f:
        got = f.read()
    expect(got == b"the daemon's own data\n", f"the daemon's file holds {got[:300]!r}")


def case_terminal_escapes(tmp):
    # Before: escape sequences in a report string (argv[0] here) reached the terminal raw in the shim's summary:
    # one set the terminal's title, one wrote its clipboard (OSC 52), one erased the line.
    evil = os.path.join(tmp, "prog\x1b]0;owned\x07\x1b]52;c;ZWNobyBvd25lZA==\x07\x1b[2K\r\x9b31m")
    os.symlink(HOSTILE, evil)
    proc = run([evil, "leaky"], shim_env(tmp, "summary=1"), rc=23)
    err = proc.stderr
    expect(b"\x1b" not in err and b"\x07" not in err and b"\r" not in err and b"\x9b" not in err,
           f"control bytes on stderr: {err[:400]!r}")
    expect(b"\\x1b]0;owned" in err, f"the name is not shown escaped: {err[:400]!r}")


def case_early_step(tmp):
    # Before: a step marked after cuInit and a context, but before the first allocation, was dropped.
    run([HOSTILE, "early-step"], shim_env(tmp), rc=0)
    steps = [s["step"] for s in only_report(tmp)["steps"] if not s.get("label")]
    expect(steps == [7, 8], f"steps {steps}")


def case_suppressions_at_start(tmp):
    # Before: a suppressions file was read only at exit, so a typo was reported after the program's work, and
    # /proc/self/mem (a read error) was taken as an empty file without a word.
    bad = os.path.join(tmp, "supp.txt")
    with open(bad, "w") as f:
        f.write("leak:*\nleek:typo\n")
    for path in (bad, "/proc/self/mem"):
        proc = subprocess.run([HOSTILE, "clean"], env=shim_env(tmp, f"suppressions={path}"), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=60)
        expect(proc.returncode == 0, f"{path}: exit {proc.returncode}")
        err = proc.stdout.decode(errors="replace")
        at = err.find("suppressions not used")
        expect(at >= 0, f"{path}: no warning:\n{err}")
        expect(at < err.find("program: after its first CUDA calls"), f"{path}: warned only after the work:\n{err}")


# ---- the CLI: one definition of leaked, text escaped, writes that fail leave nothing half-written -------------

def case_cli_escapes(tmp):
    # Before: `report`, `diff` and `merge` printed report strings raw: a title, the clipboard, an erased line.
    evil = os.path.join(tmp, "prog\x1b]0;owned\x07\x1b[2K\r")
    os.symlink(HOSTILE, evil)
    run([evil, "leaky"], shim_env(tmp), rc=23)
    f = report_files(tmp)[0]
    for args in (["report", f], ["diff", f, f], ["merge", tmp], ["check", f]):
        out = cli(args)
        both = out.stdout + out.stderr
        expect(b"\x1b" not in both and b"\x07" not in both and b"\r" not in both,
               f"cumemaudit {args[0]}: control bytes: {both[:300]!r}")


def case_views_agree(tmp):
    # Before: diff's leaked bytes by site, merge's leak sites and the html Leaks table counted memory still
    # mapped at exit as leaked, where the text summary and the totals did not.
    run([HOSTILE, "mapped-at-exit"], shim_env(tmp), rc=23)
    f = report_files(tmp)[0]
    rep = only_report(tmp)
    expect(rep["summary"]["leaked_bytes"] == 2 * MiB, f"summary {rep['summary']}")
    empty = os.path.join(tmp, "empty.json")
    blank = json.loads(json.dumps(rep))
    blank["leaks"], blank["summary"]["leaked_bytes"] = [], 0
    with open(empty, "w") as out:
        json.dump(blank, out)
    diff = cli(["diff", empty, f]).stdout.decode()
    section = diff.split("leaked bytes by site", 1)[1] if "leaked bytes by site" in diff else ""
    expect("4.0 MiB" not in section and "2.0 MiB" in section, f"diff:\n{diff}")
    merged = cli(["merge", tmp + "/" + os.path.basename(f)]).stdout.decode()
    sites = merged.split("leak sites:", 1)[1].split("\nheld at exit", 1)[0] if "leak sites:" in merged else ""
    expect("mapped-at-exit" not in sites and "2.0 MiB" in sites, f"merge:\n{merged}")
    page = os.path.join(tmp, "page.html")
    expect(cli(["html", "-o", page, f]).returncode == 0, "html failed")
    html = open(page, encoding="utf-8").read()
    leaks = html.split('<table class="leaks">', 1)[1].split("</table>", 1)[0]
    expect("mapped-at-exit" not in leaks and leaks.count("<tr>") == 2, f"the Leaks table: {leaks[:600]}")


def case_hostile_owner_names(tmp):
    # A program's file name is its allocations' owner. Names with an escape sequence, a line separator (U+2028)
    # or a byte-order mark, and one with NUL (only a report file can hold it), must reach the trace's leak events
    # and merge's sites unchanged, so each view names the same owner; no raw ESC reaches a terminal.
    names = {"esc": "ho\x1b[31mstile", "line-separator": "ho\u2028stile", "bom": "\ufeffhostile"}
    for key, name in names.items():
        exe = os.path.join(tmp, name)
        shutil.copy(HOSTILE, exe)
        d = os.path.join(tmp, key)
        run([exe, "leaky"], shim_env(d), rc=23)
        f = report_files(d)[0]
        check_owner_views(tmp, key, f, name)
    crafted = os.path.join(tmp, "nul")
    os.mkdir(crafted)
    text = open(report_files(os.path.join(tmp, "esc"))[0], encoding="utf-8").read()
    f = os.path.join(crafted, "cumemaudit.h.1.json")
    with open(f, "w", encoding="utf-8") as out:
        out.write(text.replace(json.dumps(names["esc"])[1:-1], "ho\\u0000stile"))
    check_owner_views(tmp, "nul", f, "ho\x00stile")


def check_owner_views(tmp, key, report_file, owner):
    rep = ReportDir.read(report_file)
    expect([l["owner"] for l in rep["leaks"]] == [owner], f"{key}: the report's leak owners {[l['owner'] for l in rep['leaks']]}")
    trace = os.path.join(tmp, key + ".trace.json")
    expect(cli(["trace", "-o", trace, report_file]).returncode == 0, f"{key}: trace failed")
    events = json.load(open(trace, encoding="utf-8"))["traceEvents"]
    leak_owners = [e["args"]["owner"] for e in events if e.get("name", "").startswith("leak: ")]
    expect(leak_owners == [owner], f"{key}: the trace's leak owners {leak_owners}")
    merged = os.path.join(tmp, key + ".merge.json")
    expect(cli(["merge", "-o", merged, report_file]).returncode == 0, f"{key}: merge failed")
    sites = [s["owner"] for s in json.load(open(merged, encoding="utf-8"))["sites"]]
    expect(sites == [owner], f"{key}: merge's site owners {sites}")
    for sub in (["merge", report_file], ["report", report_file], ["check", report_file]):
        out = cli(sub)
        expect(b"\x1b" not in out.stdout + out.stderr, f"{key}: raw ESC from {' '.join(sub[:1])}")


def case_cli_write_errors(tmp):
    # Before: `html -o` and `trace -o` left a 0-byte file when the write failed (a full disk; here a file-size
    # limit, SIGXFSZ ignored so the write answers EFBIG); a number no double holds (1e400) gave an error that
    # did not name the file.
    run([HOSTILE, "leaky"], shim_env(tmp), rc=23)
    f = report_files(tmp)[0]
    import resource

    def small():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))

    for cmd in ("html", "trace"):
        out = os.path.join(tmp, f"out.{cmd}")
        proc = subprocess.run([CLI, cmd, "-o", out, f], capture_output=True, timeout=30, preexec_fn=small)
        expect(proc.returncode != 0 and b"cannot write" in proc.stderr, f"{cmd}: exit {proc.returncode} {proc.stderr!r}")
        expect(not os.path.exists(out), f"{cmd} -o left {out} behind")
        expect(not [n for n in os.listdir(tmp) if ".tmp" in n], f"{cmd}: temp files {os.listdir(tmp)}")
    big = os.path.join(tmp, "big.json")
    text = open(f).read().replace('"leaked_bytes": 2097152', '"leaked_bytes": 1e400', 1)
    with open(big, "w") as out:
        out.write(text)
    proc = cli(["report", big])
    expect(proc.returncode == 2 and big.encode() in proc.stderr, f"1e400: exit {proc.returncode} {proc.stderr!r}")


def case_symbolize_in_place(tmp):
    # Before: symbolize turned a 0644 report into 0600 and replaced a symlinked report with a regular file.
    run([HOSTILE, "leaky"], shim_env(tmp, "report_mode=0644"), rc=23)
    f = report_files(tmp)[0]
    link = os.path.join(tmp, "link.json")
    os.symlink(f, link)
    proc = cli(["symbolize", link])
    expect(proc.returncode == 0, f"symbolize: exit {proc.returncode} {proc.stderr!r}")
    expect(os.path.islink(link), "the symlink was replaced")
    expect(stat.S_IMODE(os.stat(f).st_mode) == 0o644, f"mode {oct(os.stat(f).st_mode)}")
    expect(b"no local file with debug info matches " + HOSTILE.encode() not in proc.stdout,
           f"the program's own file matched, yet: {proc.stdout!r}")


if __name__ == "__main__":
    sys.exit(main(named_cases(globals())))
