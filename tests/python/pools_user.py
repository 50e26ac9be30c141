#!/usr/bin/env python3
"""A PyTorch program in miniature for test_helper.py, over the fragmented stand-in (fake_torch_pools): 64 MiB
allocated through ctypes, one torch_step, then PyTorch's allocator failing to find 2 GiB."""
import sys

import torch

import cumemaudit
from helper_user import cuda_alloc


def main():
    cuda, ptr = cuda_alloc(64 << 20)
    cumemaudit.torch_step(1)
    try:
        torch._C._raise_out_of_memory(0, 2 << 30, 40 << 30, 0)
    except RuntimeError as e:
        print(e)
    cuda.cuMemFree_v2(ptr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
