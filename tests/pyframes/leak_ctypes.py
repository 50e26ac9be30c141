"""Leaks one 2 MiB VMM allocation and one 1 MiB cuMemAlloc from Python, through ctypes.CDLL (the GIL is
released around each driver call), or through ctypes.PyDLL (kept) with --keep-gil."""
import sys

from driver import Driver, MiB


class Buffer:
    def __init__(self, driver):
        self.driver = driver

    def grow(self):
        return self.driver.create(2 * MiB)  # GROW


def main():
    driver = Driver(keep_gil="--keep-gil" in sys.argv)
    Buffer(driver).grow()  # MAIN
    driver.alloc(1 * MiB)  # CLASSIC
    kept = driver.create(2 * MiB)
    driver.release(kept)


main()  # ENTRY
