"""A stand-in for torch with only what cumemaudit.pool uses: torch.cuda.memory.CUDAPluggableAllocator and
torch.cuda.MemPool, modelled on PyTorch's own (torch/cuda/memory.py, torch/csrc/cuda/CUDAPluggableAllocator.cpp)
so the pool's entry points are loaded and called exactly as PyTorch loads and calls them, without PyTorch."""
from . import cuda  # noqa: F401
