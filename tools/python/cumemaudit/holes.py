"""The lines that make the holes: PyTorch's allocation history over one window (a warm-up-and-capture loop),
summarised per Python line and pool.

PyTorch's caching allocator keeps the blocks a program frees; a block that no later request fits is memory
the device has given away and nobody can use (a "hole"). At the window's end each free block of each pool is
traced back to the allocations of the window that last covered its bytes, so every hole is named by the
Python line that allocated there: "combine.py:12 (combine) allocated 16 × 32.0 MiB in the default pool; 448 MiB
of it free in 14 blocks at the end". Free bytes no allocation of the window covered are "before the window".

    summarize(snapshot)        pure: torch.cuda.memory._snapshot() with history recorded -> the profile (dict)
    lines(profile)             the profile as text, largest holes first
    capture_profile(path=None) the window: records history (Python stacks) inside it only, and at its end
                               prints the profile on stderr and writes it as JSON to `path`

The window costs what PyTorch's history costs inside it and nothing outside."""
import bisect
import contextlib
import json
import os
import sys

from . import _capi, sizes

_HOLES_KEPT = 32  # the shim keeps as many (history::kCaptureHolesKept)

# Frames that only carry an allocation to PyTorch: the line named is the first frame outside them.
_WRAPPER_PARTS = (os.sep + "torch" + os.sep, os.sep + "cumemaudit" + os.sep, os.sep + "contextlib.py")


def pool_name(pool_id):
    """(0, 0) is the default pool; any other id is a private pool (CUDA graph capture, MemPool)."""
    return "default" if tuple(pool_id) == (0, 0) else "graph " + str(tuple(pool_id))


def _line_of(frames):
    """'file.py:12 (function)' of the innermost frame past PyTorch and the audit's own, or '(no Python frame)'."""
    python = [f for f in frames or () if str(f.get("filename", "")).endswith(".py")]
    chosen = next((f for f in python if not any(p in f["filename"] for p in _WRAPPER_PARTS)), python[0] if python else None)
    if chosen is None:
        return "(no Python frame)"
    return f"{os.path.basename(chosen['filename'])}:{chosen.get('line', 0)} ({chosen.get('name', '?')})"


class _Row:
    def __init__(self, line, pool):
        self.line, self.pool = line, pool
        self.allocations, self.allocated_bytes, self.sizes = 0, 0, set()
        self.hole_bytes, self.hole_blocks = 0, 0

    def as_dict(self):
        return {"line": self.line, "pool": self.pool, "allocations": self.allocations,
                "allocated_bytes": self.allocated_bytes, "distinct_sizes": len(self.sizes),
                "largest_bytes": max(self.sizes, default=0), "hole_bytes": self.hole_bytes, "hole_blocks": self.hole_blocks}


def summarize(snapshot, device=None):
    """The profile of a snapshot taken with history recorded: per (line, pool) the window's allocations and
    the free bytes at the end they left; per pool its reserved, allocated and free bytes, free blocks and the
    largest; and the out-of-memory answers the window saw. `device`: the trace and segments of one device
    (default: the first trace's)."""
    traces = snapshot.get("device_traces") or [[]]
    device = device if device is not None else next((i for i, t in enumerate(traces) if t), 0)
    trace = traces[device] if device < len(traces) else []
    segments = [s for s in snapshot.get("segments", ()) if s.get("device", device) == device]
    seg_starts = sorted((int(s["address"]), int(s["total_size"]), pool_name(s.get("segment_pool_id", (0, 0))))
                        for s in segments)
    starts = [s[0] for s in seg_starts]

    def pool_at(addr):
        i = bisect.bisect_right(starts, addr) - 1
        return seg_starts[i][2] if i >= 0 and addr < seg_starts[i][0] + seg_starts[i][1] else "released"

    allocs, rows, ooms = [], {}, []  # allocs: (addr, size, sequence, line) of the window
    for seq, e in enumerate(trace):
        action = e.get("action")
        if action == "alloc":
            addr, size, line = int(e["addr"]), int(e["size"]), _line_of(e.get("frames"))
            allocs.append((addr, size, seq, line))
            row = rows.setdefault((line, pool_at(addr)), _Row(line, pool_at(addr)))
            row.allocations += 1
            row.allocated_bytes += size
            row.sizes.add(size)
        elif action == "oom":
            ooms.append({"requested_bytes": int(e.get("size", 0)), "device_free_bytes": int(e.get("device_free", 0)),
                         "line": _line_of(e.get("frames"))})
    allocs.sort()
    alloc_starts = [a[0] for a in allocs]
    longest = max((a[1] for a in allocs), default=0)

    pools, before = {}, {}
    for s in segments:
        name = pool_name(s.get("segment_pool_id", (0, 0)))
        p = pools.setdefault(name, {"pool": name, "reserved_bytes": 0, "allocated_bytes": 0, "free_bytes": 0,
                                    "free_blocks": 0, "largest_free_block_bytes": 0})
        p["reserved_bytes"] += int(s["total_size"])
        p["allocated_bytes"] += int(s.get("allocated_size", 0))
        for b in s.get("blocks", ()):
            if b.get("state") != "inactive":
                continue
            start, size = int(b["address"]), int(b["size"])
            p["free_bytes"] += size
            p["free_blocks"] += 1
            p["largest_free_block_bytes"] = max(p["largest_free_block_bytes"], size)
            named = _trace_free_block(start, size, allocs, alloc_starts, longest)
            for line, nbytes in named.items():
                row = rows.setdefault((line, name), _Row(line, name))
                row.hole_bytes += nbytes
                row.hole_blocks += 1
            rest = size - sum(named.values())
            if rest:
                before[name] = before.get(name, 0) + rest
    ordered = sorted(rows.values(), key=lambda r: (-r.hole_bytes, -r.allocated_bytes, r.line, r.pool))
    return {"device": device, "trace_entries": len(trace), "lines": [r.as_dict() for r in ordered],
            "pools": sorted(pools.values(), key=lambda p: (p["pool"] != "default", p["pool"])),
            "free_before_window_bytes": before, "oom": ooms}


def _trace_free_block(start, size, allocs, alloc_starts, longest):
    """{line: bytes} of the free block [start, start+size): each byte to the window's latest allocation that
    covered it. Allocations are sorted by address; none is longer than `longest`."""
    end = start + size
    lo = bisect.bisect_left(alloc_starts, start - longest)
    hi = bisect.bisect_left(alloc_starts, end)
    covering = sorted((a for a in allocs[lo:hi] if a[0] < end and a[0] + a[1] > start), key=lambda a: -a[2])
    uncovered, named = [(start, end)], {}
    for addr, length, _, line in covering:
        a0, a1 = addr, addr + length
        left = []
        for u0, u1 in uncovered:
            o0, o1 = max(u0, a0), min(u1, a1)
            if o0 >= o1:
                left.append((u0, u1))
                continue
            named[line] = named.get(line, 0) + (o1 - o0)
            if u0 < o0:
                left.append((u0, o0))
            if o1 < u1:
                left.append((o1, u1))
        uncovered = left
        if not uncovered:
            break
    return named


def _bytes(nbytes):
    """Sizes as every view writes them, through the shim; a plain count where the shim is not loaded."""
    try:
        return sizes.human(nbytes)
    except RuntimeError:
        return f"{nbytes} bytes"


def lines(profile, top=8):
    """The profile as text: each pool's free memory, then the lines whose allocations left the most free."""
    h = _bytes
    out = [f"capture profile ({profile['trace_entries']} allocator events):"]
    for p in profile["pools"]:
        out.append(f"  pool {p['pool']}: {h(p['reserved_bytes'])} reserved, {h(p['allocated_bytes'])} allocated, "
                   f"{h(p['free_bytes'])} free in {p['free_blocks']} blocks (largest {h(p['largest_free_block_bytes'])})")
    for o in profile["oom"]:
        out.append(f"  out of memory: {h(o['requested_bytes'])} asked at {o['line']}, {h(o['device_free_bytes'])} free on the device")
    for r in [r for r in profile["lines"] if r["hole_bytes"]][:top]:
        out.append(f"  {r['line']}: {r['allocations']} allocations in pool {r['pool']} ({r['distinct_sizes']} sizes, "
                   f"the largest {h(r['largest_bytes'])}); {h(r['hole_bytes'])} of it free in {r['hole_blocks']} blocks at the end")
    for pool, nbytes in sorted(profile["free_before_window_bytes"].items()):
        out.append(f"  pool {pool}: {h(nbytes)} free that no allocation of the window covered")
    return out


def hand_over(profile):
    """Gives the profile's rows that left holes to the shim, for the report (`capture_profile`), where one is
    loaded; the most free first, as many as it keeps."""
    api = _capi.functions("capture_profile", "capture_hole")
    if api is None:
        return
    api["capture_profile"](profile["trace_entries"])
    for r in [r for r in profile["lines"] if r["hole_bytes"]][:_HOLES_KEPT]:
        api["capture_hole"](r["line"].encode("utf-8", "replace"), r["pool"].encode(), r["allocations"], r["allocated_bytes"],
                            r["largest_bytes"], r["hole_bytes"], r["hole_blocks"])


@contextlib.contextmanager
def capture_profile(path=None, max_entries=1_000_000):
    """Records PyTorch's allocation history (Python stacks) inside the window, and at its end, also when the
    body raised (an out-of-memory error is the case it is for), prints the profile on stderr and writes it
    as JSON to `path`. History recording is switched off again at the end: a program that records its own
    should summarise its own snapshot with summarize()."""
    import torch  # the window is PyTorch's: importing it here keeps `import cumemaudit` light

    torch.cuda.memory._record_memory_history(max_entries=max_entries, stacks="python")
    try:
        yield
    finally:
        try:
            snapshot = torch.cuda.memory._snapshot()
        finally:
            torch.cuda.memory._record_memory_history(enabled=None)
        profile = summarize(snapshot, torch.cuda.current_device())
        sys.stderr.write("".join(f"cumemaudit: {line}\n" for line in lines(profile)))
        hand_over(profile)
        if path is not None:
            with open(path, "w") as f:
                json.dump(profile, f, indent=1)
