"""The arenas other frameworks keep on the device, as their own statistics say, staged for the next step so
the report (and an out-of-memory record after it) says how much of each is in use: CuPy's default memory pool
(the current device's), JAX's allocator on each local device, and RMM's current device resource where its
statistics are on (rmm.statistics.enable_statistics). The arena itself is one allocation, or a
few, in the owners' figures; the audit cannot see inside it.

Only frameworks the program already imported are asked: importing one costs seconds, and a program that
never imported it has no arena."""
import sys


def _cupy(cupy):
    pool = cupy.get_default_memory_pool()
    return [("cupy", int(pool.used_bytes()), int(pool.total_bytes()))]


def _jax(jax):
    out = []
    for device in jax.local_devices():
        stats = device.memory_stats() or {}  # None on a CPU device
        if "bytes_in_use" not in stats:
            continue
        # XLA's BFC allocator: the region it holds (the preallocated 75% by default), else its limit.
        held = stats.get("pool_bytes") or stats.get("bytes_reserved") or stats.get("bytes_limit", 0)
        out.append((f"jax:{device.id}", int(stats["bytes_in_use"]), int(held)))
    return out


def _rmm(rmm):
    """In use: the statistics adaptor's current bytes; held: the pool resource's size under it (else what is in
    use). Without the adaptor RMM does not count what is in use, and nothing is said."""
    used = held = None
    mr = rmm.mr.get_current_device_resource()
    while mr is not None:
        if used is None and isinstance(mr, rmm.mr.StatisticsResourceAdaptor):
            counts = mr.allocation_counts  # a Statistics; a dict in RMM releases before 24.10
            used = counts["current_bytes"] if isinstance(counts, dict) else counts.current_bytes
        if held is None and isinstance(mr, rmm.mr.PoolMemoryResource):
            held = mr.pool_size()
        mr = getattr(mr, "upstream_mr", None)
    return [] if used is None else [("rmm", int(used), int(held if held is not None else used))]


_READERS = {"cupy": _cupy, "jax": _jax, "rmm": _rmm}


def figures():
    """[(arena, used_bytes, reserved_bytes)] of the frameworks already imported; one that fails is left out."""
    out = []
    for name, read in _READERS.items():
        module = sys.modules.get(name)
        if module is None:
            continue
        try:
            out.extend(read(module))
        except Exception:  # a framework without the call, or without a device: the step is still worth it
            pass
    return out


def stage(arena):
    """Hands each arena's figures to the shim (cumemaudit_arena, or None) for the next mark."""
    if arena is None:
        return
    for name, used, reserved in figures():
        arena(name.encode(), used, reserved)
