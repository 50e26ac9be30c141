"""One rank of a small training job on the simulated driver, driving the driver through ctypes and marking
each step with the cumemaudit helper. Three ranks leak a VMM scratch buffer every step from a step of their
own (the handle's cuMemRelease forgotten); rank 0 exports a fabric buffer that ranks 1-3 import and never
release (one allocation, three leaked references) and then releases its own; every rank ends holding a
classic allocation and a mapped VMM buffer, which are held at exit, not leaks.

    RANK=r WORLD_SIZE=n leak_job.py --dir EXCHANGE_DIR [--steps N]
"""
import argparse
import ctypes
import os
import time

import cumemaudit
from driver import AllocationProp, Driver, Location, MiB

# rank -> (first leaking step, MiB leaked at each step from then on)
LEAKERS = {5: (3, 2), 17: (6, 4), 42: (9, 10)}
IMPORTERS = (1, 2, 3)
SHARED_MIB = 4
FABRIC = 8  # CU_MEM_HANDLE_TYPE_FABRIC


class AccessDesc(ctypes.Structure):  # CUmemAccessDesc
    _fields_ = [("location", Location), ("flags", ctypes.c_int)]


class Mapped:
    """A VMM buffer on device 0: reserved, created, mapped, readable and writable."""

    def __init__(self, drv, size):
        self.drv, self.size = drv, size
        self.ptr = ctypes.c_ulonglong()
        lib, n = drv.lib, ctypes.c_size_t(size)
        drv.check(lib.cuMemAddressReserve(ctypes.byref(self.ptr), n, ctypes.c_size_t(0), ctypes.c_ulonglong(0),
                                          ctypes.c_ulonglong(0)))
        self.handle = create(drv, size)
        drv.check(lib.cuMemMap(self.ptr, n, ctypes.c_size_t(0), ctypes.c_ulonglong(self.handle), ctypes.c_ulonglong(0)))
        access = AccessDesc(location=Location(type=1, id=0), flags=3)
        drv.check(lib.cuMemSetAccess(self.ptr, n, ctypes.byref(access), ctypes.c_size_t(1)))

    def drop_without_release(self):
        self.drv.check(self.drv.lib.cuMemUnmap(self.ptr, ctypes.c_size_t(self.size)))
        self.drv.check(self.drv.lib.cuMemAddressFree(self.ptr, ctypes.c_size_t(self.size)))
        # the bug: cuMemRelease(self.handle) is missing, so the physical memory stays held


def create(drv, size, handle_types=0):
    prop = AllocationProp(type=1, requestedHandleTypes=handle_types, location=Location(type=1, id=0))
    handle = ctypes.c_ulonglong()
    drv.check(drv.lib.cuMemCreate(ctypes.byref(handle), ctypes.c_size_t(size), ctypes.byref(prop), ctypes.c_ulonglong(0)))
    return handle.value


def grow_scratch(drv, mib):
    scratch = Mapped(drv, mib * MiB)  # LEAK: the scratch buffer's creation
    scratch.drop_without_release()


def wait_for(path):
    deadline = time.time() + 90
    while not os.path.exists(path):
        if time.time() > deadline:
            raise SystemExit(f"timed out waiting for {path}")
        time.sleep(0.005)


def share(drv, rank, xdir):
    """Rank 0 exports a fabric buffer and releases it once ranks 1-3 imported it; they never release theirs."""
    blob_path = os.path.join(xdir, "shared.blob")
    blob = (ctypes.c_ubyte * 64)()
    if rank == 0:
        handle = create(drv, SHARED_MIB * MiB, FABRIC)
        drv.check(drv.lib.cuMemExportToShareableHandle(ctypes.byref(blob), ctypes.c_ulonglong(handle), FABRIC,
                                                       ctypes.c_ulonglong(0)))
        with open(blob_path + ".tmp", "wb") as f:
            f.write(bytes(blob))
        os.rename(blob_path + ".tmp", blob_path)
        for peer in IMPORTERS:
            wait_for(os.path.join(xdir, f"imported.{peer}"))
        drv.release(handle)
    elif rank in IMPORTERS:
        wait_for(blob_path)
        with open(blob_path, "rb") as f:
            ctypes.memmove(blob, f.read(64), 64)
        handle = ctypes.c_ulonglong()
        drv.check(drv.lib.cuMemImportFromShareableHandle(ctypes.byref(handle), ctypes.byref(blob), FABRIC))  # IMPORT
        # Mapped once (so its size is known) and unmapped, the import reference itself never released.
        ptr, n = ctypes.c_ulonglong(), ctypes.c_size_t(SHARED_MIB * MiB)
        drv.check(drv.lib.cuMemAddressReserve(ctypes.byref(ptr), n, ctypes.c_size_t(0), ctypes.c_ulonglong(0),
                                              ctypes.c_ulonglong(0)))
        drv.check(drv.lib.cuMemMap(ptr, n, ctypes.c_size_t(0), handle, ctypes.c_ulonglong(0)))
        drv.check(drv.lib.cuMemUnmap(ptr, n))
        drv.check(drv.lib.cuMemAddressFree(ptr, n))
        open(os.path.join(xdir, f"imported.{rank}"), "w").close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--steps", type=int, default=12)
    args = ap.parse_args()
    rank = int(os.environ["RANK"])
    drv = Driver()
    share(drv, rank, args.dir)
    drv.alloc(1 * MiB)            # HELD: a workspace never freed, held at exit
    weights = Mapped(drv, 2 * MiB)  # HELD: mapped until exit
    first, mib = LEAKERS.get(rank, (None, 0))
    for step in range(args.steps):
        if first is not None and step >= first:
            grow_scratch(drv, mib)
        cumemaudit.step(step)
    del weights


main()
