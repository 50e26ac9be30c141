"""A stand-in for JAX in test_helper.py: a GPU device whose allocator holds 48 MiB with 5 MiB in use (the
keys XLA's memory_stats() gives), and a CPU device, which has no statistics."""


class _Device:
    def __init__(self, id, stats):
        self.id = id
        self._stats = stats

    def memory_stats(self):
        return self._stats


def local_devices():
    return [_Device(0, {"bytes_in_use": 5 << 20, "peak_bytes_in_use": 6 << 20, "bytes_limit": 60 << 20,
                        "pool_bytes": 48 << 20, "num_allocs": 7}),
            _Device(1, None)]
