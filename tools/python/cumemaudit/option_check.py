"""CUMEMAUDIT_OPTIONS checked as the shim and the CLI read them, through the shim's C API
(cumemaudit_check_options): one options table and one "did you mean" (src/common/options.cpp,
src/common/nearest_name.cpp), so the plugin refuses what the CLI refuses, in the same words."""
import ctypes

from . import _capi

_PROBLEM_BYTES = 8192
_api = _capi.functions("check_options")


def problems(text):
    """The problems of CUMEMAUDIT_OPTIONS `text`, one line each (empty: none); None without the shim's C API."""
    if _api is None:
        return None
    raw = str(text or "").encode("utf-8", "surrogateescape").replace(b"\0", b"")
    out = ctypes.create_string_buffer(_PROBLEM_BYTES)
    count = _api["check_options"](raw, out, _PROBLEM_BYTES)
    if count <= 0:
        return []
    return out.value.decode("utf-8", "replace").splitlines()[:count]
