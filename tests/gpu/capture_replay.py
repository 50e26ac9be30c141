#!/usr/bin/env python3
"""The capture out-of-memory error at small scale, for the capture profile: a vLLM-style loop over batch sizes,
largest first, each warmed up and then captured into one shared graph pool; the model step's combine
multiplies its output by a per-row score into a new tensor (as DeepEP's combine_tokens does), so every size
leaves temporaries of its own in the default pool.

  capture_replay.py SNAPSHOT_JSON [--sizes 4096,3072,...] [--hidden 4096]
      records PyTorch's history over the loop and writes its snapshot, history included, to SNAPSHOT_JSON
      (the recorded input the profile's tests replay), then prints the profile of it
  capture_replay.py PROFILE_JSON --window [--leave-gib G] [--vmm-mib M] [--scratch] [--one-stream]
      the loop inside `with cumemaudit.capture_profile(PROFILE_JSON)`, as a user runs it; with --leave-gib the
      GPU is first filled to leave G GiB, so the loop runs out of memory part way, as the original did; with
      --vmm-mib a DeepEP-style buffer (cuMemCreate, mapped) sits beside PyTorch's pools; with --scratch the
      combine writes into one buffer of the largest size, reused by every size (the cure the reporter proposed);
      with --one-stream every size is warmed up and captured on one side stream, as vLLM's graph_capture()
      does, where by default each size's warm-up makes a stream of its own"""
import argparse
import json

import torch

import cumemaudit.holes as cp
from oom_workload import Driver  # this directory: the scripts run from it
from torch_workloads import warm_up

MiB = 1 << 20


def combine(hidden_states, per_row_score, out=None):
    if out is not None:
        return torch.mul(hidden_states, per_row_score, out=out[: hidden_states.shape[0]])
    return hidden_states * per_row_score


def model_step(x, weight, score, out=None):
    h = torch.relu(x @ weight)
    return combine(h, score, out)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("snapshot")
    p.add_argument("--sizes", default="4096,3072,2048,1536,1024,768,512,384,256,192,128,96,64,32,16,8")
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--window", action="store_true")
    p.add_argument("--leave-gib", type=float)
    p.add_argument("--vmm-mib", type=int, default=0)
    p.add_argument("--scratch", action="store_true")
    p.add_argument("--one-stream", action="store_true")
    a = p.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    if a.window:
        import cumemaudit
        torch.zeros(1, device="cuda")
        if a.vmm_mib:
            Driver().vmm_buffer(a.vmm_mib * MiB)
        filler = None
        if a.leave_gib is not None:
            free, _ = torch.cuda.mem_get_info()
            filler = torch.empty(free - int(a.leave_gib * (1 << 30)), dtype=torch.uint8, device="cuda")
        cumemaudit.mark("before capture")  # what the device holds before the loop: `cumemaudit budget` starts there
        try:
            with cumemaudit.capture_profile(a.snapshot):
                kept = capture_all(sizes, a.hidden, a.scratch, a.one_stream)  # noqa: F841  (the graphs live until the window's end)
            print("captured every size")
        except RuntimeError as e:  # OutOfMemoryError, or the capture it invalidated (torch.AcceleratorError)
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


def capture_all(sizes, hidden, scratch=False, one_stream=False):
    """Each size warmed up on a side stream, then captured into the one shared graph pool, largest first;
    with `scratch` every size's combine writes into one buffer made before the loop; with `one_stream` one
    side stream serves every warm-up and capture."""
    weight = torch.randn(hidden, hidden, device="cuda", dtype=torch.bfloat16)
    buffer = torch.empty(max(sizes), hidden, device="cuda", dtype=torch.bfloat16) if scratch else None
    pool = torch.cuda.graph_pool_handle()
    stream = torch.cuda.Stream() if one_stream else None
    kept = []
    for n in sizes:
        x = torch.randn(n, hidden, device="cuda", dtype=torch.bfloat16)
        score = torch.rand(n, 1, device="cuda", dtype=torch.bfloat16)
        warm_up(lambda: model_step(x, weight, score, buffer), times=2, stream=stream)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=pool, stream=stream):
            out = model_step(x, weight, score, buffer)
        kept.append((g, x, score, out))
    torch.cuda.synchronize()
    return kept


if __name__ == "__main__":
    main()
