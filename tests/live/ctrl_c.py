"""A Python job ended by Ctrl-C: it leaks one 2 MiB VMM handle (cuMemCreate, never released), prints
"ready", then sleeps until SIGINT raises KeyboardInterrupt, which nothing catches: Python prints its
traceback, finalizes, and ends itself with SIGINT at its default disposition (exit status 130)."""
import time

from driver import Driver, MiB

drv = Driver()
drv.create(2 * MiB)  # LEAK: never released
print("ready", flush=True)
while True:
    time.sleep(1)
