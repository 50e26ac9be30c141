"""One rank of a 4-rank training job on the simulated driver, each rank on a device of its own
(CUMEMAUDIT_SIM_MEMORY), ending the ways ranks end: rank 0 runs its 50 steps and exits 0; rank 1 leaks a
2 MiB scratch buffer every step from step 12 (the handle's cuMemRelease forgotten), so the 16 MiB workspace
the evaluation at step 34 asks for is refused, and the exception ends it with 1; rank 2 exits 3 after
step 40; rank 3 is sent SIGTERM after step 45. Every rank holds 14 MiB of weights, mapped until it ends.

    RANK=r oom_job.py [--steps N]
"""
import argparse
import ctypes
import os
import signal
import sys

import cumemaudit
from driver import AllocationProp, Driver, Location, MiB

WEIGHTS_MIB = 14
LEAKER, FIRST_LEAK, LEAK_MIB = 1, 12, 2
EVAL_STEP, WORKSPACE_MIB = 34, 16
EXITS = {2: (40, 3)}      # rank -> (step, exit code)
KILLED = {3: 45}          # rank -> step after which it is sent SIGTERM


class AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", Location), ("flags", ctypes.c_int)]


def prop():
    return AllocationProp(type=1, requestedHandleTypes=0, location=Location(type=1, id=0))


def create(drv, size):
    handle = ctypes.c_ulonglong()
    drv.check(drv.lib.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop()), ctypes.c_ulonglong(0)))
    return handle.value


def mapped(drv, size):
    """A VMM buffer on device 0, reserved, created, mapped and accessible: (address, handle)."""
    lib, n = drv.lib, ctypes.c_size_t(size)
    ptr = ctypes.c_ulonglong()
    drv.check(lib.cuMemAddressReserve(ctypes.byref(ptr), n, ctypes.c_size_t(0), ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)))
    handle = create(drv, size)
    drv.check(lib.cuMemMap(ptr, n, ctypes.c_size_t(0), ctypes.c_ulonglong(handle), ctypes.c_ulonglong(0)))
    access = AccessDesc(location=Location(type=1, id=0), flags=3)
    drv.check(lib.cuMemSetAccess(ptr, n, ctypes.byref(access), ctypes.c_size_t(1)))
    return ptr, handle


def leak_scratch(drv):
    ptr, _ = mapped(drv, LEAK_MIB * MiB)
    n = ctypes.c_size_t(LEAK_MIB * MiB)
    drv.check(drv.lib.cuMemUnmap(ptr, n))
    drv.check(drv.lib.cuMemAddressFree(ptr, n))
    # the bug: cuMemRelease of the handle is missing, so the physical memory stays held


def eval_workspace(drv):
    handle = ctypes.c_ulonglong()
    size = ctypes.c_size_t(WORKSPACE_MIB * MiB)
    drv.check(drv.lib.cuMemCreate(ctypes.byref(handle), size, ctypes.byref(prop()), ctypes.c_ulonglong(0)))  # WORKSPACE
    drv.release(handle.value)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=50)
    args = ap.parse_args()
    rank = int(os.environ["RANK"])
    drv = Driver()
    mapped(drv, WEIGHTS_MIB * MiB)  # the weights, held until the rank ends
    for step in range(args.steps):
        cumemaudit.step(step)
        if step == EVAL_STEP:
            eval_workspace(drv)
        if rank == LEAKER and step >= FIRST_LEAK:
            leak_scratch(drv)
        if rank in EXITS and step == EXITS[rank][0]:
            sys.exit(EXITS[rank][1])
        if rank in KILLED and step == KILLED[rank]:
            os.kill(os.getpid(), signal.SIGTERM)


main()
