#!/usr/bin/env python3
"""Classic allocations held at exit, their headings, offline symbolization, and a free refused during capture
(classic.cpp).

Usage: classic_test.py CASE   (paths from the environment meson sets; see audit_common.py)."""
import json
import os
import re
import subprocess
import sys
import tempfile

from audit_common import CLI, SCENARIOS, MiB, run, reports, only_report, marker_line, top_frame, source, expect
from cases import main, named_cases  # tests/support, on sys.path through audit_common

SRC = source("classic.cpp")


def case_classic(tmp):
    run([SCENARIOS, "classic"], tmp, rc=0)
    rep = only_report(tmp)
    unfreed = {l["site"]["api"]: l for l in rep["leaks"] if l["class"] == "unfreed"}
    want = {"cuMemAlloc": (1 * MiB, "classic_device"), "cuMemAllocAsync": (2 * MiB, "classic_async_ptsz"),
            "cuMemAllocManaged": (3 * MiB, "classic_managed"), "cuMemHostAlloc": (4 * MiB, "classic_host")}
    expect(set(unfreed) == set(want), f"unfreed sites: {sorted(unfreed)}")
    for api, (size, marker) in want.items():
        expect(unfreed[api]["bytes"] == size, f"{api}: {unfreed[api]['bytes']}")
        expect(top_frame(unfreed[api])["line"] == marker_line(SRC, marker), f"{api} site")
    misuse = rep["misuse"]
    expect(len(misuse) == 1 and misuse[0]["api"] == "cuMemFree", f"double free: {misuse}")


def case_capture_free(tmp):
    """A free the driver refused for its own reason (graph capture) is recorded with that reason, not as a
    free of an unknown pointer, and the allocation stays live until the free that succeeds after capture."""
    proc = run([SCENARIOS, "capture-free"], tmp, flags=["--fail-on", "leaks,unfreed"], rc=0)
    expect("during=CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED after=CUDA_SUCCESS" in proc.stdout, proc.stdout)
    rep = only_report(tmp)
    expect([(m["api"], m["result"], m["what"], m["count"]) for m in rep["misuse"]] ==
           [("cuMemFree", "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "free refused by the driver; the allocation stays live", 1)],
           f"misuse: {rep['misuse']}")
    expect(top_frame(rep["misuse"][0])["line"] == marker_line(SRC, "capture_free"), f"{rep['misuse'][0]}")
    expect(rep["leaks"] == [] and rep["summary"]["unfreed_bytes"] == 0, f"the later free ended it: {rep['leaks']}")


def readelf_build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    expect(m is not None, f"no build id in {path}:\n{out}")
    return m.group(1)


def as_written_without_libdw(path, report, object_path, build_id=None):
    """The report a GPU host without libdw writes: frames keep object, offset and build id, nothing more;
    the binary sat at object_path there."""
    rep = json.load(open(report))
    for leak in rep["leaks"]:
        for f in leak["site"]["frames"]:
            if f["object"] == path:
                f.update(object=object_path, symbol="", file="", line=0)
                if build_id:
                    f["build_id"] = build_id
    json.dump(rep, open(report, "w"))


def case_symbolize(tmp):
    """Offline symbolization: a report whose frames lost symbol, file and line (written where libdw is
    missing, the binary at another path) regains them from the build id and offset, against a binary found
    under --search or a debug file under --debug-dir, and the report is rewritten in place; a file with
    another build id is never used."""
    run([SCENARIOS, "classic"], tmp, rc=0)
    report = next(iter(reports(tmp)))
    original = json.load(open(report))
    want = {l["site"]["api"]: dict(top_frame(l)) for l in original["leaks"]}
    expect(want["cuMemAlloc"]["line"] == marker_line(SRC, "classic_device"), f"{want['cuMemAlloc']}")
    expect(want["cuMemAlloc"]["build_id"] == readelf_build_id(SCENARIOS), "the build id read from the loaded object")

    def frames_now():
        return {l["site"]["api"]: top_frame(l) for l in json.load(open(report))["leaks"]}

    def same_as_original(tag):
        for api, f in frames_now().items():
            expect((f["symbol"], f["file"], f["line"]) == (want[api]["symbol"], want[api]["file"], want[api]["line"]),
                   f"{tag}: {api}: {f} against {want[api]}")

    host_path = "/gpu-host/opt/app/" + os.path.basename(SCENARIOS)
    as_written_without_libdw(SCENARIOS, report, host_path)
    expect(all(f["file"] == "" for f in frames_now().values()), "stripped")
    p = subprocess.run([CLI, "symbolize", "--search", os.path.dirname(SCENARIOS), report], capture_output=True, text=True)
    expect(p.returncode == 0 and f"{report}: 4 of " in p.stdout, f"symbolize --search:\n{p.stdout}{p.stderr}")
    same_as_original("--search")
    expect(only_report(tmp)["summary"] == original["summary"], "the rest of the report is unchanged")

    # A debug file named by build id, next to nothing else (the binary itself is not on this host).
    as_written_without_libdw(host_path, report, host_path)
    dbg = os.path.join(tmp, "debug")
    bid = want["cuMemAlloc"]["build_id"]
    os.makedirs(os.path.join(dbg, ".build-id", bid[:2]))
    subprocess.run(["objcopy", "--only-keep-debug", SCENARIOS, os.path.join(dbg, ".build-id", bid[:2], bid[2:] + ".debug")],
                   check=True)
    p = subprocess.run([CLI, "symbolize", "--debug-dir", dbg, report], capture_output=True, text=True)
    expect(p.returncode == 0, f"symbolize --debug-dir:\n{p.stdout}{p.stderr}")
    same_as_original("--debug-dir")

    # Another build of the same name must not be used.
    as_written_without_libdw(host_path, report, host_path, build_id="00" * 20)
    p = subprocess.run([CLI, "symbolize", "--search", os.path.dirname(SCENARIOS), report], capture_output=True, text=True)
    expect(p.returncode == 0 and f"no local file with debug info matches {host_path} (build id {'00' * 20})" in p.stdout
           and all(f["file"] == "" for f in frames_now().values()), f"mismatched build id:\n{p.stdout}")
    p = subprocess.run([CLI, "symbolize", os.path.join(tmp, "missing.json")], capture_output=True, text=True)
    expect(p.returncode == 2 and "missing.json" in p.stderr, f"an unreadable report: {p.returncode} {p.stderr}")


def case_held_headings(tmp):
    """Unfreed memory at exit is not called a leak: the summary folds it into one line (10 MiB in 4 rows),
    show_held=1 or `report --show-held` lists it under its own heading, and fail_on=unfreed makes it a leak."""
    proc = run([SCENARIOS, "classic"], tmp, rc=0)
    expect("Leak of" not in proc.stderr and "\nHeld at exit, not leaks: 10485760 bytes (10.0 MiB) in 4 rows" in proc.stderr,
           f"folded:\n{proc.stderr}")
    path = next(iter(reports(tmp)))
    shown = subprocess.run([CLI, "report", "--show-held", path], capture_output=True, text=True)
    expect(shown.returncode == 0 and shown.stdout.count("\nHeld at exit, not a leak: ") == 4 and "Leak of" not in shown.stdout
           and "Held at exit, not a leak: 1048576 bytes (1.0 MiB) in 1 allocations [unfreed, none, audit_scenarios] "
               "taken by cuMemAlloc at:" in shown.stdout, f"report --show-held:\n{shown.stdout}{shown.stderr}")
    d = tempfile.mkdtemp(dir=tmp)
    proc = run([SCENARIOS, "classic"], d, flags=["--option", "show_held=1"], rc=0)
    expect(proc.stderr.count("\nHeld at exit, not a leak: ") == 4, f"show_held=1:\n{proc.stderr}")
    d = tempfile.mkdtemp(dir=tmp)
    proc = run([SCENARIOS, "classic"], d, flags=["--fail-on", "leaks,unfreed"], rc=23)
    expect(proc.stderr.count("\nLeak of ") == 4 and "Held at exit" not in proc.stderr, f"fail_on=unfreed:\n{proc.stderr}")


CASES = named_cases(globals())

if __name__ == "__main__":
    sys.exit(main(CASES))
