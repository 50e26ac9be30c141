"""torch._C's out-of-memory observer, as the caching allocator calls it before raising OutOfMemoryError."""
_observers = []


def _cuda_attach_out_of_memory_observer(fn):
    _observers.append(fn)


def _raise_out_of_memory(device, alloc, device_allocated, device_free):
    """What the allocator does when a request fails: every observer, then the error."""
    for fn in _observers:
        fn(device, alloc, device_allocated, device_free)
    raise RuntimeError(f"CUDA out of memory. Tried to allocate {alloc} bytes")
