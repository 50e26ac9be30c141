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

from . import _capi


class Held(NamedTuple):
    """What allocations made since a mark still hold (cumemaudit_held_t), and the largest leaking site."""
    leaked_bytes: int
    leaked_allocations: int
    leaked_references: int
    unfreed_bytes: int
    unfreed_allocations: int
    misuse_events: int
    site: str


_api = _capi.functions("leak_mark", "held_since")
_held_sites = _capi.function("held_sites")  # a shim older than this package lacks it
_SITE_BYTES = 4096
_SITES_BYTES = 64 * 1024  # a first guess; held_sites asks again with the length the shim says it needs


def available():
    """True when the shim's C API is in the process. Starts nothing: a process that never marks or touches
    CUDA (pytest-xdist's controller) writes no report."""
    return _api is not None


def leak_mark() -> Optional[_capi.leak_mark_t]:
    """A mark to measure from, or None when the shim is not loaded."""
    if _api is None:
        return None
    m = _capi.leak_mark_t()
    return m if _api["leak_mark"](ctypes.byref(m)) == 0 else None


def held_since(mark) -> Optional[Held]:
    """What allocations made since ``mark`` still hold, or None without the shim (or a None mark)."""
    if _api is None or mark is None:
        return None
    h, site = _capi.held_t(), ctypes.create_string_buffer(_SITE_BYTES)
    if _api["held_since"](ctypes.byref(mark), ctypes.byref(h), site, _SITE_BYTES) != 0:
        return None
    return Held(*(getattr(h, f) for f, _ in _capi.held_t._fields_), site.value.decode("utf-8", "replace"))


class Sites(NamedTuple):
    """The sites behind held_since's leaked bytes (cumemaudit_held_sites): how many there are, and the
    largest ones as {"bytes": B, "site": {"api", "frames", "python_frames"}}, a report leak row's site form."""
    total: int
    largest: list


def held_sites(mark, max_sites) -> Optional[Sites]:
    """The `max_sites` largest sites of what allocations made since ``mark`` leaked, or None without the
    shim (or a None mark)."""
    if _api is None or _held_sites is None or mark is None:
        return None
    size = _SITES_BYTES
    while True:
        text = ctypes.create_string_buffer(size)
        length = _held_sites(ctypes.byref(mark), max_sites, text, size)
        if length < 0:
            return None
        if length < size:
            answer = json.loads(text.value.decode("utf-8"))
            return Sites(answer["sites_total"], answer["sites"])
        size = length + 1
