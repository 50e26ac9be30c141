#!/usr/bin/python3
"""Drives cumemaudit.pool through the stand-in torch (tests/python/pluggable_torch), the way PyTorch's
caching allocator drives a MemPool's allocator: segment-sized raw_alloc calls, raw_delete on release.
Prints one JSON line of what it saw; test_pool.py checks the figures.

  pool_user.py figures|exit-cached|exit-live"""
import ctypes
import json
import sys

import torch

import cumemaudit
import cumemaudit.pool as cpool

MiB = 1 << 20


def figures():
    pool = cpool.torch_mempool(cache_limit=64 * MiB)
    alloc = pool.allocator
    lib = ctypes.CDLL(cpool.library_path())
    seen = {"entry_points": [alloc.alloc_fn == ctypes.cast(lib.cumemaudit_pool_alloc, ctypes.c_void_p).value,
                             alloc.free_fn == ctypes.cast(lib.cumemaudit_pool_free, ctypes.c_void_p).value],
            "before": cpool.stats(0)}
    # The caching allocator's segment sizes: a 2 MiB small-pool segment, a 20 MiB large-pool segment for a
    # request under 10 MiB, and a large request rounded by the pool to the granularity (6 MiB + 1 -> 8 MiB).
    ptrs = [alloc.raw_alloc(n) for n in (2 * MiB, 20 * MiB, 6 * MiB + 1)]
    seen["offsets"] = [p - ptrs[0] for p in ptrs]
    seen["aligned"] = all(p % (2 * MiB) == 0 for p in ptrs)
    cumemaudit.step(1)
    seen["live"] = cpool.stats(0)
    for p in ptrs:
        alloc.raw_delete(p)
    cumemaudit.step(2)
    seen["freed"] = cpool.stats(0)
    again = alloc.raw_alloc(20 * MiB)  # a warm-up at the next batch size: from the cache, no new memory
    seen["again_offset"] = again - ptrs[0]
    seen["again"] = cpool.stats(0)
    alloc.raw_delete(again)
    seen["trimmed"] = cpool.trim(0)
    cumemaudit.step(3)
    seen["after"] = cpool.stats(0)
    return seen


def exit_cached():
    alloc = cpool.torch_mempool(cache_limit=64 * MiB).allocator
    alloc.raw_delete(alloc.raw_alloc(20 * MiB))  # into the cache, and the program ends without a trim
    return {"cached": cpool.stats(0)["cached_bytes"]}


def exit_live():
    alloc = cpool.torch_mempool(cache_limit=64 * MiB).allocator
    alloc.raw_alloc(4 * MiB)  # still PyTorch's at exit, as a MemPool nobody destroyed leaves it
    return {"live": cpool.stats(0)["live_bytes"]}


if __name__ == "__main__":
    mode = sys.argv[1]
    print(json.dumps({"figures": figures, "exit-cached": exit_cached, "exit-live": exit_live}[mode]()))
