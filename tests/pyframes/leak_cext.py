"""Leaks through a C extension that calls cuMemCreate itself, with the GIL held, with it released, and
from a thread of its own that Python does not know."""
from driver import Driver, MiB
import cext

Driver()
cext.create(2 * MiB)  # WITH GIL
cext.create_nogil(4 * MiB)  # WITHOUT GIL
assert cext.create_in_native_thread(8 * MiB)  # A NATIVE THREAD: no Python frames of its own
