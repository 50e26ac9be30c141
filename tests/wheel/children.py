"""Children of an audited Python program, each leaking a size of its own so its report names it: a
subprocess child (4 MiB) and a multiprocessing spawn child (6 MiB) inherit the audit; a child whose launcher
scrubs the environment (8 MiB) runs unaudited; after cumemaudit.enable_in_children() the same scrubbed
launch (10 MiB) is audited again. The parent leaks 2 MiB.

  children.py           (under `cumemaudit run --sim`)
  children.py --launcher REPORT_DIR   (not audited itself: enable_in_children(sim=True) audits its child)
"""
import multiprocessing
import os
import subprocess
import sys

from cuda_ctypes import MiB, Driver

import cumemaudit


def leak(mib):
    Driver().create(mib * MiB)


def scrubbed(mib):
    # A launcher that builds the environment from scratch, as some schedulers do.
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.path.dirname(os.path.abspath(__file__))}
    subprocess.run([sys.executable, __file__, "--child", str(mib)], env=env, check=False)


def main(argv):
    if argv[1:2] == ["--child"]:
        try:
            leak(int(argv[2]))
        except OSError:  # a scrubbed child finds no libcuda.so.1 on a machine without a GPU driver
            pass
        return 0
    if argv[1:2] == ["--launcher"]:
        cumemaudit.enable_in_children(options=f"report_dir={argv[2]}", sim=True)
        scrubbed(10)
        return 0
    leak(2)
    subprocess.run([sys.executable, __file__, "--child", "4"], check=False)
    ctx = multiprocessing.get_context("spawn")
    p = ctx.Process(target=leak, args=(6,))
    p.start()
    p.join()
    scrubbed(8)
    cumemaudit.enable_in_children()
    scrubbed(10)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
