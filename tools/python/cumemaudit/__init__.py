"""cumemaudit's Python helper: step marks, phases and PyTorch's own figures for the audit's timeline.

ctypes only, no build step: put tools/python on PYTHONPATH and ``import cumemaudit``. When the program runs
under ``cumemaudit run`` (LD_PRELOAD=libcumemaudit.so) the C API of include/cumemaudit/cumemaudit.h is in
the process's global scope and every call here reaches it; otherwise every call does nothing, quietly, so
the marks can stay in a training script that also runs without the audit.

    import cumemaudit
    for step, batch in enumerate(loader):
        with cumemaudit.phase("forward"):
            loss = model(batch)
        ...
        cumemaudit.torch_step(step)   # live bytes per owner + torch.cuda.memory_allocated/reserved
"""
import contextlib

from . import _capi, arenas
from .holes import capture_profile

__all__ = ["active", "step", "mark", "phase", "checkpoint", "torch_step", "capture_profile",
           "leak_mark", "held_since", "enable_in_children", "shim_path"]  # torch_view: PyTorch's pools and OOM observer


_api = _capi.functions("step", "mark", "checkpoint", "torch_step", "torch_pool", "torch_oom")
_arena = _capi.function("arena")  # a shim older than this package has the marks without it
if _api:
    from . import torch_view
    torch_view.attach(_api)  # PyTorch's OOM observer, when torch is already imported


def active():
    """True when the shim is loaded and the marks are being recorded."""
    return _api is not None


def step(n):
    """Marks the end of training step ``n``: the shim records live bytes per owner now, and how much of
    CuPy's and JAX's arenas is in use where the program imported them."""
    if _api:
        arenas.stage(_arena)
        _api["step"](int(n))


def mark(label):
    """Marks a named moment (``"after warmup"``), recorded like a step."""
    if _api:
        _api["mark"](str(label).encode("utf-8", "replace"))


@contextlib.contextmanager
def phase(name):
    """Marks ``name:begin`` on entry and ``name:end`` on exit (also when the body raises)."""
    mark(name + ":begin")
    try:
        yield
    finally:
        mark(name + ":end")


def checkpoint():
    """Writes the report now, replacing the last one, so a later crash still leaves it."""
    if _api:
        _api["checkpoint"]()


def _torch_figures():
    # torch is imported only here and only under the shim: importing it costs seconds, and a program that
    # never imported it has no PyTorch memory to report.
    try:
        import torch
        if not torch.cuda.is_available():
            return 0, 0
        figures = int(torch.cuda.memory_allocated()), int(torch.cuda.memory_reserved())
    except Exception:  # no torch, or no CUDA in it: the step is still worth recording
        return 0, 0
    try:
        torch_view.attach(_api)
        torch_view.stage_pools(_api, torch)  # per-pool figures join this step
    except Exception:  # a torch without memory_snapshot: the totals alone
        pass
    return figures


def torch_step(n):
    """Like ``step(n)``, and records PyTorch's allocated and reserved bytes (0 and 0 without torch), so the
    step splits driver-used memory into PyTorch allocated, PyTorch cached but free, other owners and
    unattributed; with torch, also each pool's allocated and reserved bytes (default pool, graph pools)."""
    if _api:
        allocated, reserved = _torch_figures()
        arenas.stage(_arena)
        _api["torch_step"](int(n), allocated, reserved)


# Per-test accounting, children, and where the shim that came with this package is (the wheel's, or an
# installation's): modules of their own.
from .accounting import Held, held_since, leak_mark  # noqa: E402
from .children import enable_in_children  # noqa: E402
from ._layout import shim as shim_path  # noqa: E402
