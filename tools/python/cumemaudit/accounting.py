"""Per-test accounting over the C API (include/cumemaudit/cumemaudit.h): a mark, then what the allocations
made since it still hold. The pytest plugin's gate; usable around any block of code:

    m = cumemaudit.leak_mark()
    run_one_request()
    held = cumemaudit.held_since(m)     # None without the shim
    assert held.leaked_bytes == 0, held.site
"""
import ctypes
import json
from typing import NamedTuple, Optional


class _Mark(ctypes.Structure):
    _fields_ = [("epoch", ctypes.c_uint64), ("misuse_events", ctypes.c_uint64)]


class _Held(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "leaked_bytes", "leaked_allocations", "leaked_references", "unfreed_bytes", "unfreed_allocations",
        "misuse_events")]


class Held(NamedTuple):
    """What allocations made since a mark still hold (cumemaudit_held_t), and the largest leaking site."""
    leaked_bytes: int
    leaked_allocations: int
    leaked_references: int
    unfreed_bytes: int
    unfreed_allocations: int
    misuse_events: int
    site: str


def _resolve():
    # The global scope holds the preloaded shim's exports (see __init__._resolve for why not a CDLL of it).
    try:
        scope = ctypes.CDLL(None)
        mark, since = scope.cumemaudit_leak_mark, scope.cumemaudit_held_since
    except (OSError, AttributeError):
        return None
    mark.argtypes, mark.restype = [ctypes.POINTER(_Mark)], ctypes.c_int
    since.argtypes = [ctypes.POINTER(_Mark), ctypes.POINTER(_Held), ctypes.c_char_p, ctypes.c_size_t]
    since.restype = ctypes.c_int
    sites = getattr(scope, "cumemaudit_held_sites", None)  # a shim older than this package lacks it
    if sites is not None:
        sites.argtypes = [ctypes.POINTER(_Mark), ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]
        sites.restype = ctypes.c_int64
    return mark, since, sites


_api = _resolve()
_SITE_BYTES = 4096
_SITES_BYTES = 64 * 1024  # a first guess; held_sites asks again with the length the shim says it needs


def available():
    """True when the shim's C API is in the process. Starts nothing: a process that never marks or touches
    CUDA (pytest-xdist's controller) writes no report."""
    return _api is not None


def leak_mark() -> Optional[_Mark]:
    """A mark to measure from, or None when the shim is not loaded."""
    if _api is None:
        return None
    m = _Mark()
    return m if _api[0](ctypes.byref(m)) == 0 else None


def held_since(mark) -> Optional[Held]:
    """What allocations made since ``mark`` still hold, or None without the shim (or a None mark)."""
    if _api is None or mark is None:
        return None
    h, site = _Held(), ctypes.create_string_buffer(_SITE_BYTES)
    if _api[1](ctypes.byref(mark), ctypes.byref(h), site, _SITE_BYTES) != 0:
        return None
    return Held(*(getattr(h, f) for f, _ in _Held._fields_), site.value.decode("utf-8", "replace"))


class Sites(NamedTuple):
    """The sites behind held_since's leaked bytes (cumemaudit_held_sites): how many there are, and the
    largest ones as {"bytes": B, "site": {"api", "frames", "python_frames"}}, a report leak row's site form."""
    total: int
    largest: list


def held_sites(mark, max_sites) -> Optional[Sites]:
    """The `max_sites` largest sites of what allocations made since ``mark`` leaked, or None without the
    shim (or a None mark)."""
    if _api is None or _api[2] is None or mark is None:
        return None
    size = _SITES_BYTES
    while True:
        text = ctypes.create_string_buffer(size)
        length = _api[2](ctypes.byref(mark), max_sites, text, size)
        if length < 0:
            return None
        if length < size:
            answer = json.loads(text.value.decode("utf-8"))
            return Sites(answer["sites_total"], answer["sites"])
        size = length + 1
