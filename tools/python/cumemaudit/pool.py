"""The cumemaudit pool as a PyTorch memory pool, for capture-time temporaries that must not fragment the
default pool (include/cumemaudit/torch_pool.h holds the C side and its stream semantics).

    import torch, cumemaudit.pool
    pool = cumemaudit.pool.torch_mempool(cache_limit=2 << 30)
    with torch.cuda.use_mem_pool(pool):          # warm-up temporaries
        run_warmup(batch)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=pool.id):       # or the graph's own memory too
        ...
    cumemaudit.pool.stats()                       # reserved, live, cached bytes, driver calls

The library is ``libcumemaudit_pool.so``: found through ``CUMEMAUDIT_POOL_LIB`` (a path), next to this
package (where the wheel or ``meson install`` put it), or by the dynamic loader's own search. torch is imported only by
``torch_mempool``; everything else works without it.
"""
import ctypes
import os

from . import _layout

__all__ = ["library_path", "configure", "stats", "trim", "torch_mempool", "ALLOC_FN", "FREE_FN"]

ALLOC_FN = "cumemaudit_pool_alloc"
FREE_FN = "cumemaudit_pool_free"
_SONAME = "libcumemaudit_pool.so"
_APIS = 16  # CUMEMAUDIT_POOL_APIS


class _Stats(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "address_space_bytes", "reserved_bytes", "live_bytes", "cached_bytes", "peak_reserved_bytes", "segments",
        "allocations", "frees", "failed_allocations", "bad_frees", "deferred_frees", "cache_hits")] + \
        [("driver_calls", ctypes.c_uint64 * _APIS)]


def library_path():
    """The path of libcumemaudit_pool.so this module loads (raises OSError naming where it looked)."""
    explicit = os.environ.get("CUMEMAUDIT_POOL_LIB")
    if explicit:
        if not os.path.isfile(explicit):
            raise OSError(f"CUMEMAUDIT_POOL_LIB={explicit}: no such file")
        return explicit
    beside = _layout.pool_library()  # the copy installed with this package (wheel or meson install)
    if beside:
        return beside
    try:
        ctypes.CDLL(_SONAME)  # the loader's search: LD_LIBRARY_PATH, its cache, the default directories
    except OSError as e:
        raise OSError(f"{_SONAME} not found: set CUMEMAUDIT_POOL_LIB to its path (looked beside this package and in the "
                      f"dynamic loader's search path: {e})") from None
    return _SONAME  # loading it again by this name finds the same file


_lib = None


def _library():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(library_path())
        lib.cumemaudit_pool_configure.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t]
        lib.cumemaudit_pool_configure.restype = ctypes.c_int
        lib.cumemaudit_pool_stats_get.argtypes = [ctypes.c_int, ctypes.POINTER(_Stats)]
        lib.cumemaudit_pool_stats_get.restype = ctypes.c_int
        lib.cumemaudit_pool_api_name.argtypes = [ctypes.c_int]
        lib.cumemaudit_pool_api_name.restype = ctypes.c_char_p
        lib.cumemaudit_pool_api_count.argtypes = []
        lib.cumemaudit_pool_api_count.restype = ctypes.c_int
        lib.cumemaudit_pool_trim.argtypes = [ctypes.c_int]
        lib.cumemaudit_pool_trim.restype = ctypes.c_size_t
        lib.cumemaudit_pool_last_error.argtypes = []
        lib.cumemaudit_pool_last_error.restype = ctypes.c_char_p
        _lib = lib
    return _lib


def _device_index(device):
    if device is None:
        import torch  # only asked for when the caller gave no device
        return torch.cuda.current_device()
    index = getattr(device, "index", device)  # a torch.device("cuda:1") or an int
    if index is None:
        import torch
        return torch.cuda.current_device()
    return int(index)


def configure(device=0, cache_limit=1 << 30, va_capacity=0):
    """Sets device ``device``'s pool options: ``cache_limit`` bytes of freed chunks kept for reuse (at any
    time), ``va_capacity`` bytes of address space (0: twice the device's memory; only before first use)."""
    lib = _library()
    rc = lib.cumemaudit_pool_configure(int(device), int(cache_limit), int(va_capacity))
    if rc != 0:
        raise ValueError(lib.cumemaudit_pool_last_error().decode(errors="replace"))


def stats(device=0):
    """Device ``device``'s pool figures as a dict (all zero before its first use): address_space_bytes,
    reserved_bytes (held from the driver: live + cached), live_bytes, cached_bytes, peak_reserved_bytes,
    segments, allocations, frees, failed_allocations, bad_frees, deferred_frees, cache_hits, and
    driver_calls ({"cuMemCreate": n, ...})."""
    lib = _library()
    s = _Stats()
    if lib.cumemaudit_pool_stats_get(int(device), ctypes.byref(s)) < 0:
        raise ValueError(lib.cumemaudit_pool_last_error().decode(errors="replace"))
    out = {name: int(getattr(s, name)) for name, _ in _Stats._fields_ if name != "driver_calls"}
    out["driver_calls"] = {lib.cumemaudit_pool_api_name(i).decode(): int(s.driver_calls[i])
                           for i in range(lib.cumemaudit_pool_api_count())}
    return out


def trim(device=0):
    """Gives device ``device``'s cached chunks back to the driver; returns the bytes."""
    return int(_library().cumemaudit_pool_trim(int(device)))


_torch_allocator = None  # one per process: every MemPool borrows it, so it must outlive them all


def torch_mempool(device=None, cache_limit=1 << 30):
    """A ``torch.cuda.MemPool`` whose segments come from the cumemaudit pool of ``device`` (the current
    device when None), keeping at most ``cache_limit`` bytes of freed chunks for reuse. Use it with
    ``torch.cuda.use_mem_pool(pool)`` and ``torch.cuda.graph(g, pool=pool.id)``; the default pool is left as
    it is. The figures: ``stats(device)``."""
    global _torch_allocator
    import torch
    index = _device_index(device)
    configure(index, cache_limit)
    if _torch_allocator is None:
        _torch_allocator = torch.cuda.memory.CUDAPluggableAllocator(library_path(), ALLOC_FN, FREE_FN)
    return torch.cuda.MemPool(_torch_allocator.allocator())
