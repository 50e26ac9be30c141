"""torch.cuda as far as the helper reads it: totals, the snapshot's segments with their blocks."""
MiB = 1 << 20
GiB = 1 << 30
SMALL_FREE, SMALL_FREE_BLOCKS, LARGEST_FREE = 14 * MiB, 2309, 1434 * MiB


def is_available():
    return True


def current_device():
    return 0


def _segment(pool, blocks):
    return {"device": 0, "segment_pool_id": pool, "total_size": sum(size for size, _ in blocks),
            "allocated_size": sum(size for size, state in blocks if state == "active_allocated"),
            "blocks": [{"size": size, "state": state} for size, state in blocks]}


def memory_snapshot():
    # The default pool: one segment of tensors, then segments whose tensors left holes between the ones kept.
    segments = [_segment((0, 0), [(40 * GiB, "active_allocated")])]
    segments.append(_segment((0, 0), [(LARGEST_FREE, "inactive"), (2 * MiB, "active_allocated")]))
    for _ in range(SMALL_FREE_BLOCKS):
        segments.append(_segment((0, 0), [(SMALL_FREE, "inactive")]))
    segments.append(_segment((1, 3), [(2 * GiB + 300 * MiB, "active_allocated")]))
    segments.append(_segment((2, 0), [(512 * MiB, "inactive")]))  # a graph's pool whose graph is gone
    return segments


def memory_allocated():
    return sum(s["allocated_size"] for s in memory_snapshot())


def memory_reserved():
    return sum(s["total_size"] for s in memory_snapshot())
