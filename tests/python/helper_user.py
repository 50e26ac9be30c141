#!/usr/bin/env python3
"""A training script in miniature for test_helper.py: one CUDA allocation through ctypes on whatever
libcuda.so.1 the library path gives (the simulated driver), then every call of the Python helper. Prints
one JSON line saying what it saw; exits 0 with or without the shim."""
import ctypes
import json
import os
import sys

import cumemaudit


def cuda_alloc(nbytes):
    cuda = ctypes.CDLL("libcuda.so.1")
    dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    for call in (lambda: cuda.cuInit(0), lambda: cuda.cuDeviceGet(ctypes.byref(dev), 0),
                 lambda: cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev),
                 lambda: cuda.cuCtxSetCurrent(ctx),
                 lambda: cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(nbytes))):
        rc = call()
        if rc != 0:
            sys.exit(f"helper_user: CUDA call failed with {rc}")
    return cuda, ptr


def main():
    report_dir = sys.argv[1]
    cuda, ptr = cuda_alloc(8 << 20)
    cumemaudit.step(1)
    cumemaudit.step(2)
    cumemaudit.mark("after warmup")
    with cumemaudit.phase("capture"):
        pass
    cumemaudit.torch_step(3)
    cumemaudit.checkpoint()
    checkpoint_written = any(f.startswith("cumemaudit.") for f in os.listdir(report_dir))
    cuda.cuMemFree_v2(ptr)
    print(json.dumps({"active": cumemaudit.active(), "checkpoint_written": checkpoint_written}))


if __name__ == "__main__":
    main()
