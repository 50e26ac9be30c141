"""``cumemaudit demo``: DeepEP's fabric-handle leak found, then fixed, on the simulated driver that came with
this package (scripts/demo does the same from a build tree). Exits 0 when the audit saw exactly the bytes
the driver lost and the gate failed the leaking run with 23."""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

from . import _layout


def _run(cli, report_dir, program, *args):
    cmd = [cli, "run", "--sim", "--report-dir", report_dir, "--", program, *args]
    print("   $ cumemaudit run --sim -- deepep_fabric_leak", *args, flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
    sys.stdout.write(p.stdout)
    return p.returncode, p.stdout


def main(argv=()):
    cli, program = _layout.cli(), _layout.demo_program()
    if cli is None or program is None:
        print("cumemaudit demo: the CLI or the demo program did not come with this package", file=sys.stderr)
        return 2
    out = tempfile.mkdtemp(prefix="cumemaudit-demo.")
    print("== 1. DeepEP's fabric allocator as shipped: the buffer grows 3 times; nothing releases its references")
    rc, text = _run(cli, os.path.join(out, "as-shipped"), program)
    drop = int(re.search(r"drop=(\d+)", text).group(1)) if re.search(r"drop=(\d+)", text) else -1
    (report,) = glob.glob(os.path.join(out, "as-shipped", "cumemaudit.*.json"))
    leaked = json.load(open(report))["summary"]["leaked_bytes"]
    print(f"\n   exit code {rc}: the gate failed the run (fail_on=leaks, exitcode=23)")
    print(f"   the simulated driver lost {drop} bytes of free memory; cumemaudit reports {leaked} bytes leaked")
    print("\n== 2. The same allocator with the three missing cuMemRelease calls (after map, export and import)")
    fixed_rc, _ = _run(cli, os.path.join(out, "fixed"), program, "--fixed")
    print(f"\n   $ cumemaudit check {out}/fixed", flush=True)
    check_rc = subprocess.run([cli, "check", os.path.join(out, "fixed")]).returncode
    print(f"\nreports: {out}")
    return 0 if (rc == 23 and drop == leaked and fixed_rc == 0 and check_rc == 0) else 1
