"""The pytest session that test_pytest_plugin.py runs under `pytest --cumemaudit --cumemaudit-sim`: leaks of
one and of several sites, a site reached through a helper of this file, limits written as sizes. The lines
marked `# leak:` are the ones the failures must name; the test finds them by their mark, not by number."""
import ctypes
import threading

import pytest

from cuda_ctypes import MiB, Driver

_driver = None


def driver():
    global _driver
    _driver = _driver or Driver()
    return _driver


def grow(nbytes):
    return driver().create(nbytes)  # leak: helper


def test_one_site():
    driver().create(4 * MiB)  # leak: one


def test_sites_largest_first():
    grow(2 * MiB)  # leak: through helper
    driver().create(6 * MiB)  # leak: six
    driver().create(4 * MiB)  # leak: four first


def test_more_sites_than_shown():
    for _ in range(2):
        driver().create(4 * MiB)  # leak: loop
    driver().create(10 * MiB)  # leak: ten
    driver().create(6 * MiB)  # leak: six again
    driver().create(4 * MiB)  # leak: four
    grow(2 * MiB)  # leak: helper again


def test_leak_from_a_thread():
    # No frame of this file on the thread's stack: the block names the call and the thread's frames.
    t = threading.Thread(target=driver().create, args=(2 * MiB,))
    t.start()
    t.join()


def classic(nbytes):
    ptr = ctypes.c_uint64()
    Driver.check(driver().cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(nbytes)), "cuMemAlloc")
    return ptr.value


@pytest.mark.cumemaudit(fail_on="leaks,unfreed")
def test_unfreed_counts_when_asked():
    classic(8 * MiB)  # never freed: unfreed, not leaked (cuMemFree could still free it)


@pytest.mark.cumemaudit(fail_on="leaks,unfreed")
def test_leaked_and_unfreed():
    classic(2 * MiB)
    driver().create(2 * MiB)  # leak: beside unfreed


def test_unfreed_alone_passes_by_default():
    classic(2 * MiB)


def test_misuse():
    assert driver().cuda.cuMemRelease(ctypes.c_uint64(0xDEAD)) != 0  # a handle that never was


def test_clean():
    d = driver()
    d.release(d.create(8 * MiB))


@pytest.mark.cumemaudit(max_leaked_bytes="4 MiB")
def test_within_a_spaced_size():
    driver().create(4 * MiB)


@pytest.mark.cumemaudit(max_leaked_bytes="1.5 GiB")
def test_within_a_fraction():
    driver().create(6 * MiB)


@pytest.mark.cumemaudit(max_leaked_bytes="4MiB")
def test_within_a_size():
    driver().create(4 * MiB)


@pytest.mark.cumemaudit(max_leaked_bytes=4 * MiB)
def test_within_an_int():
    driver().create(4 * MiB)


@pytest.mark.cumemaudit(max_leaked_bytes="3.5 MiB")
def test_over_a_fraction():
    driver().create(4 * MiB)  # leak: over


@pytest.mark.cumemaudit(max_leaked_bytes=4 * MiB - 1)
def test_over_by_a_byte():
    driver().create(4 * MiB)  # leak: by a byte
