"""Forks after VMM calls have filled the shim's tables (Python frames, decoded code objects): each child
starts a fresh ledger, and its own leak names its own line; the parent's names the parent's. (The forks
are not made while another thread is in a driver call: the simulated driver itself can hang then, with or
without the shim.)"""
import os
import sys

from driver import Driver, MiB

driver = Driver()
for _ in range(50):
    driver.release(driver.create(2 * MiB))
for _ in range(20):
    pid = os.fork()
    if pid == 0:
        Driver().create(4 * MiB)  # CHILD
        sys.exit(0)  # exit handlers run: the child writes its report
    _, status = os.waitpid(pid, 0)
    assert status == 0, status
driver.create(2 * MiB)  # PARENT
