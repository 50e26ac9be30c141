#!/usr/bin/python3
"""cumemaudit.pool on the simulated driver, loaded through a stand-in for PyTorch's pluggable-allocator
interface (tests/python/pluggable_torch: CUDAPluggableAllocator and MemPool as PyTorch has them). Exact
figures from the pool's statistics, and under `cumemaudit run --sim` the report's owner cumemaudit_pool
with its live and peak bytes, per-step figures, zero leaks with a cache left at exit, and a segment still
live at exit reported as mapped, not leaked. Paths from meson: CLI, CUMEMAUDIT_SIM_DIR, POOL_LIB, SOURCE_ROOT."""
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = os.environ["CLI"]
SIM_DIR = os.environ["CUMEMAUDIT_SIM_DIR"]
POOL_LIB = os.environ["POOL_LIB"]
SCRIPT = os.path.join(HERE, "pool_user.py")
MiB = 1 << 20
PY = "/usr/bin/python3"  # Debian's: the interpreter the project's Python parts are tested with


def environment():
    env = {k: v for k, v in os.environ.items() if k not in ("CUMEMAUDIT_OPTIONS", "LD_PRELOAD")}
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(os.environ["SOURCE_ROOT"], "tools", "python"),
                                         os.path.join(HERE, "pluggable_torch")])
    env["CUMEMAUDIT_POOL_LIB"] = POOL_LIB
    return env


class Pool(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def run_user(self, mode, audited):
        env = environment()
        if audited:
            cmd = [CLI, "run", "--sim", "--report-dir", self.dir, "--", PY, SCRIPT, mode]
        else:
            env["LD_LIBRARY_PATH"] = SIM_DIR
            cmd = [PY, SCRIPT, mode]
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, f"{cmd}: exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
        seen = json.loads(p.stdout.strip().splitlines()[-1])
        if not audited:
            return seen, None, p.stderr
        reports = glob.glob(os.path.join(self.dir, "cumemaudit.*.json"))
        self.assertEqual(len(reports), 1, reports)
        with open(reports[0]) as f:
            return seen, json.load(f), p.stderr

    def check_figures(self, seen):
        self.assertEqual(seen["entry_points"], [True, True], "MemPool's allocator calls the library's own symbols")
        self.assertEqual(seen["before"]["reserved_bytes"], 0)
        self.assertEqual(seen["offsets"], [0, 2 * MiB, 22 * MiB])
        self.assertTrue(seen["aligned"])
        live = seen["live"]
        self.assertEqual((live["live_bytes"], live["reserved_bytes"], live["cached_bytes"], live["segments"]),
                         (30 * MiB, 30 * MiB, 0, 3))
        self.assertEqual(live["allocations"], 3)
        calls = live["driver_calls"]
        self.assertEqual(list(calls), ["cuMemGetAllocationGranularity", "cuMemCreate", "cuMemRelease",
                                       "cuMemAddressReserve", "cuMemAddressFree", "cuMemMap", "cuMemUnmap",
                                       "cuMemSetAccess", "cuMemExportToShareableHandle",
                                       "cuMemImportFromShareableHandle"])
        # 2 MiB: one chunk; 20 MiB: 16 + 4; 8 MiB: one. One reservation for all of them.
        self.assertEqual((calls["cuMemCreate"], calls["cuMemMap"], calls["cuMemAddressReserve"], calls["cuMemRelease"]),
                         (4, 4, 1, 0))
        freed = seen["freed"]
        self.assertEqual((freed["live_bytes"], freed["cached_bytes"], freed["reserved_bytes"], freed["frees"]),
                         (0, 30 * MiB, 30 * MiB, 3))
        self.assertEqual(seen["again_offset"], 0, "the lowest free address again")
        again = seen["again"]
        self.assertEqual((again["driver_calls"]["cuMemCreate"], again["cache_hits"], again["cached_bytes"]),
                         (4, 2, 10 * MiB))
        self.assertEqual(seen["trimmed"], 30 * MiB)
        after = seen["after"]
        self.assertEqual((after["reserved_bytes"], after["peak_reserved_bytes"], after["segments"]), (0, 30 * MiB, 0))
        self.assertEqual(after["driver_calls"]["cuMemRelease"], after["driver_calls"]["cuMemCreate"])
        self.assertEqual(after["driver_calls"]["cuMemUnmap"], after["driver_calls"]["cuMemMap"])
        self.assertEqual((after["bad_frees"], after["failed_allocations"]), (0, 0))

    def test_figures_through_the_pluggable_allocator_interface(self):
        seen, _, err = self.run_user("figures", audited=False)
        self.check_figures(seen)
        self.assertEqual(err, "")

    def test_under_the_auditor_the_pool_is_its_own_owner_and_leak_free(self):
        seen, rep, err = self.run_user("figures", audited=True)
        self.check_figures(seen)
        s = rep["summary"]
        self.assertEqual((rep["leaks"], rep["misuse"], s["leaked_bytes"], s["misuse_events"]), ([], [], 0, 0))
        owners = {o["owner"]: o for o in rep["owners"]}
        self.assertIn("cumemaudit_pool", owners, f"owners: {sorted(owners)}")
        pool = owners["cumemaudit_pool"]
        self.assertEqual((pool["live_bytes"], pool["peak_bytes"]), (0, 30 * MiB))
        steps = {x["step"]: x["by_owner"].get("cumemaudit_pool", 0) for x in rep["steps"] if not x.get("label")}
        # Live segments, then freed into the cache (still held from the driver), then trimmed.
        self.assertEqual(steps, {1: 30 * MiB, 2: 30 * MiB, 3: 0})
        self.assertIn("SUMMARY: cumemaudit: 0 bytes leaked in 0 allocations", err)

    def test_a_cache_left_at_exit_is_given_back_before_the_report(self):
        seen, rep, _ = self.run_user("exit-cached", audited=True)
        self.assertEqual(seen, {"cached": 20 * MiB})
        self.assertEqual((rep["leaks"], rep["summary"]["leaked_bytes"]), ([], 0))
        owners = {o["owner"]: o for o in rep["owners"]}
        self.assertEqual((owners["cumemaudit_pool"]["live_bytes"], owners["cumemaudit_pool"]["peak_bytes"]),
                         (0, 20 * MiB))

    def test_a_segment_still_live_at_exit_is_mapped_not_leaked(self):
        seen, rep, _ = self.run_user("exit-live", audited=True)
        self.assertEqual(seen, {"live": 4 * MiB})
        self.assertEqual(rep["summary"]["leaked_bytes"], 0)
        classes = sorted({(l["class"], l["owner"], l["bytes"]) for l in rep["leaks"]})
        self.assertEqual(classes, [("mapped-at-exit", "cumemaudit_pool", 4 * MiB)])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
