"""A Python program that leaks through ctypes: three 2 MiB cuMemCreate references never released, one buffer
created and released. Under `cumemaudit run --sim` the gate turns its exit 0 into 23."""
import sys

from cuda_ctypes import MiB, Driver


def main():
    d = Driver()
    d.release(d.create(2 * MiB))
    kept = [d.create(2 * MiB) for _ in range(3)]  # the handles are dropped with the list: leaked
    del kept
    print("ctypes_leak: done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
