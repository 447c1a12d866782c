"""The environment switches: every ``STANLITE_*`` variable stanlite reads, in one table.

Each is read where it acts (most once, when its module is imported: set them before
``import stanlite``); :data:`SWITCHES` says what each does and where it is read, and
tests/test_architecture.py checks that no module reads a ``STANLITE_*`` variable this
table does not declare. :func:`switched_off` is the one reading of an on/off switch.

>>> sorted(SWITCHES)[:3]
['STANLITE_BACKEND', 'STANLITE_CACHE_DIR', 'STANLITE_COMPILE']
>>> switched_off("STANLITE_COMPILE", environ={"STANLITE_COMPILE": " Off"})
True
"""

import os

__all__ = ["SWITCHES", "switched_off"]

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
    "STANLITE_ODE_CODEGEN_BACKGROUND": ("0: compile an ODE's generated code in this "
                                        "process, at once (default: in another "
                                        "process, the interpreter meanwhile)",
                                        "stanlite/functor/ode_codegen.py, at import"),
    "STANLITE_NO_MALLOPT": ("set: leave glibc's allocator thresholds alone",
                            "stanlite/_memory.py, at import"),
    "STANLITE_POOL_COST": ("seconds a pool of worker processes is taken to cost "
                           "(0: always processes)", "samplers/runner.py, at each run"),
    "STANLITE_START_METHOD": ("the worker processes' start method (fork, spawn, "
                              "forkserver)", "samplers/runner.py, at each run"),
}

_OFF = ("0", "false", "no", "off")


def switched_off(name, default="1", environ=None):
    """Whether the on/off switch ``name`` (declared in :data:`SWITCHES`) is set to
    0, false, no or off (any case, spaces ignored) in ``environ`` (the process's)."""
    if name not in SWITCHES:
        raise KeyError(f"{name} is not declared in stanlite/config.py SWITCHES")
    environ = os.environ if environ is None else environ
    return environ.get(name, default).strip().lower() in _OFF
