"""The pytest plugin's failure text for a test that left more than it may: a first line that reads on its
own (bytes with units, allocations, references, the limit), then one block per leaking site, largest
first, each led by the line of the test file that made the leak, then a few frames of the rest of the
site, innermost first (docs/PYTEST.md, "The failure"):

    cumemaudit: leaked 6.0 MiB (6291456 bytes) in 2 allocations (2 unreleased references); limit 0 B
    4.0 MiB (4194304 bytes) at test_serve.py:31 in test_decode
        cuMemCreate from ffi_call (libffi.so.8)
        KvCache.grow at kv_cache.py:88
    2.0 MiB (2097152 bytes) at test_serve.py:32 in test_decode
        ...
    … 2 more sites (the report has them all)

Pure text from what the shim answered (accounting.Held, accounting.Sites; sites in a report row's form) and
a size formatter, so its rules can be read in one place."""
import os

SITES_SHOWN = 3    # blocks in a failure; the rest are counted
FRAMES_SHOWN = 4   # lines under a block's first; the whole stack is in the report
_INDENT = "    "


def _count(n, word):
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.normpath(a) == os.path.normpath(b)


class _Places:
    """Paths as pytest shows them: relative to the session's root when inside it."""

    def __init__(self, root):
        self.root = root

    def path(self, file):
        if self.root and os.path.isabs(file):
            rel = os.path.relpath(file, self.root)
            if not rel.startswith(os.pardir + os.sep) and rel != os.pardir:
                return rel
        return file

    def python(self, frame):
        return f"{frame['function']} at {self.path(frame['file'])}:{frame['line']}"

    def native(self, frame):
        where = (f"{self.path(frame['file'])}:{frame['line']}" if frame.get("file")
                 else f"({os.path.basename(frame['object'])})" if frame.get("object") else "")
        return " ".join(filter(None, [frame.get("symbol") or "??", where]))


def _site_block(row, test_file, size, places):
    site = row["site"]
    python, frames = site.get("python_frames") or [], site.get("frames") or []
    if not python:  # the native stack is all there is to read
        return _block(f"{size(row['bytes'])} by {site['api']}", [places.native(f) for f in frames])
    # Under Python the native frames are mostly the interpreter's; the first one with a name says which
    # library made the call (ffi_call: ctypes; an allocator of a C extension).
    named = next((f for f in frames if f.get("symbol")), None)
    call = site["api"] + (f" from {places.native(named)}" if named else "")
    in_test = [i for i, f in enumerate(python) if _same_file(f["file"], test_file)]
    if not in_test:  # a fixture of a conftest.py, a thread of a library: its own frames say where
        return _block(f"{size(row['bytes'])} by {call}", [places.python(f) for f in python])
    # The test file's innermost frame leads; the frames between it and the driver follow, then the test
    # file's outer ones (the test function under a helper of its own); pytest's machinery is left out.
    lead = python[in_test[0]]
    rest = python[:in_test[0]] + python[in_test[0] + 1:in_test[-1] + 1]
    return _block(f"{size(row['bytes'])} at {places.path(lead['file'])}:{lead['line']} in {lead['function']}",
                  [call] + [places.python(f) for f in rest])


def _block(first, rest):
    lines = [first] + [_INDENT + r for r in rest[:FRAMES_SHOWN]]
    if len(rest) > FRAMES_SHOWN:
        lines.append(f"{_INDENT}… {_count(len(rest) - FRAMES_SHOWN, 'more frame')}")
    return lines


def failure_text(held, sites, limits, test_file, size, root=None):
    """The failure message for what a test left behind (accounting.Held), or None when it stays within
    `limits` (max_leaked_bytes, fail_on). `sites` is accounting.Sites or None; `size` formats a byte count
    ("4.0 MiB (4194304 bytes)"); `root` is where shown paths are relative to."""
    fail_on, allowed = limits["fail_on"], limits["max_leaked_bytes"]
    counted = (held.leaked_bytes if "leaks" in fail_on else 0) + (held.unfreed_bytes if "unfreed" in fail_on else 0)
    lines = []
    if counted > allowed:
        what = []
        if held.leaked_bytes or "unfreed" not in fail_on:
            what.append(f"leaked {size(held.leaked_bytes)} in {_count(held.leaked_allocations, 'allocation')} "
                        f"({_count(held.leaked_references, 'unreleased reference')})")
        if "unfreed" in fail_on and held.unfreed_bytes:
            what.append(f"left {size(held.unfreed_bytes)} unfreed in {_count(held.unfreed_allocations, 'allocation')}")
        lines.append("cumemaudit: " + " and ".join(what) + f"; limit {size(allowed)}")
        places = _Places(root)
        for row in (sites.largest if sites else [])[:SITES_SHOWN]:
            lines += _site_block(row, test_file, size, places)
        if sites and sites.total > SITES_SHOWN:
            lines.append(f"… {_count(sites.total - SITES_SHOWN, 'more site')} (the report has them all)")
    if "misuse" in fail_on and held.misuse_events:
        lines.append(f"cumemaudit: {_count(held.misuse_events, 'misuse event')} (calls the driver rejected; "
                     "the report names them)")
    return "\n".join(lines) if lines else None
