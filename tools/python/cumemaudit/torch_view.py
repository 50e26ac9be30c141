"""PyTorch's own view for the audit: per-pool figures from torch.cuda.memory_snapshot() (the default pool
and each CUDA graph pool), and PyTorch's out-of-memory observer, which hands them to the shim at the moment
PyTorch raises OutOfMemoryError so they join the report's `oom` record.

Only used when torch is already imported, or when torch_step asks: importing torch costs seconds, and a
program that never imported it has no PyTorch memory to report."""
import sys

from . import _capi


def pool_name(pool_id):
    """(0, 0) is the default pool; any other id is a private pool (CUDA graph capture, MemPool)."""
    return "default" if tuple(pool_id) == (0, 0) else "graph " + str(tuple(pool_id))


class Pool:
    """One pool's figures: bytes in live tensors, bytes its segments hold, and its free blocks (how many, the
    largest): free memory spread over many small blocks serves no large request."""

    def __init__(self, name):
        self.name, self.allocated, self.reserved, self.free_blocks, self.largest_free = name, 0, 0, 0, 0


def pools(torch):
    """[Pool] for the current device, default pool first."""
    device = torch.cuda.current_device()
    by_pool = {}
    for seg in torch.cuda.memory_snapshot():
        if seg.get("device", device) != device:
            continue
        key = tuple(seg.get("segment_pool_id", (0, 0)))
        pool = by_pool.setdefault(key, Pool(pool_name(key)))
        pool.allocated += int(seg["allocated_size"])
        pool.reserved += int(seg["total_size"])
        for block in seg.get("blocks", ()):
            if block.get("state") == "inactive":  # free, cached by the pool
                pool.free_blocks += 1
                pool.largest_free = max(pool.largest_free, int(block["size"]))
    return [by_pool[k] for k in sorted(by_pool)]


def stage_pools(api, torch):
    """Hands each pool's figures to the shim for the next torch_step or torch_oom."""
    blocks = _capi.function("torch_pool_blocks")  # a shim older than this package lacks it
    for pool in pools(torch):
        api["torch_pool"](pool.name.encode(), pool.allocated, pool.reserved)
        if pool.free_blocks and blocks is not None:
            blocks(pool.name.encode(), pool.free_blocks, pool.largest_free)


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
