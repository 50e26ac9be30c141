#!/usr/bin/env python3
"""The capture out-of-memory error at small scale, for the capture profile: a vLLM-style loop over batch sizes,
largest first, each warmed up and then captured into one shared graph pool; the model step's combine
multiplies its output by a per-row score into a new tensor (as DeepEP's combine_tokens does), so every size
leaves temporaries of its own in the default pool.

  capture_replay.py SNAPSHOT_JSON [--sizes 4096,3072,...] [--hidden 4096]
      records PyTorch's history over the loop and writes its snapshot, history included, to SNAPSHOT_JSON
      (the recorded input the profile's tests replay), then prints the profile of it
  capture_replay.py PROFILE_JSON --window [--leave-gib G]
      the loop inside `with cumemaudit.capture_profile(PROFILE_JSON)`, as a user runs it; with --leave-gib the
      GPU is first filled to leave G GiB, so the loop runs out of memory part way, as the original did"""
import argparse
import json

import torch

import cumemaudit.holes as cp
from torch_workloads import warm_up  # this directory: the scripts run from it


def combine(hidden_states, per_row_score):
    return hidden_states * per_row_score


def model_step(x, weight, score):
    h = torch.relu(x @ weight)
    return combine(h, score)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("snapshot")
    p.add_argument("--sizes", default="4096,3072,2048,1536,1024,768,512,384,256,192,128,96,64,32,16,8")
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--window", action="store_true")
    p.add_argument("--leave-gib", type=float)
    a = p.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    if a.window:
        import cumemaudit
        filler = None
        if a.leave_gib is not None:
            free, _ = torch.cuda.mem_get_info()
            filler = torch.empty(free - int(a.leave_gib * (1 << 30)), dtype=torch.uint8, device="cuda")
        try:
            with cumemaudit.capture_profile(a.snapshot):
                kept = capture_all(sizes, a.hidden)  # noqa: F841  (the graphs live until the window's end)
            print("captured every size")
        except torch.cuda.OutOfMemoryError as e:
            print("out of memory:", str(e).splitlines()[0][:200])
        del filler
        return
    torch.cuda.memory._record_memory_history(max_entries=100_000, stacks="python")
    kept = capture_all(sizes, a.hidden)  # noqa: F841  (the graphs live until the snapshot)
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    with open(a.snapshot, "w") as f:
        json.dump(snapshot, f)
    profile = cp.summarize(snapshot, torch.cuda.current_device())
    print("\n".join(cp.lines(profile)))
    print("PROFILE " + json.dumps(profile))


def capture_all(sizes, hidden):
    """Each size warmed up on a side stream, then captured into the one shared graph pool, largest first."""
    weight = torch.randn(hidden, hidden, device="cuda", dtype=torch.bfloat16)
    pool = torch.cuda.graph_pool_handle()
    kept = []
    for n in sizes:
        x = torch.randn(n, hidden, device="cuda", dtype=torch.bfloat16)
        score = torch.rand(n, 1, device="cuda", dtype=torch.bfloat16)
        warm_up(lambda: model_step(x, weight, score), times=2)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool):
            out = model_step(x, weight, score)
        kept.append((g, x, score, out))
    torch.cuda.synchronize()
    return kept


if __name__ == "__main__":
    main()
