#!/usr/bin/python3
"""The html page's icicle charts of leaked and held bytes by stack, in a real headless Chromium, on a report
the shim wrote for a Python program that leaks through ctypes (tests/longjob/slow_leak_job.py, 300 steps:
29 buffers leaked from the loop's growth, 1 before it, the last one still mapped at exit). Exact widths and
labels: the Python frames stand where the interpreter's native frames were; a click zooms in; one allocation
held by several references counts once. Writes the screenshot given as argv[1], if any (docs/html_flame.png).
Exits 77 (skipped) without chromium. Environment from meson: CLI, SOURCE_ROOT."""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_html_chromium import body_attrs, browse, chromium, expect, script_errors, verdict  # noqa: E402

CLI = os.environ["CLI"]
ROOT = os.environ["SOURCE_ROOT"]
JOB = os.path.join(ROOT, "tests", "longjob", "slow_leak_job.py")
MiB = 1 << 20

# Appended to a copy of the page: clicks the loop's growth frame in the leaked chart, then reads back what
# the browser shows.
PROBE = """<script>
const svg = document.querySelector("svg.flame");
const byLabel = l => Array.from(svg.querySelectorAll("g.fl")).find(g => g.dataset.l === l);
const grow = byLabel(GROW_LABEL), first = byLabel(FIRST_LABEL);
grow.dispatchEvent(new MouseEvent("click", {bubbles: true}));
document.body.dataset.zoom = JSON.stringify({
  grow: Math.round(grow.querySelector("rect").getBoundingClientRect().width),
  svg: Math.round(svg.getBoundingClientRect().width),
  first: first.style.display,
  root: Math.round(svg.querySelector("g.fl").querySelector("rect").getBoundingClientRect().width)});
</script>"""

def line_of(marker):
    return next(n for n, text in enumerate(open(JOB), 1) if marker in text)


def main():
    browser = chromium()
    if browser is None:
        print("SKIP: chromium is not installed (scripts/setup installs the Debian package `chromium`)")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "tools", "python"),
                                                           os.path.join(ROOT, "tests", "pyframes")]))
        env.pop("CUMEMAUDIT_OPTIONS", None)
        p = subprocess.run([CLI, "run", "--sim", "--report-dir", tmp, "--", "/usr/bin/python3", JOB, "300"],
                           capture_output=True, text=True, env=env, timeout=120)
        expect(p.returncode == 23, f"the job: exit {p.returncode}\n{p.stderr[-2000:]}")
        report = glob.glob(os.path.join(tmp, "cumemaudit.*.json"))[0]
        page = os.path.join(tmp, "page.html")
        p = subprocess.run([CLI, "html", report, "-o", page], capture_output=True, text=True, timeout=60)
        expect(p.returncode == 0, f"html: {p.stderr}")
        html = open(page).read()

        # Two charts; their roots are the leaked bytes and the bytes held (the mapped buffer too).
        roots = re.findall(r'<g class="fl k-r"[^>]*data-l="([^"]*)"', html)
        expect(roots == ["leaked: 60.0 MiB", "held: 62.0 MiB"], f"roots: {roots}")
        leaked_chart = html.split('<svg class="flame"')[1]
        frames = re.findall(r'<g class="fl k-(\w)" data-x="([\d.]+)" data-w="([\d.]+)" data-d="(\d)" data-l="([^"]*)"',
                            leaked_chart)
        grow = f"main slow_leak_job.py:{line_of('# GROW')}"
        first = f"main slow_leak_job.py:{line_of('# FIRST')}"
        leak = f"Buffer.__init__ slow_leak_job.py:{line_of('# LEAK')}"
        want = [("r", "0.000000", "1.000000", "0", "leaked: 60.0 MiB"),
                ("p", "0.000000", "1.000000", "1", f"&lt;module&gt; slow_leak_job.py:{line_of('# ENTRY')}"),
                ("p", "0.000000", f"{1 / 30:.6f}", "2", first), ("p", "0.000000", f"{1 / 30:.6f}", "3", leak),
                ("a", "0.000000", f"{1 / 30:.6f}", "4", "cuMemCreate"),
                ("p", f"{1 / 30:.6f}", f"{29 / 30:.6f}", "2", grow), ("p", f"{1 / 30:.6f}", f"{29 / 30:.6f}", "3", leak),
                ("a", f"{1 / 30:.6f}", f"{29 / 30:.6f}", "4", "cuMemCreate")]
        expect(frames == want, f"leaked chart frames:\n{frames}\nwant\n{want}")
        expect(f"<title>{grow.replace('main ', 'main ' + os.path.dirname(JOB) + '/')} — 58.0 MiB (60817408 bytes, 96.7%)"
               "</title>" in leaked_chart, "the growth frame's tooltip names its whole path and exact bytes")
        expect("libffi" not in leaked_chart and "_PyEval" not in leaked_chart, "interpreter frames in the chart")

        dom, log = browse(browser, page, os.path.join(tmp, "profile1"), "--dump-dom")
        expect(body_attrs(dom).get("ok") == "1" and script_errors(log) == [], f"script: {script_errors(log)}")
        probe = PROBE.replace("GROW_LABEL", json.dumps(grow)).replace("FIRST_LABEL", json.dumps(first))
        probe_page = os.path.join(tmp, "probe.html")
        open(probe_page, "w").write(html.replace("</body>", probe + "</body>"))
        dom, log = browse(browser, probe_page, os.path.join(tmp, "profile2"), "--dump-dom")
        zoom = json.loads(body_attrs(dom).get("zoom", "{}").replace("&quot;", '"'))
        expect(script_errors(log) == [] and zoom.get("first") == "none" and zoom.get("svg", 0) > 600 and
               abs(zoom.get("grow", 0) - zoom["svg"]) <= 2 and abs(zoom.get("root", 0) - zoom["svg"]) <= 2,
               f"after a click on the growth frame it fills the width, its sibling hides: {zoom} {script_errors(log)}")

        if len(sys.argv) > 1:  # the picture in docs/: the charts alone
            alone = html.replace("</head>", "<style>body>*:not(section),section>*:not(.flames){display:none}"
                                            "</style></head>")
            alone_page = os.path.join(tmp, "alone.html")
            open(alone_page, "w").write(alone)
            browse(browser, alone_page, os.path.join(tmp, "profile3"), "--hide-scrollbars", "--window-size=1100,330",
                   f"--screenshot={os.path.abspath(sys.argv[1])}")
    return verdict()


if __name__ == "__main__":
    sys.exit(main())
