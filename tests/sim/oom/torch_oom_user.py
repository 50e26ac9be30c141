#!/usr/bin/env python3
"""For test_oom.py: imports the fake torch, then the helper (which attaches PyTorch's out-of-memory
observer), takes a torch_step, fills the simulated device through ctypes, is refused a cuMemAlloc, and lets
the fake torch raise as PyTorch would. Prints one JSON line of what it saw."""
import ctypes
import json
import sys

import torch
import cumemaudit

MiB = 1 << 20


def main():
    cuda = ctypes.CDLL("libcuda.so.1")
    dev, ctx, held, refused = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64(), ctypes.c_uint64()
    for call in (lambda: cuda.cuInit(0), lambda: cuda.cuDeviceGet(ctypes.byref(dev), 0),
                 lambda: cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev),
                 lambda: cuda.cuCtxSetCurrent(ctx),
                 lambda: cuda.cuMemAlloc_v2(ctypes.byref(held), ctypes.c_size_t(160 * MiB))):
        if call() != 0:
            sys.exit("torch_oom_user: CUDA call failed")
    cumemaudit.torch_step(1)
    if cuda.cuMemAlloc_v2(ctypes.byref(refused), ctypes.c_size_t(128 * MiB)) != 2:  # CUDA_ERROR_OUT_OF_MEMORY
        sys.exit("torch_oom_user: expected CUDA_ERROR_OUT_OF_MEMORY")
    torch.cuda.raise_oom(128 * MiB)
    cuda.cuMemFree_v2(held)
    print(json.dumps({"observers": len(torch._C.observers), "raised": True}))


if __name__ == "__main__":
    main()
