#!/usr/bin/env python3
"""The Python helper (tools/python/cumemaudit) on the simulated driver: under `cumemaudit run --sim` its
steps, marks, phases and torch_step figures land in the report's steps, in order; without the shim the same
script runs, exits 0 and says it is inactive. Paths come from the environment meson sets: CLI,
CUMEMAUDIT_SHIM, CUMEMAUDIT_SIM_DIR, SOURCE_ROOT."""
import glob
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.environ["SOURCE_ROOT"]
CLI = os.environ["CLI"]
SIM_DIR = os.environ["CUMEMAUDIT_SIM_DIR"]
SCRIPT = os.path.join(HERE, "helper_user.py")
MiB = 1 << 20


def environment(torch="fake_torch"):
    env = dict(os.environ)
    for k in ("CUMEMAUDIT_OPTIONS", "LD_PRELOAD"):
        env.pop(k, None)
    paths = [os.path.join(SOURCE_ROOT, "tools", "python")]
    paths.append(os.path.join(HERE, torch))  # a stub with fixed figures, or one that fails to import
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


class Helper(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def run_script(self, cmd, env):
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, f"{cmd}: exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
        return json.loads(p.stdout.strip().splitlines()[-1]), p.stderr

    def test_under_the_shim_marks_reach_the_report(self):
        seen, _ = self.run_script([CLI, "run", "--sim", "--report-dir", self.dir, "--", sys.executable, SCRIPT, self.dir],
                                  environment())
        self.assertEqual(seen, {"active": True, "checkpoint_written": True})
        reports = glob.glob(os.path.join(self.dir, "cumemaudit.*.json"))
        self.assertEqual(len(reports), 1, reports)
        with open(reports[0]) as f:
            rep = json.load(f)
        # A mark is known by its label; the step number it carries is the shim's business.
        marks = [s["label"] if s.get("label") else s["step"] for s in rep["steps"]]
        self.assertEqual(marks, [1, 2, "after warmup", "capture:begin", "capture:end", 3])
        times = [s["time_ns"] for s in rep["steps"]]
        self.assertEqual(times, sorted(times))
        torch_step = rep["steps"][-1]
        self.assertEqual((torch_step["pytorch_allocated_bytes"], torch_step["pytorch_reserved_bytes"]), (3 * MiB, 6 * MiB))
        for s in rep["steps"]:
            self.assertEqual(sum(s["by_owner"].values()), 8 * MiB, f"live bytes at {s}")

    def test_torch_step_without_torch_records_zeros(self):
        self.run_script([CLI, "run", "--sim", "--report-dir", self.dir, "--", sys.executable, SCRIPT, self.dir],
                        environment(torch="no_torch"))
        with open(glob.glob(os.path.join(self.dir, "cumemaudit.*.json"))[0]) as f:
            last = json.load(f)["steps"][-1]
        self.assertEqual((last["step"], last["pytorch_allocated_bytes"], last["pytorch_reserved_bytes"]), (3, 0, 0))

    def test_arenas_of_cupy_jax_and_rmm_join_the_step_and_the_oom_record(self):
        p = subprocess.run([CLI, "run", "--sim", "--report-dir", self.dir, "--fail-on", "none", "--", sys.executable,
                            os.path.join(HERE, "arena_user.py")], capture_output=True, text=True,
                           env=environment(torch="fake_arenas"), timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("refused: 2", p.stdout)  # CUDA_ERROR_OUT_OF_MEMORY
        with open(glob.glob(os.path.join(self.dir, "cumemaudit.*.json"))[0]) as f:
            rep = json.load(f)
        # The CPU device has no statistics: only the GPU's arena is named.
        want = [{"arena": "cupy", "used_bytes": 3 * MiB, "reserved_bytes": 64 * MiB},
                {"arena": "jax:0", "used_bytes": 5 * MiB, "reserved_bytes": 48 * MiB},
                {"arena": "rmm", "used_bytes": 7 * MiB, "reserved_bytes": 32 * MiB}]
        (step,) = [s for s in rep["steps"] if s["step"] == 1]
        self.assertEqual(step["arenas"], want)
        (oom,) = rep["oom"]
        self.assertEqual(oom["arenas"], want)
        self.assertIn("  arena cupy: 3.0 MiB in use of 64.0 MiB it holds (at the last step)\n", p.stderr)
        self.assertIn("  arena jax:0: 5.0 MiB in use of 48.0 MiB it holds (at the last step)\n", p.stderr)
        self.assertIn("  arena rmm: 7.0 MiB in use of 32.0 MiB it holds (at the last step)\n", p.stderr)

    def test_fragmented_pytorch_pools_name_their_free_blocks(self):
        """PyTorch out of memory for 2 GiB with 33 GiB free in its default pool: the step and the OOM record
        say how many free blocks the free bytes are split into and the largest, and the record's text that no
        block fits the request; a graph pool with nothing allocated in it is called idle."""
        p = subprocess.run([CLI, "run", "--sim", "--report-dir", self.dir, "--fail-on", "none", "--", sys.executable,
                            os.path.join(HERE, "pools_user.py")], capture_output=True, text=True,
                           env=environment(torch="fake_torch_pools"), timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(glob.glob(os.path.join(self.dir, "cumemaudit.*.json"))[0]) as f:
            rep = json.load(f)
        GiB = 1 << 30
        want = [{"pool": "default", "allocated_bytes": 40 * GiB + 2 * MiB, "reserved_bytes": 40 * GiB + 2 * MiB + 1434 * MiB + 2309 * 14 * MiB,
                 "fragmentation_bytes": 1434 * MiB + 2309 * 14 * MiB, "free_blocks": 2310, "largest_free_block_bytes": 1434 * MiB},
                {"pool": "graph (1, 3)", "allocated_bytes": 2 * GiB + 300 * MiB, "reserved_bytes": 2 * GiB + 300 * MiB,
                 "fragmentation_bytes": 0, "free_blocks": 0, "largest_free_block_bytes": 0},
                {"pool": "graph (2, 0)", "allocated_bytes": 0, "reserved_bytes": 512 * MiB, "fragmentation_bytes": 512 * MiB,
                 "free_blocks": 1, "largest_free_block_bytes": 512 * MiB}]
        (step,) = [s for s in rep["steps"] if s["step"] == 1]
        self.assertEqual(step["pytorch_pools"], want)
        (oom,) = rep["oom"]
        self.assertEqual((oom["api"], oom["requested_bytes"], oom["pytorch_pools"]), ("torch", 2 * GiB, want))
        self.assertIn("  PyTorch pool default: 40.0 GiB allocated, 73.0 GiB reserved, 33.0 GiB reserved but unallocated in 2,310 "
                      "free blocks, the largest 1.4 GiB < 2.0 GiB asked: no free block fits\n", p.stderr)
        self.assertIn("  PyTorch pool graph (1, 3): 2.3 GiB allocated, 2.3 GiB reserved, 0 B reserved but unallocated\n", p.stderr)
        self.assertIn("  PyTorch pool graph (2, 0): 0 B allocated, 512.0 MiB reserved, 512.0 MiB reserved but unallocated in one free "
                      "block < 2.0 GiB asked: no free block fits; idle: nothing allocated in it\n", p.stderr)

    def test_without_the_shim_it_does_nothing_quietly(self):
        env = environment()
        env["LD_LIBRARY_PATH"] = SIM_DIR  # the same CUDA calls, on the same simulated driver, unaudited
        seen, err = self.run_script([sys.executable, SCRIPT, self.dir], env)
        self.assertEqual(seen, {"active": False, "checkpoint_written": False})
        self.assertNotIn("cumemaudit", err)
        self.assertEqual(os.listdir(self.dir), [])


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
