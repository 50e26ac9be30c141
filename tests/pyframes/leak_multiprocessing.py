"""multiprocessing's children, started by fork and by forkserver: CPython ends each with os._exit, past
exit()'s handlers, and each still writes its report with its own leak at its own line."""
import multiprocessing
import sys

from driver import Driver, MiB


def child():
    Driver().create(4 * MiB)  # CHILD


if __name__ == "__main__":
    method = sys.argv[1]
    if method == "fork":
        Driver()  # the parent's audit runs before the fork: each child starts its own
    ctx = multiprocessing.get_context(method)
    for _ in range(3):
        p = ctx.Process(target=child)
        p.start()
        p.join()
        assert p.exitcode == 0, p.exitcode
    print(f"{method}: 3 children")
