#!/usr/bin/env python3
"""cuMemMapArrayAsync's handle list under mode=enforce (map_array.cpp).

Usage: map_array_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import sys
import tempfile

from audit_common import SCENARIOS, run, only_report, source, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("map_array.cpp")


def case_enforce_map_array(tmp):
    """cuMemMapArrayAsync under enforce: the handles inside the program's list are translated on a copy (the
    driver sees the live handle, the list comes back untouched), a made-up handle gets the driver's own
    answer, and a handle enforce reclaimed is refused with a message instead of passed on as garbage."""
    audit = run([SCENARIOS, "map-array"], tmp, rc=0)
    expect("live=CUDA_ERROR_NOT_SUPPORTED madeup=CUDA_ERROR_INVALID_VALUE intact=1 "
           "after_unreachable=CUDA_ERROR_NOT_SUPPORTED" in audit.stdout, f"audit mode passes the list on:\n{audit.stdout}")
    d = tempfile.mkdtemp(dir=tmp)
    proc = run([SCENARIOS, "map-array"], d, flags=["--option", "mode=enforce"], rc=23)  # the gate: 1 reclaimed
    expect("live=CUDA_ERROR_NOT_SUPPORTED madeup=CUDA_ERROR_INVALID_VALUE intact=1 "
           "after_unreachable=CUDA_ERROR_INVALID_VALUE" in proc.stdout, f"enforce translates, then refuses:\n{proc.stdout}")
    expect("mode=enforce: cuMemMapArrayAsync of a handle this process does not hold" in proc.stderr, proc.stderr)
    expect(only_report(d)["summary"]["leaked_bytes"] == 0, "the late release was answered; nothing leaked")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
