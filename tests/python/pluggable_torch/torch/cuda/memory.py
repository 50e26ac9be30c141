"""CUDAPluggableAllocator and MemPool as PyTorch has them, minus the caching allocator: the test drives
raw_alloc / raw_delete itself, as CUDACachingAllocator's allocPrimitive and release_block do for a MemPool
that has an allocator."""
import ctypes

from . import _lazy_init, current_device, current_stream_handle

# The std::function types CUDAPluggableAllocator.cpp holds the two pointers as.
_ALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)
_FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p)


class _CUDAAllocator:
    """torch._C._cuda_CUDAAllocator for a pluggable allocator: malloc records (size, device, stream) per
    pointer, raw_delete hands them back to the free function."""

    def __init__(self, alloc_fn, free_fn):
        self.alloc_fn, self.free_fn = alloc_fn, free_fn
        self._alloc, self._free = _ALLOC(alloc_fn), _FREE(free_fn)
        self.metadata = {}

    def raw_alloc(self, nbytes):
        _lazy_init()
        device, stream = current_device(), current_stream_handle()
        ptr = self._alloc(nbytes, device, stream)
        self.metadata[ptr] = (nbytes, device, stream)  # PyTorch records even a NULL result
        return ptr or 0

    def raw_delete(self, ptr):
        if ptr not in self.metadata:
            raise RuntimeError("Trying to free a pointer not allocated here")
        size, device, stream = self.metadata.pop(ptr)
        self._free(ptr, size, device, stream)


class CUDAPluggableAllocator:
    def __init__(self, path_to_so_file, alloc_fn_name, free_fn_name):
        allocator = ctypes.CDLL(path_to_so_file)
        alloc_fn = ctypes.cast(getattr(allocator, alloc_fn_name), ctypes.c_void_p).value
        free_fn = ctypes.cast(getattr(allocator, free_fn_name), ctypes.c_void_p).value
        if alloc_fn is None or free_fn is None:
            raise AssertionError("alloc_fn or free_fn is None")
        self._allocator = _CUDAAllocator(alloc_fn, free_fn)

    def allocator(self):
        return self._allocator


class MemPool:
    _next = 1

    def __init__(self, allocator=None, use_on_oom=False, no_split=False):
        if allocator is not None and not isinstance(allocator, _CUDAAllocator):
            raise TypeError("MemPool takes the torch._C._cuda_CUDAAllocator of allocator.allocator()")
        self.allocator = allocator
        self.id = (0, MemPool._next)
        MemPool._next += 1
