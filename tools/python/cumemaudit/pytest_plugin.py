"""The pytest plugin (the wheel registers it as the ``pytest11`` entry point ``cumemaudit``). Inert until
``pytest --cumemaudit``; then the session runs under the shim — re-executing itself once with the shim that
came with this package preloaded when it is not — and each test fails that leaves more leaked bytes than
allowed (references held on memory nothing maps: nothing can free it), or misuse, with a message naming the
test, the bytes and the leaking site. Per test, through the C API's leak mark (accounting.py):

    @pytest.mark.cumemaudit(max_leaked_bytes=0, warmups=1, fail_on="leaks,misuse")
    def test_decode(): ...

``warmups`` calls the test that many times before the measured call (caches filled once are not leaks);
``fail_on`` takes leaks, unfreed (classic allocations still live, counted with the leaked bytes), misuse, or
none. The session's reports — one per process, so each pytest-xdist worker writes its own — land in
--cumemaudit-dir, which ``cumemaudit check`` and ``cumemaudit merge`` read. The process's exit gate is off
(fail_on=none) in a session the plugin started: the tests are the gate."""
import os
import sys

import pytest

from . import _layout, accounting

_REEXECUTED = "CUMEMAUDIT_PYTEST_REEXEC"  # set in the re-executed session, so it happens exactly once
_FAIL_ON_WORDS = {"leaks", "unfreed", "misuse", "none"}


def pytest_addoption(parser):
    group = parser.getgroup("cumemaudit", "CUDA memory audit (cumemaudit)")
    group.addoption("--cumemaudit", action="store_true", help="Fail each test that leaks CUDA memory")
    group.addoption("--cumemaudit-dir", default="cumemaudit-reports", metavar="DIR",
                    help="Directory of the session's reports, one per process (default: cumemaudit-reports)")
    group.addoption("--cumemaudit-sim", action="store_true",
                    help="Run on the simulated driver that came with cumemaudit (no GPU needed)")
    group.addoption("--cumemaudit-fail-on", default="leaks,misuse", metavar="WHAT",
                    help="Default of the marker's fail_on: leaks, unfreed, misuse, none (comma-separated)")


def pytest_configure(config):
    config.addinivalue_line("markers", "cumemaudit(max_leaked_bytes=0, warmups=0, fail_on='leaks,misuse'): "
                                       "limits of the CUDA memory audit for this test (with --cumemaudit)")
    if config.getoption("cumemaudit") and not accounting.available():
        _reexec_under_shim(config)


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
    env = dict(os.environ)
    env[_REEXECUTED] = "1"
    env["LD_PRELOAD"] = ":".join([shim] + [p for p in _entries(env.get("LD_PRELOAD")) if p != shim])
    report_dir = os.path.abspath(config.getoption("cumemaudit_dir"))
    # The user's own CUMEMAUDIT_OPTIONS come last, so they win.
    ours = f"report_dir={report_dir}:fail_on=none:stack_depth=16"
    env["CUMEMAUDIT_OPTIONS"] = ":".join(filter(None, [ours, env.get("CUMEMAUDIT_OPTIONS")]))
    if config.getoption("cumemaudit_sim"):
        sim = _layout.sim_dir()
        if sim is None:
            raise pytest.UsageError("--cumemaudit-sim: no simulated driver came with this cumemaudit package")
        env["LD_LIBRARY_PATH"] = ":".join([sim] + _entries(env.get("LD_LIBRARY_PATH")))
    argv = list(getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv])
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)


def _limits(item):
    marker = item.get_closest_marker("cumemaudit")
    kwargs = dict(marker.kwargs) if marker else {}
    limits = {"max_leaked_bytes": int(kwargs.pop("max_leaked_bytes", 0)), "warmups": int(kwargs.pop("warmups", 0)),
              "fail_on": kwargs.pop("fail_on", item.config.getoption("cumemaudit_fail_on"))}
    if kwargs:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.cumemaudit: unknown argument(s) {sorted(kwargs)}; "
                                "known: max_leaked_bytes, warmups, fail_on")
    words = {w.strip() for w in str(limits["fail_on"]).split(",") if w.strip()}
    if not words or not words <= _FAIL_ON_WORDS:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.cumemaudit: fail_on={limits['fail_on']!r}: "
                                f"expected a comma-separated mix of {', '.join(sorted(_FAIL_ON_WORDS))}")
    limits["fail_on"] = words
    return limits


def _verdict(nodeid, held, limits):
    """The failure message for what the test left behind, or None when it stays within its limits."""
    fail_on, problems = limits["fail_on"], []
    counted = (held.leaked_bytes if "leaks" in fail_on else 0) + (held.unfreed_bytes if "unfreed" in fail_on else 0)
    if counted > limits["max_leaked_bytes"]:
        what = [f"{held.leaked_bytes} bytes leaked in {held.leaked_allocations} allocation(s) "
                f"({held.leaked_references} unreleased reference(s))"]
        if "unfreed" in fail_on:
            what.append(f"{held.unfreed_bytes} bytes unfreed in {held.unfreed_allocations} allocation(s)")
        problems.append(", ".join(what) + f", {limits['max_leaked_bytes']} allowed")
        if held.site:
            problems.append(f"leaking site: {held.site}")
    if "misuse" in fail_on and held.misuse_events:
        problems.append(f"{held.misuse_events} misuse event(s) (see the report)")
    return f"cumemaudit: {nodeid}: " + "; ".join(problems) if problems else None


@pytest.hookimpl(hookwrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    if not pyfuncitem.config.getoption("cumemaudit"):
        yield
        return
    limits = _limits(pyfuncitem)
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    for _ in range(limits["warmups"]):
        pyfuncitem.obj(**args)
    mark = accounting.leak_mark()
    outcome = yield
    if outcome.excinfo is not None:
        return  # the test failed on its own; that failure is the one to read
    message = _verdict(pyfuncitem.nodeid, accounting.held_since(mark), limits)
    if message:
        pytest.fail(message, pytrace=False)


def pytest_terminal_summary(terminalreporter, config):
    if config.getoption("cumemaudit") and os.environ.get(_REEXECUTED):
        report_dir = os.path.abspath(config.getoption("cumemaudit_dir"))
        terminalreporter.write_line(f"cumemaudit: reports in {report_dir} (cumemaudit check {report_dir})")
