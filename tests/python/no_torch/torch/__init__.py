"""Shadows any installed torch, so the test of torch_step without PyTorch means the same on every machine."""
raise ImportError("torch hidden by tests/python/no_torch")
