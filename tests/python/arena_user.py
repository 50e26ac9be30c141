#!/usr/bin/env python3
"""A CuPy, JAX and RMM program in miniature for test_helper.py: 64 MiB allocated through ctypes (the arena), the
stand-in frameworks imported, one step, then an allocation larger than the device refused."""
import ctypes
import sys

import cupy  # noqa: F401  (the stand-ins: the helper reads only what the program imported)
import jax  # noqa: F401
import rmm  # noqa: F401

import cumemaudit
from helper_user import cuda_alloc


def main():
    cuda, ptr = cuda_alloc(64 << 20)
    cumemaudit.step(1)
    too_big = ctypes.c_uint64()
    rc = cuda.cuMemAlloc_v2(ctypes.byref(too_big), ctypes.c_size_t(1 << 40))
    cuda.cuMemFree_v2(ptr)
    print(f"refused: {rc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
