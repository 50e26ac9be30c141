#!/usr/bin/python3
"""The pytest plugin (tools/python/cumemaudit/pytest_plugin.py) as a user meets it: an inner
`pytest --cumemaudit --cumemaudit-sim` session on the simulated driver, its exit code and its failure text
read line by line — the bytes, the limit, each site's line in the test file (found by its `# leak:` mark in
plugin_sessions/leaky_session.py), the sites' order. Sizes in markers and options go through the shim's C
API, so the plugin reads exactly what CUMEMAUDIT_OPTIONS and the CLI read; the same table of strings is
fed to both here. Bad markers and options are errors that name the test and the value.
Environment from meson: CLI, CUMEMAUDIT_SHIM, CUMEMAUDIT_SIM_DIR, SOURCE_ROOT."""
import glob
import inspect
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.environ["SOURCE_ROOT"]
CLI = os.environ["CLI"]
SHIM = os.environ["CUMEMAUDIT_SHIM"]
SESSIONS = os.path.join(HERE, "plugin_sessions")
CUDA_CTYPES = os.path.join(SOURCE_ROOT, "tests", "wheel", "cuda_ctypes.py")
MiB = 1 << 20
HEADER = re.compile(r"^_{3,} (\S+) _{3,}$")


def line_of(path, text):
    """The one line number of `path` whose line holds `text`."""
    with open(path) as f:
        found = [i for i, line in enumerate(f, 1) if text in line]
    assert len(found) == 1, (path, text, found)
    return found[0]


def leak_line(mark):
    return line_of(os.path.join(SESSIONS, "leaky_session.py"), f"# leak: {mark}\n")


def libffi_name():
    """The libffi this Python's ctypes calls through (the first named native frame of a ctypes call), by
    the name the loader knows it by."""
    import ctypes.util
    name = ctypes.util.find_library("ffi")
    assert name, "no libffi found"
    return name


def line_in(function, text):
    """The line of `function`'s source holding `text` (the standard library's, as this Python runs it)."""
    lines, first = inspect.getsourcelines(function)
    found = [first + i for i, line in enumerate(lines) if text in line]
    assert len(found) == 1, (function, text, found)
    return found[0]


CREATE = f"Driver.create at cuda_ctypes.py:{line_of(CUDA_CTYPES, 'self.cuda.cuMemCreate(')}"
CALL = f"cuMemCreate from ffi_call ({libffi_name()})"


def failures(stdout):
    """Each FAILURES section's lines by test name, in the order pytest printed them."""
    sections, current = {}, None
    for line in stdout.splitlines():
        head = HEADER.match(line)
        if head:
            current = sections.setdefault(head.group(1), [])
        elif line.startswith(("=====", "cumemaudit: reports in ")):
            current = None
        elif current is not None and not line.startswith("[gw"):  # xdist's "[gw0] linux -- Python ..."
            current.append(line)
    return sections


class Plugin(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        for path in (os.path.join(SESSIONS, "leaky_session.py"), CUDA_CTYPES):
            shutil.copy(path, self.dir)

    def tearDown(self):
        self.tmp.cleanup()

    def pytest(self, *args, options=None):
        env = dict(os.environ)
        for k in ("CUMEMAUDIT_OPTIONS", "LD_PRELOAD", "CUMEMAUDIT_PYTEST_REEXEC", "PYTEST_ADDOPTS"):
            env.pop(k, None)
        if options:
            env["CUMEMAUDIT_OPTIONS"] = options
        env["PYTHONPATH"] = os.path.join(SOURCE_ROOT, "tools", "python")
        cmd = ["/usr/bin/python3", "-m", "pytest", "-p", "no:cacheprovider", "-p", "cumemaudit.pytest_plugin",
               "--cumemaudit", "--cumemaudit-sim", "--cumemaudit-dir", os.path.join(self.dir, "reports"), *args]
        return subprocess.run(cmd, cwd=self.dir, env=env, capture_output=True, text=True, timeout=120)

    def from_program(self, script):
        """pytest.main() called by a program fed on stdin (the CI heredoc), which prints a line of its own."""
        env = dict(os.environ, PYTHONPATH=os.path.join(SOURCE_ROOT, "tools", "python"))
        for k in ("CUMEMAUDIT_OPTIONS", "LD_PRELOAD", "CUMEMAUDIT_PYTEST_REEXEC", "PYTEST_ADDOPTS"):
            env.pop(k, None)
        return subprocess.run(["/usr/bin/python3", "-"], input=script, cwd=self.dir, env=env, capture_output=True,
                              text=True, timeout=120)

    def test_pytest_main_from_a_program_runs_the_session_once_in_a_child(self):
        reports = os.path.join(self.dir, "reports")
        p = self.from_program(
            "import sys, pytest\nprint('side effect')\n"
            f"sys.exit(pytest.main(['-p', 'no:cacheprovider', '-p', 'cumemaudit.pytest_plugin', '--cumemaudit',"
            f" '--cumemaudit-sim', '--cumemaudit-dir', {reports!r}, 'leaky_session.py']))\n")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)  # the leaky tests ran, and failed
        self.assertEqual(p.stdout.count("side effect"), 1, p.stdout)
        self.assertIn("test_one_site", failures(p.stdout), p.stdout)
        self.assertIn("the session ran under the shim in a child process (exit 1)", p.stderr)

    def test_a_report_dir_with_a_colon_is_a_usage_error(self):
        p = self.pytest("leaky_session.py", "--cumemaudit-dir", os.path.join(self.dir, "audit-10:30"))
        self.assertEqual(p.returncode, 4, p.stdout + p.stderr)
        self.assertIn("a ':' separates CUMEMAUDIT_OPTIONS' entries", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "audit-10")))

    def suggested_check(self, stdout):
        """The session's line naming its reports, and the `cumemaudit check` command it suggests (as argv)."""
        lines = [l for l in stdout.splitlines() if l.startswith("cumemaudit: reports in ")]
        self.assertEqual(len(lines), 1, stdout)
        m = re.fullmatch(r"cumemaudit: reports in (\S+) \((cumemaudit check .*)\)", lines[0])
        self.assertIsNotNone(m, lines[0])
        return m.group(1), m.group(2).split()

    def test_each_session_has_its_own_report_dir_and_latest_names_it(self):
        base = os.path.join(self.dir, "reports")
        sessions = []
        for _ in range(2):
            p = self.pytest("leaky_session.py", "-k", "test_one_site")
            self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
            session, _ = self.suggested_check(p.stdout)
            self.assertRegex(session, "^" + re.escape(base) + r"/session-\d{8}-\d{6}-\d+(-\d+)?$")
            self.assertEqual(len(glob.glob(os.path.join(session, "cumemaudit.*.json"))), 1, session)
            self.assertEqual(os.readlink(os.path.join(base, "latest")), os.path.basename(session))
            sessions.append(session)
        self.assertNotEqual(sessions[0], sessions[1])
        self.assertEqual(sorted(os.listdir(base)), sorted(["latest"] + [os.path.basename(s) for s in sessions]))

    def test_the_session_prints_no_summary_of_its_own(self):
        # The failures say what leaked; the process's LSan-style block would say it again on stderr.
        p = self.pytest("leaky_session.py", "-k", "test_one_site")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("test_one_site", failures(p.stdout))
        for text in ("SUMMARY:", "cumemaudit: report:", "Leak of "):
            self.assertNotIn(text, p.stderr + p.stdout)
        (report,) = glob.glob(os.path.join(self.dir, "reports", "latest", "cumemaudit.*.json"))
        with open(report) as f:
            rep = json.load(f)
        self.assertEqual(rep["summary"]["leaked_bytes"], 4 * MiB)
        self.assertEqual(rep["options"]["summary"], "0")

    def test_a_misspelt_option_is_a_usage_error_naming_the_nearest(self):
        p = self.pytest("leaky_session.py", options="stack_depht=4:fail_on=leaks")
        self.assertEqual(p.returncode, 4, p.stdout + p.stderr)
        self.assertIn("ERROR: unknown option 'stack_depht' in CUMEMAUDIT_OPTIONS (did you mean stack_depth?) (known: ",
                      p.stderr)
        self.assertNotIn("passed", p.stdout)
        self.assertEqual(glob.glob(os.path.join(self.dir, "reports", "latest", "cumemaudit.*.json")), [])
        p = self.pytest("leaky_session.py", options="stack_depth=many")
        self.assertEqual(p.returncode, 4, p.stdout + p.stderr)
        self.assertIn("ERROR: option stack_depth='many' in CUMEMAUDIT_OPTIONS is not an integer", p.stderr)

    def test_the_suggested_check_agrees_with_the_markers(self):
        # Four tests leak within their markers' limits (4 + 6 + 4 + 4 MiB): the session passes, and so does the
        # check it suggests, which a plain `check` would fail.
        p = self.pytest("leaky_session.py", "-k", "test_within or test_unfreed_alone")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        session, argv = self.suggested_check(p.stdout)
        self.assertEqual(argv, ["cumemaudit", "check", session, "--fail-on", "leaks,misuse", "--max-leaked-bytes",
                                str(18 * MiB)])
        check = subprocess.run([CLI, *argv[1:]], capture_output=True, text=True, timeout=60)
        self.assertEqual(check.returncode, 0, check.stdout + check.stderr)
        self.assertEqual(subprocess.run([CLI, "check", session], capture_output=True, timeout=60).returncode, 1)
        # One test over its limit beside them: the session fails, and so does its check.
        p = self.pytest("leaky_session.py", "-k", "test_within or test_one_site")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        session, argv = self.suggested_check(p.stdout)
        self.assertEqual(argv[-1], str(18 * MiB))
        check = subprocess.run([CLI, *argv[1:]], capture_output=True, text=True, timeout=60)
        self.assertEqual(check.returncode, 1, check.stdout + check.stderr)
        self.assertIn(f"{22 * MiB} bytes leaked in 5 allocations, more than the allowed {18 * MiB} (18.0 MiB)", check.stdout)

    def test_failures_name_bytes_limit_and_each_site_from_the_test_line(self):
        p = self.pytest("leaky_session.py")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        failed = ["test_one_site", "test_sites_largest_first", "test_more_sites_than_shown", "test_leak_from_a_thread",
                  "test_unfreed_counts_when_asked", "test_leaked_and_unfreed", "test_misuse", "test_over_a_fraction",
                  "test_over_by_a_byte"]
        self.assertRegex(p.stdout, r"\n=+ 9 failed, 6 passed in ")
        self.assertEqual(re.findall(r"^FAILED leaky_session\.py::(\S+)", p.stdout, re.M), failed)
        got = failures(p.stdout)
        at = lambda mark, test: f"at leaky_session.py:{leak_line(mark)} in {test}"  # noqa: E731
        self.assertEqual(got["test_one_site"], [
            "cumemaudit: leaked 4.0 MiB (4194304 bytes) in 1 allocation (1 unreleased reference); limit 0 B",
            f"4.0 MiB (4194304 bytes) {at('one', 'test_one_site')}",
            f"    {CALL}",
            f"    {CREATE}"])
        # One block per site, largest first; a site reached through a helper of the test file leads with the
        # helper's line, and the test's own line follows the frames in between.
        test = "test_sites_largest_first"
        self.assertEqual(got[test], [
            "cumemaudit: leaked 12.0 MiB (12582912 bytes) in 3 allocations (3 unreleased references); limit 0 B",
            f"6.0 MiB (6291456 bytes) {at('six', test)}", f"    {CALL}", f"    {CREATE}",
            f"4.0 MiB (4194304 bytes) {at('four first', test)}", f"    {CALL}", f"    {CREATE}",
            f"2.0 MiB (2097152 bytes) {at('helper', 'grow')}", f"    {CALL}", f"    {CREATE}",
            f"    {test} at leaky_session.py:{leak_line('through helper')}"])
        # Two allocations of one line are one site; three sites shown, the other two counted.
        test = "test_more_sites_than_shown"
        self.assertEqual(got[test], [
            "cumemaudit: leaked 30.0 MiB (31457280 bytes) in 6 allocations (6 unreleased references); limit 0 B",
            f"10.0 MiB (10485760 bytes) {at('ten', test)}", f"    {CALL}", f"    {CREATE}",
            f"8.0 MiB (8388608 bytes) {at('loop', test)}", f"    {CALL}", f"    {CREATE}",
            f"6.0 MiB (6291456 bytes) {at('six again', test)}", f"    {CALL}", f"    {CREATE}",
            "… 2 more sites (the report has them all)"])
        # No frame of the test file on the stack (a thread): the call leads, then the thread's own frames.
        where = threading.__file__
        self.assertEqual(got["test_leak_from_a_thread"], [
            "cumemaudit: leaked 2.0 MiB (2097152 bytes) in 1 allocation (1 unreleased reference); limit 0 B",
            f"2.0 MiB (2097152 bytes) by {CALL}",
            f"    {CREATE}",
            f"    Thread.run at {where}:{line_in(threading.Thread.run, 'self._target(')}",
            f"    Thread._bootstrap_inner at {where}:{line_in(threading.Thread._bootstrap_inner, 'self.run()')}",
            f"    Thread._bootstrap at {where}:{line_in(threading.Thread._bootstrap, 'self._bootstrap_inner()')}"])
        # Unfreed classic memory counts only where fail_on asks for it, with the leaked bytes, against one limit.
        self.assertEqual(got["test_unfreed_counts_when_asked"], [
            "cumemaudit: left 8.0 MiB (8388608 bytes) unfreed in 1 allocation; limit 0 B"])
        self.assertEqual(got["test_leaked_and_unfreed"], [
            "cumemaudit: leaked 2.0 MiB (2097152 bytes) in 1 allocation (1 unreleased reference) and left 2.0 MiB "
            "(2097152 bytes) unfreed in 1 allocation; limit 0 B",
            f"2.0 MiB (2097152 bytes) {at('beside unfreed', 'test_leaked_and_unfreed')}", f"    {CALL}", f"    {CREATE}"])
        self.assertEqual(got["test_misuse"], [
            "cumemaudit: 1 misuse event (calls the driver rejected; the report names them)"])
        # Limits written as sizes: "3.5 MiB" is 3670016 bytes; an int one byte short of 4 MiB fails 4 MiB.
        self.assertEqual(got["test_over_a_fraction"], [
            "cumemaudit: leaked 4.0 MiB (4194304 bytes) in 1 allocation (1 unreleased reference); "
            "limit 3.5 MiB (3670016 bytes)",
            f"4.0 MiB (4194304 bytes) {at('over', 'test_over_a_fraction')}", f"    {CALL}", f"    {CREATE}"])
        self.assertEqual(got["test_over_by_a_byte"], [
            "cumemaudit: leaked 4.0 MiB (4194304 bytes) in 1 allocation (1 unreleased reference); "
            "limit 4.0 MiB (4194303 bytes)",
            f"4.0 MiB (4194304 bytes) {at('by a byte', 'test_over_by_a_byte')}", f"    {CALL}", f"    {CREATE}"])
        self.assertEqual(list(got), failed)

    def test_without_python_frames_a_few_native_frames_and_the_count_of_the_rest(self):
        p = self.pytest("leaky_session.py", "-k", "test_one_site", options="python_frames=none")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        (report,) = glob.glob(os.path.join(self.dir, "reports", "latest", "cumemaudit.*.json"))
        with open(report) as f:
            (leak,) = json.load(f)["leaks"]
        frames = leak["site"]["frames"]
        self.assertEqual(leak["bytes"], 4 * MiB)
        self.assertGreater(len(frames), 4)
        shown = [f"    {f['symbol'] or '??'} " + (f"{f['file']}:{f['line']}" if f["file"]
                                                   else f"({os.path.basename(f['object'])})") for f in frames[:4]]
        self.assertEqual(failures(p.stdout)["test_one_site"], [
            "cumemaudit: leaked 4.0 MiB (4194304 bytes) in 1 allocation (1 unreleased reference); limit 0 B",
            "4.0 MiB (4194304 bytes) by cuMemCreate", *shown, f"    … {len(frames) - 4} more frames"])

    def test_the_session_default_limit_takes_a_size(self):
        p = self.pytest("leaky_session.py", "-k", "test_one_site or test_sites_largest_first",
                        "--cumemaudit-max-leaked-bytes", "4 MiB")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"\n=+ 1 failed, 1 passed, 13 deselected in ")
        self.assertEqual(failures(p.stdout)["test_sites_largest_first"][0],
                         "cumemaudit: leaked 12.0 MiB (12582912 bytes) in 3 allocations (3 unreleased references); "
                         "limit 4.0 MiB (4194304 bytes)")

    def test_xdist_workers_write_the_same_failure(self):
        p = self.pytest("leaky_session.py", "-k", "test_one_site", "-n", "2")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertEqual(failures(p.stdout)["test_one_site"], [
            "cumemaudit: leaked 4.0 MiB (4194304 bytes) in 1 allocation (1 unreleased reference); limit 0 B",
            f"4.0 MiB (4194304 bytes) at leaky_session.py:{leak_line('one')} in test_one_site",
            f"    {CALL}", f"    {CREATE}"])


class HeldSites(unittest.TestCase):
    def test_sites_come_whole_whatever_the_first_buffer(self):
        # cumemaudit_held_sites says the length it needs; accounting.held_sites asks again with that much.
        script = "\n".join([
            "import json", "from cumemaudit import accounting", "from cuda_ctypes import Driver, MiB",
            "d = Driver()", "m = accounting.leak_mark()", "d.create(4 * MiB)", "d.create(2 * MiB)",
            "whole = accounting.held_sites(m, 8)", "accounting._SITES_BYTES = 8",
            "print(json.dumps([whole, accounting.held_sites(m, 8), accounting.held_sites(m, 1)]))"])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(SOURCE_ROOT, "tools", "python"),
                                                           os.path.dirname(CUDA_CTYPES)]))
        env.pop("CUMEMAUDIT_OPTIONS", None)
        with tempfile.TemporaryDirectory() as out:
            p = subprocess.run([CLI, "run", "--sim", "--report-dir", out, "--fail-on", "none", "--",
                                "/usr/bin/python3", "-c", script], env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        whole, again, first = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(again, whole)
        total, sites = whole
        self.assertEqual((total, [s["bytes"] for s in sites]), (2, [4 * MiB, 2 * MiB]))
        create = line_of(CUDA_CTYPES, "self.cuda.cuMemCreate(")
        for s in sites:
            self.assertEqual(s["site"]["api"], "cuMemCreate")
            self.assertEqual(s["site"]["python_frames"][0], {"file": CUDA_CTYPES, "line": create,
                                                             "function": "Driver.create"})
        self.assertEqual(first, [2, sites[:1]])  # max_sites: the largest, and the count of all


NOT_A_SIZE = ("not a size: write a byte count or a number and one of B, KiB, MiB, GiB, TiB (powers of 1024), "
              "such as 4194304, '4MiB' or '1.5 GiB'; MB and GB are refused, as tools disagree on what they mean")
# Each bad marker in a file of its own (a collection error stops its file), and what the error says of it.
BAD_MARKERS = {
    "mb": ('max_leaked_bytes="4 MB"', "(max_leaked_bytes='4 MB'): " + NOT_A_SIZE),
    "mb_unspaced": ('max_leaked_bytes="4MB"', "(max_leaked_bytes='4MB'): " + NOT_A_SIZE),
    "words": ('max_leaked_bytes="lots"', "(max_leaked_bytes='lots'): " + NOT_A_SIZE),
    "negative": ("max_leaked_bytes=-1", "(max_leaked_bytes=-1): a negative number of bytes"),
    "float": ("max_leaked_bytes=1.5", "(max_leaked_bytes=1.5): a float; expected an int or a size string"),
    "bool": ("max_leaked_bytes=True", "(max_leaked_bytes=True): a bool; expected an int or a size string"),
    "warmups": ('warmups="2"', "(warmups='2'): expected a non-negative int"),
    "fail_on": ('fail_on="leak"', "(fail_on='leak'): expected a comma-separated mix of leaks, misuse, none, unfreed"),
    "positional": ('"4MiB"', "('4MiB',): arguments are named: max_leaked_bytes=, warmups=, fail_on="),
    "unknown": ("max_leaked=1", ": unknown argument(s) ['max_leaked']; known: max_leaked_bytes, warmups, fail_on"),
}


class BadInput(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        for name, (marker, _) in BAD_MARKERS.items():
            with open(os.path.join(self.dir, f"bad_{name}.py"), "w") as f:
                f.write(f"import pytest\n\n\n@pytest.mark.cumemaudit({marker})\ndef test_{name}():\n    pass\n")
        with open(os.path.join(self.dir, "good.py"), "w") as f:
            f.write("def test_good():\n    pass\n")

    def tearDown(self):
        self.tmp.cleanup()

    def pytest(self, *args):
        env = dict(os.environ, PYTHONPATH=os.path.join(SOURCE_ROOT, "tools", "python"))
        for k in ("CUMEMAUDIT_OPTIONS", "LD_PRELOAD", "CUMEMAUDIT_PYTEST_REEXEC", "PYTEST_ADDOPTS"):
            env.pop(k, None)
        cmd = ["/usr/bin/python3", "-m", "pytest", "-p", "no:cacheprovider", "-p", "cumemaudit.pytest_plugin",
               "--cumemaudit", "--cumemaudit-sim", "--cumemaudit-dir", os.path.join(self.dir, "reports"), *args]
        return subprocess.run(cmd, cwd=self.dir, env=env, capture_output=True, text=True, timeout=120)

    def files(self):
        return ["good.py", *sorted(f"bad_{n}.py" for n in BAD_MARKERS)]

    def check_collection_errors(self, p, exit_code, summary):
        self.assertEqual(p.returncode, exit_code, p.stdout + p.stderr)
        self.assertNotIn("INTERNALERROR", p.stdout + p.stderr)
        self.assertRegex(p.stdout, summary)
        for name, (_, said) in BAD_MARKERS.items():
            self.assertEqual(p.stdout.count(f"\nbad_{name}.py::test_{name}: @pytest.mark.cumemaudit{said}\n"), 1,
                             p.stdout)

    def test_bad_markers_are_collection_errors_naming_test_and_value(self):
        # pytest's exit for errors in collection (2), as for a bad parametrize; no test ran, nothing crashed.
        p = self.pytest(*self.files())
        self.check_collection_errors(p, 2, rf"Interrupted: {len(BAD_MARKERS)} errors during collection")
        self.assertRegex(p.stdout, rf"\n=+ {len(BAD_MARKERS)} errors in ")  # good.py's test did not run

    def test_bad_markers_under_xdist_too(self):
        # The workers collect; pytest-xdist reports their collection errors as errors of the run (exit 1)
        # and runs the tests of the other files.
        self.check_collection_errors(self.pytest("-n", "2", *self.files()), 1,
                                     rf"\n=+ 1 passed, {len(BAD_MARKERS)} errors in ")

    def test_bad_session_options_are_usage_errors(self):
        p = self.pytest("--cumemaudit-max-leaked-bytes", "4 MB", "good.py")
        self.assertEqual(p.returncode, 4, p.stdout + p.stderr)
        self.assertIn(f"ERROR: --cumemaudit-max-leaked-bytes='4 MB': {NOT_A_SIZE}\n", p.stderr)
        p = self.pytest("--cumemaudit-fail-on", "leak", "good.py")
        self.assertEqual(p.returncode, 4, p.stdout + p.stderr)
        self.assertIn("ERROR: --cumemaudit-fail-on='leak': expected a comma-separated mix of leaks, misuse, none, "
                      "unfreed\n", p.stderr)


# One table for both readers of a size: the plugin's (the shim's cumemaudit_parse_size) and the CLI's
# (`check --max-leaked-bytes`, which reads the options table's grammar). None: refused.
SIZES = [
    ("0", 0), ("4194304", 4194304), ("4194303", 4194303), ("7B", 7), ("7 B", 7), ("4KiB", 4096),
    ("4MiB", 4 * MiB), ("4 MiB", 4 * MiB), ("1.5GiB", 3 << 29), ("1.5 GiB", 3 << 29), ("3.5 MiB", 3670016),
    ("1TiB", 1 << 40), ("1e3", 1000),
    ("4MB", None), ("4 MB", None), ("4mib", None), ("4 mib", None), ("4KB", None), ("4GB", None), ("4  MiB", None),
    ("4 ", None), (" 4MiB", None), ("4MiB ", None), ("-1", None), ("-1MiB", None), ("nan", None), ("inf", None),
    ("", None), ("MiB", None), ("16777216TiB", None), ("+4MiB", None),
]


class OneGrammar(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # A report that leaked exactly 4 MiB: `check --max-leaked-bytes X` passes (0) when X reads as at least
        # 4194304 bytes, fails (1) below, and refuses (2) what is not a size.
        cls.tmp = tempfile.TemporaryDirectory()
        env = dict(os.environ, PYTHONPATH=os.path.dirname(CUDA_CTYPES))
        env.pop("CUMEMAUDIT_OPTIONS", None)
        made = subprocess.run([CLI, "run", "--sim", "--report-dir", cls.tmp.name, "--fail-on", "none", "--",
                               "/usr/bin/python3", "-c", "from cuda_ctypes import Driver, MiB; Driver().create(4 * MiB)"],
                              env=env, capture_output=True, text=True, timeout=60)
        assert made.returncode == 0, made.stderr
        (cls.report,) = glob.glob(os.path.join(cls.tmp.name, "cumemaudit.*.json"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_plugin_and_the_cli_read_sizes_alike(self):
        script = ("import json, sys\nfrom cumemaudit import sizes\n"
                  "print(json.dumps([sizes.parse(t) for t in json.loads(sys.argv[1])]))\n")
        env = dict(os.environ, PYTHONPATH=os.path.join(SOURCE_ROOT, "tools", "python"), LD_PRELOAD=SHIM)
        env.pop("CUMEMAUDIT_OPTIONS", None)
        p = subprocess.run(["/usr/bin/python3", "-c", script, json.dumps([t for t, _ in SIZES])], env=env,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(dict(zip([t for t, _ in SIZES], json.loads(p.stdout))), dict(SIZES))
        for text, value in SIZES:
            cli = subprocess.run([CLI, "check", "--max-leaked-bytes", text, self.report],
                                 capture_output=True, text=True, timeout=60)
            expected = 2 if value is None else 0 if value >= 4 * MiB else 1
            self.assertEqual(cli.returncode, expected, (text, cli.stdout, cli.stderr))
            if value is None:
                self.assertIn(f"--max-leaked-bytes: '{text}' is not a size", cli.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
