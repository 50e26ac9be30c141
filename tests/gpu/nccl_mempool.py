"""NCCL's allocator (ncclMemAlloc) giving memory to its caller, as NCCL user buffers and symmetric memory use
it: one rank, an all-reduce (NCCL's own buffers, step 1), then 256 MiB from ncclMemAlloc, asked for through
ctypes as a Python program does (step 2), given back with ncclMemFree (step 3). PyTorch's MemPool over
NCCL's allocator (ProcessGroupNCCL.mem_allocator) is tried first where this PyTorch supports it."""
import ctypes
import os

import torch
import torch.distributed as dist

import cumemaudit

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
x = torch.ones(1 << 20, device="cuda")
dist.all_reduce(x)
torch.cuda.synchronize()
cumemaudit.torch_step(1)
nccl = ctypes.CDLL("libnccl.so.2")  # the one PyTorch loaded
ptr = ctypes.c_void_p()
rc = nccl.ncclMemAlloc(ctypes.byref(ptr), ctypes.c_size_t(256 << 20))
torch.cuda.synchronize()
cumemaudit.torch_step(2)
rc_free = nccl.ncclMemFree(ptr)
cumemaudit.torch_step(3)
print(f"nccl_mempool: ncclMemAlloc {rc}, ncclMemFree {rc_free}")
dist.destroy_process_group()
