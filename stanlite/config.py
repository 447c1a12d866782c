"""The environment switches: every ``STANLITE_*`` variable stanlite reads, in one table.

Each is read where it acts (most once, when its module is imported: set them before
``import stanlite``), always through this module - :func:`setting` (a value),
:func:`switched_off` (an on/off switch), :func:`user_cache_home` (the platform's
cache directory) are the library's only readings of the environment.
:data:`SWITCHES` says what each does and where it is read, and
tests/test_architecture.py checks that no module reads a ``STANLITE_*`` variable this
table does not declare.

>>> sorted(SWITCHES)[:3]
['STANLITE_BACKEND', 'STANLITE_CACHE_DIR', 'STANLITE_COMPILE']
>>> switched_off("STANLITE_COMPILE", environ={"STANLITE_COMPILE": " Off"})
True
"""

import os
import sys

__all__ = ["SWITCHES", "setting", "switched_off", "user_cache_home"]

#: name -> (what it does, where it is read)
SWITCHES = {
    "STANLITE_COMPILE": ("0/false/no/off: models keep the eager tape instead of "
                         "retaping their log-density gradient (Model.compile)",
                         "stanlite/model.py, at import"),
    "STANLITE_BACKEND": ("the replay backend of sl.compile: auto (default), vm, python",
                         "stanlite/autodiff/compile.py, at each compile"),
    "STANLITE_JIT": ("0/false/no/off: no numba - the compiled interpreter and the "
                     "compiled NUTS trajectory are not used",
                     "stanlite/autodiff/vm/scalar.py, samplers/nuts_jit.py, at import"),
    "STANLITE_FAST_LOAD": ("0/false/no/off: numba loads stanlite's cached kernels its "
                           "own way (its whole CPU target initialised, each kernel's "
                           "bitcode parsed)",
                           "stanlite/autodiff/vm/fast_load.py, at import"),
    "STANLITE_VM_PASSES": ("0/false/no/off: no graph passes over interpreter "
                           "programs; 4: passes 1-4 only",
                           "stanlite/autodiff/vm/passes.py, at each lowering"),
    "STANLITE_CACHE_DIR": ("the on-disk cache of lowered programs (empty, 0 or off: "
                           "none)", "stanlite/autodiff/program_cache.py, at each use"),
    "STANLITE_ODE": ("scipy: ODEs take scipy's route, not the native solver",
                     "stanlite/functor/ode_native.py, at import"),
    "STANLITE_ODE_CODEGEN_AFTER": ("right-hand-side evaluations before an ODE's "
                                   "program is generated (off: never)",
                                   "stanlite/functor/ode_codegen.py, at import"),
    "STANLITE_ODE_CODEGEN_BACKGROUND": ("0/false/no/off: an ODE's generated program is "
                                        "compiled in the solving process, not in "
                                        "another one meanwhile",
                                        "stanlite/functor/ode_codegen.py, at import"),
    "STANLITE_NO_MALLOPT": ("set: leave glibc's allocator thresholds alone",
                            "stanlite/_memory.py, at import"),
    "STANLITE_POOL_COST": ("seconds a pool of worker processes is taken to cost "
                           "(0: always processes)", "samplers/runner.py, at each run"),
    "STANLITE_START_METHOD": ("the worker processes' start method (fork, spawn, "
                              "forkserver)", "samplers/runner.py, at each run"),
}

_OFF = ("0", "false", "no", "off")


def setting(name, default="", environ=None):
    """The value of switch ``name`` (declared in :data:`SWITCHES`) in ``environ`` (the
    process's), ``default`` where it is not set."""
    if name not in SWITCHES:
        raise KeyError(f"{name} is not declared in stanlite/config.py SWITCHES")
    environ = os.environ if environ is None else environ
    return environ.get(name, default)


def switched_off(name, default="1", environ=None):
    """Whether the on/off switch ``name`` (declared in :data:`SWITCHES`) is set to
    0, false, no or off (any case, spaces ignored) in ``environ`` (the process's)."""
    return setting(name, default, environ).strip().lower() in _OFF


def user_cache_home(environ=None, platform=None):
    """The platform's directory for users' caches: ``%LOCALAPPDATA%`` on Windows, else
    ``$XDG_CACHE_HOME`` or ``~/.cache`` (where the program cache goes by default)."""
    environ = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    if platform == "win32" and environ.get("LOCALAPPDATA"):
        return environ["LOCALAPPDATA"]
    return environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                         ".cache")
