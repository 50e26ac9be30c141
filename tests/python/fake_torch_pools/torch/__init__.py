"""A stand-in for torch whose caching allocator is fragmented, as at a CUDA graph capture's out-of-memory
error: the default pool holds 40 GiB of tensors in 73 GiB of segments, its 33 GiB free split into 2,310
blocks, the largest 1.4 GiB; a graph pool holds 2.3 GiB, and another 512 MiB with nothing allocated. Only what the helper reads: memory_snapshot() in
PyTorch's layout, and the out-of-memory observer, which `_C._raise_out_of_memory` calls as the allocator does
before it raises."""
from . import _C, cuda  # noqa: F401
