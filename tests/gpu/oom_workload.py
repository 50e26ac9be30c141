#!/usr/bin/env python3
"""The GPU `oom` check, run by gpu_suite.py's `oom` part under `cumemaudit run`: a PyTorch program with
a VMM buffer outside PyTorch (cuMemCreate + map through ctypes), a GPU filled by a plain cuMemAlloc until
`--headroom-mib` is left, and a loop capturing CUDA graphs over growing batch sizes into one shared pool
until PyTorch raises OutOfMemoryError. Prints one JSON line: PyTorch's own per-pool figures after each
capture and at the end, and cuMemGetInfo right after the error, for the suite to set beside the report."""
import argparse
import ctypes
import json
import sys

import torch
import cumemaudit  # after torch: attaches PyTorch's out-of-memory observer

MiB = 1 << 20


class Driver:
    """The few driver calls made outside PyTorch, through ctypes (a VMM call is this file's: owner_rules name it)."""

    def __init__(self):
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.cu.cuMemGetInfo_v2.argtypes = [ctypes.POINTER(ctypes.c_size_t)] * 2

    def ok(self, rc, what):
        if rc != 0:
            sys.exit(f"oom_workload: {what} returned {rc}")

    def mem_info(self):
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self.ok(self.cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
        return free.value, total.value

    def vmm_buffer(self, size):
        class Location(ctypes.Structure):
            _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]

        class AllocFlags(ctypes.Structure):
            _fields_ = [("compressionType", ctypes.c_ubyte), ("gpuDirectRDMACapable", ctypes.c_ubyte),
                        ("usage", ctypes.c_ushort), ("reserved", ctypes.c_ubyte * 4)]

        class Prop(ctypes.Structure):
            _fields_ = [("type", ctypes.c_int), ("requestedHandleTypes", ctypes.c_int), ("location", Location),
                        ("win32HandleMetaData", ctypes.c_void_p), ("allocFlags", AllocFlags)]

        class Access(ctypes.Structure):
            _fields_ = [("location", Location), ("flags", ctypes.c_int)]

        dev = torch.cuda.current_device()
        prop = Prop(type=1, requestedHandleTypes=1, location=Location(1, dev))  # pinned, POSIX fd, device
        handle, va = ctypes.c_uint64(), ctypes.c_uint64()
        self.ok(self.cu.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop), ctypes.c_ulonglong(0)),
                "cuMemCreate")
        self.ok(self.cu.cuMemAddressReserve(ctypes.byref(va), ctypes.c_size_t(size), ctypes.c_size_t(0),
                                            ctypes.c_uint64(0), ctypes.c_ulonglong(0)), "cuMemAddressReserve")
        self.ok(self.cu.cuMemMap(va, ctypes.c_size_t(size), ctypes.c_size_t(0), handle, ctypes.c_ulonglong(0)), "cuMemMap")
        access = Access(Location(1, dev), 3)  # read-write
        self.ok(self.cu.cuMemSetAccess(va, ctypes.c_size_t(size), ctypes.byref(access), ctypes.c_size_t(1)), "cuMemSetAccess")
        return va.value  # va stays a c_uint64 in the calls above: a bare int would pass as a 32-bit C int

    def fill(self, leave):
        free, _ = self.mem_info()
        size = max(free - leave, 0) // (2 * MiB) * (2 * MiB)
        ptr = ctypes.c_uint64()
        self.ok(self.cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)), "cuMemAlloc (fill)")
        return size


def pool_figures():
    from cumemaudit import torch_view
    return [{"pool": p.name, "allocated_bytes": p.allocated, "reserved_bytes": p.reserved, "free_blocks": p.free_blocks,
             "largest_free_block_bytes": p.largest_free} for p in torch_view.pools(torch)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--vmm-mib", type=int, default=1024)
    p.add_argument("--headroom-mib", type=int, default=3072)
    p.add_argument("--hidden", type=int, default=8192)
    a = p.parse_args()
    torch.cuda.init()
    drv = Driver()
    model = torch.nn.Sequential(*[torch.nn.Linear(a.hidden, a.hidden, bias=False) for _ in range(4)]).cuda().half()
    drv.vmm_buffer(a.vmm_mib * MiB)
    filled = drv.fill(a.headroom_mib * MiB)
    cumemaudit.torch_step(1)
    pool = torch.cuda.graph_pool_handle()
    graphs, captured, error = [], [], None
    batch = 256
    while batch <= 1 << 22:
        try:
            x = torch.randn(batch, a.hidden, device="cuda", dtype=torch.half)  # the batch's input may be what fails
            with torch.no_grad():
                for _ in range(2):  # warm-up outside capture, as vLLM does
                    model(x)
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, pool=pool):
                    y = model(x)
            graphs.append((g, x, y))
            captured.append({"batch": batch, "pools": pool_figures()})
        except (torch.cuda.OutOfMemoryError, RuntimeError) as e:  # RuntimeError: a capture the OOM invalidated
            error = {"batch": batch, "message": str(e).splitlines()[0][:300]}
            break
        batch *= 2
    free, total = drv.mem_info()
    cumemaudit.torch_step(2)
    cumemaudit.checkpoint()
    print(json.dumps({"filled_bytes": filled, "captured": captured, "error": error,
                      "after_error": {"free": free, "total": total}, "pools_end": pool_figures()}))


if __name__ == "__main__":
    main()
