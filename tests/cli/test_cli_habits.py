#!/usr/bin/env python3
"""The command line's habits, the same in every command: "--" is never an option's value, every error
line starts with `cumemaudit <command>: `, metavars are upper-case words and durations carry their unit,
every command that reads reports takes a report file, a merged job.json or a directory of reports (diff
too), and html/trace name what they wrote when they chose the name."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

CLI = None  # path of the cumemaudit binary, from argv


def report(leaked_bytes=0, rank=0, line=42):
    leaks = []
    if leaked_bytes:
        leaks.append({"class": "unreachable", "bytes": leaked_bytes, "allocations": 1, "references": 1,
                      "handle_type": "fabric", "owner": "deepep",
                      "site": {"api": "cuMemCreate", "frames": [
                          {"pc": "0x401234", "object": "/bin/deepep", "symbol": "allocate_buffer",
                           "file": "deepep.cpp", "line": line}]}})
    return {"schema": "cumemaudit/report/v1",
            "process": {"pid": 7 + rank, "rank": rank, "world_size": 2, "host": "h", "argv": ["python"], "exit_code": 0},
            "driver": {"version": 13000, "simulated": True},
            "summary": {"leaked_bytes": leaked_bytes, "leaked_allocations": 1 if leaked_bytes else 0,
                        "leaked_references": 1 if leaked_bytes else 0, "misuse_events": 0, "unfreed_bytes": 0,
                        "peak_tracked_bytes": leaked_bytes, "intercepted_calls": 12},
            "leaks": leaks, "misuse": [], "owners": [], "steps": []}


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.shim = os.path.join(self.dir, "libcumemaudit.so")
        open(self.shim, "w").close()  # any file: the loader ignores it with a warning, the program still runs
        self.marker = os.path.join(self.dir, "started")

    def tearDown(self):
        self.tmp.cleanup()

    def cli(self, *args, cwd=None):
        env = {k: v for k, v in os.environ.items()
               if k not in ("CUMEMAUDIT_OPTIONS", "LD_PRELOAD", "LD_LIBRARY_PATH", "CUMEMAUDIT_SIM_DIR")}
        env["CUMEMAUDIT_SHIM"] = self.shim
        p = subprocess.run([CLI, *args], capture_output=True, text=True, env=env, timeout=60, cwd=cwd or self.dir)
        return p.returncode, p.stdout, p.stderr

    def touch_program(self):
        return ["sh", "-c", f"touch {self.marker}"]


class DoubleDash(Base):
    def test_run_flag_before_double_dash_needs_a_value(self):
        for args in (["--report-dir", "--"], ["--report-dir=--"], ["--stack-depth", "--"], ["--option", "--"]):
            flag = args[0].split("=")[0]
            rc, out, err = self.cli("run", *args, *self.touch_program())
            self.assertEqual((rc, out, err), (2, "", f"cumemaudit run: {flag} needs a value\n"), args)
            self.assertFalse(os.path.exists(self.marker), f"{args}: the program started")
        self.assertEqual(sorted(os.listdir(self.dir)), ["libcumemaudit.so"])  # no directory named "--"
        rc, _, err = self.cli("run", "--report-dir")
        self.assertEqual((rc, err), (2, "cumemaudit run: --report-dir needs a value\n"))

    def options_seen(self, *flags):
        rc, out, err = self.cli("run", *flags, "env")
        self.assertEqual(rc, 0, err)
        return dict(l.split("=", 1) for l in out.splitlines() if "=" in l)["CUMEMAUDIT_OPTIONS"]

    def test_a_switch_alone_means_1_and_leaves_double_dash_alone(self):
        self.assertEqual(self.options_seen("--metrics", "--"), "metrics=1")
        self.assertEqual(self.options_seen("--metrics", "0", "--"), "metrics=0")
        self.assertEqual(self.options_seen("--metrics=no", "--"), "metrics=no")
        self.assertEqual(self.options_seen("--metrics"), "metrics=1")  # `env` is the program, not a value

    def test_other_commands_never_take_double_dash_as_a_value(self):
        f = os.path.join(self.dir, "cumemaudit.h.7.json")
        with open(f, "w") as out:
            json.dump(report(), out)
        for args, flag in ((["check", "--junit", "--", f], "--junit"), (["html", "-o", "--", f], "-o"),
                           (["merge", f, "--output=--"], "--output"), (["snapshot", "--timeout"], "--timeout")):
            rc, out, err = self.cli(*args)
            self.assertEqual((rc, out, err), (2, "", f"cumemaudit {args[0]}: {flag} needs a value\n"), args)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "--")))


class Prefix(Base):
    def test_every_error_names_its_command(self):
        rc, _, err = self.cli("report", "--max-frames", "many", "x.json")
        self.assertEqual(rc, 2)
        self.assertTrue(err.startswith("cumemaudit report: --max-frames: "), err)
        self.assertTrue(err.endswith(" (cumemaudit report --help)\n"), err)
        rc, _, err = self.cli("run")
        self.assertEqual((rc, err), (2, "cumemaudit run: the program to run is missing: cumemaudit run [OPTIONS] [--] "
                                        "PROG [ARGS...] (cumemaudit run --help)\n"))
        rc, _, err = self.cli("merge", os.path.join(self.dir, "absent"))
        self.assertEqual(rc, 2)
        self.assertEqual(err.splitlines()[-1], "cumemaudit merge: no rank report could be read")
        rc, _, err = self.cli("diff", "a.json")
        self.assertEqual((rc, err), (2, "cumemaudit diff: takes two reports (diff A B: report files, merged jobs or "
                                        "directories of reports), or one with --steps N M\n"))


class Help(Base):
    def test_usage_metavars_and_units(self):
        _, out, _ = self.cli("run", "--help")
        self.assertIn("Usage: cumemaudit run [OPTIONS] [--] PROG [ARGS...]\n", out)
        self.assertRegex(out, r"--checkpoint-s SECONDS\s")
        self.assertIn("default 60 s]", out)
        self.assertRegex(out, r"--growth-alarm SIZE\s")
        self.assertRegex(out, r"--report-dir DIR\s")
        self.assertRegex(out, r"--metrics 0\|1\s")
        _, out, _ = self.cli("check", "--help")
        self.assertRegex(out, r"--junit FILE\s")
        self.assertRegex(out, r"--max-leaked-bytes SIZE\s")
        self.assertRegex(out, r"Usage: cumemaudit check \[OPTIONS\] PATH\.\.\.")
        _, out, _ = self.cli("snapshot", "--help")
        self.assertRegex(out, r"--timeout SECONDS\s")
        self.assertIn("(default 30 s)", out)
        _, out, _ = self.cli("run", "--help-options")
        self.assertIn("checkpoint_s (--checkpoint-s)\n", out)
        self.assertIn("; default: 60 s\n", out)


class SamePaths(Base):
    def ranks(self, name, leaked, line=42):
        d = os.path.join(self.dir, name)
        os.mkdir(d)
        for rank in (0, 1):
            with open(os.path.join(d, f"cumemaudit.h.{7 + rank}.r{rank}.json"), "w") as f:
                json.dump(report(leaked if rank == 1 else 0, rank, line), f)
        return d

    def test_diff_takes_directories_and_jobs(self):
        a, b = self.ranks("before", 1 << 20), self.ranks("after", 3 << 20, line=43)
        rc, out, err = self.cli("diff", a, b)
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.startswith(f"cumemaudit diff: {a} -> {b}\n"), out)
        self.assertRegex(out, r"cuMemCreate at deepep\.cpp:4[23] \(allocate_buffer\) \[deepep\]\s+1\.0 MiB\s+3\.0 MiB\s+\+2\.0 MiB")
        job = os.path.join(self.dir, "job.json")
        self.assertEqual(self.cli("merge", a, "-o", job)[0], 0)
        rc, out, err = self.cli("diff", job, b)
        self.assertEqual(rc, 0, err)
        self.assertRegex(out, r"leaked\s+1\.0 MiB\s+3\.0 MiB\s+\+2\.0 MiB")
        rc, out, err = self.cli("diff", "--steps", "1", "2", a)
        self.assertEqual((rc, out), (2, ""))
        self.assertEqual(err, f"cumemaudit diff: {a}: --steps compares two steps of one process report, and this is "
                              "a job (its ranks' steps are in `cumemaudit html`)\n")


if __name__ == "__main__":
    CLI = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
