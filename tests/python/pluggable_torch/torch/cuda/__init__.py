"""torch.cuda as far as cumemaudit.pool uses it. CUDA is brought up the way PyTorch's lazy init leaves a
thread: the driver initialised and device 0's primary context current."""
import ctypes

_driver = None


def _lazy_init():
    global _driver
    if _driver is None:
        d = ctypes.CDLL("libcuda.so.1")  # the simulated driver, first on LD_LIBRARY_PATH
        ctx = ctypes.c_void_p()
        if d.cuInit(0) != 0 or d.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) != 0 or d.cuCtxSetCurrent(ctx) != 0:
            raise RuntimeError("fake torch: no CUDA device 0")
        _driver = d
    return _driver


def is_available():
    return True


def current_device():
    return 0


def current_stream_handle():
    """The raw cudaStream_t PyTorch passes: the legacy default stream here."""
    return None


from . import memory  # noqa: E402,F401  (after what memory.py imports from here)
from .memory import MemPool  # noqa: E402,F401
