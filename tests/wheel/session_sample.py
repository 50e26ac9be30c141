"""The pytest session that test_wheel.py runs under `pytest --cumemaudit`: one test leaks, one is clean, one
leaks only in its first (warm-up) call, one is marked to allow the bytes it leaks. Exactly test_leaks fails."""
import pytest

from cuda_ctypes import MiB, Driver

_driver = None
_cache = []  # filled once, by the first call: a warm-up cost, not a leak


def driver():
    global _driver
    _driver = _driver or Driver()
    return _driver


def test_leaks():
    driver().create(4 * MiB)  # never released


def test_clean():
    d = driver()
    d.release(d.create(8 * MiB))


@pytest.mark.cumemaudit(warmups=1)
def test_leaks_only_in_warmup():
    if not _cache:
        _cache.append(driver().create(2 * MiB))


@pytest.mark.cumemaudit(max_leaked_bytes=2 * MiB)
def test_allowed_to_leak():
    driver().create(2 * MiB)
