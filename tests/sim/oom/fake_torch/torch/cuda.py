"""torch.cuda as far as the helper uses it: two pools, the default one and a graph pool, in fixed figures."""
from . import _C

MiB = 1 << 20
SEGMENTS = [
    {"device": 0, "segment_pool_id": (0, 0), "total_size": 100 * MiB, "allocated_size": 80 * MiB,
     "blocks": [{"size": 80 * MiB, "state": "active_allocated"}, {"size": 20 * MiB, "state": "inactive"}]},
    {"device": 0, "segment_pool_id": (0, 0), "total_size": 60 * MiB, "allocated_size": 20 * MiB,
     "blocks": [{"size": 16 * MiB, "state": "inactive"}, {"size": 20 * MiB, "state": "active_allocated"},
                {"size": 24 * MiB, "state": "inactive"}]},
    {"device": 0, "segment_pool_id": (1, 1), "total_size": 4 * MiB, "allocated_size": 2 * MiB,
     "blocks": [{"size": 2 * MiB, "state": "active_allocated"}, {"size": 2 * MiB, "state": "inactive"}]},
    {"device": 1, "segment_pool_id": (0, 0), "total_size": 8 * MiB, "allocated_size": 8 * MiB,  # another GPU
     "blocks": [{"size": 8 * MiB, "state": "active_allocated"}]},
]


def is_available():
    return True


def current_device():
    return 0


def memory_allocated():
    return 102 * MiB


def memory_reserved():
    return 164 * MiB


def memory_snapshot():
    return [dict(s) for s in SEGMENTS]


def raise_oom(alloc):
    for fn in _C.observers:
        fn(0, alloc, memory_allocated(), 0)
