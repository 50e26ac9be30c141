"""The same leak once from a sub-interpreter and once from the main interpreter: the sub-interpreter's
site has no Python frames (not supported, and never the main interpreter's frames instead), the main one
names its line."""
import os
import sys

try:
    import _xxsubinterpreters as interpreters  # 3.11, 3.12
except ImportError:
    import _interpreters as interpreters  # 3.13

HERE = os.path.dirname(os.path.abspath(__file__))
code = f"import sys; sys.path.insert(0, {HERE!r}); from driver import Driver, MiB; Driver().create(4 * MiB)"
try:
    sub = interpreters.create(isolated=False)  # 3.12 and 3.13: ctypes refuses isolated interpreters
except TypeError:
    sub = interpreters.create()
interpreters.run_string(sub, code)

from driver import Driver, MiB  # noqa: E402

Driver().create(2 * MiB)  # MAIN INTERPRETER
