#!/usr/bin/env python3
"""Real PyTorch / NCCL / Triton workloads for the GPU suite. Each prints one deterministic `result:` line,
so the suite can check the program computes the same thing with and without the shim, and `time:` lines
for the overhead table.

  torch_workloads.py caching|expandable|graph|triton|train|nccl [--rank R --world W] [--steps N]
"""
import argparse
import os
import statistics
import time

import torch


def warm_up(step, times=1, stream=None):
    """Runs step() `times` on a side stream (a new one unless given), as PyTorch asks before a capture, and has
    the current stream wait."""
    s = stream if stream is not None else torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(times):
            step()
    torch.cuda.current_stream().wait_stream(s)


def checksum(t):
    return f"{float(t.double().sum().item()):.6e}"


def caching(_):
    torch.manual_seed(0)
    out = []
    for i in range(20):
        a = torch.randn(1024 + 64 * i, 1024, device="cuda")
        b = torch.randn(1024, 512, device="cuda")
        out.append(checksum(a @ b))
        del a, b
    torch.cuda.synchronize()
    print("result:", out[-1], torch.cuda.memory_reserved() > 0)


def expandable(_):
    # PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True is set by the suite: VMM growth and shrink.
    torch.manual_seed(0)
    keep = []
    for i in range(12):
        keep.append(torch.ones(32 << 20, device="cuda") * i)  # 128 MiB each: the segment grows
    total = sum(float(t[0].item()) for t in keep)
    del keep
    torch.cuda.synchronize()
    torch.cuda.empty_cache()  # shrink: unmap, release
    x = torch.randn(8 << 20, device="cuda")
    print("result:", total, x.shape[0])


def graph(_):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)).cuda()
    static_in = torch.randn(64, 512, device="cuda")
    warm_up(lambda: model(static_in), times=3)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_out = model(static_in)
    results = []
    for i in range(5):
        static_in.copy_(torch.full((64, 512), 0.01 * i, device="cuda"))
        g.replay()
        results.append(checksum(static_out))
    torch.cuda.synchronize()
    del g
    print("result:", results[-1])


def triton_kernel(_):
    import triton
    import triton.language as tl

    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)

    n = 1 << 20
    x = torch.arange(n, device="cuda", dtype=torch.float32)
    y = torch.ones(n, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)
    add[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
    torch.cuda.synchronize()
    print("result:", checksum(out))


def train(args):
    """A small training loop; prints the median step time (the overhead table compares it). With --ab (under
    cumemaudit or the minimal recorder) steps alternate between recorded and passed through
    (cumemaudit_bench_pass_through, process-wide: the autograd thread's calls too), and it also prints the
    median of the per-pair ratios: the recording cost inside one process (tests/gpu/cost.py)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(8)]).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    pass_through = None
    if args.ab:
        import ctypes
        try:
            pass_through = ctypes.CDLL(None).cumemaudit_bench_pass_through
        except AttributeError:
            raise SystemExit("train --ab: no preloaded library has cumemaudit_bench_pass_through")
    times, passing = [], []
    result = None
    for step in range(args.steps):
        off = pass_through is not None and ((step ^ (step >> 1)) & 1) == 1  # r p p r r p p r …
        if pass_through is not None:
            pass_through(1 if off else 0)  # between steps: every tensor of a step is freed within it
        t0 = time.perf_counter()
        x = torch.randn(256, 1024, device="cuda")
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        passing.append(off)
        if step == args.steps - 1:
            result = float(loss.item())
        del x, loss
    if pass_through is not None:
        pass_through(0)
    recorded = sorted(t for i, t in enumerate(times) if i >= 5 and not passing[i])
    print(f"time: step_median_us={1e6 * recorded[len(recorded) // 2]:.1f}")
    if pass_through is not None:
        ratios = []
        for i in range(8, args.steps - 1, 2):  # pairs (i, i+1) hold one step of each kind; warm-up left out
            rec, off = (times[i], times[i + 1]) if not passing[i] else (times[i + 1], times[i])
            ratios.append(rec / off)
        ratios.sort()
        print(f"ab: added_pct={100 * (statistics.median(ratios) - 1):.2f} min_pct={100 * (ratios[0] - 1):.2f} "
              f"max_pct={100 * (ratios[-1] - 1):.2f} pairs={len(ratios)}")
    print("result:", f"{result:.4e}")


def loop(args):
    """A training loop with expandable segments (set by the suite), a CUDA graph and an NCCL group, marking
    every step with cumemaudit.torch_step so each step splits driver-used memory by owner."""
    import cumemaudit
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29555")
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", rank=0, world_size=1)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(6)]).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    static_in = torch.randn(128, 2048, device="cuda")
    warm_up(lambda: model(static_in))
    g = torch.cuda.CUDAGraph()
    with cumemaudit.phase("capture"):
        with torch.cuda.graph(g):
            static_out = model(static_in)
    for step in range(args.steps):
        x = torch.randn(256 * (1 + step % 4), 2048, device="cuda")  # varying shapes: the segment grows
        loss = model(x).square().mean()
        loss.backward()
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        opt.zero_grad(set_to_none=True)
        g.replay()
        torch.cuda.synchronize()
        cumemaudit.torch_step(step)
    print("result:", f"{float(static_out.double().sum().item()):.4e}", cumemaudit.active())
    dist.destroy_process_group()


def profile(_):
    """torch.profiler around a few kernels: the profile must keep its CUDA events whatever backend audits."""
    from torch.profiler import ProfilerActivity, profile as torch_profile

    a = torch.randn(1024, 1024, device="cuda")
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            b = a @ a
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    print(f"profile: cuda_events={len(kernels)}")
    print("result:", f"{float(b.double().sum().item()):.4e}")


def nccl(args):
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.cuda.set_device(args.rank % torch.cuda.device_count())
    dist.init_process_group("nccl", rank=args.rank, world_size=args.world)
    t = torch.full((1 << 20,), float(args.rank + 1), device="cuda")
    for _ in range(5):
        dist.all_reduce(t)
        t /= args.world
    torch.cuda.synchronize()
    expected = sum(range(1, args.world + 1)) / args.world
    dist.destroy_process_group()
    print("result:", f"{float(t[0].item()):.4f}", f"{expected:.4f}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["caching", "expandable", "graph", "triton", "train", "nccl", "loop", "profile"])
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--world", type=int, default=1)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--ab", action="store_true", help="train: alternate recorded and passed-through blocks")
    args = p.parse_args()
    {"caching": caching, "expandable": expandable, "graph": graph, "triton": triton_kernel, "train": train,
     "nccl": nccl, "loop": loop, "profile": profile}[args.what](args)


if __name__ == "__main__":
    main()
