#!/usr/bin/env python3
"""Workloads for the GPU suite's `pysites` part: leaks made from Python through
cuda-python, whose sites must name this file's lines, and a VMM cycle driven from Python to time the
Python frames and deep stacks at VMM calls. Runs on the interpreter the suite runs on.

  python_sites.py bindings          cuda.bindings.driver.cuMemCreate, never released
  python_sites.py core              cuda.core VirtualMemoryResource: 4 x (allocate 64 MiB, close)
  python_sites.py cycle --iters N   create+map+access+unmap+release of 2 MiB through ctypes; prints cycle_us=
"""
import ctypes
import statistics
import sys
import time

MiB = 1 << 20


def bindings():
    from cuda.bindings import driver as cu
    (err,) = cu.cuInit(0)
    err, dev = cu.cuDeviceGet(0)
    err, ctx = cu.cuDevicePrimaryCtxRetain(dev)
    (err,) = cu.cuCtxSetCurrent(ctx)
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = 0
    err, handle = cu.cuMemCreate(64 * MiB, prop, 0)  # BINDINGS LEAK
    assert err == cu.CUresult.CUDA_SUCCESS, err
    print("bindings handle", int(handle))


def core():
    try:
        from cuda.core import Device, VirtualMemoryResource
    except ImportError:
        from cuda.core.experimental import Device, VirtualMemoryResource
    dev = Device(0)
    dev.set_current()
    try:
        mr = VirtualMemoryResource(dev)
    except TypeError:
        mr = VirtualMemoryResource(0)
    for _ in range(4):
        buf = mr.allocate(64 * MiB)  # CORE LEAK
        buf.close()
    print("core done")


class Cycle:
    """The VMM cycle of bench_calls, from Python through ctypes.CDLL (the GIL released per call)."""

    def __init__(self):
        self.cu = ctypes.CDLL("libcuda.so.1")
        cu = self.cu
        assert cu.cuInit(0) == 0
        dev, ctx = ctypes.c_int(), ctypes.c_void_p()
        assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
        assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
        assert cu.cuCtxSetCurrent(ctx) == 0
        # CUmemAllocationProp (32 bytes): type, requestedHandleTypes, location {type, id}, then zeros.
        self.prop = (ctypes.c_int * 8)(1, 0, 1, 0, 0, 0, 0, 0)
        # CUmemAccessDesc: location {type=device, id=0}, flags=read|write.
        self.access = (ctypes.c_int * 3)(1, 0, 3)
        self.va = ctypes.c_ulonglong()
        assert cu.cuMemAddressReserve(ctypes.byref(self.va), ctypes.c_size_t(2 * MiB), ctypes.c_size_t(0),
                                      ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)) == 0

    def once(self):
        cu, size, h = self.cu, ctypes.c_size_t(2 * MiB), ctypes.c_ulonglong()
        assert cu.cuMemCreate(ctypes.byref(h), size, self.prop, ctypes.c_ulonglong(0)) == 0
        assert cu.cuMemMap(self.va, size, ctypes.c_size_t(0), h, ctypes.c_ulonglong(0)) == 0
        assert cu.cuMemSetAccess(self.va, size, self.access, ctypes.c_size_t(1)) == 0
        assert cu.cuMemUnmap(self.va, size) == 0
        assert cu.cuMemRelease(h) == 0


def cycle(iters):
    c = Cycle()
    for _ in range(50):
        c.once()
    per = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            c.once()
        per.append((time.perf_counter_ns() - t0) / iters / 1000)
    print(f"cycle_us={statistics.median(per):.2f}")


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "cycle":
        cycle(int(sys.argv[sys.argv.index("--iters") + 1]) if "--iters" in sys.argv else 2000)
    else:
        {"bindings": bindings, "core": core}[what]()
