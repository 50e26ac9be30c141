#!/usr/bin/env python3
"""The GPU `neighbour` check, run by gpu_suite.py: one process holds most of the GPU, as a second test worker
or an inference engine beside a trainer does, and another, under the audit, fills what is left until even a
2 MiB request is refused.

  neighbour_workload.py hold FRACTION   allocate FRACTION of the GPU, print "holding PID BYTES", wait for stdin
  neighbour_workload.py fill            mark step 1, allocate 1 GiB, 64 MiB, then 2 MiB blocks until each is
                                        refused, mark step 2, print one JSON line of what it saw"""
import ctypes
import json
import os
import sys

MiB = 1 << 20
OUT_OF_MEMORY = 2


def driver():
    cu = ctypes.CDLL("libcuda.so.1")
    cu.cuMemGetInfo_v2.argtypes = [ctypes.POINTER(ctypes.c_size_t)] * 2
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0 and cu.cuCtxSetCurrent(ctx) == 0
    return cu


def mem_info(cu):
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    assert cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
    return free.value, total.value


def alloc(cu, size):
    ptr = ctypes.c_uint64()
    rc = cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size))
    return ptr.value if rc == 0 else -rc


def hold(fraction):
    cu = driver()
    _, total = mem_info(cu)
    size = int(total * fraction) // (2 * MiB) * (2 * MiB)
    assert alloc(cu, size) > 0, "the holder could not allocate"
    print(f"holding {os.getpid()} {size}", flush=True)
    sys.stdin.read()


def fill():
    import cumemaudit
    cu = driver()
    cumemaudit.step(1)
    kept, refused = [], []
    for block in (1024 * MiB, 64 * MiB, 2 * MiB):
        while True:
            p = alloc(cu, block)
            if p < 0:
                refused.append({"bytes": block, "result": -p})
                break
            kept.append((p, block))
    cumemaudit.step(2)
    free, total = mem_info(cu)
    for p, _ in kept:
        cu.cuMemFree_v2(ctypes.c_uint64(p))
    print(json.dumps({"kept_bytes": sum(size for _, size in kept), "refused": refused, "free": free, "total": total}))


if __name__ == "__main__":
    hold(float(sys.argv[2])) if sys.argv[1] == "hold" else fill()
