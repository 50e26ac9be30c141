"""Eight Python threads leak through ctypes at once, each from its own line, while the main thread keeps
the GIL busy: no thread may wait on another, and each site must name its own thread's line."""
import threading

from driver import Driver, MiB

driver = Driver()
start = threading.Barrier(9)


def worker_even():
    start.wait()
    for _ in range(25):
        driver.release(driver.create(2 * MiB))
    driver.create(2 * MiB)  # EVEN


def worker_odd():
    start.wait()
    for _ in range(25):
        driver.release(driver.create(2 * MiB))
    driver.create(4 * MiB)  # ODD


threads = [threading.Thread(target=worker_even if i % 2 == 0 else worker_odd) for i in range(8)]
for t in threads:
    t.start()
start.wait()
busy = sum(i * i for i in range(200000))  # the main thread holds the GIL meanwhile
for t in threads:
    t.join()
print("joined", busy > 0)
