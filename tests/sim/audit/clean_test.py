#!/usr/bin/env python3
"""Programs that release what they take (the NCCL pattern, expandable segments, the fixed DeepEP sequence):
nothing reported, in audit mode and under mode=enforce.

Usage: clean_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import os
import sys
import tempfile

from audit_common import DEEPEP, HANDLE, run, only_report, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common


def case_nccl(tmp):
    run([os.environ["NCCL"]], tmp, rc=0)
    rep = only_report(tmp)
    expect(rep["summary"]["leaked_bytes"] == 0 and rep["summary"]["misuse_events"] == 0 and rep["leaks"] == [],
           f"NCCL pattern: {rep['summary']} {rep['leaks']}")


def case_expandable(tmp):
    run([os.environ["EXPANDABLE"]], tmp, rc=0)
    rep = only_report(tmp)
    expect(rep["summary"]["leaked_bytes"] == 0 and rep["summary"]["misuse_events"] == 0 and rep["leaks"] == [],
           f"expandable segments: {rep['summary']} {rep['leaks']}")


def case_enforce_clean(tmp):
    """Programs that release properly are untouched by enforce mode: nothing reclaimed, same return codes."""
    for argv in ([DEEPEP, "--fixed", "--handle", HANDLE], [os.environ["NCCL"]], [os.environ["EXPANDABLE"]]):
        d = tempfile.mkdtemp(dir=tmp)
        run(argv, d, flags=["--option", "mode=enforce"], rc=0)
        rep = only_report(d)
        expect(rep["summary"]["leaked_bytes"] == 0 and rep.get("reclaimed", []) == [] and rep["misuse"] == [],
               f"{argv[0]}: {rep['summary']} {rep.get('reclaimed')}")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
