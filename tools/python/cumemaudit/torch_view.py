"""PyTorch's own view for the audit: per-pool figures from torch.cuda.memory_snapshot() (the default pool
and each CUDA graph pool), and PyTorch's out-of-memory observer, which hands them to the shim at the moment
PyTorch raises OutOfMemoryError so they join the report's `oom` record.

Only used when torch is already imported, or when torch_step asks: importing torch costs seconds, and a
program that never imported it has no PyTorch memory to report."""
import sys


def pool_name(pool_id):
    """(0, 0) is the default pool; any other id is a private pool (CUDA graph capture, MemPool)."""
    return "default" if tuple(pool_id) == (0, 0) else "graph " + str(tuple(pool_id))


def pools(torch):
    """[(name, allocated_bytes, reserved_bytes)] for the current device, default pool first."""
    device = torch.cuda.current_device()
    by_pool = {}
    for seg in torch.cuda.memory_snapshot():
        if seg.get("device", device) != device:
            continue
        key = tuple(seg.get("segment_pool_id", (0, 0)))
        allocated, reserved = by_pool.get(key, (0, 0))
        by_pool[key] = (allocated + int(seg["allocated_size"]), reserved + int(seg["total_size"]))
    return [(pool_name(k), a, r) for k, (a, r) in sorted(by_pool.items())]


def stage_pools(api, torch):
    """Hands each pool's figures to the shim for the next torch_step or torch_oom."""
    for name, allocated, reserved in pools(torch):
        api["torch_pool"](name.encode(), allocated, reserved)


_attached = False


def attach(api):
    """Registers PyTorch's out-of-memory observer once, if torch is imported and has CUDA."""
    global _attached
    torch = sys.modules.get("torch")
    if _attached or torch is None:
        return
    try:
        if not torch.cuda.is_available():
            return
        attach_observer = torch._C._cuda_attach_out_of_memory_observer
    except Exception:  # a torch without CUDA or without the observer: nothing to join
        return

    def on_out_of_memory(device, alloc, device_allocated, device_free):
        # Called by the caching allocator after it released its lock, before it raises: never let the
        # audit change what the program sees.
        try:
            stage_pools(api, torch)
            api["torch_oom"](int(alloc))
        except Exception:
            pass

    attach_observer(on_out_of_memory)
    _attached = True
