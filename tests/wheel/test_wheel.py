#!/usr/bin/python3
"""The wheel as a user gets it: built from this tree with meson-python (scripts/wheel), pip-installed into a
new venv, then run from that venv only — no PYTHONPATH, no LD_* variables, no build tree on any path:
`cumemaudit demo`, a Python program leaking through ctypes on the simulated driver, a pytest session under
--cumemaudit (alone and with two xdist workers), children and a scrubbing launcher. Also `meson install`'s
layout. The venv sees Debian's site packages only for pytest and xdist (no PyPI here).
Environment from meson: SOURCE_ROOT, BUILD_ROOT, WHEEL_BUILDDIR."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import zipfile

SOURCE_ROOT = os.environ["SOURCE_ROOT"]
BUILD_ROOT = os.environ["BUILD_ROOT"]
HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20
ELF = b"\x7fELF"


def sh(cmd, timeout=300, **kw):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    print(f"[{time.time() - t0:5.1f}s] rc {p.returncode}: {' '.join(cmd)}", flush=True)
    return p


def read(path):
    with open(path) as f:
        return f.read()


def reports(directory):
    return [json.loads(read(f)) for f in sorted(glob.glob(os.path.join(directory, "cumemaudit.*.json")))]


def newest_glibc_by_objdump(wheel):
    """The glibc the wheel's ELF files need, read with objdump (a second tool beside wheel-tag's readelf)."""
    newest = (0, 0)
    with zipfile.ZipFile(wheel) as z, tempfile.TemporaryDirectory() as tmp:
        for info in z.infolist():
            data = z.read(info)
            if data.startswith(ELF):
                path = os.path.join(tmp, "elf")
                with open(path, "wb") as f:
                    f.write(data)
                out = subprocess.run(["objdump", "-T", path], capture_output=True, text=True, check=True).stdout
                for a, b in re.findall(r"GLIBC_(\d+)\.(\d+)", out):
                    newest = max(newest, (int(a), int(b)))
    return newest


def needed(elf):
    """The DT_NEEDED entries of an ELF file's bytes, as readelf -d names them (the names it links)."""
    with tempfile.NamedTemporaryFile(suffix=".so") as f:
        f.write(elf)
        f.flush()
        out = subprocess.run(["readelf", "-d", f.name], capture_output=True, text=True, check=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


class Wheel(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="cumemaudit-wheel.")
        built = sh([os.path.join(SOURCE_ROOT, "scripts", "wheel"), "--out", os.path.join(BUILD_ROOT, "wheel-dist"),
                    "--builddir", os.environ["WHEEL_BUILDDIR"]], timeout=1500)
        if built.returncode != 0:
            raise AssertionError(f"scripts/wheel failed:\n{built.stdout}\n{built.stderr[-6000:]}")
        cls.wheel = built.stdout.strip().splitlines()[-1]
        cls.venv = os.path.join(cls.tmp, "venv")
        made = sh(["/usr/bin/python3", "-m", "venv", "--system-site-packages", cls.venv])
        assert made.returncode == 0, made.stderr
        pip = sh([os.path.join(cls.venv, "bin", "python"), "-m", "pip", "install", "--no-index", "--no-deps",
                  "--disable-pip-version-check", cls.wheel])
        assert pip.returncode == 0, pip.stdout + pip.stderr
        # The programs are copied out of the tree, so nothing can be imported from it by accident.
        cls.work = os.path.join(cls.tmp, "work")
        os.makedirs(cls.work)
        for name in ("cuda_ctypes.py", "ctypes_leak.py", "session_sample.py", "children.py"):
            shutil.copy(os.path.join(HERE, name), cls.work)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def venv_run(self, *cmd, timeout=180, extra_env=None):
        env = {"PATH": os.path.join(self.venv, "bin") + ":/usr/bin:/bin", "HOME": self.tmp, "LANG": "C.UTF-8",
               **(extra_env or {})}
        return sh(list(cmd), timeout=timeout, env=env, cwd=self.work)

    def dir(self, name):
        return os.path.join(self.tmp, name)

    def test_shim_is_built_from_a_profile_of_its_hot_path(self):
        # scripts/release trained it: the build directory builds from the profile, and the profile covers the
        # ledger's table and the wrappers, which every recorded allocation runs.
        builddir = os.environ["WHEEL_BUILDDIR"]
        options = json.loads(sh(["meson", "introspect", "--buildoptions", builddir]).stdout)
        self.assertEqual([o["value"] for o in options if o["name"] == "shim-profile"], ["use"])
        profiles = os.listdir(os.path.join(builddir, "shim-profile"))
        for source in ("classic_table.cpp", "hooks.cpp", "events.cpp"):
            self.assertTrue(any(p.endswith(source + ".gcda") for p in profiles), f"no profile of {source}: {profiles}")

    def test_wheel_is_tagged_for_any_cpython3_with_the_glibc_it_needs(self):
        major, minor = newest_glibc_by_objdump(self.wheel)
        self.assertEqual(os.path.basename(self.wheel),
                         f"cumemaudit-0.1.0-py3-none-manylinux_{major}_{minor}_x86_64.whl")
        with zipfile.ZipFile(self.wheel) as z:
            names = set(z.namelist())
            for member in ("cumemaudit/_native/lib/libcumemaudit.so", "cumemaudit/_native/bin/cumemaudit",
                           "cumemaudit/_native/lib/cumemaudit/sim/libcuda.so.1",
                           "cumemaudit/_native/lib/cumemaudit/sim/libnvidia-ml.so.1",
                           "cumemaudit/_native/lib/libcumemaudit_pool.so",
                           "cumemaudit/_native/include/cumemaudit/cumemaudit.h",
                           "cumemaudit/_native/include/cumemaudit/fabric_pool.hpp",
                           "cumemaudit/__init__.py", "cumemaudit/_capi.py", "cumemaudit/pytest_plugin.py"):
                self.assertIn(member, names)
            for info in z.infolist():  # nothing links libpython: one wheel serves every CPython 3
                data = z.read(info)
                if data.startswith(ELF):
                    self.assertEqual([n for n in needed(data) if n.startswith("libpython")], [], info.filename)
            entry_points = z.read("cumemaudit-0.1.0.dist-info/entry_points.txt").decode()
        self.assertIn("[pytest11]\ncumemaudit = cumemaudit.pytest_plugin", entry_points)
        self.assertIn("[console_scripts]\ncumemaudit = cumemaudit.__main__:main", entry_points)

    def test_cli_module_and_import_from_the_venv(self):
        for cmd in (["cumemaudit", "--version"], ["python", "-m", "cumemaudit", "--version"]):
            p = self.venv_run(*cmd)
            self.assertEqual((p.returncode, p.stdout.strip()), (0, "cumemaudit 0.1.0"), p.stderr)
        p = self.venv_run("python", "-c", "import cumemaudit, cumemaudit.pool; print(cumemaudit.__file__); "
                          "print(cumemaudit.shim_path()); print(cumemaudit.pool.library_path())")
        module, shim, pool = p.stdout.split()
        self.assertTrue(module.startswith(self.venv + "/"), module)
        self.assertEqual(shim, os.path.join(os.path.dirname(module), "_native", "lib", "libcumemaudit.so"))
        self.assertEqual(pool, os.path.join(os.path.dirname(module), "_native", "lib", "libcumemaudit_pool.so"))

    def test_demo(self):
        p = self.venv_run("cumemaudit", "demo")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("exit code 23: the gate failed the run", p.stdout)
        self.assertIn("the simulated driver lost 402653184 bytes of free memory; cumemaudit reports 402653184 "
                      "bytes leaked", p.stdout)

    def test_ctypes_leak_on_the_simulated_driver(self):
        out = self.dir("ctypes")
        p = self.venv_run("cumemaudit", "run", "--sim", "--report-dir", out, "--", "python", "ctypes_leak.py")
        self.assertEqual(p.returncode, 23, p.stdout + p.stderr)
        self.assertIn("ctypes_leak: done", p.stdout)
        (rep,) = reports(out)
        self.assertEqual(rep["summary"]["leaked_bytes"], 3 * 2 * MiB)
        self.assertEqual(rep["summary"]["leaked_allocations"], 3)
        self.assertEqual(rep["leaks"][0]["site"]["api"], "cuMemCreate")
        self.assertTrue(rep["driver"]["simulated"])
        self.assertIn("ctypes_leak.py", rep["process"]["argv"])

    def check_session_output(self, p, failed, passed):
        text = p.stdout
        self.assertEqual(p.returncode, 1, text + p.stderr)
        self.assertRegex(text, rf"\b{failed} failed, {passed} passed\b")
        self.assertEqual(re.findall(r"FAILED (\S+)", text), ["session_sample.py::test_leaks"] * failed)
        # The failure (docs/PYTEST.md): the bytes and the limit, then the site led by the leaking test's line,
        # then the call and the helper that made it.
        sample = os.path.join(HERE, "session_sample.py")
        line = next(i for i, t in enumerate(open(sample), 1) if "# never released" in t)
        create = next(i for i, t in enumerate(open(os.path.join(HERE, "cuda_ctypes.py")), 1) if "self.cuda.cuMemCreate(" in t)
        failure = re.compile(r"^cumemaudit: leaked 4\.0 MiB \(4194304 bytes\) in 1 allocation \(1 unreleased reference\); "
                             r"limit 0 B\n4\.0 MiB \(4194304 bytes\) at session_sample\.py:(\d+) in test_leaks\n"
                             r"    cuMemCreate from ffi_call \(libffi\.so\.\d+\)\n    Driver\.create at cuda_ctypes\.py:(\d+)\n", re.M)
        self.assertEqual(failure.findall(text), [(str(line), str(create))] * failed, text)

    def test_pytest_session_reexecs_under_the_shim_and_fails_exactly_the_leaking_test(self):
        out = self.dir("session")
        p = self.venv_run("python", "-m", "pytest", "-p", "no:cacheprovider", "--cumemaudit", "--cumemaudit-sim",
                          "--cumemaudit-dir", out, "session_sample.py")
        self.check_session_output(p, failed=1, passed=3)
        self.assertEqual(p.stdout.count(f"cumemaudit: reports in {out}/session-"), 1)  # one re-exec, one session
        out = os.path.join(out, "latest")  # the session's own directory
        (rep,) = reports(out)
        # The process report keeps everything the session left: 4 MiB (test), 2 MiB (warm-up), 2 MiB (allowed).
        self.assertEqual(rep["summary"]["leaked_bytes"], 8 * MiB)
        check = self.venv_run("cumemaudit", "check", out)
        self.assertEqual(check.returncode, 1, check.stdout + check.stderr)
        self.assertIn("8388608 bytes leaked in 3 allocations", check.stdout)
        merged = self.venv_run("cumemaudit", "merge", out, "-o", self.dir("job.json"))
        self.assertEqual(merged.returncode, 0, merged.stdout + merged.stderr)
        self.assertIn("SUMMARY: cumemaudit job: 8388608 bytes leaked in 3 allocations", merged.stdout)
        self.assertEqual(json.loads(read(self.dir("job.json")))["schema"], "cumemaudit/job/v1")

    def test_pytest_reexecutes_at_most_once(self):
        # As if the session had already re-executed itself and the shim still were not there: a usage error
        # (pytest's exit 4) naming what happened, never a second exec.
        p = self.venv_run("python", "-m", "pytest", "-p", "no:cacheprovider", "--cumemaudit", "session_sample.py",
                          extra_env={"CUMEMAUDIT_PYTEST_REEXEC": "1"})
        self.assertEqual(p.returncode, 4, p.stdout + p.stderr)
        self.assertIn("--cumemaudit: re-executed with LD_PRELOAD=, yet the shim's C API is not in the process",
                      p.stderr)

    def test_pytest_without_the_flag_is_inert(self):
        p = self.venv_run("python", "-m", "pytest", "-p", "no:cacheprovider", "session_sample.py")
        # No shim, no driver on the library path: each test fails on its own (no libcuda.so.1); the plugin
        # adds nothing and re-executes nothing.
        self.assertRegex(p.stdout, r"\b4 failed in\b")
        self.assertIn("OSError: libcuda.so.1", p.stdout)
        self.assertNotIn("cumemaudit:", p.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.work, "cumemaudit-reports")))

    def test_xdist_workers_each_write_their_own_report(self):
        out = self.dir("xdist")
        p = self.venv_run("python", "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist", "each",
                          "--cumemaudit", "--cumemaudit-sim", "--cumemaudit-dir", out, "session_sample.py")
        self.check_session_output(p, failed=2, passed=6)  # --dist each: every worker runs the four tests
        reps = reports(os.path.join(out, "latest"))
        self.assertEqual(len(reps), 2, [r["process"]["pid"] for r in reps])  # the controller touched nothing
        self.assertEqual(len({r["process"]["pid"] for r in reps}), 2)
        self.assertEqual([r["summary"]["leaked_bytes"] for r in reps], [8 * MiB, 8 * MiB])

    def test_children_inherit_the_audit_and_enable_in_children_survives_a_scrubbing_launcher(self):
        out = self.dir("children")
        p = self.venv_run("cumemaudit", "run", "--sim", "--report-dir", out, "--", "python", "children.py")
        self.assertEqual(p.returncode, 23, p.stdout + p.stderr)
        leaked = sorted(r["summary"]["leaked_bytes"] // MiB for r in reports(out))
        # parent 2, subprocess 4, spawn 6, scrubbed 8 (unaudited: no report), scrubbed after enable 10
        self.assertEqual(leaked, [2, 4, 6, 10])
        launched = self.dir("launcher")
        p = self.venv_run("python", "children.py", "--launcher", launched)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual([r["summary"]["leaked_bytes"] for r in reports(launched)], [10 * MiB])


class MesonInstall(unittest.TestCase):
    def test_install_has_the_design_layout_and_the_installed_cli_runs(self):
        with tempfile.TemporaryDirectory() as dest:
            p = sh(["meson", "install", "-C", BUILD_ROOT, "--destdir", dest, "--no-rebuild", "--quiet"])
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            intro = json.loads(sh(["meson", "introspect", "--buildoptions", BUILD_ROOT]).stdout)
            opt = {o["name"]: o["value"] for o in intro}
            root = dest + opt["prefix"]
            lib = os.path.join(root, opt["libdir"])
            for path in (os.path.join(lib, "libcumemaudit.so"), os.path.join(lib, "cumemaudit", "sim", "libcuda.so.1"),
                         os.path.join(lib, "cumemaudit", "sim", "libnvidia-ml.so.1"),
                         os.path.join(lib, "libcumemaudit_pool.so"),
                         os.path.join(root, opt["bindir"], "cumemaudit"),
                         os.path.join(root, opt["includedir"], "cumemaudit", "cumemaudit.h"),
                         os.path.join(root, opt["includedir"], "cumemaudit", "fabric_pool.hpp")):
                self.assertTrue(os.path.exists(path), path)
            (installed,) = glob.glob(os.path.join(root, "lib", "python3*", "*-packages", "cumemaudit", "_installed.py"))
            self.assertIn(f'ROOT = "{opt["prefix"]}"', read(installed))
            # The installed CLI finds the shim and the simulated driver beside it, with nothing set.
            out = os.path.join(dest, "reports")
            env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": HERE}
            p = sh([os.path.join(root, opt["bindir"], "cumemaudit"), "run", "--sim", "--report-dir", out, "--",
                    "/usr/bin/python3", os.path.join(HERE, "ctypes_leak.py")], env=env)
            self.assertEqual(p.returncode, 23, p.stdout + p.stderr)
            self.assertEqual(reports(out)[0]["summary"]["leaked_bytes"], 6 * MiB)


if __name__ == "__main__":
    unittest.main(verbosity=2)
