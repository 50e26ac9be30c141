"""Where the native parts that came with this package are: the shim, the simulated driver's directory, the
CLI and the demo program. An installed package (wheel or ``meson install``) knows from _installed.py, which
meson writes; a source tree on PYTHONPATH is told by the CLI's own variables (CUMEMAUDIT_SHIM,
CUMEMAUDIT_SIM_DIR) and CUMEMAUDIT_CLI. A variable that is set always wins, as it does for the CLI."""
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def _installed_path(kind, *names):
    try:
        from . import _installed
    except ImportError:  # a source tree: nothing was installed
        return None
    root = _installed.ROOT or os.path.join(_HERE, "_native")
    path = os.path.join(root, getattr(_installed, kind), *names)
    return path if os.path.exists(path) else None


def _find(variable, kind, *names):
    return os.environ.get(variable) or _installed_path(kind, *names)


def shim():
    """Path of libcumemaudit.so, or None."""
    return _find("CUMEMAUDIT_SHIM", "LIBDIR", "libcumemaudit.so")


def sim_dir():
    """Directory holding the simulated libcuda.so.1 and libnvidia-ml.so.1, or None."""
    return _find("CUMEMAUDIT_SIM_DIR", "LIBDIR", "cumemaudit", "sim")


def pool_library():
    """Path of libcumemaudit_pool.so (the pool and its PyTorch pluggable-allocator entry points), or None."""
    return _installed_path("LIBDIR", "libcumemaudit_pool.so")


def cli():
    """Path of the native ``cumemaudit`` command-line tool, or None."""
    return _find("CUMEMAUDIT_CLI", "BINDIR", "cumemaudit")


def demo_program():
    """Path of the DeepEP fabric-leak example that ``cumemaudit demo`` runs, or None."""
    return _find("CUMEMAUDIT_DEMO", "LIBEXECDIR", "deepep_fabric_leak")
