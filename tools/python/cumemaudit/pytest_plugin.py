"""The pytest plugin (the wheel registers it as the ``pytest11`` entry point ``cumemaudit``). Inert until
``pytest --cumemaudit``; then the session runs under the shim — re-executing itself once with the shim that
came with this package preloaded when it is not — and each test fails that leaves more leaked bytes than
allowed (references held on memory nothing maps: nothing can free it), or misuse, with a message naming the
test's own line and the leaking sites (leak_message.py; docs/PYTEST.md). Per test, through the C API's
leak mark (accounting.py):

    @pytest.mark.cumemaudit(max_leaked_bytes="4 MiB", warmups=1, fail_on="leaks,misuse")
    def test_decode(): ...

``max_leaked_bytes`` is a byte count or a size as CUMEMAUDIT_OPTIONS takes one ("4MiB", "1.5 GiB"; sizes.py);
a marker the plugin cannot read is an error collecting its file, naming the test and the value.

``warmups`` calls the test that many times before the measured call (caches filled once are not leaks);
``fail_on`` takes leaks, unfreed (classic allocations still live, counted with the leaked bytes), misuse, or
none. The session's reports — one per process, so each pytest-xdist worker writes its own — land in a
directory of the session's own under --cumemaudit-dir (``latest`` names the newest), which ``cumemaudit
check`` and ``cumemaudit merge`` read. The process's exit gate and its stderr summary are off (fail_on=none,
summary=0) in a session the plugin started: the tests are the gate, and their failures say what leaked."""
import os
import subprocess
import sys
import time

import pytest

from . import _layout, accounting, leak_message, option_check, sizes

# Set in the re-executed session, so it happens exactly once; its value is the session's report directory.
_REEXECUTED = "CUMEMAUDIT_PYTEST_REEXEC"
_LATEST = "latest"
# The leaked bytes the markers let this process's tests leave (their limits, fail_on without leaks, warm-up
# calls): the report holds them too, so the `check` the session suggests allows them. A test's share travels
# in its report's user_properties, so under pytest-xdist the controller sums the workers' tests.
_ALLOWED = "cumemaudit_allowed_bytes"
_allowed_total = [0]
_FAIL_ON_WORDS = {"leaks", "unfreed", "misuse", "none"}
_NOT_A_SIZE = (f"not a size: write a byte count or a number and one of {sizes.UNITS} (powers of 1024), "
               "such as 4194304, '4MiB' or '1.5 GiB'; MB and GB are refused, as tools disagree on what they mean")
_NOT_FAIL_ON = f"expected a comma-separated mix of {', '.join(sorted(_FAIL_ON_WORDS))}"


def pytest_addoption(parser):
    group = parser.getgroup("cumemaudit", "CUDA memory audit (cumemaudit)")
    group.addoption("--cumemaudit", action="store_true", help="Fail each test that leaks CUDA memory")
    group.addoption("--cumemaudit-dir", default="cumemaudit-reports", metavar="DIR",
                    help="Directory of the session's reports, one per process (default: cumemaudit-reports)")
    group.addoption("--cumemaudit-sim", action="store_true",
                    help="Run on the simulated driver that came with cumemaudit (no GPU needed)")
    group.addoption("--cumemaudit-fail-on", default="leaks,misuse", metavar="WHAT",
                    help="Default of the marker's fail_on: leaks, unfreed, misuse, none (comma-separated)")
    group.addoption("--cumemaudit-max-leaked-bytes", default="0", metavar="SIZE",
                    help="Default of the marker's max_leaked_bytes: bytes, or a size such as 4MiB or '1.5 GiB'")


def pytest_configure(config):
    config.addinivalue_line("markers", "cumemaudit(max_leaked_bytes=0, warmups=0, fail_on='leaks,misuse'): "
                                       "limits of the CUDA memory audit for this test (with --cumemaudit); "
                                       "max_leaked_bytes takes bytes or a size such as '4 MiB'")
    if config.getoption("cumemaudit") and not accounting.available():
        _reexec_under_shim(config)
    if config.getoption("cumemaudit"):
        _allowed_total[0] = 0
        # Before anything runs: a misspelt key would otherwise be one warning on stderr once a test touches
        # CUDA, its setting silently left at the default.
        bad = option_check.problems(os.environ.get("CUMEMAUDIT_OPTIONS", ""))
        if bad:
            raise pytest.UsageError("\n".join(bad))
        text = config.getoption("cumemaudit_max_leaked_bytes")
        if sizes.parse(text) is None:
            raise pytest.UsageError(f"--cumemaudit-max-leaked-bytes={text!r}: {_NOT_A_SIZE}")
        if _fail_on_words(config.getoption("cumemaudit_fail_on")) is None:
            raise pytest.UsageError(f"--cumemaudit-fail-on={config.getoption('cumemaudit_fail_on')!r}: {_NOT_FAIL_ON}")


def _entries(value):
    return [p for p in (value or "").split(":") if p]


def _reexec_under_shim(config):
    if os.environ.get(_REEXECUTED):
        raise pytest.UsageError("--cumemaudit: re-executed with LD_PRELOAD=%s, yet the shim's C API is not in "
                                "the process (was it loaded?)" % os.environ.get("LD_PRELOAD", ""))
    shim = _layout.shim()
    if shim is None:
        raise pytest.UsageError("--cumemaudit: no libcumemaudit.so came with this cumemaudit package; set "
                                "CUMEMAUDIT_SHIM or run pytest under `cumemaudit run`")
    base = os.path.abspath(os.path.join(str(config.invocation_params.dir), config.getoption("cumemaudit_dir")))
    if ":" in base:
        raise pytest.UsageError(f"--cumemaudit-dir={config.getoption('cumemaudit_dir')!r}: a ':' separates "
                                "CUMEMAUDIT_OPTIONS' entries; choose a directory whose path has none")
    report_dir = _session_dir(base)
    env = dict(os.environ)
    env[_REEXECUTED] = report_dir
    env["LD_PRELOAD"] = ":".join([shim] + [p for p in _entries(env.get("LD_PRELOAD")) if p != shim])
    # The user's own CUMEMAUDIT_OPTIONS come last, so they win. python_depth: the test's own frame is found
    # under a deep library (a model's forward, an allocator's wrappers), not cut off.
    # summary=0: the tests' failures say what leaked; an LSan-style block per process after pytest's own
    # summary would say it again, for every pytest-xdist worker.
    ours = f"report_dir={report_dir}:fail_on=none:summary=0:stack_depth=16:python_depth=32"
    env["CUMEMAUDIT_OPTIONS"] = ":".join(filter(None, [ours, env.get("CUMEMAUDIT_OPTIONS")]))
    if config.getoption("cumemaudit_sim"):
        sim = _layout.sim_dir()
        if sim is None:
            raise pytest.UsageError("--cumemaudit-sim: no simulated driver came with this cumemaudit package")
        env["LD_LIBRARY_PATH"] = ":".join([sim] + _entries(env.get("LD_LIBRARY_PATH")))
    # The session again, from its own arguments and directory: never the host program's command line,
    # which may be a script on stdin (nothing to run again) or a program whose side effects would repeat.
    args = list(config.invocation_params.args)
    # The same root as this session's: pytest finds it from the arguments that name existing paths, and the
    # report directory made above is one now, which would move the root and the test paths shown.
    if not any(a == "--rootdir" or a.startswith("--rootdir=") for a in args):
        args.append(f"--rootdir={config.rootpath}")
    argv = [sys.executable, "-m", "pytest", *args]
    sys.stdout.flush()
    sys.stderr.flush()
    if _started_as_pytest():
        os.chdir(str(config.invocation_params.dir))
        os.execve(sys.executable, argv, env)
    # pytest.main() from a program: the session runs in a child, and this one ends with its exit code.
    code = subprocess.run(argv, cwd=str(config.invocation_params.dir), env=env).returncode
    pytest.exit(f"cumemaudit: the session ran under the shim in a child process (exit {code})", returncode=code)


def _session_dir(base):
    """A directory of this session's own under `base`, made now, and `base`/latest pointing at it: the
    reports of one session are never mixed with an earlier one's."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1, 100):
        name = f"session-{stamp}-{os.getpid()}" + (f"-{n}" if n > 1 else "")
        path = os.path.join(base, name)
        try:
            os.makedirs(path)
            break
        except FileExistsError:
            continue
        except OSError as e:
            raise pytest.UsageError(f"--cumemaudit-dir: cannot make {path}: {e.strerror}") from None
    else:
        raise pytest.UsageError(f"--cumemaudit-dir: no free session directory name in {base}")
    # Relative, so the directory can be moved or copied whole; replaced atomically (a concurrent session
    # sees the old link or the new one).
    temporary = os.path.join(base, f".{_LATEST}.{os.getpid()}")
    try:
        if os.path.lexists(temporary):
            os.unlink(temporary)
        os.symlink(name, temporary)
        os.replace(temporary, os.path.join(base, _LATEST))
    except OSError as e:
        sys.stderr.write(f"cumemaudit: could not point {os.path.join(base, _LATEST)} at {name}: {e.strerror}\n")
    return path


def _started_as_pytest():
    """This process is the pytest command (`pytest ...`, `python -m pytest ...`), not a program that called
    pytest.main(): only then may it become the session under the shim in place."""
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    if os.path.basename(argv[0]).startswith(("pytest", "py.test")):
        return True
    for i, word in enumerate(argv[1:], 1):
        if word == "-c":
            return False
        if word == "-m":
            return i + 1 < len(argv) and argv[i + 1] in ("pytest", "py.test")
        if word.startswith("-m") and len(word) > 2:
            return word[2:] in ("pytest", "py.test")
        if not word.startswith("-"):
            return os.path.basename(word).startswith(("pytest", "py.test"))  # the pytest script run by Python
    return False


class MarkerError(Exception):
    """A @pytest.mark.cumemaudit the plugin cannot read; the message names the test and the value."""


def _fail_on_words(value):
    """The set of words of a fail_on value, or None when it is not one."""
    words = {w.strip() for w in str(value).split(",") if w.strip()}
    return words if words and words <= _FAIL_ON_WORDS else None


def _bytes_allowed(item, value):
    where = f"{item.nodeid}: @pytest.mark.cumemaudit(max_leaked_bytes={value!r})"
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise MarkerError(f"{where}: a negative number of bytes")
        return value
    if not isinstance(value, str):
        raise MarkerError(f"{where}: a {type(value).__name__}; expected an int or a size string")
    parsed = sizes.parse(value)
    if parsed is None:
        raise MarkerError(f"{where}: {_NOT_A_SIZE}")
    return parsed


def _count_of(item, name, value):
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise MarkerError(f"{item.nodeid}: @pytest.mark.cumemaudit({name}={value!r}): expected a non-negative int")


def _limits(item):
    """The test's limits: its marker's, over the session's defaults (read in pytest_configure)."""
    marker = item.get_closest_marker("cumemaudit")
    kwargs = dict(marker.kwargs) if marker else {}
    if marker and marker.args:
        raise MarkerError(f"{item.nodeid}: @pytest.mark.cumemaudit{marker.args!r}: arguments are named: "
                          "max_leaked_bytes=, warmups=, fail_on=")
    allowed = kwargs.pop("max_leaked_bytes", item.config.getoption("cumemaudit_max_leaked_bytes"))
    warmups = kwargs.pop("warmups", 0)
    fail_on = kwargs.pop("fail_on", item.config.getoption("cumemaudit_fail_on"))
    if kwargs:
        raise MarkerError(f"{item.nodeid}: @pytest.mark.cumemaudit: unknown argument(s) {sorted(kwargs)}; "
                          "known: max_leaked_bytes, warmups, fail_on")
    words = _fail_on_words(fail_on)
    if words is None:
        raise MarkerError(f"{item.nodeid}: @pytest.mark.cumemaudit(fail_on={fail_on!r}): {_NOT_FAIL_ON}")
    return {"max_leaked_bytes": _bytes_allowed(item, allowed), "warmups": _count_of(item, "warmups", warmups),
            "fail_on": words}


@pytest.hookimpl(hookwrapper=True)
def pytest_pycollect_makeitem(collector, name, obj):
    """Each test's marker is read as the test is collected: a bad one is an error collecting its file, as
    pytest reports a bad parametrize (exit 2, "Interrupted: 1 error during collection"), and so under
    pytest-xdist too, where workers collect."""
    outcome = yield
    if not collector.config.getoption("cumemaudit"):
        return
    made = outcome.get_result()
    for item in made if isinstance(made, list) else [made]:
        if isinstance(item, pytest.Function):
            try:
                item._cumemaudit_limits = _limits(item)
            except MarkerError as e:
                raise collector.CollectError(str(e)) from None


@pytest.hookimpl(hookwrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    if not pyfuncitem.config.getoption("cumemaudit"):
        yield
        return
    limits = getattr(pyfuncitem, "_cumemaudit_limits", None)
    if limits is None:  # an item made other than by the Python collector: its marker read now
        try:
            limits = _limits(pyfuncitem)
        except MarkerError as e:
            pytest.fail(str(e), pytrace=False)
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    warm = accounting.leak_mark() if limits["warmups"] else None
    for _ in range(limits["warmups"]):
        pyfuncitem.obj(**args)
    warm_held = accounting.held_since(warm) if warm is not None else None
    mark = accounting.leak_mark()
    outcome = yield
    if outcome.excinfo is not None:
        return  # the test failed on its own; that failure is the one to read
    held = accounting.held_since(mark)
    if held is None:
        return
    sites = accounting.held_sites(mark, leak_message.SITES_SHOWN) if held.leaked_bytes else None
    message = leak_message.failure_text(held, sites, limits, str(pyfuncitem.fspath), sizes.exact,
                                        root=str(pyfuncitem.config.rootpath))
    if message:
        pytest.fail(message, pytrace=False)
    # Passed: what its marker let it leave (the warm-up calls' leaks too) is allowed in the process's report.
    excused = held.leaked_bytes + (warm_held.leaked_bytes if warm_held is not None else 0)
    if excused:
        pyfuncitem.user_properties.append((_ALLOWED, excused))


def pytest_runtest_logreport(report):
    if report.when == "call":
        _allowed_total[0] += sum(v for k, v in report.user_properties if k == _ALLOWED)


def check_command(report_dir, fail_on_words, allowed_bytes):
    """The `cumemaudit check` that judges the session's reports as its markers judged its tests: the session's
    fail_on (but unfreed, which the markers count against a test's limit and check cannot budget), and the
    leaked bytes the markers allowed: a session whose tests passed their markers passes it, unless memory leaked
    outside any test's call (a fixture, an import)."""
    words = sorted(fail_on_words - {"unfreed"}) or ["none"]
    return f"cumemaudit check {report_dir} --fail-on {','.join(words)} --max-leaked-bytes {allowed_bytes}"


def pytest_terminal_summary(terminalreporter, config):
    report_dir = os.environ.get(_REEXECUTED)
    if config.getoption("cumemaudit") and report_dir:
        words = _fail_on_words(config.getoption("cumemaudit_fail_on")) or {"leaks", "misuse"}
        terminalreporter.write_line(f"cumemaudit: reports in {report_dir} "
                                    f"({check_command(report_dir, words, _allowed_total[0])})")
