"""An ODE right-hand side's programs as straight-line numba code (the hot solves).

The compiled steppers (:mod:`.ode_steppers`) evaluate ``f`` and, for the sensitivity
system, its Jacobian rows at every stage. Through the tape interpreter
(:mod:`stanlite.autodiff.vm.kernel`) each evaluation dispatches on every instruction
of a forward pass and of ``n`` reverse sweeps, and clears the adjoint buffer before
each sweep: ~1.3 us per evaluation of a two-compartment model with 5 sensitivities,
where the arithmetic is a few dozen flops (benchmarks/pk_population.py). Here a
program of scalar code becomes Python source - one statement per instruction and
element, every value a local variable, the reverse sweeps unrolled per output over
the instructions the output depends on - compiled once by numba and cached on disk
beside the source (the file is named by the hash of its text and of the
interpreter's sources), and the steppers call it through a function pointer of one
fixed signature (:data:`.ode_steppers.RHS_SIG`), as they call the interpreter's
adapter. The numbers are the interpreter's: the same scalar functions
(``binary1``, ``unary``, their VJPs), the same order of every sum, the adjoints
accumulated from ``0.0`` in the reverse order of the rows (tested bit for bit); the
one difference is that a contribution of an adjoint that is structurally zero is not
made (the interpreter adds ``0 * x``, NaN for an infinite ``x``, and then hands the
point to the eager tape).

A program with any other instruction (vector ops other than the elementwise ones,
densities, matrix products, ...) or with more than :data:`MAX_ROWS` element
statements is not generated: the interpreter keeps it. Generation costs a numba
compile (~0.5-2 s, once per install and program; ~12 s for the Friberg-Karlsson
model's), so :mod:`.ode_native` asks for it only once a right-hand side has run
``AFTER`` evaluations in the interpreter.

The compile does not hold up the solves (issue 20, point 6: a fresh process's first
draw): unless numba's disk cache has the function already, :func:`generate` starts it
in a separate Python process and returns a :class:`Pending`; the solves go on with
the interpreter, whose numbers the generated code reproduces, and switch over at the
first solve after the compile has finished (:meth:`Pending.ready`: the function is
then loaded from the cache that process wrote, ~0.1 s). A separate process rather
than a thread: numba's compiler holds the GIL for most of its work (a thread would
slow the chains that go on meanwhile by about half), and the compile then runs on
another core. The process is detached: one that outlives its parent still fills the
cache for the next. ``STANLITE_ODE_CODEGEN_BACKGROUND=0`` (or ``BACKGROUND = False``
here) compiles in this process, at once, as before; so does a failed background
compile.
"""

import hashlib
import importlib.util
import math
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from ..autodiff.vm import kernel as _k, opcodes as O
from ..config import setting, switched_off

__all__ = ["generate", "source", "Pending", "wait", "MAX_ROWS", "AFTER", "BACKGROUND",
           "STATS"]

#: the largest program (element statements of its forward pass) generated
MAX_ROWS = 600
#: right-hand side evaluations in the interpreter before its programs are generated
#: (``STANLITE_ODE_CODEGEN_AFTER``; ``off`` never generates)
_env = setting("STANLITE_ODE_CODEGEN_AFTER", "20000").strip().lower()
AFTER = None if _env in ("off", "none", "no") else int(_env)
#: compile in a separate process while the interpreter goes on (see the module's doc)
BACKGROUND = not switched_off("STANLITE_ODE_CODEGEN_BACKGROUND")
#: programs generated, bundles refused (an instruction without a rule here), compiles
#: started in another process
STATS = {"generated": 0, "refused": 0, "background": 0}

_CMP = ("<", "<=", ">", ">=", "==", "!=")


def _blas_min():
    """The product size (multiply-adds) from which the interpreter's MATMUL calls BLAS
    (other sums than its plain loop, so larger products are not generated)."""
    from ..math.linalg import products      # (where MATMUL's sweeps are declared)
    return int(products._BLAS_MIN)


_MATMUL_MAX = _blas_min()
_LOCK = threading.Lock()
_LOADED = {}


class _Unsupported(Exception):
    pass


def _lit(v):
    v = float(v)
    if math.isnan(v):
        return "math.nan"
    if math.isinf(v):
        return "math.inf" if v > 0 else "-math.inf"
    return repr(v)


_OPS = {}


def _ops(binary):
    """The op codes the interpreter's elementwise functions run - ``binary1`` and its
    VJPs (:mod:`~stanlite.autodiff.vm.binary_generated`) or ``unary`` and
    ``unary_vjp`` (:mod:`~stanlite.autodiff.vm.unary_generated`): those of the
    declarations they are written from (:mod:`~stanlite.autodiff.vm.generate`), so
    that an op added to either range is generated here too, not refused."""
    ops = _OPS.get(binary)
    if ops is None:
        from ..autodiff.vm import generate
        ops = _OPS[binary] = frozenset(r.op for _, r in generate._rules(binary))
    return ops


def _is_binary(op):
    return op in _ops(True)


def _is_unary(op):
    return op in _ops(False)


class _Program:
    """One program's forward statements and the reverse sweep of each output."""

    def __init__(self, q, n, dim):
        self.code = np.asarray(q.code)
        self.aux = np.asarray(q.aux)
        self.V0 = np.asarray(q.V)
        self.nvar, self.out, self.n, self.dim = int(q.nvar), int(q.out), n, dim
        self.names = {}
        self.lines = []
        self.rows = []                  # (op, mask, [(out slot, arg slots ...)])
        self.count = 0
        self.used = set()               # (function, op) of the calls written

    def call(self, fn, op, *args):
        """A call of the interpreter's elementwise function ``fn`` for op ``op``,
        written as a call of its one-op wrapper (:func:`_wrappers`)."""
        self.used.add((fn, op))
        return f"{fn}_{op}({', '.join(args)})"

    def val(self, s):
        s = int(s)
        e = self.names.get(s)
        if e is not None:
            return e
        if s < self.dim:
            return f"x{s}"
        if s >= self.nvar:
            return _lit(self.V0[s])
        raise _Unsupported(f"slot {s} read before it is written")

    def _set(self, s, expr):
        s = int(s)
        if s in self.names or s < self.dim:
            raise _Unsupported(f"slot {s} written twice")
        nm = f"v{s}"
        self.lines.append(f"{nm} = {expr}")
        self.names[s] = nm
        self.count += 1

    def _alias(self, s, src):
        s = int(s)
        if s in self.names or s < self.dim:
            raise _Unsupported(f"slot {s} written twice")
        self.names[s] = self.val(src)

    def forward(self):
        """The forward statements (checks and guards return as the interpreter's)."""
        for row in self.code:
            op, N, o, a, sa, b, sb = (int(v) for v in row[:7])
            mask, x1, x2, x3 = (int(v) for v in row[O.MASK:O.X3 + 1])
            el = []
            if _is_binary(op):
                for i in range(N):
                    sa_, sb_ = a + i * sa, b + i * sb
                    self._set(o + i, self.call("_b1", op, self.val(sa_), self.val(sb_)))
                    el.append((o + i, sa_, sb_))
            elif _is_unary(op):
                for i in range(N):
                    x = self.val(a + i)
                    self._set(o + i, f"-{x}" if op == O.NEG else self.call("_u", op, x))
                    el.append((o + i, a + i))
            elif op in (O.COPY, O.GATHER):
                for i in range(N):
                    src = a + i * sa if op == O.COPY else int(self.aux[x1 + i])
                    self._alias(o + i, src)
                    el.append((o + i, src))
            elif op in (O.SUM, O.SUMN, O.DOT):
                src = [a + i if op != O.SUMN else int(self.aux[x1 + i])
                       for i in range(x2)]
                if op == O.DOT:
                    terms = "".join(f" + {self.val(s)} * {self.val(b + i)}"
                                    for i, s in enumerate(src))
                    el.append((o, src, [b + i for i in range(x2)]))
                else:
                    terms = "".join(f" + {self.val(s)}" for s in src)
                    el.append((o, src))
                self._set(o, "0.0" + terms)
            elif op == O.SEGSUM:
                seg = [int(self.aux[x1 + i]) for i in range(x2)]
                for j in range(N):
                    self._set(o + j, "0.0" + "".join(f" + {self.val(a + i)}"
                                                     for i in range(x2) if seg[i] == j))
                el.append((o, a, seg))
            elif op == O.MATMUL and x1 * x2 * x3 < _MATMUL_MAX:
                # (the interpreter's plain loop below its BLAS size: the same sums)
                for i in range(x1):
                    for j in range(x3):
                        self._set(o + i * x3 + j, "0.0" + "".join(
                            f" + {self.val(a + i * x2 + t)} * {self.val(b + t * x3 + j)}"
                            for t in range(x2)))
                el.append((o, a, b, x1, x2, x3))
            elif op in (O.CHECK_POSITIVE, O.CHECK_ARG, O.GUARD_POSITIVE):
                for i in range(N):
                    self._check(op, self.val(a + i), x1, x2, i)
                continue
            elif op == O.GUARD_CMP:
                self.lines.append(f"if ({self.val(a)} {_CMP[x1]} {self.val(b)}) != "
                                  f"{x3 != 0}:\n    return {1 + x2}")
                continue
            else:
                raise _Unsupported(f"op {op}")
            if self.count > MAX_ROWS:
                raise _Unsupported("program too long")
            self.rows.append((op, mask, el))

    def _check(self, op, x, x1, x2, i):
        if op == O.GUARD_POSITIVE:
            cond = f"({x} > 0.0) != {bool(self.aux[x1 + i])}"
            self.lines.append(f"if {cond}:\n    return {1 + x2}")
            return
        if op == O.CHECK_POSITIVE:
            bad = f"not math.isfinite({x}) or {x} < 0.0" + (
                f" or {x} == 0.0" if x1 != 0 else "")
        else:
            bad = {0: f"{x} != {x}", 1: f"not math.isfinite({x})",
                   2: f"not (math.isfinite({x}) and {x} > 0.0)",
                   3: f"not (math.isfinite({x}) and {x} >= 0.0)",
                   4: f"not ({x} >= 0.0 and {x} <= 1.0)"}.get(x1, f"not {x} > 0.0")
        self.lines.append(f"if {bad}:\n    return -1")

    def reverse(self, i):
        """Output ``i``'s reverse sweep: statements and the adjoint of each input."""
        adj = {int(self.out + i): "1.0"}
        lines = []

        def push(s, expr):
            s = int(s)
            if s >= self.nvar:
                return              # a constant (the interpreter's adjoint is unread)
            old = adj.get(s)
            nm = f"g{i}_{len(lines)}"
            lines.append(f"{nm} = {'0.0' if old is None else old} + {expr}")
            adj[s] = nm
        for op, mask, el in reversed(self.rows):
            if mask == 0:
                continue
            if _is_binary(op):
                for o, a, b in el:
                    g = adj.get(o)
                    if g is None:
                        continue
                    x, y, ans = self.val(a), self.val(b), self.val(o)
                    if mask & 1:
                        push(a, self.call("_b1dx", op, g, x, y, ans))
                    if mask & 2:
                        push(b, self.call("_b1dy", op, g, x, y, ans))
            elif _is_unary(op):
                for o, a in el:
                    g = adj.get(o)
                    if g is not None:
                        push(a, f"-{g}" if op == O.NEG else
                             self.call("_uvjp", op, g, self.val(a),
                                       self.val(o)))
            elif op in (O.COPY, O.GATHER):
                for o, src in el:
                    g = adj.get(o)
                    if g is not None:
                        push(src, g)
            elif op in (O.SUM, O.SUMN):
                (o, src), = el
                g = adj.get(o)
                if g is not None:
                    for s in src:
                        push(s, g)
            elif op == O.DOT:
                (o, src, other), = el
                g = adj.get(o)
                if g is not None:
                    for s, t in zip(src, other):
                        if mask & 1:
                            push(s, f"{g} * {self.val(t)}")
                        if mask & 2:
                            push(t, f"{g} * {self.val(s)}")
            elif op == O.MATMUL:
                (o, a, b, P, K, Q), = el
                for i in range(P):
                    for j in range(Q):
                        g = adj.get(o + i * Q + j)
                        if g is None:
                            continue
                        for t in range(K):
                            sa_, sb_ = a + i * K + t, b + t * Q + j
                            if mask & 1:
                                push(sa_, f"{g} * {self.val(sb_)}")
                            if mask & 2:
                                push(sb_, f"{g} * {self.val(sa_)}")
            else:                   # SEGSUM
                (o, a, seg), = el
                for j, sj in enumerate(seg):
                    g = adj.get(o + sj)
                    if g is not None:
                        push(a + j, g)
        return lines, [adj.get(s, "0.0") for s in range(self.dim)]


def _function(q, n, dim, name):
    """The source of one program's function ``name(t, z, p, k, ptr, idx, val, J,
    res)`` (the modes of :data:`.ode_steppers.RHS_SIG`) and the set of (function, op)
    calls it makes."""
    pg = _Program(q, n, dim)
    pg.forward()
    body = [f"x0 = t"] + [f"x{1 + i} = z[{i}]" for i in range(n)]
    body += [f"x{1 + n + m} = p[{m}]" for m in range(dim - 1 - n)]
    body += pg.lines
    fs = [pg.val(pg.out + i) for i in range(n)]
    body += [f"f{i} = {e}" for i, e in enumerate(fs)]
    body.append("if not (" + " and ".join(f"math.isfinite(f{i})" for i in range(n))
                + "):\n    return -1")
    body += [f"res[{i}] = f{i}" for i in range(n)]
    body.append("if k == 0:\n    return 0")
    for i in range(n):
        lines, row = pg.reverse(i)
        body += lines
        body += [f"J[{i}, {j}] = {e}" for j, e in enumerate(row)]
    body.append(f"for i in range({n}):\n    for j in range({dim}):\n"
                "        if not math.isfinite(J[i, j]):\n            return -1")
    body.append(f"if k > 0:\n    _tangent_rows(J, z, {n}, k, ptr, idx, val, res)")
    body.append("return 0")
    text = "\n".join(body).replace("\n", "\n    ")
    return (f"@_jit\ndef {name}(t, z, p, k, ptr, idx, val, J, res):\n    {text}\n",
            pg.used)


# the arguments of the interpreter's elementwise functions after ``op``
_ARGS = {"_b1": "x, y", "_b1dx": "g, x, y, ans", "_b1dy": "g, x, y, ans", "_u": "x",
         "_uvjp": "g, x, ans"}


def _wrappers(used):
    """One small function per (function, op) the programs call: ``_b1_3(x, y)`` is
    ``binary1(3, x, y)``. The value is the interpreter's (the same function, the op a
    constant the compiler folds), and each dispatcher is compiled once per op rather
    than once per call: ``binary1`` and its VJPs are ``inline="always"`` (for the
    interpreter's loop), and numba copying their IR - a branch per op - into each of
    the hundreds of calls of a right-hand side like the Friberg-Karlsson model's took
    minutes and gigabytes to compile."""
    return "".join(f"@_jit\ndef {fn}_{op}({_ARGS[fn]}):\n    return {fn}({op}, {_ARGS[fn]})"
                   "\n\n\n" for fn, op in sorted(used))


_HEADER = '''"""Generated by stanlite.functor.ode_codegen: an ODE right-hand side."""
import math

from stanlite.autodiff.vm.binary_generated import (binary1 as _b1, binary1_dx as _b1dx,
                                                   binary1_dy as _b1dy)
from stanlite.autodiff.vm.kernel import tangent_rows as _tangent_rows
from stanlite.autodiff.vm.scalar import _jit
from stanlite.autodiff.vm.unary_generated import unary as _u, unary_vjp as _uvjp
from stanlite.functor.ode_steppers import rhs_jit as _rhs_jit

'''


def source(progs, n, dim):
    """The module source for ``progs`` (the bundle :mod:`.ode_native` hands the
    steppers, tried in turn from the one that ran last, as the interpreter's adapter
    does), or None when a program has an instruction without a rule here."""
    try:
        parts = [_function(q, n, dim, f"_p{j}") for j, q in enumerate(progs)]
    except _Unsupported:
        return None
    used = set().union(*(u for _, u in parts))
    parts = [text for text, _ in parts]
    calls = "".join(f"    {'if' if j == 0 else 'elif'} j == {j}:\n        return _p{j}("
                    "t, z, p, k, ptr, idx, val, J, res)\n" for j in range(len(progs)))
    return (_HEADER + _wrappers(used) + "\n\n".join(parts) + f'''

@_jit
def _call(j, t, z, p, k, ptr, idx, val, J, res):
{calls}    return -1


@_rhs_jit
def rhs(t, z, p, k, ptr, idx, val, J, res, ci, cf, cur, where):
    j = cur[0]
    st = _call(j, t, z, p, k, ptr, idx, val, J, res)
    if st <= 0:
        return st
    for q in range(1, {len(progs)}):
        jj = (j + q) % {len(progs)}
        s2 = _call(jj, t, z, p, k, ptr, idx, val, J, res)
        if s2 <= 0:
            if s2 == 0:
                cur[0] = jj
            return s2
    where[0] = t
    for i in range({n}):
        where[1 + i] = z[i]
    return st
''')


def _directory():
    from ..autodiff import program_cache
    d = program_cache.directory()
    if d is None:
        d = os.path.join(tempfile.gettempdir(), f"stanlite-ode-{os.getuid()}")
    else:
        d = os.path.join(os.path.dirname(d), "ode_rhs")
    os.makedirs(d, exist_ok=True)
    return d


def _deps():
    """A digest of the sources the generated code compiles in (numba's cache of a
    generated file is keyed on that file alone)."""
    from ..autodiff import program_cache
    from ..autodiff.vm import binary_generated, kernel, opcodes, scalar, unary_generated
    from . import ode_steppers
    return program_cache.source_digest([m.__file__ for m in (
        binary_generated, kernel, opcodes, scalar, unary_generated, ode_steppers)])


def generate(progs, n, dim, compiled_only=False):
    """The compiled ``rhs`` of ``progs`` (a numba function of signature
    :data:`.ode_steppers.RHS_SIG`), None when they are not generated, or - with
    :data:`BACKGROUND`, while numba's cache does not have it yet - a :class:`Pending`
    whose :meth:`~Pending.ready` gives it once another process has compiled it.
    ``compiled_only``: the function only if it is loaded or in the disk cache already
    (no file written, no compile started), else None."""
    text = source(progs, n, dim)
    if text is None:
        if not compiled_only:
            STATS["refused"] += 1
        return None
    key = hashlib.sha256((text + _deps()).encode()).hexdigest()[:24]
    with _LOCK:
        fn = _LOADED.get(key)
        if fn is not None:
            return fn
        pend = _PENDING.get(key)
        if pend is not None:
            return None if compiled_only else pend
        name = f"stanlite_ode_rhs_{key}"
        path = os.path.join(_directory(), name + ".py")
        if compiled_only:
            return _load(key, name, path) if _compiled(path) else None
        if not os.path.exists(path):
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w") as fh:
                fh.write(text)
            os.replace(tmp, path)
        if BACKGROUND and not _compiled(path):
            pend = _PENDING[key] = Pending(key, name, path)
            if pend.start():
                return pend
            del _PENDING[key]
        return _load(key, name, path)


def _load(key, name, path):
    """Import the generated module (numba compiles ``rhs`` at its decoration, or loads
    it from its disk cache); called under ``_LOCK``."""
    fn = _LOADED.get(key)
    if fn is not None:
        return fn
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    fn = _LOADED[key] = mod.rhs
    STATS["generated"] += 1
    return fn


# ---- the compile in another process ---------------------------------------------------
_PENDING = {}                   # key -> Pending (compiles this process waits for)


def _stamp():
    """What the compiled code in numba's cache depends on besides the generated file
    and :func:`_deps` (both in its name): the versions of numba and Python."""
    import numba
    return f"numba {numba.__version__} python {sys.version.split()[0]}"


def _compiled(path):
    """Whether a process compiled ``path`` into numba's cache (its ``.ok`` marker,
    written after the compile, names the same numba and Python as this process)."""
    try:
        with open(path + ".ok") as fh:
            return fh.read().strip() == _stamp()
    except OSError:
        return False


def _young(lock):
    """A lock file without its pid yet: written this instant by another process?"""
    try:
        return time.time() - os.path.getmtime(lock) < 30.0
    except OSError:
        return False


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True             # (exists, another user's)
    return True


class Pending:
    """A generated right-hand side being compiled by another process."""

    def __init__(self, key, name, path):
        self.key, self.name, self.path = key, name, path
        self.proc = None
        self.owner = os.getpid()        # (a forked worker cannot wait for the process)
        self._lock = threading.Lock()

    def start(self):
        """Start the compile, unless another process is compiling this file already
        (its lock file names a live process): True, or False when no process could be
        started (compile here instead)."""
        lock = self.path + ".lock"
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                with open(lock) as fh:
                    pid = int(fh.read().strip() or 0)
            except (OSError, ValueError):
                pid = 0
            if (_alive(pid) if pid else _young(lock)):
                return True             # another process compiles it: wait for that
            try:
                os.unlink(lock)         # (left by a process that died)
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except OSError:
                return True             # (taken meanwhile)
        except OSError:
            return False
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
            __file__))))
        env = dict(os.environ)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        # (single-threaded: the compile needs no BLAS, and must not compete for cores)
        env.setdefault("OMP_NUM_THREADS", "1")
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        try:
            with open(self.path + ".log", "w") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-c", "import sys; from stanlite.functor.ode_codegen "
                     "import _compile_main; _compile_main(*sys.argv[1:])", self.name,
                     self.path], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                    env=env, cwd=os.path.dirname(self.path), start_new_session=True)
        except OSError:
            os.close(fd)
            os.unlink(lock)
            return False
        with os.fdopen(fd, "w") as fh:
            fh.write(str(self.proc.pid))
        STATS["background"] += 1
        return True

    def ready(self):
        """The compiled function once the compile has finished (loaded from numba's
        cache), else None. A compile that failed, or another process's that died, is
        done here, at once (what :data:`BACKGROUND` off does)."""
        if not self._lock.acquire(blocking=False):
            return None                 # (another thread is checking)
        try:
            proc = self.proc if self.owner == os.getpid() else None
            if _compiled(self.path):
                done = True
                if proc is not None:
                    proc.wait()         # (exiting: its marker is its last act)
            elif proc is not None:
                if proc.poll() is None:
                    return None
                done = True             # exited without its marker: compile here
            else:
                done = not self._other_alive()
            if not done:
                return None
            with _LOCK:
                fn = _load(self.key, self.name, self.path)
                _PENDING.pop(self.key, None)
            return fn
        finally:
            self._lock.release()

    def _other_alive(self):
        try:
            with open(self.path + ".lock") as fh:
                pid = int(fh.read().strip() or 0)
            return _alive(pid) if pid else _young(self.path + ".lock")
        except (OSError, ValueError):
            return False

    def wait(self, timeout=None):
        """Block until the compile has finished (or ``timeout`` seconds); the
        function, or None."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            fn = self.ready()
            if fn is not None or (end is not None and time.monotonic() >= end):
                return fn
            time.sleep(0.05)


def wait(timeout=None):
    """Wait for the compiles this process started or waits for (benchmarks, tests)."""
    for pend in list(_PENDING.values()):
        pend.wait(timeout)


def _compile_main(name, path):
    """The compile process: import the generated module (numba compiles it into its
    disk cache), then write the marker :func:`_compiled` looks for."""
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        mod.rhs                         # (compiled at its decoration: a signature)
        tmp = f"{path}.ok.{os.getpid()}.tmp"
        with open(tmp, "w") as fh:
            fh.write(_stamp())
        os.replace(tmp, path + ".ok")
    finally:
        try:
            os.unlink(path + ".lock")
        except OSError:
            pass
