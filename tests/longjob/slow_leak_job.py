"""A training loop as a user writes it against the driver through ctypes: like DeepEP's buffer, it grows a
VMM buffer every 10th step and forgets the old handle's cuMemRelease, so 2 MiB leak each time. Marks every
step through the cumemaudit helper.

    slow_leak_job.py STEPS [--grow-every N]
"""
import ctypes
import sys

import cumemaudit
from driver import AllocationProp, Location, MiB

lib = ctypes.CDLL("libcuda.so.1")  # releases the GIL around each call, as cuda-python's bindings do


class AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", Location), ("flags", ctypes.c_int)]


def check(result):
    if result != 0:
        raise RuntimeError(f"CUDA error {result}")


class Buffer:
    """One VMM buffer on device 0: reserved, created, mapped, readable and writable."""

    def __init__(self, size):
        self.size = size
        self.ptr, self.handle = ctypes.c_ulonglong(), ctypes.c_ulonglong()
        check(lib.cuMemAddressReserve(ctypes.byref(self.ptr), ctypes.c_size_t(size), ctypes.c_size_t(0),
                                      ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)))
        prop = AllocationProp(type=1, location=Location(type=1, id=0))
        flags = ctypes.c_ulonglong(0)
        check(lib.cuMemCreate(ctypes.byref(self.handle), ctypes.c_size_t(size), ctypes.byref(prop), flags))  # LEAK
        check(lib.cuMemMap(self.ptr, ctypes.c_size_t(size), ctypes.c_size_t(0), self.handle, ctypes.c_ulonglong(0)))
        access = AccessDesc(location=Location(type=1, id=0), flags=3)  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        check(lib.cuMemSetAccess(self.ptr, ctypes.c_size_t(size), ctypes.byref(access), ctypes.c_size_t(1)))

    def drop_without_release(self):
        check(lib.cuMemUnmap(self.ptr, ctypes.c_size_t(self.size)))
        check(lib.cuMemAddressFree(self.ptr, ctypes.c_size_t(self.size)))
        # the bug: lib.cuMemRelease(self.handle) is missing, so the physical memory stays held


def main():
    steps = int(sys.argv[1])
    grow_every = int(sys.argv[sys.argv.index("--grow-every") + 1]) if "--grow-every" in sys.argv else 10
    check(lib.cuInit(0))
    ctx = ctypes.c_void_p()
    check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0))
    check(lib.cuCtxSetCurrent(ctx))
    buffer = Buffer(2 * MiB)  # FIRST
    for step in range(steps + 1):
        if step and step % grow_every == 0:
            buffer.drop_without_release()
            buffer = Buffer(2 * MiB)  # GROW
        cumemaudit.step(step)
    print(f"trained {steps} steps")


main()  # ENTRY
