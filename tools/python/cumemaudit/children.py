"""Children and launchers. A child inherits the audit through its environment — LD_PRELOAD (the shim),
CUMEMAUDIT_OPTIONS, CUDA_INJECTION64_PATH for the CUPTI backend, and the library path of the driver this
process runs on — so ``subprocess``, ``multiprocessing`` (fork, spawn, forkserver), ``torchrun`` and
``mp.spawn`` children that touch CUDA each write their own report (their pid, and rank when set, in its
name). A launcher that builds the child's environment from scratch (``subprocess.run(cmd, env={...})``,
some schedulers) drops those variables and its child runs unaudited: no report, no gate.

``enable_in_children()`` is the way out: from then on every environment this process hands to a child —
os.environ, ``subprocess.Popen(env=...)``, ``os.execve``/``execvpe``, ``os.posix_spawn[p]`` — carries the
audit. It also works in a launcher that is not audited itself: its children get the shim that came with
this package."""
import functools
import os
import subprocess

from . import _layout

_applied = None  # the variables put back into every child's environment, once enabled


def _entries(value):
    return [p for p in (value or "").split(":") if p]


def _audit_variables(options, sim):
    env = os.environ
    shim = next((p for p in _entries(env.get("LD_PRELOAD")) if os.path.basename(p) == "libcumemaudit.so"), None)
    shim = shim or _layout.shim()
    if shim is None:
        raise RuntimeError("cumemaudit.enable_in_children: no libcumemaudit.so (not preloaded, none installed "
                           "with this package, CUMEMAUDIT_SHIM unset)")
    out = {"LD_PRELOAD": shim}
    opts = options if options is not None else env.get("CUMEMAUDIT_OPTIONS")
    if opts:
        out["CUMEMAUDIT_OPTIONS"] = opts
    if env.get("CUDA_INJECTION64_PATH") == shim:
        out["CUDA_INJECTION64_PATH"] = shim
    # The children run on the driver this process runs on (the simulated one, say): the library path
    # entries that hold a libcuda.so.1.
    drivers = [d for d in _entries(env.get("LD_LIBRARY_PATH")) if os.path.exists(os.path.join(d, "libcuda.so.1"))]
    if sim:
        if _layout.sim_dir() is None:
            raise RuntimeError("cumemaudit.enable_in_children(sim=True): no simulated driver came with this "
                               "package (CUMEMAUDIT_SIM_DIR unset)")
        drivers = [_layout.sim_dir()] + drivers
    if drivers:
        out["LD_LIBRARY_PATH"] = ":".join(dict.fromkeys(drivers))
    return out


def _with_audit(env):
    """A copy of the mapping `env` with the audit variables added (a setting it has of its own stays)."""
    if env is None or _applied is None:
        return env
    out = dict(env)
    for key, value in _applied.items():
        if key in ("LD_PRELOAD", "LD_LIBRARY_PATH"):
            rest = [p for p in _entries(out.get(key)) if p not in _entries(value)]
            out[key] = ":".join(_entries(value) + rest)
        else:
            out.setdefault(key, value)
    return out


def _wrap_env_arg(fn, position):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if "env" in kwargs:
            kwargs["env"] = _with_audit(kwargs["env"])
        elif len(args) > position:
            args = (*args[:position], _with_audit(args[position]), *args[position + 1:])
        return fn(*args, **kwargs)
    wrapper.__cumemaudit_wrapped__ = True
    return wrapper


def enable_in_children(options=None, sim=False):
    """Makes every child of this process run under the audit, whatever environment its launcher builds.
    ``options``: the children's CUMEMAUDIT_OPTIONS (default: this process's). ``sim``: run them on the
    simulated driver that came with this package. Returns the variables each child gets. Idempotent."""
    global _applied
    _applied = _audit_variables(options, sim)
    os.environ.update(_with_audit(dict(os.environ)))
    # Popen.__init__(self, args, bufsize, executable, stdin, stdout, stderr, preexec_fn, close_fds, shell, cwd, env)
    if not getattr(subprocess.Popen.__init__, "__cumemaudit_wrapped__", False):
        subprocess.Popen.__init__ = _wrap_env_arg(subprocess.Popen.__init__, 11)
    for name, position in (("execve", 2), ("execvpe", 2), ("posix_spawn", 2), ("posix_spawnp", 2)):
        fn = getattr(os, name, None)
        if fn is not None and not getattr(fn, "__cumemaudit_wrapped__", False):
            setattr(os, name, _wrap_env_arg(fn, position))
    return dict(_applied)
