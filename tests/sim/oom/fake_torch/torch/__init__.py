"""A stand-in for torch with what the helper's PyTorch view reads (torch.cuda.memory_snapshot, the
out-of-memory observer of torch._C), so the oom record's PyTorch part is tested without PyTorch. Its
`raise_oom` does what PyTorch's caching allocator does after a refused cudaMalloc: call each observer."""
from . import _C, cuda  # noqa: F401
