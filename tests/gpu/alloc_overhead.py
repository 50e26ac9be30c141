#!/usr/bin/env python3
"""What NCCL's ways of allocating move the device's used memory by, beyond their sizes (cuda-python, no audit):
many 2 MiB VMM allocations each in its own reservation (ncclCuMemAlloc), pinned host memory (cuMemHostAlloc),
streams. Prints one line per step: the step, the bytes asked for, the used memory it moved."""
import sys

from cuda.bindings import driver as cu


def ok(result):
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise SystemExit(f"{err}")
    return rest[0] if len(rest) == 1 else rest


def used():
    free, total = ok(cu.cuMemGetInfo())
    return total - free


def vmm(count, size=2 << 20):
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = 0
    prop.requestedHandleTypes = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    access = cu.CUmemAccessDesc()
    access.location = prop.location
    access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
    held = []
    for _ in range(count):
        handle = ok(cu.cuMemCreate(size, prop, 0))
        ptr = ok(cu.cuMemAddressReserve(size, 2 << 20, 0, 0))
        ok(cu.cuMemMap(ptr, size, 0, handle, 0))
        ok(cu.cuMemSetAccess(ptr, size, [access], 1))
        held.append((handle, ptr))
    return held


def main():
    ok(cu.cuInit(0))
    dev = ok(cu.cuDeviceGet(0))
    ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
    ok(cu.cuCtxSetCurrent(ctx))
    warm = ok(cu.cuMemAlloc(4096))
    steps = []

    def measure(name, asked, fn):
        before = used()
        kept = fn()
        ok(cu.cuCtxSynchronize())
        moved = used() - before
        print(f"{name}: asked {asked} moved {moved} excess {moved - asked}", flush=True)
        steps.append(kept)
        return kept

    measure("vmm 1 x 2 MiB", 2 << 20, lambda: vmm(1))
    measure("vmm 16 x 2 MiB", 16 * (2 << 20), lambda: vmm(16))
    measure("vmm 192 x 2 MiB", 192 * (2 << 20), lambda: vmm(192))
    measure("host alloc 1 MiB + 2 x 64 KiB", 0,
            lambda: [ok(cu.cuMemHostAlloc(n, 0x3))  # PORTABLE | DEVICEMAP
                     for n in (1 << 20, 1 << 16, 1 << 16)])
    measure("64 streams", 0, lambda: [ok(cu.cuStreamCreate(1)) for _ in range(64)])
    measure("64 events", 0, lambda: [ok(cu.cuEventCreate(2)) for _ in range(64)])
    del warm
    return 0


if __name__ == "__main__":
    sys.exit(main())
