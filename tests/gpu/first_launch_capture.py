#!/usr/bin/env python3
"""A CUDA graph whose capture holds the first launches of kernels never launched before, in global capture
mode (PyTorch's default, where a call that is not allowed during a capture, from any thread, invalidates it).
The audit measures a kernel's first launch; under it the capture must still succeed and replay. Marks before
and after the capture say what the audit named.

  first_launch_capture.py        (run under `cumemaudit run`, or plain)"""
import torch

try:
    import cumemaudit
    mark = cumemaudit.mark
except ImportError:
    mark = lambda label: None  # noqa: E731


def main():
    torch.cuda.set_device(0)
    x = torch.randn(4096, device="cuda")
    torch.cuda.synchronize()
    mark("before-capture")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=torch.cuda.Stream(), capture_error_mode="global"):
        y = torch.special.erfcx(x) + torch.special.i1e(x) * torch.special.ndtri(x.sigmoid())
    g.replay()
    torch.cuda.synchronize()
    mark("after-capture")
    print("capture ok, replay ok", float(y.sum()))


if __name__ == "__main__":
    main()
