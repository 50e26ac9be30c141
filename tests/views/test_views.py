#!/usr/bin/env python3
"""`cumemaudit trace`, `html` and `diff` on the sample report (tests/views/sample_report.json), on reports
holding markup, on bad input, and on real reports of the DeepEP leak run under the shim on the simulated
driver. Paths come from the environment meson sets: CLI, CUMEMAUDIT_SHIM, CUMEMAUDIT_SIM_DIR, DEEPEP."""
import copy
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = os.path.join(HERE, "sample_report.json")
CLI = os.environ["CLI"]
GiB = 1 << 30


def run(*args, env=None, cwd=None):
    full = dict(os.environ)
    for k in ("CUMEMAUDIT_OPTIONS", "LD_PRELOAD"):
        full.pop(k, None)
    full.update(env or {})
    p = subprocess.run([CLI, *args], capture_output=True, text=True, env=full, timeout=60, cwd=cwd)
    return p.returncode, p.stdout, p.stderr


def sample():
    with open(SAMPLE) as f:
        return json.load(f)


class Base(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, rep):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(rep if isinstance(rep, str) else json.dumps(rep))
        return path

    def ok(self, *args):
        rc, out, err = run(*args)
        self.assertEqual((rc, err), (0, ""), f"cumemaudit {' '.join(args)}")
        return out


class Trace(Base):
    def trace(self, *reports):
        out = os.path.join(self.dir, "trace.json")
        self.ok("trace", *reports, "-o", out)
        with open(out) as f:
            text = f.read()
        return json.loads(text)["traceEvents"], text

    def test_counters_steps_alarms_and_leaks(self):
        events, _ = self.trace(SAMPLE)
        rep = sample()
        counters = {}
        for e in events:
            if e["ph"] == "C":
                counters.setdefault(e["name"], []).append((e["ts"], e["args"]["bytes"]))
        self.assertEqual(set(counters), {"owner pytorch", "owner deepep", "owner nccl", "owner cublas", "driver used",
                                         "unattributed"})
        for name, series in counters.items():
            self.assertEqual(len(series), len(rep["steps"]), name)
        self.assertEqual(counters["owner deepep"][-1], (39 * 1.5e6, rep["steps"][-1]["by_owner"]["deepep"]))
        self.assertEqual(counters["driver used"][0], (0.0, rep["steps"][0]["driver_used_bytes"]))

        instants = [e for e in events if e["ph"] == "i"]
        names = [e["name"] for e in instants if e["cat"] in ("step", "mark")]
        self.assertEqual(names[:8], ["step 0", "step 1", "step 2", "step 3", "step 4", "step 5", "capture:begin (after step 5)",
                                     "capture:end (after step 5)"])
        alarm, = [e for e in instants if e["cat"] == "alarm"]
        self.assertEqual((alarm["ts"], alarm["args"]["owner"], alarm["args"]["bytes"]), (13 * 1.5e6, "deepep", 5 * GiB))  # grew 1 GiB at each of 5 raisings
        self.assertEqual(alarm["args"]["site"],
                         "cuMemCreate at deep_ep::FabricAllocator::grow(unsigned long) csrc/kernels/fabric.cu:118")
        # Rows held at exit (the unfreed cuMemAlloc_v2) are events of their own, never leaks.
        leaks = [e for e in instants if e["cat"] == "leak"]
        self.assertEqual([(l["args"]["api"], l["ts"]) for l in leaks], [("cuMemCreate", 40 * 1.5e6)])
        held = [e for e in instants if e["cat"] == "held"]
        self.assertEqual([(h["name"], h["args"]["api"], h["ts"]) for h in held],
                         [("held at exit: 32.0 MiB unfreed cublas", "cuMemAlloc_v2", 40 * 1.5e6)])
        self.assertEqual(leaks[0]["args"]["top_frame"], "deep_ep::FabricAllocator::grow(unsigned long) csrc/kernels/fabric.cu:118")
        meta, = [e for e in events if e["ph"] == "M" and e["name"] == "process_name"]
        self.assertEqual(meta["args"]["name"], "rank 0 pid 48213 on h200-node07")

    def test_deterministic_and_one_process_per_report(self):
        other = sample()
        other["process"]["rank"] = 1
        for s in other["steps"]:
            s["time_ns"] += 2_000  # rank 1 starts 2 µs later: both share rank 0's origin
        second = self.write("r1.json", other)
        events, text = self.trace(SAMPLE, second)
        _, again = self.trace(SAMPLE, second)
        self.assertEqual(text, again)
        self.assertEqual({e["pid"] for e in events}, {0, 1})
        first_r1 = next(e for e in events if e["pid"] == 1 and e["ph"] == "C")
        self.assertEqual(first_r1["ts"], 2.0)

    def test_a_report_without_steps_still_has_owner_counters(self):
        rep = sample()
        rep["steps"] = []
        events, _ = self.trace(self.write("nosteps.json", rep))
        counters = sorted(e["name"] for e in events if e["ph"] == "C")
        self.assertEqual(counters, ["owner cublas", "owner deepep", "owner nccl", "owner pytorch"])


class Html(Base):
    def html(self, *reports):
        out = os.path.join(self.dir, "report.html")
        self.ok("html", *reports, "-o", out)
        with open(out) as f:
            return f.read()

    def test_chart_and_tables(self):
        page = self.html(SAMPLE)
        self.assertEqual(len(re.findall(r'<path class="area" data-owner="', page)), 4)
        for owner in ("pytorch", "nccl", "deepep", "cublas"):
            self.assertIn(f'data-owner="{owner}"', page)
        self.assertEqual(page.count('<path class="driver"'), 1)
        for cls in ("leaks", "alarms", "graphs", "owners", "misuse", "steps"):
            self.assertIn(f'<table class="{cls}">', page)
        self.assertIn("deep_ep::FabricAllocator::grow(unsigned long) csrc/kernels/fabric.cu:118", page)
        self.assertIn('<td class="num" data-sort="325058560" title="325058560 bytes">310.0 MiB</td>', page)  # graph cost
        # An alarm raised five times is one row that says so: first step 13, last 25, 5 times.
        alarms = page[page.index('<table class="alarms">'):]
        alarms = alarms[:alarms.index("</table>")]
        self.assertEqual(re.findall(r"<tr><td[^>]*>(\d+)</td><td[^>]*>(\d+)</td><td[^>]*>(\d+)</td><td>leak</td>", alarms),
                         [("13", "25", "5")])
        self.assertIn("GiB", page)

    def test_self_contained(self):
        page = self.html(SAMPLE)
        # The SVG namespace is a name, never fetched; anything else with a scheme would be a request.
        self.assertEqual(re.findall(r"\b(?:https?:)?//[\w.-]+", page.replace('xmlns="http://www.w3.org/2000/svg"', "")), [])
        for tag in ("<link", "<img", "<iframe", " src=", "@import", "url("):
            self.assertNotIn(tag, page)

    def test_text_from_reports_is_escaped(self):
        rep = sample()
        evil = '<script>alert("x")</script>'
        rep["steps"][1]["by_owner"][evil] = GiB
        rep["steps"][2]["label"] = '<img src=x onerror=alert(1)>'
        rep["leaks"][0]["site"]["frames"][0]["symbol"] = "operator<<(ostream&, T const&)"
        rep["process"]["argv"] = ["python", "'\"><blink>"]
        page = self.html(self.write("evil.json", rep))
        self.assertNotIn(evil, page)
        self.assertNotIn("<img", page)
        self.assertNotIn("<blink>", page)
        self.assertIn("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;", page)
        self.assertIn("operator&lt;&lt;(ostream&amp;, T const&amp;)", page)
        self.assertEqual(page.count("<script>"), 1)  # the page's own

    def test_several_reports_one_section_each(self):
        other = sample()
        other["process"]["rank"] = 1
        other["steps"] = []
        page = self.html(SAMPLE, self.write("r1.json", other))
        self.assertEqual(page.count('<section class="report"'), 2)
        self.assertIn('<a href="#report-1">rank 1 · pid 48213 on h200-node07</a>', page)
        self.assertIn("No steps recorded", page)


class Diff(Base):
    def test_two_reports_by_owner_and_site(self):
        before = sample()
        before["owners"][1]["live_bytes"] = 2 * GiB  # deepep
        before["leaks"][0]["bytes"] = 1 * GiB
        for f in before["leaks"][0]["site"]["frames"]:
            f["pc"] = hex(int(f["pc"], 16) + 0x1000)  # another run, other addresses: still the same site
        out = self.ok("diff", self.write("a.json", before), SAMPLE)
        lines = out.splitlines()
        self.assertTrue(lines[0].startswith("cumemaudit diff: "), out)
        owners = lines[lines.index(next(l for l in lines if l.startswith("live bytes by owner"))) + 1:]
        self.assertRegex(owners[0], r"^deepep\s+2\.0 GiB\s+10\.0 GiB\s+\+8\.0 GiB \(\+8589934592\)$")
        self.assertRegex(owners[1], r"^cublas\s+32\.0 MiB\s+32\.0 MiB\s+0$")
        sites = [l for l in lines if l.startswith("cuMemCreate at fabric.cu:118 (deep_ep::FabricAllocator::grow(unsigned long))")]
        self.assertEqual(len(sites), 1, out)
        self.assertRegex(sites[0], r"\[deepep\]\s+1\.0 GiB\s+9\.0 GiB\s+\+8\.0 GiB \(\+8589934592\)$")

    def test_two_steps_of_one_report(self):
        out = self.ok("diff", "--steps", "10", "39", SAMPLE)
        lines = out.splitlines()
        self.assertEqual(lines[0], "cumemaudit diff: step 10 -> step 39")
        self.assertRegex(lines[3], r"^deepep\s+1\.0 GiB\s+10\.0 GiB\s+\+9\.0 GiB \(\+9663676416\)$")
        out = self.ok("diff", "--steps", "4", "capture:end", SAMPLE)
        self.assertIn("cumemaudit diff: step 4 -> capture:end", out)
        self.assertRegex(out, r"\npytorch\s+56\.0 GiB\s+59\.0 GiB\s+\+3\.0 GiB \(\+3221225472\)\n")

    def test_bad_input_exits_2_naming_the_file(self):
        missing = os.path.join(self.dir, "absent.json")
        rc, out, err = run("diff", SAMPLE, missing)
        self.assertEqual((rc, out), (2, ""))
        self.assertEqual(err, f"cumemaudit diff: {missing}: cannot read: No such file or directory\n")
        junk = self.write("junk.json", "{")
        rc, _, err = run("diff", junk, SAMPLE)
        self.assertEqual(rc, 2)
        self.assertTrue(err.startswith(f"cumemaudit diff: {junk}: truncated JSON"), err)
        rc, _, err = run("diff", "--steps", "10", "999", SAMPLE)
        self.assertEqual(rc, 2)
        self.assertEqual(err, f"cumemaudit diff: {SAMPLE}: no step or mark '999' (the report has 42 steps)\n")
        rc, _, err = run("diff", SAMPLE)
        self.assertEqual(rc, 2)
        self.assertIn("two reports", err)
        rc, _, err = run("diff", "--steps", "1", SAMPLE, SAMPLE)
        self.assertEqual(rc, 2)


class BadInput(Base):
    def test_trace_and_html_refuse_before_writing(self):
        junk = self.write("junk.json", "not json")
        for cmd in ("trace", "html"):
            out = os.path.join(self.dir, cmd + ".out")
            rc, _, err = run(cmd, SAMPLE, junk, "-o", out)
            self.assertEqual(rc, 2, cmd)
            self.assertTrue(err.startswith(f"cumemaudit {cmd}: {junk}: not JSON"), err)
            self.assertFalse(os.path.exists(out), cmd)
            rc, _, err = run(cmd, SAMPLE, "-o", os.path.join(self.dir, "no", "such", "dir", "x"))
            self.assertEqual(rc, 2, cmd)
            self.assertIn("cannot write", err)

    def test_trace_and_html_without_output_name_what_they_wrote(self):
        # Without -o (once a usage error): a name after the input, in the current directory, said on stdout.
        for cmd, name in (("trace", "sample_report.trace.json"), ("html", "sample_report.html")):
            rc, out, err = run(cmd, SAMPLE, cwd=self.dir)
            self.assertEqual((rc, out, err), (0, f"cumemaudit {cmd}: wrote {name}\n", ""), cmd)
            self.assertGreater(os.path.getsize(os.path.join(self.dir, name)), 0, cmd)
        reports = os.path.join(self.dir, "audit")
        os.mkdir(reports)
        with open(SAMPLE) as f, open(os.path.join(reports, "cumemaudit.h.1.r0.json"), "w") as g:
            g.write(f.read())
        rc, out, err = run("html", reports + "/", cwd=self.dir)
        self.assertEqual((rc, out, err), (0, "cumemaudit html: wrote audit.html\n", ""))
        self.assertEqual(sorted(os.listdir(reports)), ["cumemaudit.h.1.r0.json"])  # nothing written among the reports
        rc, out, err = run("trace", SAMPLE, SAMPLE, cwd=self.dir)
        self.assertEqual((rc, out, err), (0, "cumemaudit trace: wrote cumemaudit.trace.json\n", ""))


@unittest.skipUnless(os.environ.get("DEEPEP"), "DEEPEP not set")
class UnderTheShim(Base):
    """The views on reports the shim wrote: the DeepEP leak, 3 steps and 6 steps."""

    def audit(self, steps):
        d = os.path.join(self.dir, f"steps{steps}")
        os.mkdir(d)
        rc, _, err = run("run", "--sim", "--report-dir", d, "--", os.environ["DEEPEP"], "--steps", str(steps),
                         env={"CUMEMAUDIT_SHIM": os.environ["CUMEMAUDIT_SHIM"],
                              "CUMEMAUDIT_SIM_DIR": os.environ["CUMEMAUDIT_SIM_DIR"]})
        self.assertEqual(rc, 23, err)
        report, = glob.glob(os.path.join(d, "cumemaudit.*.json"))
        return report

    def test_views_of_real_reports(self):
        short, long = self.audit(3), self.audit(6)
        out = self.ok("diff", short, long)
        grew = [l for l in out.splitlines() if "deepep_fabric_leak.cpp:" in l]
        self.assertEqual(len(grew), 3, out)  # cuMemCreate, cuMemRetainAllocationHandle, cuMemImportFromShareableHandle
        for line in grew:
            self.assertRegex(line, r"\+[\d.]+ [MG]iB \(\+\d+\)$")
        html = os.path.join(self.dir, "real.html")
        self.ok("html", short, long, "-o", html)
        with open(html) as f:
            page = f.read()
        self.assertEqual(page.count('<section class="report"'), 2)
        self.assertIn('<table class="leaks">', page)
        trace = os.path.join(self.dir, "real.trace.json")
        self.ok("trace", long, "-o", trace)
        with open(trace) as f:
            leaks = [e for e in json.load(f)["traceEvents"] if e.get("cat") == "leak"]
        self.assertEqual(len(leaks), 3)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
