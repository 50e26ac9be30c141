#!/usr/bin/env python3
"""Capture-time fragmentation at small scale: CUDA graph capture at decreasing batch sizes whose warm-up
allocates varying-size temporaries, beside a fixed outside VMM buffer (DeepEP's registered buffers), with
the default pool's expandable segments off. The temporaries go either to PyTorch's default pool (mode
`default`, vLLM's way) or to a cumemaudit pool MemPool made for each batch size and dropped after its
warm-up (mode `cumemaudit`). The graphs themselves share one graph pool in both modes.

  pool_capture.py run --mode default|cumemaudit [--sizes 1024,768,...] [--free-gib G] [...]
      one sequence in this process; prints `RESULT {json}`
  pool_capture.py bench --cli BUILD/tools/cumemaudit/cumemaudit --pool-lib BUILD/src/pool/libcumemaudit_pool.so
      both modes side by side, each run in its own process (about 3 minutes on an H200): unconstrained
      figures, the largest starting batch whose whole decreasing sequence captures on a GPU left with
      --free-gib free, and each mode under the auditor. Prints a table; --json-out FILE keeps the figures.

Needs PyTorch with CUDA, and tools/python on PYTHONPATH (bench sets it)."""
import argparse
import ctypes
import gc
import json
import os
import random
import subprocess
import sys
import glob
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MiB, GiB = 1 << 20, 1 << 30
SIZES = "1024,768,512,384,256,192,128,96,64,48,32,24,16,8,4,2,1"


# ---------------------------------------------------------------- outside the caching allocator (ctypes)

class _Prop(ctypes.Structure):  # CUmemAllocationProp
    _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("loc_type", ctypes.c_int),
                ("loc_id", ctypes.c_int), ("win32HandleMetaData", ctypes.c_void_p), ("compressionType", ctypes.c_ubyte),
                ("gpuDirectRDMACapable", ctypes.c_ubyte), ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]


class _Access(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("loc_type", ctypes.c_int), ("loc_id", ctypes.c_int), ("flags", ctypes.c_int)]


class Driver:
    """The few driver calls the benchmark makes itself: a fixed VMM buffer and a plain filler allocation,
    both released exactly once at the end so the auditor's report stays about the pools."""

    def __init__(self, device):
        self.d = ctypes.CDLL("libcuda.so.1")
        self.device = device
        for name in ("cuMemCreate", "cuMemAddressReserve", "cuMemMap", "cuMemSetAccess", "cuMemUnmap",
                     "cuMemAddressFree", "cuMemRelease", "cuMemAlloc_v2", "cuMemFree_v2"):
            getattr(self.d, name).restype = ctypes.c_int

    def check(self, rc, what):
        if rc != 0:
            raise RuntimeError(f"{what} failed: CUresult {rc}")

    def vmm_buffer(self, nbytes):
        prop = _Prop(type=1, requestedHandleTypes=1, loc_type=1, loc_id=self.device)  # pinned, POSIX fd, device
        h, va = ctypes.c_ulonglong(), ctypes.c_ulonglong()
        self.check(self.d.cuMemCreate(ctypes.byref(h), ctypes.c_size_t(nbytes), ctypes.byref(prop), ctypes.c_ulonglong(0)), "cuMemCreate")
        self.check(self.d.cuMemAddressReserve(ctypes.byref(va), ctypes.c_size_t(nbytes), ctypes.c_size_t(0),
                                              ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)), "cuMemAddressReserve")
        self.check(self.d.cuMemMap(va, ctypes.c_size_t(nbytes), ctypes.c_size_t(0), h, ctypes.c_ulonglong(0)), "cuMemMap")
        acc = _Access(loc_type=1, loc_id=self.device, flags=3)
        self.check(self.d.cuMemSetAccess(va, ctypes.c_size_t(nbytes), ctypes.byref(acc), ctypes.c_size_t(1)), "cuMemSetAccess")
        return (h, va, nbytes)

    def release_vmm(self, buf):
        h, va, nbytes = buf
        self.check(self.d.cuMemUnmap(va, ctypes.c_size_t(nbytes)), "cuMemUnmap")
        self.check(self.d.cuMemAddressFree(va, ctypes.c_size_t(nbytes)), "cuMemAddressFree")
        self.check(self.d.cuMemRelease(h), "cuMemRelease")

    def plain(self, nbytes):
        p = ctypes.c_ulonglong()
        self.check(self.d.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(nbytes)), f"cuMemAlloc_v2({nbytes})")
        return p

    def free_plain(self, p):
        self.check(self.d.cuMemFree_v2(p), "cuMemFree_v2")


# ---------------------------------------------------------------- one sequence

def run(args):
    import torch
    import cumemaudit.pool as cpool

    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    if "expandable_segments:True" in conf.replace(" ", ""):
        raise SystemExit("pool_capture: the default pool's expandable segments must be off (the seed's setting)")
    dev = torch.cuda.current_device()
    drv = Driver(dev)
    total = torch.cuda.mem_get_info()[1]
    sizes = [int(x) for x in args.sizes.split(",")]
    hidden, tokens = args.hidden, args.tokens
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    model = torch.nn.Sequential(torch.nn.Linear(hidden, 4 * hidden), torch.nn.GELU(),
                                torch.nn.Linear(4 * hidden, hidden)).to("cuda", torch.bfloat16)
    fixed = drv.vmm_buffer(args.fixed_gib * GiB)  # what DeepEP/NVSHMEM would have registered
    side = torch.cuda.Stream()
    with torch.no_grad(), torch.cuda.stream(side):  # cuBLAS workspaces made now, in the default pool
        model(torch.zeros(8, hidden, device="cuda", dtype=torch.bfloat16))
    torch.cuda.synchronize()
    filler = None
    if args.free_gib > 0:
        free_now = torch.cuda.mem_get_info()[0]
        want = free_now - int(args.free_gib * GiB)
        if want > 0:
            filler = drv.plain(want)  # a plain allocation: the GPU left with --free-gib free
    base_used = total - torch.cuda.mem_get_info()[0]
    peak_used = base_used
    torch.cuda.reset_peak_memory_stats()

    def sample():
        nonlocal peak_used
        peak_used = max(peak_used, total - torch.cuda.mem_get_info()[0])

    graph_pool = torch.cuda.graph_pool_handle()
    graphs, outs, statics = [], {}, {}
    captured, failed_at, error = [], None, ""
    warmup_s = capture_s = 0.0
    for bs in sizes:
        rows = bs * tokens
        try:
            t0 = time.perf_counter()
            pool = cpool.torch_mempool(dev, cache_limit=0) if args.mode == "cumemaudit" else None
            route = (lambda: torch.cuda.use_mem_pool(pool)) if pool is not None else None
            with torch.no_grad(), torch.cuda.stream(side):
                temps = []
                # Warm-up part one: activations and temporaries of sizes that vary from batch to batch.
                with (route() if route else _nothing()):
                    x = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16)
                    for _ in range(args.temps):
                        temps.append(torch.empty(int(rows * hidden * 2 * rng.uniform(0.3, 2.5)), dtype=torch.uint8, device="cuda"))
                    y = model(x)
                    del temps[::2]  # some go early, leaving holes
                # The graph's static input, kept for good: PyTorch's default pool in both modes.
                statics[bs] = torch.randn(rows, hidden, device="cuda", dtype=torch.bfloat16)
                with (route() if route else _nothing()):
                    for _ in range(args.temps):
                        temps.append(torch.empty(int(rows * hidden * 2 * rng.uniform(0.3, 2.5)), dtype=torch.uint8, device="cuda"))
                    y = model(y)
                sample()
                del temps, x, y
            torch.cuda.synchronize()
            if pool is not None:
                del pool, route  # ~MemPool empties its cache: every segment back to the cumemaudit pool
                gc.collect()
                cpool.trim(dev)
            if args.empty_cache:
                torch.cuda.empty_cache()  # the default pool gives back what is wholly free
            warmup_s += time.perf_counter() - t0
            t0 = time.perf_counter()
            g = torch.cuda.CUDAGraph()
            with torch.no_grad(), torch.cuda.graph(g, pool=graph_pool):
                outs[bs] = model(statics[bs])
            torch.cuda.synchronize()
            capture_s += time.perf_counter() - t0
            graphs.append(g)
            captured.append(bs)
            sample()
        except (torch.cuda.OutOfMemoryError, RuntimeError) as e:  # cuBLAS reports its own allocation failures
            failed_at, error = bs, f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
            break
    try:
        for g in graphs:  # replay once: the graphs work
            g.replay()
        torch.cuda.synchronize()
    except RuntimeError as e:
        error += f"; replay: {(str(e).splitlines() or [''])[0][:200]}"
    reserved, allocated = torch.cuda.memory_reserved(), torch.cuda.memory_allocated()
    st = cpool.stats(dev) if args.mode == "cumemaudit" else None
    result = {"mode": args.mode, "captured": captured, "failed_at": failed_at, "error": error,
              "peak_reserved": torch.cuda.max_memory_reserved(), "reserved_after": reserved,
              "reserved_unallocated_after": reserved - allocated, "peak_used_extra": peak_used - base_used,
              "warmup_s": round(warmup_s, 3), "capture_s": round(capture_s, 3),
              "pool": None if st is None else {k: st[k] for k in ("reserved_bytes", "peak_reserved_bytes", "allocations",
                                                                 "frees", "failed_allocations", "deferred_frees")},
              "pool_driver_calls": None if st is None else sum(st["driver_calls"].values())}
    del graphs, outs, statics
    torch.cuda.synchronize()
    if filler is not None:
        drv.free_plain(filler)
    drv.release_vmm(fixed)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ---------------------------------------------------------------- both modes side by side

def bench(args):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.path.join(ROOT, "tools", "python"), env.get("PYTHONPATH")]))
    env["CUMEMAUDIT_POOL_LIB"] = os.path.abspath(args.pool_lib)
    env.pop("PYTORCH_CUDA_ALLOC_CONF", None)  # expandable segments off, as DeepEP's registered buffers require
    common = ["--hidden", str(args.hidden), "--tokens", str(args.tokens), "--temps", str(args.temps),
              "--fixed-gib", str(args.fixed_gib), "--seed", str(args.seed)]

    def one(mode, sizes, free_gib, prefix=(), timeout=120):
        cmd = [*prefix, sys.executable, os.path.abspath(__file__), "run", "--mode", mode, "--sizes",
               ",".join(map(str, sizes)), "--free-gib", str(free_gib), *common]
        t0 = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
            rc, out, err = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired:
            rc, out, err = 124, "", "timed out"
        lines = [l for l in out.splitlines() if l.startswith("RESULT ")]
        res = json.loads(lines[-1][7:]) if lines else {"error": (err.strip().splitlines() or ["no output"])[-1][:300]}
        res.update(rc=rc, wall_s=round(time.time() - t0, 1))
        print(f"  {mode:10} sizes {sizes[0]}..{sizes[-1]} free {free_gib} GiB: rc {rc}, captured "
              f"{len(res.get('captured', []))}, failed at {res.get('failed_at')}", flush=True)
        return res

    sizes = [int(x) for x in args.sizes.split(",")]
    out = {"sizes": sizes, "free_gib": args.free_gib, "fixed_gib": args.fixed_gib, "hidden": args.hidden,
           "tokens": args.tokens, "temps": args.temps, "date": time.strftime("%Y-%m-%d"), "modes": {}}
    for mode in ("default", "cumemaudit"):
        deadline = time.time() + args.budget_s / 2  # each mode its half; the audited run is outside it
        m = out["modes"][mode] = {}
        print(f"{mode}: unconstrained", flush=True)
        m["free"] = one(mode, sizes, 0)
        # The largest starting batch whose whole decreasing sequence captures with --free-gib free: a binary
        # search over where the sequence starts (smaller starts need less memory).
        print(f"{mode}: largest starting batch with {args.free_gib} GiB free", flush=True)
        lo, hi, best, tries = 0, len(sizes) - 1, None, []
        while lo <= hi and deadline - time.time() > 30:
            mid = (lo + hi) // 2
            r = one(mode, sizes[mid:], args.free_gib, timeout=max(20, deadline - time.time()))
            ok = r.get("rc") == 0 and r.get("failed_at") is None and len(r.get("captured", [])) == len(sizes) - mid
            tries.append((sizes[mid], ok))
            if ok:
                best, hi = sizes[mid], mid - 1
            else:
                lo = mid + 1
        m["largest_start"], m["search"] = best, tries
        print(f"{mode}: under the auditor", flush=True)
        rd = tempfile.mkdtemp()
        a = one(mode, sizes, 0, prefix=(args.cli, "run", "--report-dir", rd, "--"))
        reps = [json.load(open(f)) for f in glob.glob(os.path.join(rd, "cumemaudit.*.json"))]
        s = reps[0]["summary"] if reps else {}
        owners = {o["owner"]: o for o in reps[0]["owners"]} if reps else {}
        m["audit"] = {"rc": a.get("rc"), "leaked_bytes": s.get("leaked_bytes"), "misuse_events": s.get("misuse_events"),
                      "leaks": [(l["class"], l["owner"], l["bytes"]) for l in (reps[0]["leaks"] if reps else [])
                                if l["class"] in ("unreachable", "open-export")],
                      "cumemaudit_pool_peak": owners.get("cumemaudit_pool", {}).get("peak_bytes"),
                      "reports": len(reps)}
    print(table(out))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(out, f, indent=1)
    ok = all(m["audit"]["rc"] == 0 and m["audit"]["leaked_bytes"] == 0 for m in out["modes"].values())
    return 0 if ok else 1


def table(out):
    """The side-by-side table (also what gpu_suite.py writes into RESULTS.md)."""
    def gib(n):
        return "—" if n is None else f"{n / GiB:.2f} GiB"
    d, c = out["modes"].get("default", {}), out["modes"].get("cumemaudit", {})
    rows = [("peak reserved (torch.cuda.max_memory_reserved)", lambda m: gib(m["free"].get("peak_reserved"))),
            ("peak device memory beyond the start (cuMemGetInfo)", lambda m: gib(m["free"].get("peak_used_extra"))),
            ("reserved but unallocated after the captures", lambda m: gib(m["free"].get("reserved_unallocated_after"))),
            ("cumemaudit pool still held after the captures", lambda m: gib((m["free"].get("pool") or {}).get("reserved_bytes"))),
            ("graphs captured (unconstrained)", lambda m: f"{len(m['free'].get('captured', []))} of {len(out['sizes'])}"),
            (f"largest starting batch captured with {out['free_gib']} GiB free", lambda m: str(m.get("largest_start"))),
            ("capture time, all graphs", lambda m: f"{m['free'].get('capture_s', 0):.2f} s"),
            ("warm-up time, all batches", lambda m: f"{m['free'].get('warmup_s', 0):.2f} s"),
            ("cumemaudit pool driver calls", lambda m: "—" if m["free"].get("pool_driver_calls") is None
             else str(m["free"]["pool_driver_calls"])),
            ("auditor: exit code, leaked bytes, misuse", lambda m: f"{m['audit']['rc']}, {m['audit']['leaked_bytes']}, {m['audit']['misuse_events']}")]
    lines = [f"Graph capture at batch sizes {out['sizes'][0]}..{out['sizes'][-1]} (decreasing), hidden {out['hidden']}, "
             f"{out['tokens']} tokens a sequence, {out['temps']} temporaries per warm-up half, a fixed "
             f"{out['fixed_gib']} GiB VMM buffer, expandable segments off ({out['date']}).", "",
             "| | temporaries in the default pool | temporaries in the cumemaudit pool |", "|---|---|---|"]
    for name, f in rows:
        try:
            lines.append(f"| {name} | {f(d)} | {f(c)} |")
        except (KeyError, TypeError):
            lines.append(f"| {name} | — | — |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", choices=["run", "bench"])
    p.add_argument("--mode", choices=["default", "cumemaudit"], default="default")
    p.add_argument("--sizes", default=SIZES)
    p.add_argument("--free-gib", type=float, default=4.0, help="run: leave this much free (0: no filler); bench: the constrained runs")
    p.add_argument("--fixed-gib", type=int, default=2, help="the outside VMM buffer")
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--tokens", type=int, default=32, help="rows per batch entry")
    p.add_argument("--temps", type=int, default=3, help="temporaries per warm-up half")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-empty-cache", dest="empty_cache", action="store_false",
                   help="default mode: skip torch.cuda.empty_cache() after each warm-up")
    p.add_argument("--cli", help="bench: the cumemaudit CLI")
    p.add_argument("--pool-lib", help="bench: libcumemaudit_pool.so")
    p.add_argument("--budget-s", type=float, default=150, help="bench: seconds for both modes' runs before the audited ones")
    p.add_argument("--json-out")
    a = p.parse_args()
    if a.what == "bench" and not (a.cli and a.pool_lib):
        p.error("bench needs --cli and --pool-lib")
    return run(a) if a.what == "run" else bench(a)


if __name__ == "__main__":
    sys.exit(main())
