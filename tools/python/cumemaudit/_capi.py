"""The shim's C API (include/cumemaudit/cumemaudit.h) through ctypes: every function of the header with its
argument and result types, looked up once for the whole package.

The global scope (dlopen(NULL)) holds the preloaded shim's exports; a plain CDLL of the shim's path would load
a second, idle copy when the shim is absent, and dlsym(RTLD_DEFAULT) is what the header promises to programs
that do not link against it. Without the shim every function is missing and the package's calls do nothing
(or, for sizes, raise)."""
import ctypes

_u64 = ctypes.c_uint64


class leak_mark_t(ctypes.Structure):
    _fields_ = [("epoch", _u64), ("misuse_events", _u64)]


class held_t(ctypes.Structure):
    _fields_ = [(name, _u64) for name in (
        "leaked_bytes", "leaked_allocations", "leaked_references", "unfreed_bytes", "unfreed_allocations",
        "misuse_events")]


# name (without the cumemaudit_ prefix): (argtypes, restype), in the header's order.
_SIGNATURES = {
    "checkpoint": ([], None),
    "step": ([_u64], None),
    "mark": ([ctypes.c_char_p], None),
    "torch_step": ([_u64, _u64, _u64], None),
    "leak_mark": ([ctypes.POINTER(leak_mark_t)], ctypes.c_int),
    "held_since": ([ctypes.POINTER(leak_mark_t), ctypes.POINTER(held_t), ctypes.c_char_p, ctypes.c_size_t],
                   ctypes.c_int),
    "held_sites": ([ctypes.POINTER(leak_mark_t), ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t], ctypes.c_int64),
    "parse_size": ([ctypes.c_char_p, ctypes.POINTER(_u64)], ctypes.c_int),
    "format_size": ([_u64, ctypes.c_char_p, ctypes.c_size_t], ctypes.c_int),
    "check_options": ([ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t], ctypes.c_int),
    "torch_pool": ([ctypes.c_char_p, _u64, _u64], None),
    "torch_pool_blocks": ([ctypes.c_char_p, _u64, _u64], None),
    "arena": ([ctypes.c_char_p, _u64, _u64], None),
    "torch_oom": ([_u64], None),
    "capture_profile": ([_u64], None),
    "capture_hole": ([ctypes.c_char_p, ctypes.c_char_p, _u64, _u64, _u64, _u64, _u64], None),
}


def _resolve():
    try:
        scope = ctypes.CDLL(None)
    except OSError:
        return {}
    found = {}
    for name, (argtypes, restype) in _SIGNATURES.items():
        fn = getattr(scope, "cumemaudit_" + name, None)  # a shim older than this package lacks its newer ones
        if fn is None:
            continue
        fn.argtypes, fn.restype = argtypes, restype
        found[name] = fn
    return found


_found = _resolve()


def function(name):
    """The C function cumemaudit_<name>, typed, or None when the process does not have it."""
    return _found.get(name)


def functions(*names):
    """{name: function} for every one of `names`, or None unless the process has them all: a module works
    with its whole set of calls or not at all."""
    if not all(n in _found for n in names):
        return None
    return {n: _found[n] for n in names}
