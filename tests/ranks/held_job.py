"""One rank that makes VMM handles ahead of their use, as a pool's reserve or a buffer mapped at its first
growth does: a 8 MiB handle made before step 0 is mapped before step 2 and unmapped and released before
step 4, a 4 MiB handle made before step 0 is never mapped and released after the last mark. Neither is a
leak at any mark. With --leak-from N the rank also leaks a 2 MiB scratch buffer at every step from step N
on (mapped, unmapped, its cuMemRelease forgotten).

    RANK=r WORLD_SIZE=n held_job.py [--steps N] [--leak-from N]
"""
import argparse
import ctypes

import cumemaudit
from driver import Driver, MiB


def reserve(drv, size):
    ptr = ctypes.c_ulonglong()
    drv.check(drv.lib.cuMemAddressReserve(ctypes.byref(ptr), ctypes.c_size_t(size), ctypes.c_size_t(0),
                                          ctypes.c_ulonglong(0), ctypes.c_ulonglong(0)))
    return ptr


def map_at(drv, ptr, size, handle):
    drv.check(drv.lib.cuMemMap(ptr, ctypes.c_size_t(size), ctypes.c_size_t(0), ctypes.c_ulonglong(handle),
                               ctypes.c_ulonglong(0)))


def unmap(drv, ptr, size):
    drv.check(drv.lib.cuMemUnmap(ptr, ctypes.c_size_t(size)))
    drv.check(drv.lib.cuMemAddressFree(ptr, ctypes.c_size_t(size)))


def leak_scratch(drv):
    ptr = reserve(drv, 2 * MiB)
    handle = drv.create(2 * MiB)  # LEAK
    map_at(drv, ptr, 2 * MiB, handle)
    unmap(drv, ptr, 2 * MiB)  # the bug: cuMemRelease(handle) is missing


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--leak-from", type=int, default=-1)
    args = ap.parse_args()
    drv = Driver()
    ahead = drv.create(8 * MiB)   # AHEAD: mapped before step 2
    spare = drv.create(4 * MiB)   # SPARE: never mapped, released at the end
    ptr = None
    for step in range(args.steps):
        if step == 2:
            ptr = reserve(drv, 8 * MiB)
            map_at(drv, ptr, 8 * MiB, ahead)
        if step == 4:
            unmap(drv, ptr, 8 * MiB)
            drv.release(ahead)
        if 0 <= args.leak_from <= step:
            leak_scratch(drv)
        cumemaudit.step(step)
    drv.release(spare)


main()
