"""A stand-in for RMM in test_helper.py, shaped as RMM's Python API is: the current device resource is a
statistics adaptor (rmm.statistics.enable_statistics) over a pool resource; 7 MiB in use of a 32 MiB pool."""
from . import mr  # noqa: F401
