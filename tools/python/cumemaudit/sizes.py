"""Sizes as the rest of cumemaudit reads and writes them, through the shim's C API (cumemaudit_parse_size,
cumemaudit_format_size): one grammar for CUMEMAUDIT_OPTIONS, the CLI and the pytest plugin's marker, kept in
one place (src/common/options.cpp) so they cannot drift. A byte count, or a number and a binary unit:
"4194304", "4MiB", "1.5 GiB". MB, GB and the like are refused: tools disagree on whether they mean 10^6 or
2^20. Both need the shim loaded (the plugin's sessions always run under it); without it they raise."""
import ctypes

from . import _capi

UNITS = "B, KiB, MiB, GiB, TiB"
_TEXT_BYTES = 32


_api = _capi.functions("parse_size", "format_size")


def _require():
    if _api is None:
        raise RuntimeError("cumemaudit sizes need the shim's C API in the process (LD_PRELOAD=libcumemaudit.so)")
    return _api


def parse(text):
    """The byte count `text` names, or None when it is not a size."""
    value = ctypes.c_uint64()
    try:
        raw = str(text).encode("utf-8")
    except UnicodeEncodeError:
        return None
    if b"\0" in raw:
        return None
    return value.value if _require()["parse_size"](raw, ctypes.byref(value)) == 0 else None


def human(nbytes):
    """`nbytes` as every text view shows a size: "4.0 MiB", below 1 KiB "512 B"."""
    text = ctypes.create_string_buffer(_TEXT_BYTES)
    if _require()["format_size"](int(nbytes), text, _TEXT_BYTES) != 0:
        raise ValueError(f"cannot format {nbytes} bytes")
    return text.value.decode("ascii")


def exact(nbytes):
    """A size for a failure message: the words and, from 1 KiB up, the exact count, "4.0 MiB (4194304 bytes)"."""
    words = human(nbytes)
    return words if nbytes < 1024 else f"{words} ({nbytes} bytes)"
