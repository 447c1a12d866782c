"""The array ops' sweeps declared beside their primitives (:mod:`.declare`), compiled
where they are declared, for the kernel.

The kernel reaches an op's forward and reverse sweep through the generated dispatch
of ``ops_generated.py``; the functions it calls are the plain-Python ones written in
stanlite/math and stanlite/distributions, compiled by the kernel's decorator - not
copies of their source. Each is compiled over its own module's globals, with a
function the declaration lists in ``helpers`` replaced by its compiled version.

What a declared function may read is what the kernel can have: the module ``math``
or ``numpy``, the op codes, a compiled scalar helper of :mod:`.scalar`, a number
(numba freezes it at compile time) or a declared helper. :func:`check` says so,
naming the function that reads anything else; it runs where ``ops_generated.py`` is
generated and in tests/autodiff/test_vm_generated_ops.py over every declaration
(not at import: reading the bytecode of every declared function costs a fresh
process more than the kernel's cached load is worth waiting for).

numba's disk cache watches only a compiled function's own file. What a compiled
sweep carries from elsewhere - the op codes, the scalar helpers, numbers defined in
other files (:func:`fingerprint`) - flushes its cache here; what the kernel's cache
carries - every declaring file (:func:`sources`) and those numbers - is part of the
key on which :func:`.kernel.drop_stale_cache` flushes the kernel and the compiled
samplers, so editing a declaration recompiles them.
"""

import builtins
import dis
import hashlib
import types

from . import opcodes, scalar
from .declare import declared_kernels
from .scalar import _jit

__all__ = ["build", "check", "compiled", "fingerprint", "sources"]

_MODULES = ("math", "numpy")
_COMPILED = None                # {op: (forward, reverse)}, made once per process
# A helper is compiled into each sweep that calls it, and a sweep its disk cache
# holds neither compiles nor loads it: the helpers go without a disk cache of their
# own (a dispatcher without one is half as costly to make, at every start).
_helper_jit = _jit if scalar.njit is None else scalar.njit(nogil=True, error_model="numpy")


def _names(code):
    """Every name ``code`` (and code nested in it) looks up: its globals, and
    attribute names besides (``math.log``'s ``log``), which are harmless extra."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _functions(decls):
    for d in decls.values():
        yield from d.helpers + (d.forward, d.reverse)


def build(decls, jit, helper_jit=None):
    """``{op: (forward, reverse)}`` of the declarations ``decls``, every declared
    function compiled by ``jit`` over its module's globals with its helpers compiled
    the same way, or by ``helper_jit`` (a helper shared by several ops is compiled
    once)."""
    done = {}                   # plain function -> compiled

    def one(fn, helpers, how):
        if fn not in done:
            g = {"__name__": fn.__module__, "__builtins__": builtins}
            for name in _names(fn.__code__) & fn.__globals__.keys():
                v = fn.__globals__[name]
                g[name] = (one(v, helpers, helper_jit or jit) if _is_helper(v, helpers)
                           else v)
            copy = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__,
                                      fn.__closure__)
            copy.__qualname__ = fn.__qualname__
            copy.__doc__ = fn.__doc__
            done[fn] = how(copy)
        return done[fn]

    return {op: (one(d.forward, d.helpers, jit), one(d.reverse, d.helpers, jit))
            for op, d in sorted(decls.items())}


def _is_helper(v, helpers):
    return isinstance(v, types.FunctionType) and any(v is h for h in helpers)


def compiled(op):
    """``(forward, reverse)`` of op code ``op``, compiled by the kernel's decorator
    (plain Python without numba). Every declaration is compiled on the first call; an
    op without one is an ImportError naming it (the declarations are made when
    ``stanlite`` is imported)."""
    global _COMPILED
    if _COMPILED is None:
        decls = declared_kernels()
        _COMPILED = build(decls, _jit, _helper_jit)
        _flush_stale(_COMPILED, decls)
    if op not in _COMPILED:
        raise ImportError(f"the interpreter's array op {op_names().get(op, op)} is not "
                          "declared: import stanlite first, or regenerate ops_generated.py "
                          "(python -m stanlite.autodiff.vm.generate)")
    return _COMPILED[op]


def op_names():
    """``{op code: name}`` of the op codes in :mod:`.opcodes`."""
    return {v: k for k, v in vars(opcodes).items()
            if k.isupper() and type(v) is int and not k.startswith("CHECK_")}


def _is_number(v):
    return type(v) in (int, float) or type(v).__name__ in ("int64", "float64")


def _global_loads(code):
    """The global names ``code`` (and code nested in it) reads, from its bytecode."""
    names = {i.argval for i in dis.get_instructions(code)
             if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_loads(const)
    return names


def check(decls=None):
    """Raise ValueError naming a declared function that reads a global the kernel
    cannot have (see the module docstring), or that its module does not define."""
    decls = declared_kernels() if decls is None else decls
    names = op_names()
    allowed_builtins = set(dir(builtins))
    for op, d in sorted(decls.items()):
        for fn in d.helpers + (d.forward, d.reverse):
            where = f"'{fn.__name__}' ({fn.__module__}, op of {names.get(op, op)})"
            for name in sorted(_global_loads(fn.__code__)):
                if name not in fn.__globals__:
                    if name in allowed_builtins:
                        continue
                    raise ValueError(f"{where} reads {name!r}, which its module does "
                                     "not define")
                v = fn.__globals__[name]
                if not (v is opcodes or v is scalar or _is_number(v)
                        or (isinstance(v, types.ModuleType) and v.__name__ in _MODULES)
                        or getattr(scalar, name, None) is v
                        or _is_helper(v, d.helpers)):
                    raise ValueError(f"{where} uses {name!r}, which is not a number, "
                                     "math, numpy, the op codes, a helper of "
                                     "vm/scalar.py nor a declared helper")


def sources(decls=None):
    """The files the declared sweeps are written in, sorted."""
    decls = declared_kernels() if decls is None else decls
    return sorted({fn.__code__.co_filename for fn in _functions(decls)})


def fingerprint(decls=None):
    """The numbers the declared sweeps can read, as text (``module.name = repr``):
    compiled in, they may be defined in a file that is none of :func:`sources`."""
    decls = declared_kernels() if decls is None else decls
    lines = set()
    for fn in _functions(decls):
        for name in _names(fn.__code__):
            v = fn.__globals__.get(name)
            if _is_number(v):
                lines.add(f"{fn.__module__}.{name} = {v!r}")
    return "\n".join(sorted(lines))


def _flush_stale(compiled_ops, decls):
    """The compiled sweeps' own caches carry this file's way of compiling them, the
    op codes, the scalar helpers, the numbers they read and the files of their op's
    declared functions other than their own: files numba does not watch (a sweep made
    by ``declare.defdensity`` is written in declare.py, its per-element functions
    inlined from the family's file; a helper may live in another module)."""
    if scalar.njit is None:
        return
    from .stale_cache import flush_when_changed
    by_files = {}               # declaring files but the sweep's own -> its sweeps
    for op, pair in compiled_ops.items():
        d = decls[op]
        files = tuple(sorted(set(sources({op: d})) - {d.forward.__code__.co_filename}))
        by_files.setdefault(files, []).extend(pair)
    common = hashlib.sha256(fingerprint(decls).encode())    # (read once: all share it)
    try:
        for path in (__file__, opcodes.__file__, scalar.__file__):
            with open(path, "rb") as f:
                common.update(f.read())
    except OSError:
        return
    for files, dispatchers in sorted(by_files.items()):
        flush_when_changed(dispatchers, "sweeps", files, "vm-deps",
                           extra=common.hexdigest())
