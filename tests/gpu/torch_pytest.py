"""PyTorch tests that tests/gpu/gpu_suite.py's `wheel` part runs under `pytest --cumemaudit` from a venv
holding only the wheel (made with --system-site-packages, so PyTorch and cuda-python come from the image).
Expected: test_clean_training_step and test_expandable_segments_and_graph pass; exactly
test_cuda_python_leak fails, naming 67108864 bytes in 1 allocation and the cuMemCreate site."""
import pytest
import torch

MiB = 1 << 20


@pytest.mark.cumemaudit(warmups=1)
def test_clean_training_step():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(3):
        loss = model(torch.randn(256, 1024, device="cuda")).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


def test_cuda_python_leak():
    # cuda-python's own binding, the way cuda.core's VirtualMemoryResource reaches the driver: a cuMemCreate
    # whose reference is never released (cuda-python's known leak, measured in docs/DRIVER.md).
    from cuda.bindings import driver as cu
    torch.zeros(1, device="cuda")  # PyTorch's primary context, current on this thread
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = torch.cuda.current_device()
    err, handle = cu.cuMemCreate(64 * MiB, prop, 0)
    assert err == cu.CUresult.CUDA_SUCCESS, err


@pytest.mark.cumemaudit(warmups=1)
def test_expandable_segments_and_graph():
    # Expandable segments (VMM: reserve, then create + map per growth) from here on; the graph's private pool too.
    torch.cuda.memory._set_allocator_settings("expandable_segments:True")
    try:
        x = torch.randn(4096, 4096, device="cuda")
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y = x @ x + 1  # warm-up on a side stream before capture, as PyTorch asks
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            y = x @ x + 1
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
        del graph, y, x
        torch.cuda.empty_cache()  # unmaps and releases what the segments mapped
    finally:
        torch.cuda.memory._set_allocator_settings("expandable_segments:False")
