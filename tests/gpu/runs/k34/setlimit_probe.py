"""Does cuCtxSetLimit(MALLOC_HEAP_SIZE, the value it has) wait for work in flight, and may it run inside a
stream capture? Before and after a heap kernel's first launch."""
import time
import torch
from cuda.bindings import driver as cu

HEAP = cu.CUlimit.CU_LIMIT_MALLOC_HEAP_SIZE
torch.cuda.set_device(0)
torch.zeros(1, device="cuda")
torch.cuda.synchronize()

def same():
    err, v = cu.cuCtxGetLimit(HEAP)
    t = time.perf_counter()
    (r,) = cu.cuCtxSetLimit(HEAP, v)
    return r, v, time.perf_counter() - t

print("idle:", same())
# a long kernel in flight: does the set wait for it?
torch.cuda._sleep(2_000_000_000)  # about a second
t = time.perf_counter(); r = same(); print("with a 1 s kernel in flight:", r, "wall", time.perf_counter() - t)
torch.cuda.synchronize()
# inside a capture, global mode (PyTorch's default for torch.cuda.graph is thread_local? use global)
x = torch.zeros(1024, device="cuda")
s = torch.cuda.Stream()
g = torch.cuda.CUDAGraph()
ok = True
try:
    with torch.cuda.graph(g, stream=s, capture_error_mode="global"):
        y = x + 1
        print("inside capture:", same())
        err, info = cu.cuMemGetInfo()
        print("cuMemGetInfo inside capture:", err)
        y2 = y * 2
    g.replay(); torch.cuda.synchronize()
    print("capture survived; replay ok")
except Exception as e:
    ok = False
    print("capture broke:", repr(e))
print("after:", same())
