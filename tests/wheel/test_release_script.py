#!/usr/bin/python3
"""scripts/release on what it cannot build: an unknown argument is a usage error (exit 2); a build directory
meson cannot configure (its saved state unreadable, an option meson does not know) stops the script with
meson's own message and which step and directory failed (exit 1), before anything is built or trained.
Environment from meson: SOURCE_ROOT."""
import os
import subprocess
import tempfile
import unittest

RELEASE = os.path.join(os.environ["SOURCE_ROOT"], "scripts", "release")


def release(*args):
    return subprocess.run([RELEASE, *args], capture_output=True, text=True, timeout=300)


class ReleaseScriptRefuses(unittest.TestCase):
    def test_unknown_argument_is_a_usage_error(self):
        p = release("--bulddir", "x")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("scripts/release: unknown argument '--bulddir' (see --help)", p.stderr)

    def test_unreadable_build_directory_names_meson_and_the_directory(self):
        with tempfile.TemporaryDirectory() as d:
            build = os.path.join(d, "old build")
            os.makedirs(os.path.join(build, "meson-private"))
            with open(os.path.join(build, "meson-private", "coredata.dat"), "w") as f:
                f.write("not meson's\n")
            p = release("--builddir", build)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn(f"scripts/release: 'meson setup' of {build} failed", p.stderr)
            self.assertNotIn("building the instrumented shim", p.stderr)
            self.assertFalse(os.path.exists(os.path.join(build, "shim-profile")))

    def test_option_meson_does_not_know_shows_its_message(self):
        with tempfile.TemporaryDirectory() as d:
            build = os.path.join(d, "b")
            p = release("--builddir", build, "--", "-Dno-such-option=1")
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn('Unknown options: "no-such-option"', p.stderr)  # meson's own words, not swallowed
            self.assertIn(f"scripts/release: 'meson setup' of {build} failed", p.stderr)
            self.assertNotIn("building the instrumented shim", p.stderr)


if __name__ == "__main__":
    unittest.main()
