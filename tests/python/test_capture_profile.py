#!/usr/bin/env python3
"""The capture profile (tools/python/cumemaudit/holes.py): each free block at a window's end named by the
Python line whose allocation last covered its bytes, per pool, with exact bytes; and the window itself, with a
stand-in torch, printing and writing the profile also when the body raised. Paths: SOURCE_ROOT."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.environ.get("SOURCE_ROOT", os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(SOURCE_ROOT, "tools", "python"))

from cumemaudit import holes  # noqa: E402

MiB = 1 << 20


def frames(line, function="combine", file="/srv/app/model.py"):
    """Innermost first, as PyTorch records them: the allocator's own Python frames, then the program's."""
    return [{"filename": "/usr/lib/python3/site-packages/torch/nn/modules/module.py", "line": 1775, "name": "_call_impl"},
            {"filename": file, "line": line, "name": function}]


def alloc(addr, size, line, **kw):
    return {"action": "alloc", "addr": addr, "size": size, "frames": frames(line, **kw)}


def free(addr, size):
    return {"action": "free_completed", "addr": addr, "size": size, "frames": []}


def segment(addr, total, pool, blocks):
    return {"device": 0, "address": addr, "total_size": total, "segment_pool_id": pool,
            "allocated_size": sum(s for _, s, state in blocks if state == "active_allocated"),
            "blocks": [{"address": a, "size": s, "state": state} for a, s, state in blocks]}


# Two sizes of a warm-up then capture: the combine line's 64 MiB temporary is freed and a 32 MiB one of the
# same line later takes its first half; an attention line's block stays live; a segment of the graph pool
# keeps the captured output; a segment the window released holds nothing at the end.
BASE, GRAPH = 1 << 30, 2 << 30
SNAPSHOT = {
    "device_traces": [[
        alloc(BASE, 64 * MiB, 40),
        alloc(BASE + 64 * MiB, 16 * MiB, 31, function="attention"),
        free(BASE, 64 * MiB),
        alloc(BASE, 32 * MiB, 40),
        free(BASE, 32 * MiB),
        alloc(GRAPH, 8 * MiB, 40),
        alloc(GRAPH + 8 * MiB, 4 * MiB, 52, function="capture"),
        free(GRAPH + 8 * MiB, 4 * MiB),
        alloc(3 << 30, 2 * MiB, 60, function="scratch"),
        free(3 << 30, 2 * MiB),
        {"action": "oom", "size": 2048 * MiB, "device_free": 100 * MiB, "frames": frames(40)},
    ]],
    "segments": [
        # 8 MiB at the segment's start were free before the window began
        segment(BASE - 8 * MiB, 96 * MiB, [0, 0], [(BASE - 8 * MiB, 72 * MiB, "inactive"),
                                                    (BASE + 64 * MiB, 16 * MiB, "active_allocated"),
                                                    (BASE + 80 * MiB, 8 * MiB, "inactive")]),
        segment(GRAPH, 20 * MiB, [1, 1], [(GRAPH, 8 * MiB, "active_allocated"), (GRAPH + 8 * MiB, 12 * MiB, "inactive")]),
    ],
}


class Summary(unittest.TestCase):
    def test_each_free_byte_goes_to_the_line_that_last_allocated_it(self):
        p = holes.summarize(SNAPSHOT)
        rows = {(r["line"], r["pool"]): (r["allocations"], r["allocated_bytes"], r["distinct_sizes"], r["largest_bytes"],
                                         r["hole_bytes"], r["hole_blocks"]) for r in p["lines"]}
        self.assertEqual(rows, {
            # the 64 MiB block: its first 32 MiB last held the 32 MiB temporary, its rest the 64 MiB one
            ("model.py:40 (combine)", "default"): (2, 96 * MiB, 2, 64 * MiB, 64 * MiB, 1),
            ("model.py:31 (attention)", "default"): (1, 16 * MiB, 1, 16 * MiB, 0, 0),
            ("model.py:40 (combine)", "graph (1, 1)"): (1, 8 * MiB, 1, 8 * MiB, 0, 0),
            ("model.py:52 (capture)", "graph (1, 1)"): (1, 4 * MiB, 1, 4 * MiB, 4 * MiB, 1),
            ("model.py:60 (scratch)", "released"): (1, 2 * MiB, 1, 2 * MiB, 0, 0),
        })
        # the default pool's first free block began 8 MiB before any allocation of the window; its last free
        # block, and the graph segment's tail past the 4 MiB, no allocation of the window covered
        self.assertEqual(p["free_before_window_bytes"], {"default": 16 * MiB, "graph (1, 1)": 8 * MiB})
        self.assertEqual(p["lines"][0]["line"], "model.py:40 (combine)")  # the most free first
        pools = {x["pool"]: x for x in p["pools"]}
        self.assertEqual((pools["default"]["reserved_bytes"], pools["default"]["allocated_bytes"], pools["default"]["free_bytes"],
                          pools["default"]["free_blocks"], pools["default"]["largest_free_block_bytes"]),
                         (96 * MiB, 16 * MiB, 80 * MiB, 2, 72 * MiB))
        for name, pool in pools.items():  # every free byte of a pool is a line's or before the window
            named = sum(r["hole_bytes"] for r in p["lines"] if r["pool"] == name)
            self.assertEqual(named + p["free_before_window_bytes"].get(name, 0), pool["free_bytes"], name)
        self.assertEqual(p["oom"], [{"requested_bytes": 2048 * MiB, "device_free_bytes": 100 * MiB, "line": "model.py:40 (combine)"}])

    def test_the_text_names_the_line_its_pool_and_its_free_bytes(self):
        text = "\n".join(holes.lines(holes.summarize(SNAPSHOT)))
        self.assertIn(f"model.py:40 (combine): 2 allocations in pool default (2 sizes, the largest {64 * MiB} bytes); "
                      f"{64 * MiB} bytes of it free in 1 blocks at the end", text)
        self.assertIn(f"out of memory: {2048 * MiB} bytes asked at model.py:40 (combine)", text)
        self.assertLess(text.index("model.py:40 (combine)"), text.index("model.py:52 (capture)"))

    def test_a_frame_of_the_program_is_named_past_the_allocator_and_the_audit(self):
        wrapped = [{"filename": "/x/cumemaudit/holes.py", "line": 1, "name": "w"},
                   {"filename": "/usr/lib/python3.12/contextlib.py", "line": 2, "name": "__exit__"},
                   {"filename": "/srv/app/run.py", "line": 9, "name": "main"}]
        self.assertEqual(holes._line_of(wrapped), "run.py:9 (main)")
        self.assertEqual(holes._line_of(wrapped[:2]), "holes.py:1 (w)")  # only wrappers: the innermost
        self.assertEqual(holes._line_of([{"filename": "??", "line": 0, "name": "c10::alloc"}]), "(no Python frame)")


def window_env(tmp):
    snapshot_path = os.path.join(tmp, "snapshot.json")
    with open(snapshot_path, "w") as f:
        json.dump(SNAPSHOT, f)
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "CUMEMAUDIT_OPTIONS")}
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(SOURCE_ROOT, "tools", "python"), os.path.join(HERE, "fake_torch_history")])
    env["FAKE_TORCH_SNAPSHOT"] = snapshot_path
    return env


class Window(unittest.TestCase):
    def test_the_profile_is_printed_and_written_when_the_body_raises(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "profile.json")
            proc = subprocess.run([sys.executable, os.path.join(HERE, "capture_profile_user.py"), out], capture_output=True,
                                  text=True, env=window_env(tmp), timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertIn("raised: CUDA out of memory (stand-in)", proc.stdout)
            calls = json.loads(proc.stdout.split("history calls:", 1)[1])
            self.assertEqual(calls, [{"enabled": "all", "max_entries": 1_000_000, "stacks": "python"}, {"enabled": None}])
            self.assertIn("cumemaudit: capture profile (11 allocator events):", proc.stderr)
            self.assertIn("cumemaudit:   model.py:40 (combine): 2 allocations in pool default", proc.stderr)
            with open(out) as f:
                self.assertEqual(json.load(f), json.loads(json.dumps(holes.summarize(SNAPSHOT))))

    def test_under_the_shim_the_report_names_the_lines_that_left_holes(self):
        """The rows that left free bytes reach the report (`capture_profile`), the most free first, and
        `cumemaudit report` prints them."""
        cli, sim = os.environ.get("CLI"), os.environ.get("CUMEMAUDIT_SIM_DIR")
        if not cli or not sim:
            self.skipTest("CLI and CUMEMAUDIT_SIM_DIR come from meson")
        with tempfile.TemporaryDirectory() as tmp:
            proc = subprocess.run([cli, "run", "--sim", "--report-dir", tmp, "--fail-on", "none", "--", sys.executable,
                                   os.path.join(HERE, "capture_profile_user.py"), os.path.join(tmp, "profile.json"), "--cuda"],
                                  capture_output=True, text=True, env=window_env(tmp), timeout=60)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            (path,) = [os.path.join(tmp, f) for f in os.listdir(tmp) if f.startswith("cumemaudit.") and f.endswith(".json")]
            with open(path) as f:
                rep = json.load(f)
            self.assertEqual(rep["capture_trace_entries"], 11)
            self.assertEqual([(r["line"], r["pool"], r["allocations"], r["allocated_bytes"], r["largest_bytes"], r["hole_bytes"],
                               r["hole_blocks"]) for r in rep["capture_profile"]],
                             [("model.py:40 (combine)", "default", 2, 96 * MiB, 64 * MiB, 64 * MiB, 1),
                              ("model.py:52 (capture)", "graph (1, 1)", 1, 4 * MiB, 4 * MiB, 4 * MiB, 1)])
            text = subprocess.run([cli, "report", path], capture_output=True, text=True, timeout=60).stdout
            self.assertIn("Capture profile (11 allocator events): the lines whose blocks were left free\n"
                          "  model.py:40 (combine): 2 allocations in pool default (the largest 64.0 MiB); 64.0 MiB of it "
                          "free in 1 blocks\n", text)
            page = os.path.join(tmp, "page.html")
            subprocess.run([cli, "html", "-o", page, path], check=True, capture_output=True, timeout=60)
            with open(page) as f:
                html = f.read()
            self.assertIn("<h3>Capture profile</h3>", html)
            self.assertIn("(11 allocator events of PyTorch's history)", html)
            self.assertIn(f"<tr><td>model.py:40 (combine)</td><td>default</td><td class=\"num\" data-sort=\"2\">2</td>"
                          f"<td class=\"num\" data-sort=\"{96 * MiB}\"", html)
            row = html[html.index("<tr><td>model.py:40 (combine)</td>"):]
            row = row[:row.index("</tr>")]
            self.assertIn(f"data-sort=\"{64 * MiB}\" title=\"{64 * MiB} bytes\">64.0 MiB</td><td class=\"num\" "
                          f"data-sort=\"1\">1</td>", row)


if __name__ == "__main__":
    unittest.main()
