"""Another process on the same simulated node, holding device memory until the block ends: cuMemGetInfo
counts it for every process on the node, NVML charges it to its own pid. The node is named for the caller
and removed afterwards."""
import contextlib
import os
import subprocess
import sys

from cases import Failure

HOLDER = """
import ctypes, sys

cu = ctypes.CDLL(sys.argv[1])
dev, ctx, ptr = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
assert cu.cuInit(0) == 0 and cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0 and cu.cuCtxSetCurrent(ctx) == 0
assert cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(int(sys.argv[2]))) == 0
print("holding", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def neighbour(node, nbytes, env=None):
    """Yields the holder's Popen once it holds `nbytes` on device 0 of simulated node `node` (the caller's
    processes join it with CUMEMAUDIT_SIM_NODE=node; `env` adds e.g. CUMEMAUDIT_SIM_MEMORY, which both sides
    must agree on)."""
    driver = os.path.join(os.environ["CUMEMAUDIT_SIM_DIR"], "libcuda.so.1")
    full = dict(os.environ, **(env or {}), CUMEMAUDIT_SIM_NODE=node)
    full.pop("LD_PRELOAD", None)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, driver, str(nbytes)], env=full, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        if holder.stdout.readline().strip() != "holding":
            raise Failure(f"the neighbour could not allocate {nbytes} bytes on node {node}")
        yield holder
    finally:
        holder.communicate("", timeout=30)
        shm = f"/dev/shm/cumemaudit-sim-{node}"
        if os.path.exists(shm):
            os.unlink(shm)
