#!/usr/bin/env python3
"""Where a training loop's unattributed bytes come from: the loop of torch_workloads.py split into phases, each
followed by a named mark, so the report's marks say which phase moved driver-used memory by what the audit
does not name. Printed too: driver-used per phase from cuMemGetInfo, for the same run without the audit.

  unattributed_phases.py        (run under `cumemaudit run`, or plain)"""
import json
import os

import torch
from torch_workloads import warm_up  # this directory: the scripts run from it


def driver_limits():
    """The current context's stack, heap and printf FIFO limits at a phase (what the driver reserves for them
    moves with them), from cuda-python where it is importable."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return lambda: {}
    names = {"stack": driver.CUlimit.CU_LIMIT_STACK_SIZE, "malloc_heap": driver.CUlimit.CU_LIMIT_MALLOC_HEAP_SIZE,
             "printf_fifo": driver.CUlimit.CU_LIMIT_PRINTF_FIFO_SIZE}
    return lambda: {name: int(driver.cuCtxGetLimit(which)[1]) for name, which in names.items()}


def main():
    try:
        import cumemaudit
        mark = cumemaudit.mark
    except ImportError:
        mark = lambda label: None  # noqa: E731
    import torch.distributed as dist

    rows = []
    limits = driver_limits()

    def phase(label):
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        rows.append({"phase": label, "used": total - free, "reserved": torch.cuda.memory_reserved(), **limits()})
        mark(label)

    torch.cuda.set_device(0)
    torch.zeros(1, device="cuda")
    phase("cuda-init")
    a = torch.randn(2048, 2048, device="cuda")
    (a @ a).sum().item()
    phase("matmul")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29556")
    dist.init_process_group("nccl", rank=0, world_size=1)
    phase("nccl-init")
    dist.all_reduce(a)
    phase("all-reduce")
    model = torch.nn.Sequential(*[torch.nn.Linear(2048, 2048) for _ in range(6)]).cuda()
    loss = model(torch.randn(256, 2048, device="cuda")).square().mean()
    loss.backward()
    phase("backward")
    g = torch.cuda.CUDAGraph()
    static_in = torch.randn(128, 2048, device="cuda")
    warm_up(lambda: model(static_in))
    with torch.cuda.graph(g):
        model(static_in)
    g.replay()
    phase("graph")
    print(json.dumps(rows))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
