#!/usr/bin/python3
"""`cumemaudit check` in CI, run as a CI job runs it: the FAIL line names the top leak site (its Python line
first), sizes with units, JUnit XML read back with xml.etree, and a baseline of known sites. One test runs
a real Python ctypes program on the simulated driver; the others read reports written here.
Arguments: the cumemaudit binary, then the directory of tests/pyframes (the real program)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

CLI = None     # path of the cumemaudit binary, from argv
PYFRAMES = None  # tests/pyframes: leak_ctypes.py and driver.py
MiB = 1 << 20

LIBFFI = {"pc": "0x7f0000006f7a", "object": "/lib/x86_64-linux-gnu/libffi.so.8", "offset": "0x6f7a", "symbol": "",
          "file": "", "line": 0}
CUDART = {"pc": "0x7f0000010000", "object": "/usr/local/cuda/lib64/libcudart.so.13", "offset": "0x10000",
          "symbol": "cudaMalloc", "file": "", "line": 0}


def frame(symbol, file, line, pc="0x401234", obj="/bin/app"):
    return {"pc": pc, "object": obj, "symbol": symbol, "file": file, "line": line}


def py(file, line, function):
    return {"file": file, "line": line, "function": function}


def row(nbytes, frames, python_frames=(), cls="unreachable", api="cuMemCreate", allocations=1):
    site = {"api": api, "frames": list(frames)}
    if python_frames:
        site["python_frames"] = list(python_frames)
    return {"class": cls, "bytes": nbytes, "allocations": allocations, "references": allocations,
            "handle_type": "none", "owner": "app", "site": site}


def report(rows, rank=-1, world_size=-1, misuse=0):
    leaked = [r for r in rows if r["class"] in ("unreachable", "open-export")]
    unfreed = [r for r in rows if r["class"] == "unfreed"]
    return {"schema": "cumemaudit/report/v1",
            "process": {"pid": 7, "rank": rank, "world_size": world_size, "host": "h", "argv": ["app"], "exit_code": 0},
            "driver": {"version": 13000, "simulated": True},
            "summary": {"leaked_bytes": sum(r["bytes"] for r in leaked),
                        "leaked_allocations": sum(r["allocations"] for r in leaked),
                        "leaked_references": sum(r["references"] for r in leaked), "misuse_events": misuse,
                        "unfreed_bytes": sum(r["bytes"] for r in unfreed), "peak_tracked_bytes": 0,
                        "intercepted_calls": 12},
            "leaks": rows, "misuse": [], "owners": [], "steps": []}


def summary(rep):
    s = rep["summary"]
    return (f"SUMMARY: cumemaudit: {s['leaked_bytes']} bytes leaked in {s['leaked_allocations']} allocations "
            f"({s['leaked_references']} references); {s['misuse_events']} misuse events; {s['unfreed_bytes']} bytes "
            "unfreed at exit")


def run(*args, env=None, cwd=None):
    full_env = {k: v for k, v in os.environ.items() if k not in ("CUMEMAUDIT_OPTIONS", "LD_PRELOAD")}
    full_env.update(env or {})
    # Report paths are bytes: one that is not UTF-8 comes back as it went in.
    p = subprocess.run([CLI, *args], capture_output=True, encoding="utf-8", errors="surrogateescape", env=full_env,
                       timeout=60, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def line_of(path, marker):
    with open(path) as f:
        hits = [i for i, text in enumerate(f, 1) if marker in text]
    assert len(hits) == 1, (marker, path, hits)
    return hits[0]


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, content, directory=None):
        path = os.path.join(directory or self.dir, name)
        with open(path, "w") as f:
            f.write(content if isinstance(content, str) else json.dumps(content))
        return path


# A Python program's leak: the Python frames name the program, the native frames are libffi's.
TRAIN = "/w/train.py"
PY_LEAK = row(3 * MiB, [LIBFFI], [py(TRAIN, 42, "Model.step"), py(TRAIN, 90, "main")])
NATIVE_LEAK = row(4096, [frame("allocate_buffer", "deepep.cpp", 42), frame("main", "main.cpp", 8, pc="0x402000")])


class FailLine(Base):
    def test_names_the_largest_row_with_its_python_line(self):
        path = self.write("cumemaudit.h.1.json", report([NATIVE_LEAK, PY_LEAK]))
        rc, out, err = run("check", path)
        self.assertEqual((rc, err), (1, ""))
        self.assertEqual(out, f"FAIL {path}: 3149824 bytes leaked in 2 allocations (2 references); "
                              "top site: 3.0 MiB [unreachable] cuMemCreate at train.py:42 (Model.step)\n")

    def test_program_frame_past_cudart_and_a_c_extension_under_python(self):
        via_cudart = row(MiB, [CUDART, frame("Trainer::init", "trainer.cpp", 17)], api="cuMemAlloc")
        path = self.write("cumemaudit.h.2.json", report([via_cudart]))
        self.assertEqual(run("check", path)[1], f"FAIL {path}: 1048576 bytes leaked in 1 allocations (1 references); "
                                                "top site: 1.0 MiB [unreachable] cuMemAlloc at trainer.cpp:17 "
                                                "(Trainer::init)\n")
        cext = row(2 * MiB, [frame("grow", "cext.c", 30, obj="/w/cext.cpython-311-x86_64-linux-gnu.so"), LIBFFI],
                   [py("/w/leak.py", 5, "main")])
        path = self.write("cumemaudit.h.3.json", report([cext]))
        self.assertEqual(run("check", path)[1], f"FAIL {path}: 2097152 bytes leaked in 1 allocations (1 references); "
                                                "top site: 2.0 MiB [unreachable] cuMemCreate at leak.py:5 (main) "
                                                "via cext.c:30 (grow)\n")

    def test_unfreed_rows_name_a_site_only_when_they_fail(self):
        rows = [NATIVE_LEAK, row(8 * MiB, [frame("workspace", "ws.cpp", 3)], cls="unfreed", api="cuMemAlloc")]
        path = self.write("cumemaudit.h.4.json", report(rows))
        self.assertEqual(run("check", path)[1], f"FAIL {path}: 4096 bytes leaked in 1 allocations (1 references); "
                                                "top site: 4.0 KiB [unreachable] cuMemCreate at deepep.cpp:42 "
                                                "(allocate_buffer)\n")
        self.assertEqual(run("check", "--fail-on", "leaks,unfreed", path)[1],
                         f"FAIL {path}: 4096 bytes leaked in 1 allocations (1 references); 8388608 bytes unfreed at "
                         "exit; top site: 8.0 MiB [unfreed] cuMemAlloc at ws.cpp:3 (workspace)\n")

    def test_memory_enforce_reclaimed_is_a_failing_row(self):
        rep = report([NATIVE_LEAK])
        rep["reclaimed"] = [{"bytes": 6 * MiB, "allocations": 3, "references": 3,
                             "site": {"api": "cuMemCreate", "frames": [frame("grow_pool", "pool.cpp", 88)]}}]
        rep["summary"].update(reclaimed_bytes=6 * MiB, reclaimed_allocations=3, reclaimed_references=3)
        path = self.write("cumemaudit.h.5.json", rep)
        self.assertEqual(run("check", path)[1], f"FAIL {path}: 4096 bytes leaked in 1 allocations (1 references); "
                                                "6291456 bytes reclaimed by mode=enforce in 3 allocations (3 references "
                                                "the program never released); top site: 6.0 MiB [reclaimed] cuMemCreate "
                                                "at pool.cpp:88 (grow_pool)\n")


class Sizes(Base):
    def test_units_everywhere_bytes_are_taken(self):
        path = self.write("cumemaudit.h.1.json", report([row(5 * MiB, [frame("f", "f.cpp", 1)])]))
        for size in ("500MiB", "5 MiB", "1.5GiB", "5242880"):
            rc, out, err = run("check", "--max-leaked-bytes", size, path)
            self.assertEqual((rc, err), (0, ""), size)
            self.assertTrue(out.startswith(f"PASS {path}: "), out)
        rc, out, _ = run("check", "--max-leaked-bytes", "4 MiB", path)
        self.assertEqual((rc, out), (1, f"FAIL {path}: 5242880 bytes leaked in 1 allocations, more than the allowed "
                                        "4194304 (4.0 MiB); top site: 5.0 MiB [unreachable] cuMemCreate at f.cpp:1 (f)\n"))
        self.assertEqual(run("check", "--max-leaked-bytes", "5242879", path)[0], 1)

    def test_garbage_is_refused_naming_flag_and_value(self):
        path = self.write("cumemaudit.h.1.json", report([]))
        # MB is refused by the one size grammar (the options table's): tools disagree on what it means.
        for size in ("lots", "-1", "5x", "", "4MB", "1e30", "inf", "4 mib"):
            rc, out, err = run("check", "--max-leaked-bytes", size, path)
            self.assertEqual((rc, out, err), (2, "", f"cumemaudit check: --max-leaked-bytes: '{size}' is not a size such as "
                                                     "4096, 500MiB or 1.5GiB\n"), size)
        for tolerance in ("ten", "-5%", "%", "5x"):
            rc, out, err = run("check", "--baseline", path, "--tolerance", tolerance, path)
            self.assertEqual((rc, out, err), (2, "", f"cumemaudit check: --tolerance: '{tolerance}' is neither a percentage "
                                                     "(such as 10%) nor a size (such as 1MiB)\n"), tolerance)
        rc, out, err = run("check", "--tolerance", "5%", path)
        self.assertEqual((rc, out, err), (2, "", "cumemaudit check: --tolerance requires --baseline (cumemaudit check --help)\n"))


class Junit(Base):
    def parse(self, path):
        root = ET.parse(path).getroot()
        self.assertEqual(root.tag, "testsuites")
        suites = root.findall("testsuite")
        self.assertEqual(len(suites), 1)
        return root, suites[0]

    def test_one_case_per_report_with_failures_errors_and_hostile_names(self):
        reports = os.path.join(self.dir, "reports")
        os.mkdir(reports)
        clean = self.write("cumemaudit.h.1.json", report([], rank=0, world_size=2), reports)
        hostile_py = "/w/<tr&in>\x01\"'\ufffe.py"  # U+FFFE: well-formed UTF-8 that XML forbids
        leaky = self.write("cumemaudit.h.2.json", report([NATIVE_LEAK, row(3 * MiB, [LIBFFI], [py(hostile_py, 7, "f")])],
                                                          rank=1, world_size=2), reports)
        hostile = self.write("cumemaudit.<x>&\"'\x1b]0;\n\x01\udcff.json", report([NATIVE_LEAK]), reports)
        broken = self.write("cumemaudit.h.9.json", "{\"schema\": ", reports)
        xml_path = os.path.join(self.dir, "junit.xml")
        self.write("junit.xml", "an old file, replaced whole")
        rc, out, err = run("check", "--junit", xml_path, reports)
        self.assertEqual(rc, 2, err)  # an unusable report wins over failures
        self.assertEqual(sorted(os.listdir(self.dir)), ["junit.xml", "reports"])  # no temporary left beside it
        root, suite = self.parse(xml_path)
        for node in (root, suite):
            self.assertEqual((node.get("name"), node.get("tests"), node.get("failures"), node.get("errors")),
                             ("cumemaudit check", "4", "2", "1"))
        cases = suite.findall("testcase")
        # Files in the order check reads them (sorted); control bytes and bytes that are not UTF-8 shown as \xNN.
        shown_hostile = os.path.join(reports, "cumemaudit.<x>&\"'\\x1b]0;\n\\x01\\xff.json")
        self.assertEqual([c.get("name") for c in cases],
                         [shown_hostile, f"{clean} (rank 0 of 2)", f"{leaky} (rank 1 of 2)", broken])
        self.assertEqual({c.get("classname") for c in cases}, {"cumemaudit check"})
        self.assertEqual([len(list(c)) for c in cases], [1, 0, 1, 1])

        failure = cases[2].find("failure")
        self.assertEqual(failure.get("type"), "gate")
        shown_py = "<tr&in>\\x01\"'\\xef\\xbf\\xbe.py"  # the basename, as every one-line view names a file
        self.assertEqual(failure.get("message"), "3149824 bytes leaked in 2 allocations (2 references); top site: "
                                                 f"3.0 MiB [unreachable] cuMemCreate at {shown_py}:7 (f)")
        self.assertEqual(failure.text.splitlines(), [
            f"3145728 bytes in 1 allocations: 3.0 MiB [unreachable] cuMemCreate at {shown_py}:7 (f)",
            "4096 bytes in 1 allocations: 4.0 KiB [unreachable] cuMemCreate at deepep.cpp:42 (allocate_buffer)",
            "SUMMARY: cumemaudit: 3149824 bytes leaked in 2 allocations (2 references); 0 misuse events; 0 bytes "
            "unfreed at exit"])
        self.assertEqual(cases[0].find("failure").get("message"),
                         "4096 bytes leaked in 1 allocations (1 references); top site: 4.0 KiB [unreachable] "
                         "cuMemCreate at deepep.cpp:42 (allocate_buffer)")
        error = cases[3].find("error")
        self.assertEqual(error.get("type"), "unusable report")
        self.assertTrue(error.get("message").startswith(f"{broken}: truncated JSON (ends early): "), error.get("message"))
        self.assertIn(f"FAIL {leaky}: ", out)

    def test_all_pass_and_an_unwritable_file(self):
        clean = self.write("cumemaudit.h.1.json", report([]))
        xml_path = os.path.join(self.dir, "junit.xml")
        self.assertEqual(run("check", "--junit", xml_path, clean)[0], 0)
        root, suite = self.parse(xml_path)
        self.assertEqual((suite.get("tests"), suite.get("failures"), suite.get("errors")), ("1", "0", "0"))
        self.assertEqual([(c.get("name"), len(list(c))) for c in suite.findall("testcase")], [(clean, 0)])
        missing_dir = os.path.join(self.dir, "no", "junit.xml")
        rc, out, err = run("check", "--junit", missing_dir, clean)
        self.assertEqual((rc, err), (2, f"cumemaudit check: cannot write {missing_dir}: No such file or directory\n"))
        self.assertEqual(out, f"PASS {clean}: {summary(report([]))}\n")


SITE_A = [frame("alloc_a", "a.cpp", 10)]
SITE_B = [frame("alloc_b", "b.cpp", 7)]


class Baseline(Base):
    def check(self, baseline_rows, rows, *flags):
        old = self.write("old.json", report(baseline_rows))
        new = self.write("cumemaudit.h.2.json", report(rows))
        rc, out, err = run("check", "--baseline", old, *flags, new)
        return rc, out.replace(new, "NEW"), err

    def test_known_sites_pass_new_and_grown_ones_fail(self):
        rc, out, err = self.check([row(MiB, SITE_A)], [row(MiB, SITE_A), row(2 * MiB, SITE_B)])
        self.assertEqual((rc, err), (1, ""))
        self.assertEqual(out.splitlines(), [
            "FAIL NEW: 1 leak sites not in the baseline; top site: 2.0 MiB [unreachable] cuMemCreate at b.cpp:7 (alloc_b)",
            "  new site: 2.0 MiB [unreachable] cuMemCreate at b.cpp:7 (alloc_b)"])
        rc, out, _ = self.check([row(MiB, SITE_A)], [row(3 * MiB, SITE_A)])
        self.assertEqual((rc, out.splitlines()), (1, [
            "FAIL NEW: 1 leak sites grew beyond it (tolerance 10%); top site: 3.0 MiB [unreachable] cuMemCreate at "
            "a.cpp:10 (alloc_a)",
            "  grew: 3.0 MiB [unreachable] cuMemCreate at a.cpp:10 (alloc_a), +2.0 MiB over the baseline's 1.0 MiB"]))
        # Within the default tolerance (a tenth), at another address (ASLR): the same site, known.
        moved = [dict(SITE_A[0], pc="0x7f0000401234")]
        grown = MiB + MiB // 10
        rc, out, _ = self.check([row(MiB, SITE_A)], [row(grown, moved)])
        self.assertEqual((rc, out), (0, f"PASS NEW: {summary(report([row(grown, moved)]))} (1 leak sites within the "
                                        "baseline)\n"))
        self.assertEqual(self.check([row(MiB, SITE_A)], [row(grown + 1, moved)])[0], 1)

    def test_tolerance_as_size_or_percentage(self):
        base, now = [row(MiB, SITE_A)], [row(MiB + 1, SITE_A)]
        self.assertEqual(self.check(base, now, "--tolerance", "0")[1].splitlines()[0],
                         "FAIL NEW: 1 leak sites grew beyond it (tolerance 0 B); top site: 1.0 MiB [unreachable] "
                         "cuMemCreate at a.cpp:10 (alloc_a)")
        self.assertEqual(self.check(base, [row(3 * MiB, SITE_A)], "--tolerance", "2 MiB")[0], 0)
        self.assertEqual(self.check(base, [row(3 * MiB + 1, SITE_A)], "--tolerance", "2MiB")[0], 1)
        self.assertEqual(self.check(base, [row(3 * MiB, SITE_A)], "--tolerance", "200%")[0], 0)
        rc, out, _ = self.check(base, [row(3 * MiB + 1, SITE_A)], "--tolerance", "200%")
        self.assertIn("grew beyond it (tolerance 200%)", out)

    def test_a_directory_of_baselines_and_misuse_still_gated(self):
        old = os.path.join(self.dir, "old")
        os.mkdir(old)
        self.write("cumemaudit.h.1.json", report([row(MiB, SITE_A)], rank=0, world_size=2), old)
        self.write("cumemaudit.h.2.json", report([row(4 * MiB, SITE_B)], rank=1, world_size=2), old)
        new = self.write("cumemaudit.h.3.json", report([row(4 * MiB, SITE_B), row(MiB, SITE_A)], misuse=2))
        rc, out, _ = run("check", "--baseline", old, new)
        self.assertEqual(rc, 0, out)
        rc, out, _ = run("check", "--baseline", old, "--fail-on", "leaks,misuse", new)
        self.assertEqual((rc, out), (1, f"FAIL {new}: 2 misuse events\n"))

    def test_unusable_baselines_exit_2(self):
        new = self.write("cumemaudit.h.2.json", report([row(MiB, SITE_A)]))
        missing = os.path.join(self.dir, "absent.json")
        self.assertEqual(run("check", "--baseline", missing, new),
                         (2, "", f"cumemaudit check: --baseline: {missing}: cannot read: No such file or directory\n"))
        bad = report([])
        del bad["summary"]["leaked_bytes"]
        malformed = self.write("malformed.json", bad)
        self.assertEqual(run("check", "--baseline", malformed, new),
                         (2, "", f"cumemaudit check: --baseline: {malformed}: missing field 'summary.leaked_bytes'\n"))
        empty = os.path.join(self.dir, "empty")
        os.mkdir(empty)
        self.assertEqual(run("check", "--baseline", empty, new),
                         (2, "", f"cumemaudit check: --baseline {empty}: no cumemaudit.*.json reports in this directory\n"))


class MergedJob(Base):
    def test_a_job_names_its_top_site_and_serves_as_baseline(self):
        ranks = os.path.join(self.dir, "ranks")
        os.mkdir(ranks)
        self.write("cumemaudit.h.1.r0.json", report([row(MiB, SITE_A)], rank=0, world_size=2), ranks)
        self.write("cumemaudit.h.2.r1.json", report([row(MiB, SITE_A), row(2 * MiB, SITE_B)], rank=1, world_size=2),
                   ranks)
        job = os.path.join(self.dir, "job.json")
        rc, _, err = run("merge", ranks, "-o", job)
        self.assertEqual(rc, 0, err)
        rc, out, err = run("check", job)
        self.assertEqual((rc, err), (1, ""))
        # Site A leaked on both ranks: 2 MiB across the job, listed before B's 2 MiB of one rank.
        self.assertEqual(out, f"FAIL {job}: 4194304 bytes leaked in 3 allocations (3 references); top site: 2.0 MiB "
                              "[unreachable] cuMemCreate at a.cpp:10 (alloc_a)\n")
        self.assertEqual(run("check", "--baseline", job, "--tolerance", "0", ranks)[0], 0)
        rc, out, _ = run("check", "--baseline", os.path.join(ranks, "cumemaudit.h.1.r0.json"), job)
        self.assertEqual((rc, out.splitlines()[1:]), (1, [
            "  grew: 2.0 MiB [unreachable] cuMemCreate at a.cpp:10 (alloc_a), +1.0 MiB over the baseline's 1.0 MiB",
            "  new site: 2.0 MiB [unreachable] cuMemCreate at b.cpp:7 (alloc_b)"]))


class RealRun(Base):
    """leak_ctypes.py leaks 2 MiB through ctypes on the simulated driver: check names driver.py's line."""

    def audit(self, out_dir, tree=None):
        tree = tree or PYFRAMES
        env = {"PYTHONPATH": tree, "PYTHONDONTWRITEBYTECODE": "1"}
        rc, _, err = run("run", "--sim", "--report-dir", out_dir, "--", "/usr/bin/python3",
                         os.path.join(tree, "leak_ctypes.py"), env=env)
        self.assertEqual(rc, 23, err)  # the shim's own gate at exit: the leak fails the run
        found = [f for f in os.listdir(out_dir) if f.startswith("cumemaudit.") and f.endswith(".json")]
        self.assertEqual(len(found), 1, found)
        return os.path.join(out_dir, found[0])

    def test_fail_line_junit_and_baseline_of_a_python_program(self):
        old_dir, new_dir = os.path.join(self.dir, "old"), os.path.join(self.dir, "new")
        os.mkdir(old_dir)
        os.mkdir(new_dir)
        old, new = self.audit(old_dir), self.audit(new_dir)
        # The place a person fixes: the caller of the program's own ctypes helper, the helper beside it.
        script, driver = os.path.join(PYFRAMES, "leak_ctypes.py"), os.path.join(PYFRAMES, "driver.py")
        site = (f"cuMemCreate at leak_ctypes.py:{line_of(script, '# GROW')} (Buffer.grow) "
                f"via driver.py:{line_of(driver, '# CREATE')}")
        xml_path = os.path.join(self.dir, "junit.xml")
        rc, out, err = run("check", "--junit", xml_path, new_dir)
        self.assertEqual((rc, err), (1, ""))
        self.assertEqual(out, f"FAIL {new}: 2097152 bytes leaked in 1 allocations (1 references); top site: 2.0 MiB "
                              f"[unreachable] {site}\n")
        suite = ET.parse(xml_path).getroot().find("testsuite")
        self.assertEqual((suite.get("tests"), suite.get("failures"), suite.get("errors")), ("1", "1", "0"))
        failure = suite.find("testcase").find("failure")
        self.assertEqual(failure.get("message"), out.split(": ", 1)[1].rstrip("\n"))
        self.assertEqual(failure.text.splitlines()[0], f"2097152 bytes in 1 allocations: 2.0 MiB [unreachable] {site}")
        # The same program again: its one leak site is the baseline's, another pid and other addresses.
        rc, out, err = run("check", "--baseline", old_dir, new_dir)
        self.assertEqual((rc, err), (0, ""))
        self.assertTrue(out.startswith(f"PASS {new}: SUMMARY: cumemaudit: 2097152 bytes leaked") and
                        out.endswith(" (1 leak sites within the baseline)\n"), out)

    def test_a_baseline_survives_another_checkout_and_an_edit(self):
        # The same program from two checkouts; in the second, lines added above the leak and at the end of
        # main(): the baseline still knows the leak, and diff sees no change in its sites.
        checkouts = []
        for name, edit in (("one", False), ("two", True)):
            tree = os.path.join(self.dir, name, "src")
            shutil.copytree(PYFRAMES, tree, ignore=shutil.ignore_patterns("__pycache__"))
            if edit:
                path = os.path.join(tree, "leak_ctypes.py")
                text = open(path).read()
                text = text.replace("class Buffer:", "# a comment that moves every line below it\n\nclass Buffer:")
                text = text.replace("    driver.release(kept)\n", "    driver.release(kept)\n    print(\"done\")\n")
                with open(path, "w") as f:
                    f.write(text)
            out_dir = os.path.join(self.dir, name, "audit")
            os.mkdir(out_dir)
            checkouts.append((tree, out_dir, self.audit(out_dir, tree)))
        (tree_one, dir_one, report_one), (tree_two, dir_two, report_two) = checkouts
        grow_one = line_of(os.path.join(tree_one, "leak_ctypes.py"), "# GROW")
        grow_two = line_of(os.path.join(tree_two, "leak_ctypes.py"), "# GROW")
        self.assertEqual(grow_two, grow_one + 2)
        rc, out, err = run("check", "--baseline", dir_one, dir_two)
        self.assertEqual((rc, err), (0, ""), out)
        self.assertTrue(out.endswith(" (1 leak sites within the baseline)\n"), out)
        # Asked to match lines, the moved line is a new site.
        rc, out, _ = run("check", "--baseline", dir_one, "--match-lines", dir_two)
        self.assertEqual(rc, 1, out)
        self.assertIn(f"new site: 2.0 MiB [unreachable] cuMemCreate at leak_ctypes.py:{grow_two} (Buffer.grow)", out)
        rc, out, err = run("diff", report_one, report_two)
        self.assertEqual((rc, err), (0, ""))
        sites = out.split("leaked bytes by site", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
        self.assertEqual(len(sites), 1, sites)
        self.assertTrue(sites[0].endswith(" 0"), sites)  # 2.0 MiB on both sides: no change


if __name__ == "__main__":
    CLI = os.path.abspath(sys.argv.pop(1))
    PYFRAMES = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
