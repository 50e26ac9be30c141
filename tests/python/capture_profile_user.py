"""A capture window that runs out of memory, under cumemaudit.capture_profile (with the stand-in torch of
fake_torch_history): the profile must still be printed and written, and the error reach the program. With
an argument `--cuda`, the process first allocates through the driver (the simulated one, under the shim),
as a PyTorch process has, so the shim is started and takes the profile into its report."""
import ctypes
import json
import sys

import cumemaudit
import torch

if "--cuda" in sys.argv:
    cuda = ctypes.CDLL("libcuda.so.1")
    dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    for rc in (cuda.cuInit(0), cuda.cuDeviceGet(ctypes.byref(dev), 0), cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev),
               cuda.cuCtxSetCurrent(ctx), cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(1 << 20))):
        if rc != 0:
            sys.exit(f"capture_profile_user: CUDA call failed with {rc}")
try:
    with cumemaudit.capture_profile(sys.argv[1]):
        raise MemoryError("CUDA out of memory (stand-in)")
except MemoryError as e:
    print("raised:", e)
print("history calls:", json.dumps(torch.cuda.calls))
