"""rmm.mr in miniature: the two resources the helper reads, and the current device resource."""
from dataclasses import dataclass


@dataclass
class Statistics:  # rmm.statistics.Statistics: what StatisticsResourceAdaptor.allocation_counts returns
    current_bytes: int
    current_count: int
    peak_bytes: int
    peak_count: int
    total_bytes: int
    total_count: int


class PoolMemoryResource:
    def __init__(self, initial_pool_size):
        self._size = initial_pool_size

    def pool_size(self):
        return self._size


class StatisticsResourceAdaptor:
    def __init__(self, upstream_mr):
        self.upstream_mr = upstream_mr

    @property
    def allocation_counts(self):
        return Statistics(7 << 20, 3, 9 << 20, 4, 20 << 20, 8)


_current = StatisticsResourceAdaptor(PoolMemoryResource(32 << 20))


def get_current_device_resource():
    return _current
