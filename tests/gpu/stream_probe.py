#!/usr/bin/env python3
"""What a stream costs on the device (cuda-python, no audit): used memory (cuMemGetInfo) after each of 40
streams created, after work on each, after each destroy; streams of the greatest priority; PyTorch's stream
pool. One line per measurement: name, then the used memory it moved in bytes."""
import subprocess
import sys

from alloc_overhead import ok, used  # this directory
from cuda.bindings import driver as cu


def driver_streams():
    ok(cu.cuInit(0))
    ctx = ok(cu.cuDevicePrimaryCtxRetain(ok(cu.cuDeviceGet(0))))
    ok(cu.cuCtxSetCurrent(ctx))
    buf = ok(cu.cuMemAlloc(1 << 20))
    ok(cu.cuMemsetD8(buf, 0, 1 << 20))
    ok(cu.cuCtxSynchronize())
    start = used()
    streams, deltas = [], []
    for _ in range(40):
        before = used()
        streams.append(ok(cu.cuStreamCreate(1)))
        deltas.append(used() - before)
    print("create each:", " ".join(str(d >> 10) for d in deltas), "KiB", flush=True)
    print(f"created 40: {used() - start}")
    before = used()
    for s in streams:
        ok(cu.cuMemsetD8Async(buf, 1, 1 << 20, s))
    ok(cu.cuCtxSynchronize())
    print(f"work on each of 40: {used() - before}")
    before = used()
    marks = {}
    for n, s in enumerate(streams, 1):
        ok(cu.cuStreamDestroy(s))
        if n in (1, 8, 16, 24, 32, 40):
            ok(cu.cuCtxSynchronize())
            marks[n] = used() - before
    print("destroyed:", " ".join(f"{n}={d}" for n, d in marks.items()), flush=True)
    low, high = ok(cu.cuCtxGetStreamPriorityRange())
    before = used()
    prio = [ok(cu.cuStreamCreateWithPriority(1, high)) for _ in range(16)]
    print(f"16 of priority {high}: {used() - before}")
    before = used()
    again = [ok(cu.cuStreamCreate(1)) for _ in range(16)]
    print(f"16 more after the destroys: {used() - before}")
    before = used()
    blocking = [ok(cu.cuStreamCreate(0)) for _ in range(16)]
    print(f"16 blocking (flags 0): {used() - before}", flush=True)
    del prio, again, blocking


TORCH = r"""
import torch
from alloc_overhead import ok, used  # this directory
from cuda.bindings import driver as cu
def used():
    free, total = torch.cuda.mem_get_info()
    return total - free
torch.ones(1, device="cuda"); torch.cuda.synchronize()
before = used(); s = torch.cuda.Stream(); torch.cuda.synchronize()
print(f"torch first Stream() (the pool): {used() - before}")
before = used(); t = [torch.cuda.Stream() for _ in range(64)]; torch.cuda.synchronize()
print(f"torch 64 more Stream(): {used() - before}")
before = used(); h = torch.cuda.Stream(priority=-1); torch.cuda.synchronize()
print(f"torch first high-priority Stream(): {used() - before}")
"""


if __name__ == "__main__":
    driver_streams()
    subprocess.run([sys.executable, "-c", TORCH], check=False)
    sys.exit(0)
