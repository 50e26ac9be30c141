#!/usr/bin/env python3
"""cuda.core's pinned and managed memory resources under the audit: four steps, each keeping 256 MiB more from
each resource. Pinned host memory is no device memory, and managed memory nothing touched stays off the device,
so no step may book device bytes for them, and no device growth alarm may fire. Prints what each resource is
made from. Run under `cumemaudit run`."""
import sys

import cumemaudit

try:
    import cuda.core as core
except ImportError:
    import cuda.core.experimental as core

MiB = 1 << 20


def resource(name, dev):
    cls = getattr(core, name)
    try:
        return cls(dev)
    except TypeError:
        return cls()


def main():
    dev = core.Device(0)
    dev.set_current()
    pinned, managed = resource("PinnedMemoryResource", dev), resource("ManagedMemoryResource", dev)
    print("resources:", type(pinned).__name__, type(managed).__name__, flush=True)
    stream = dev.create_stream()
    kept = []
    for n in range(4):
        kept.append(pinned.allocate(256 * MiB, stream=stream))
        kept.append(managed.allocate(256 * MiB, stream=stream))
        dev.sync()
        cumemaudit.step(n)
    for buf in kept:
        buf.close(stream)
    print("core resources done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
