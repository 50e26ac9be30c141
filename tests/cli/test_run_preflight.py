#!/usr/bin/env python3
"""`cumemaudit run` refuses, before the program starts, what the shim would only find at exit: a report
directory that takes no file (a regular file, /sys/kernel, a directory this user may not write) and a
suppression file it would drop (a malformed line, a FIFO). Each case runs a program that would leave a
marker file, and checks the exact exit code and message, and that the marker is absent."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

CLI = None  # path of the cumemaudit binary, from argv
NOT_STARTED = "; the program was not started\n"


class Preflight(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        os.chmod(self.dir, 0o755)  # the unwritable-directory case runs the CLI as another user
        self.shim = os.path.join(self.dir, "libcumemaudit.so")
        open(self.shim, "w").close()  # any file: the loader ignores it with a warning, the program still runs
        self.marker = os.path.join(self.dir, "started")

    def tearDown(self):
        self.tmp.cleanup()

    def run_cli(self, *args, env=None, preexec_fn=None, cli=None):
        full_env = {k: v for k, v in os.environ.items()
                    if k not in ("CUMEMAUDIT_OPTIONS", "LD_PRELOAD", "LD_LIBRARY_PATH", "CUMEMAUDIT_SIM_DIR")}
        full_env.update({"CUMEMAUDIT_SHIM": self.shim, **(env or {})})
        p = subprocess.run([cli or CLI, "run", *args, "--", "sh", "-c", f"touch {self.marker}"], capture_output=True,
                           text=True, env=full_env, timeout=60, preexec_fn=preexec_fn)
        return p.returncode, p.stderr

    def refused(self, want_err, *args, **kw):
        rc, err = self.run_cli(*args, **kw)
        self.assertEqual((rc, err), (2, want_err))
        self.assertFalse(os.path.exists(self.marker), "the program started")

    def write(self, name, text):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_report_dir_that_is_a_file(self):
        f = self.write("audit", "")
        self.refused(f"cumemaudit run: report_dir {f}: not a directory{NOT_STARTED}", "--report-dir", f)
        # From the environment too, and below a placeholder: the part every rank shares is checked.
        self.refused(f"cumemaudit run: report_dir {f}: not a directory{NOT_STARTED}",
                     env={"CUMEMAUDIT_OPTIONS": f"report_dir={f}"})
        self.refused(f"cumemaudit run: report_dir {f}: not a directory{NOT_STARTED}", "--report-dir", f + "/%h/%p")
        self.refused(f"cumemaudit run: report_dir {f}/sub: cannot make it ({f}/sub: Not a directory){NOT_STARTED}",
                     "--report-dir", f + "/sub")

    def test_report_dir_that_takes_no_file(self):
        self.refused(f"cumemaudit run: report_dir /sys/kernel: cannot write a file there (Permission denied){NOT_STARTED}",
                     "--report-dir", "/sys/kernel")

    def test_report_dir_this_user_may_not_write(self):
        ro = os.path.join(self.dir, "ro")
        os.mkdir(ro, 0o555)
        drop, cli = None, CLI
        if os.geteuid() == 0:  # root writes anywhere: run as nobody, whom 0555 stops
            def drop():
                os.setgid(65534)
                os.setuid(65534)
            # A copy nobody can reach: the build may lie under a directory only root may enter (a CI
            # checkout in a 0700 temporary directory).
            cli = shutil.copy(CLI, os.path.join(self.dir, "cumemaudit"))
        self.refused(f"cumemaudit run: report_dir {ro}: cannot write a file there (Permission denied){NOT_STARTED}",
                     "--report-dir", ro, preexec_fn=drop, cli=cli)

    def test_missing_report_dir_is_made_and_left_clean(self):
        d = os.path.join(self.dir, "a", "b")
        rc, err = self.run_cli("--report-dir", d)
        self.assertEqual(rc, 0, err)
        self.assertTrue(os.path.exists(self.marker))
        self.assertEqual(os.listdir(d), [])  # the probe file is gone
        rc, err = self.run_cli("--report-dir", os.path.join(self.dir, "ranks", "%h", "%p"))
        self.assertEqual(rc, 0, err)
        self.assertEqual(os.listdir(os.path.join(self.dir, "ranks")), [])  # the per-process part is the shim's

    def test_malformed_suppression_names_file_and_line(self):
        supp = self.write("supp.txt", "# known\nleak:*ncclProxy*\nlek:foo\n")
        self.refused(f"cumemaudit run: {supp}:3: unknown rule type 'lek' (expected leak or misuse): lek:foo{NOT_STARTED}",
                     "--suppressions", supp)
        self.refused(f"cumemaudit run: {supp}:3: unknown rule type 'lek' (expected leak or misuse): lek:foo{NOT_STARTED}",
                     "--option", f"suppressions={supp}")
        empty = self.write("empty.txt", "leak:\n")
        self.refused(f"cumemaudit run: {empty}:1: empty pattern: leak:{NOT_STARTED}", "--suppressions", empty)

    def test_suppressions_the_shim_would_not_read(self):
        fifo = os.path.join(self.dir, "supp.fifo")
        os.mkfifo(fifo)
        self.refused(f"cumemaudit run: {fifo}: cannot read the suppression file: not a regular file{NOT_STARTED}",
                     "--suppressions", fifo)

    def test_good_suppressions_run(self):
        supp = self.write("supp.txt", "leak:*ncclProxy*\nmisuse:libfoo.so\n")
        rc, err = self.run_cli("--report-dir", self.dir, "--suppressions", supp)
        self.assertEqual(rc, 0, err)
        self.assertTrue(os.path.exists(self.marker))


if __name__ == "__main__":
    CLI = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
