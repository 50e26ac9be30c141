#!/usr/bin/env python3
"""cumemaudit's command line, run as a user would: exit codes and messages of `report` and `check` on
good, leaking, malformed, missing and truncated reports, and the environment `run` hands a program."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

CLI = None  # path of the cumemaudit binary, from argv


def report(leaked_bytes=0, leaked_allocations=0, leaked_references=0, misuse=0, unfreed=0):
    leaks = []
    if leaked_bytes:
        leaks.append({"class": "unreachable", "bytes": leaked_bytes, "allocations": leaked_allocations,
                      "references": leaked_references, "handle_type": "fabric", "owner": "deepep",
                      "site": {"api": "cuMemCreate", "frames": [
                          {"pc": "0x401234", "object": "/bin/deepep", "symbol": "allocate_buffer",
                           "file": "deepep.cpp", "line": 42}]}})
    return {"schema": "cumemaudit/report/v1",
            "process": {"pid": 7, "rank": 0, "world_size": 2, "host": "h", "argv": ["python"], "exit_code": 0},
            "driver": {"version": 13000, "simulated": True},
            "summary": {"leaked_bytes": leaked_bytes, "leaked_allocations": leaked_allocations,
                        "leaked_references": leaked_references, "misuse_events": misuse, "unfreed_bytes": unfreed,
                        "peak_tracked_bytes": leaked_bytes, "intercepted_calls": 12},
            "leaks": leaks, "misuse": [], "owners": [], "steps": []}


def run(*args, env=None):
    full_env = dict(os.environ)
    for k in ("CUMEMAUDIT_OPTIONS", "CUMEMAUDIT_SHIM", "CUMEMAUDIT_SIM_DIR", "LD_PRELOAD", "LD_LIBRARY_PATH"):
        full_env.pop(k, None)
    full_env.update(env or {})
    p = subprocess.run([CLI, *args], capture_output=True, text=True, env=full_env, timeout=60)
    return p.returncode, p.stdout, p.stderr


class ReportFiles(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, content):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(content if isinstance(content, str) else json.dumps(content))
        return path

    def test_report_prints_summary(self):
        good = self.write("cumemaudit.h.7.json", report(1 << 30, 1, 3))
        rc, out, err = run("report", good)
        self.assertEqual(rc, 0, err)
        self.assertIn("Leak of 1073741824 bytes (1.0 GiB) in 1 allocations (3 references) "
                      "[unreachable, fabric, deepep] taken by cuMemCreate at:", out)
        self.assertIn("#0 0x401234 in allocate_buffer deepep.cpp:42 (/bin/deepep+0x0)", out)
        self.assertTrue(out.endswith("SUMMARY: cumemaudit: 1073741824 bytes leaked in 1 allocations (3 references); "
                                     "0 misuse events; 0 bytes unfreed at exit\n"), out)

    def test_report_errors_exit_2_and_name_the_file(self):
        missing = os.path.join(self.dir, "absent.json")
        rc, out, err = run("report", missing)
        self.assertEqual(rc, 2)
        self.assertEqual(err, f"cumemaudit report: {missing}: cannot read: No such file or directory\n")
        junk = self.write("junk.json", "not json at all")
        rc, _, err = run("report", junk)
        self.assertEqual(rc, 2)
        self.assertTrue(err.startswith(f"cumemaudit report: {junk}: not JSON: "), err)

    def test_check_pass_and_fail(self):
        clean = self.write("cumemaudit.h.1.json", report())
        leaky = self.write("cumemaudit.h.2.json", report(4096, 1, 2, misuse=3, unfreed=10))
        rc, out, err = run("check", clean)
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out, f"PASS {clean}: SUMMARY: cumemaudit: 0 bytes leaked in 0 allocations (0 references); "
                              "0 misuse events; 0 bytes unfreed at exit\n")
        rc, out, _ = run("check", leaky)
        self.assertEqual(rc, 1)
        self.assertEqual(out, f"FAIL {leaky}: 4096 bytes leaked in 1 allocations (2 references); top site: 4.0 KiB [unreachable] cuMemCreate at deepep.cpp:42 (allocate_buffer)\n")
        rc, out, _ = run("check", "--fail-on", "misuse,unfreed", leaky)
        self.assertEqual(rc, 1)
        self.assertEqual(out, f"FAIL {leaky}: 10 bytes unfreed at exit; 3 misuse events\n")  # no unfreed row: no site
        self.assertEqual(run("check", "--fail-on", "none", leaky)[0], 0)
        self.assertEqual(run("check", "--max-leaked-bytes", "4096", leaky)[0], 0)
        rc, out, _ = run("check", "--max-leaked-bytes", "4095", leaky)
        self.assertEqual(rc, 1)
        self.assertEqual(out, f"FAIL {leaky}: 4096 bytes leaked in 1 allocations, more than the allowed 4095 (4.0 KiB)"
                              "; top site: 4.0 KiB [unreachable] cuMemCreate at deepep.cpp:42 (allocate_buffer)\n")
        # A directory means every cumemaudit.*.json in it; other files there are ignored.
        self.write("notes.json", "{}")
        rc, out, _ = run("check", self.dir)
        self.assertEqual(rc, 1)
        self.assertEqual(out.splitlines(), [f"PASS {clean}: SUMMARY: cumemaudit: 0 bytes leaked in 0 allocations "
                                            "(0 references); 0 misuse events; 0 bytes unfreed at exit",
                                            f"FAIL {leaky}: 4096 bytes leaked in 1 allocations (2 references)"
                                            "; top site: 4.0 KiB [unreachable] cuMemCreate at deepep.cpp:42 (allocate_buffer)"])

    def test_check_unusable_reports_exit_2(self):
        clean = self.write("cumemaudit.h.1.json", report())
        text = json.dumps(report(4096, 1, 1))
        truncated = self.write("truncated.json", text[: len(text) // 2])
        rc, out, err = run("check", clean, truncated)
        self.assertEqual(rc, 2)
        self.assertIn(f"PASS {clean}", out)
        self.assertTrue(err.startswith(f"cumemaudit check: {truncated}: truncated JSON (ends early): "), err)
        bad = report()
        del bad["summary"]["leaked_bytes"]
        malformed = self.write("malformed.json", bad)
        rc, _, err = run("check", malformed)
        self.assertEqual((rc, err), (2, f"cumemaudit check: {malformed}: missing field 'summary.leaked_bytes'\n"))
        wrong = dict(report(), schema="someone/else")
        wrong_schema = self.write("wrong.json", wrong)
        rc, _, err = run("check", wrong_schema)
        self.assertEqual((rc, err), (2, f"cumemaudit check: {wrong_schema}: schema is \"someone/else\", "
                                        "expected \"cumemaudit/report/v1\"\n"))
        missing = os.path.join(self.dir, "absent.json")
        self.assertEqual(run("check", missing)[0], 2)
        empty_dir = os.path.join(self.dir, "empty")
        os.mkdir(empty_dir)
        rc, _, err = run("check", empty_dir)
        self.assertEqual((rc, err), (2, f"cumemaudit check: {empty_dir}: no cumemaudit.*.json reports in this directory\n"))
        rc, _, err = run("check", "--fail-on", "leak", clean)
        self.assertEqual(rc, 2)
        self.assertIn("unknown word 'leak'", err)


class SameSite(unittest.TestCase):
    """merge and diff tell sites apart by one rule: function and file:line of every frame, never the pc."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def reports(self, second_frames):
        a, b = report(1 << 20, 1, 1), report(3 << 20, 1, 1)
        b["process"]["rank"] = 1
        b["leaks"][0]["site"]["frames"] = second_frames
        paths = []
        for name, r in (("a.json", a), ("b.json", b)):
            paths.append(os.path.join(self.tmp.name, name))
            with open(paths[-1], "w") as f:
                json.dump(r, f)
        return paths

    def sites(self, paths, *diff_flags):
        job = os.path.join(self.tmp.name, "job.json")
        rc, _, err = run("merge", *paths, "-o", job)
        self.assertEqual(rc, 0, err)
        merged = [(s["bytes"], s["ranks"]) for s in json.load(open(job))["sites"]]
        rc, out, err = run("diff", *diff_flags, *paths)
        self.assertEqual(rc, 0, err)
        table = out.split("leaked bytes by site", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
        return merged, table

    top = {"pc": "0x401234", "object": "/bin/deepep", "symbol": "allocate_buffer", "file": "deepep.cpp", "line": 42}

    def test_other_addresses_are_the_same_site(self):
        merged, table = self.sites(self.reports([dict(self.top, pc="0x7f0000401234", offset="0x1300")]))
        self.assertEqual(merged, [(4 << 20, 2)])
        self.assertEqual(len(table), 1, table)
        self.assertIn("+2.0 MiB", table[0])

    def test_another_caller_is_another_site(self):
        caller = {"pc": "0x402000", "object": "/bin/deepep", "symbol": "main", "file": "main.cpp", "line": 8}
        merged, table = self.sites(self.reports([self.top, caller]))
        self.assertEqual(sorted(merged), [(1 << 20, 1), (3 << 20, 1)])
        self.assertEqual(len(table), 2, table)
        # Both read "deepep.cpp:42 (allocate_buffer)" at first: the lines grow by the caller until they part.
        self.assertIn("cuMemCreate at deepep.cpp:42 (allocate_buffer) < main.cpp:8 (main) [deepep]", "".join(table))

    def reports_from_python(self, first_lines, second_lines):
        """Both ranks reach the driver through the same ctypes frame; only their Python frames differ."""
        ffi = {"pc": "0x401000", "object": "/usr/lib/libffi.so.8", "offset": "0x1000", "symbol": "ffi_call",
               "file": "", "line": 0}
        paths = self.reports([ffi])
        for path, lines in zip(paths, (first_lines, second_lines)):
            with open(path) as f:
                r = json.load(f)
            r["leaks"][0]["site"]["frames"] = [ffi]
            r["leaks"][0]["site"]["python_frames"] = [
                {"file": "/w/train.py", "line": line, "function": f"f{i}"} for i, line in enumerate(lines)]
            with open(path, "w") as f:
                json.dump(r, f)
        return paths

    def test_python_frames_are_part_of_the_site(self):
        merged, table = self.sites(self.reports_from_python([42, 7], [42, 7]))
        self.assertEqual(merged, [(4 << 20, 2)])
        self.assertEqual(len(table), 1, table)
        merged, table = self.sites(self.reports_from_python([42, 7], [42, 9]), "--match-lines")  # called from another line
        self.assertEqual(sorted(merged), [(1 << 20, 1), (3 << 20, 1)])
        self.assertEqual(len(table), 2, table)
        self.assertIn("cuMemCreate at train.py:42 (f0) < train.py:9 (f1) [deepep]", "".join(table))
        # Without --match-lines, diff takes a moved line for the same site (an edit above it, another commit).
        _, table = self.sites(self.reports_from_python([42, 7], [42, 9]))
        self.assertEqual(len(table), 1, table)
        self.assertIn("+2.0 MiB", table[0])


class Arguments(unittest.TestCase):
    def test_help_version_and_usage_errors(self):
        for args in (["--help"], ["run", "--help"], ["report", "--help"], ["check", "--help"]):
            rc, out, _ = run(*args)
            self.assertEqual(rc, 0, args)
            self.assertIn("Usage:", out)
        rc, out, _ = run("--version")
        self.assertEqual((rc, out.strip().split()[0]), (0, "cumemaudit"))
        for args in ([], ["frobnicate"], ["check"], ["report"], ["run"], ["check", "--max-leaked-bytes", "x", "f"],
                     ["run", "--exitcode", "300", "--", "true"], ["run", "--fail-on", "sometimes", "--", "true"],
                     ["run", "--option", "novalue", "--", "true"], ["run", "--option", "bogus=1", "--", "true"],
                     ["run", "--stack-depth", "256", "--", "true"], ["run", "--option", "growth_alarm=inf", "--", "true"]):
            rc, _, err = run(*args)
            self.assertEqual(rc, 2, args)
            self.assertTrue(err.strip(), args)


    def test_misspelt_names_get_the_nearest_one(self):
        rc, out, err = run("chek", "audit/")
        self.assertEqual((rc, out), (2, ""))
        self.assertTrue(err.startswith("cumemaudit: unknown command 'chek' (did you mean check?); commands: run, "), err)
        rc, _, err = run("run", "--report_dir", "x", "--", "true")
        self.assertEqual((rc, err), (2, "cumemaudit run: unknown flag '--report_dir' (did you mean --report-dir?) "
                                        "(cumemaudit run --help)\n"))
        rc, _, err = run("run", "--sim", "--option", "reprot_dir=x", "--", "true")
        self.assertEqual(rc, 2)
        self.assertIn("unknown option 'reprot_dir' (did you mean report_dir?)", err)
        # Nothing near enough: no guess.
        rc, _, err = run("frobnicate")
        self.assertEqual(rc, 2)
        self.assertNotIn("did you mean", err)
        # The program's own flags after -- are the program's.
        with tempfile.TemporaryDirectory() as tmp:
            rc, _, err = run("run", "--sim", "--report-dir", os.path.join(tmp, "r"), "--", "true", "--report_dir")
        self.assertEqual(rc, 0, err)

    def test_help_options_lists_the_table(self):
        rc, out, _ = run("run", "--help-options")
        self.assertEqual(rc, 0)
        self.assertIn("stack_depth (--stack-depth)\n", out)
        self.assertIn("    value: an integer from 1 to 64; default: 1\n", out)
        self.assertIn("    value: audit or enforce; default: audit\n", out)
        rc, _, err = run("run", "--option", "stack_dpeth=4", "--", "true")
        self.assertEqual(rc, 2)
        self.assertIn("cumemaudit run: --option stack_dpeth=4: unknown option 'stack_dpeth' (did you mean stack_depth?) (known: report_dir, ", err)


class Run(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.shim = os.path.join(self.tmp.name, "libcumemaudit.so")
        open(self.shim, "w").close()  # any file: the loader ignores it with a warning, `env` still runs
        self.sim = os.path.join(self.tmp.name, "sim")
        os.mkdir(self.sim)
        open(os.path.join(self.sim, "libcuda.so.1"), "w").close()

    def tearDown(self):
        self.tmp.cleanup()

    def env_of(self, *args, env=None):
        base = {"CUMEMAUDIT_SHIM": self.shim, "CUMEMAUDIT_SIM_DIR": self.sim}
        base.update(env or {})
        rc, out, err = run("run", *args, "--", "env", env=base)
        self.assertEqual(rc, 0, err)
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def test_environment(self):
        e = self.env_of("--sim", "--report-dir", "reports", "--fail-on", "leaks,misuse", "--exitcode", "9",
                        "--stack-depth", "16", "--option", "checkpoint_s=5", "--option", "log_level=info",
                        env={"CUMEMAUDIT_OPTIONS": "log_level=debug:deepbind=keep", "LD_PRELOAD": "/other.so",
                             "LD_LIBRARY_PATH": "/opt/lib"})
        self.assertEqual(e["LD_PRELOAD"], f"{self.shim}:/other.so")
        self.assertEqual(e["LD_LIBRARY_PATH"], f"{self.sim}:/opt/lib")
        reports = os.path.join(os.getcwd(), "reports")
        # The user's options stay as written; the flags follow them, and the shim lets the last of a key win.
        self.assertEqual(e["CUMEMAUDIT_OPTIONS"], f"log_level=debug:deepbind=keep:checkpoint_s=5:log_level=info:"
                                                  f"report_dir={reports}:fail_on=leaks,misuse:exitcode=9:stack_depth=16")

    def test_cupti_backend_loads_the_shim_as_injection_whatever_sets_it(self):
        for args, env in ((["--backend", "cupti"], {}), (["--option", "backend=both"], {}),
                          ([], {"CUMEMAUDIT_OPTIONS": "backend=cupti"})):
            self.assertEqual(self.env_of(*args, env=env).get("CUDA_INJECTION64_PATH"), self.shim, args or env)
        self.assertNotIn("CUDA_INJECTION64_PATH", self.env_of("--backend", "preload"))

    def test_without_sim_the_library_path_is_left_alone(self):
        e = self.env_of(env={"LD_LIBRARY_PATH": "/opt/lib"})
        self.assertEqual(e["LD_PRELOAD"], self.shim)
        self.assertEqual(e["LD_LIBRARY_PATH"], "/opt/lib")
        self.assertNotIn("CUMEMAUDIT_OPTIONS", {k: v for k, v in e.items() if v})

    def test_program_arguments_reach_the_program_untouched(self):
        rc, out, _ = run("run", "printf", "[%s]", "-c", "--sim", "--", env={"CUMEMAUDIT_SHIM": self.shim})
        self.assertEqual((rc, out), (0, "[-c][--sim][--]"))

    def test_exit_codes_are_the_programs(self):
        rc, _, _ = run("run", "--", "sh", "-c", "exit 7", env={"CUMEMAUDIT_SHIM": self.shim})
        self.assertEqual(rc, 7)
        rc, _, _ = run("run", "--", "sh", "-c", "kill -TERM $$", env={"CUMEMAUDIT_SHIM": self.shim})
        self.assertEqual(rc, -15)  # killed by the signal itself: run exec'ed the program

    def test_missing_program_shim_or_sim(self):
        rc, _, err = run("run", "--", "no-such-program-xyz", env={"CUMEMAUDIT_SHIM": self.shim})
        self.assertEqual((rc, err), (127, "cumemaudit run: no-such-program-xyz: command not found\n"))
        rc, _, err = run("run", "--", "true", env={"CUMEMAUDIT_SHIM": "/nonexistent/libcumemaudit.so"})
        self.assertEqual(rc, 2)
        self.assertIn("cannot find libcumemaudit.so", err)
        self.assertIn("CUMEMAUDIT_SHIM=/nonexistent/libcumemaudit.so", err)
        rc, _, err = run("run", "--sim", "--", "true",
                         env={"CUMEMAUDIT_SHIM": self.shim, "CUMEMAUDIT_SIM_DIR": self.tmp.name})
        self.assertEqual(rc, 2)
        self.assertIn("cannot find the simulated driver", err)


if __name__ == "__main__":
    CLI = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
