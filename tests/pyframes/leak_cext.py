"""Leaks through a C extension that calls cuMemCreate itself, with the GIL held and with it released."""
from driver import Driver, MiB
import cext

Driver()
cext.create(2 * MiB)  # WITH GIL
cext.create_nogil(4 * MiB)  # WITHOUT GIL
