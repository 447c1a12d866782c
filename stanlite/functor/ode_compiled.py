"""ODE right-hand sides as compiled programs: ``f``, ``df/dy`` and ``df/dp`` in one call.

An integrator evaluates the user's ``f(t, y, *args)`` hundreds of times per solve, and
the sensitivity system needs its Jacobians at each of those points. Through the tape
each evaluation is a fresh recording and ``n`` reverse sweeps in Python (~30 us for a
one-state system). Here ``f`` is recorded once - as ``sl.compile`` records, with its
guards (``if t > 0:``) and the spot checks against the eager tape - as a program of
``x = (t, y, p)`` with a vector output, lowered to the compiled tape interpreter
(:mod:`stanlite.autodiff.vm`), and every later evaluation is one numba call:

* :meth:`CompiledRHS.value`    - ``f`` (the forward pass alone);
* :meth:`CompiledRHS.jacobian` - ``f`` and ``J = [df/dt, df/dy, df/dp]``, one reverse
  sweep per state (:func:`~stanlite.autodiff.vm.kernel.jacobian_rows`);
* :meth:`CompiledRHS.tangent`  - the right-hand side of the sensitivity/tangent system
  ``[f, V J_y^T + D J_p^T]``, Jacobian and contraction in the same call;
* :meth:`CompiledRHS.vjp`      - ``f`` and ``w^T J`` in one sweep (the adjoint method).

The inputs ``p`` are every float argument (floats and float arrays, flattened in
order), whether or not it is traced in this solve: one program then serves plain
solves, sensitivities for any subset of the arguments, and the next sampler step's
new parameter values. Other arguments (integers, tuples of numbers, other objects)
are data, constants of the program; the program is shared by the solves that pass
the same ``f`` with the same data (keyed as :mod:`.ode_rhs` keys its retaped rows).

When a recording cannot be lowered (a primitive of ``f`` without an interpreter
rule, a guard of another kind, numba absent or ``STANLITE_BACKEND=python``), or its
replay disagrees with the eager tape, the evaluator falls back quietly: ``fallback``
and ``vm_skipped`` say why, ``STATS`` counts it, and :mod:`.ode_rhs` keeps using its
own path (the tape, or its retaped rows). Points where the kernel meets a value
outside a function's domain or a non-finite result are evaluated by the eager tape,
which raises or returns what it always does.
"""

import warnings

import numpy as np

from ..autodiff.codegen import NotCompilable
from ..autodiff.compile import (CompileWarning, Recording, _close, _Retaped,
                                _record_function)
from ..autodiff.tape import sweep_rows
from ..autodiff.var import Box, Var
from ..autodiff.vm.opcodes import DOMAIN, OK

__all__ = ["CompiledRHS", "Directions", "evaluator", "STATS", "COMPILE_AFTER"]

# Calls of f with the same data before it is compiled. 1: at once, so that every
# evaluation of f - from the first solve of a model on - gives the kernel's numbers,
# and a model's retaped gradient, recorded around a solve and replayed, meets the same
# numbers again (a switch from the tape's numbers to the kernel's, equal only to
# rounding, would move the solver's steps between recording and replay). A recording
# and its lowering cost about as much as a few dozen eager evaluations; a solve makes
# hundreds. None turns the compiled route off (the benchmarks time both routes).
COMPILE_AFTER = 1
# recordings per right-hand side (guard paths: ``if t > t_dose`` ...) before the tape
MAX_RECORDINGS = 16
# the largest n k (n + P) contraction of the tangent system done from the Jacobian
TANGENT_MAX_WORK = 200_000
#: how many right-hand sides were compiled, and how many fell back (see ``fallback``)
STATS = {"compiled": 0, "fallback": 0}


# ---- the evaluator ------------------------------------------------------------------
def _is_param(a):
    return type(a) is float or isinstance(a, np.floating) or \
        (type(a) is np.ndarray and a.dtype.kind == "f")


class CompiledRHS(_Retaped):
    """``f(t, y, *args)`` of one :class:`~.ode_rhs.OdeRHS` and fixed data, compiled.

    Made by :func:`evaluator`. Its methods take ``p`` (:meth:`params` of the
    arguments) and return None when this evaluator is not (or no longer) usable; the
    caller then evaluates as before. ``fallback``/``vm_skipped``: why not."""

    quiet = True                    # a fallback is silent: the caller has its own path

    def __init__(self, rhs, t, y, args):
        super().__init__(f"the ODE right-hand side {rhs.name}", MAX_RECORDINGS, True)
        self.forward_pays = None        # OdeRHS._choose's decision, from the recording
        n = self.n = rhs.n
        F, state = rhs.F, rhs.state
        self.pos = pos = [j for j, a in enumerate(args) if _is_param(a)]
        shapes = self.shapes = [np.shape(args[j]) for j in pos]
        sizes = self.sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
        self.offsets = np.cumsum([0] + sizes)
        self.P = P = int(self.offsets[-1])
        self.dim = 1 + n + P
        self._prog = None
        self._directions = {}           # (k, dense bytes) -> Directions
        self._last_directions = None     # (k, mask, D, Directions): directions()
        from . import ode_kernels
        self._kk = ode_kernels
        data = list(args)

        from .ode_rhs import unpack_arguments     # (ode_rhs imports this module)

        def f_of_x(x):
            a, _ = unpack_arguments(x, data, n, pos, shapes, sizes)
            return state(F(x[0], x[1:1 + n], *a))
        self._f = f_of_x
        self._J = np.empty((n, self.dim))
        x = self._x(t, y, self.params(args))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CompileWarning)
            rec = self._record(x)
            self._add(rec, x.shape)
        STATS["fallback" if self.fallback is not None else "compiled"] += 1

    # -- what _Retaped needs --------------------------------------------------------
    def _record(self, x):
        """Record ``f`` at ``x = (t, y, p)``; the result is ``(0.0, [f, J.ravel()])``
        by one reverse sweep of the tape per state."""
        rec = _record_function(self._f, x, scalar=False)
        n = self.n
        out, leaf, tape = rec.output, rec.inputs[0], rec.tape
        J = np.zeros((n, self.dim))
        if type(out) is Var and out.tape is tape:
            if isinstance(out.value, Box):
                # f uses a traced value that is not an argument (the caller's own
                # path raises about it): not replayable
                escapes = list(rec.escapes) + ["f closes over a traced value"]
                return Recording(tape, rec.nodes, rec.inputs, out, rec.guards,
                                 escapes, (0.0, np.zeros(n * (1 + self.dim))), x)
            nodes = rec.nodes
            if self.forward_pays is None:
                self.forward_pays = rhs_prefers_forward(n, nodes)
            for i, (g,) in sweep_rows(tape, nodes, out, (leaf,), n):
                if g is not None:
                    J[i] = g
        f = rec.result[1]
        return Recording(tape, rec.nodes, rec.inputs, out, rec.guards, rec.escapes,
                         (0.0, np.concatenate([f, J.ravel()])), x)

    def _eager(self, x):
        return self._record(x).result

    def _rerecord(self, x, key):
        """A new recording (a guard failed), then the kernel's numbers at ``x``: every
        point gets the same numbers whichever path recorded it."""
        r = super()._rerecord(x, key)
        progs = self._programs.get(key)
        if self.fallback is None and progs:
            try:
                s = progs[0].fn(x)
            except ArithmeticError:
                return r                     # a domain error: the tape's numbers
            if type(s) is tuple:
                return s
        return r

    def _checked(self, x, r):
        """A spot check: the eager tape's numbers at ``x`` must agree with the kernel's
        (to rounding); the kernel's are returned, so that results do not depend on
        which call was checked. A disagreement turns the evaluator off for good."""
        e = self._reference(x)
        if not _close(r, e):
            self._give_up("its replay differs from the eager tape at a new point (f "
                          "depends on values in a way no guard saw?)")
            return e
        return r

    def _vm_io(self, rec):
        leaf = rec.inputs[0]
        return [(leaf, 0, (self.dim,))], rec.output, None, None

    def _io(self, rec):
        # no Python replay of a vector output: the caller's own path is as fast
        raise NotCompilable(f"not lowerable to the interpreter: {self.vm_skipped}",
                            quiet=True)

    def _lower(self, rec):
        prog = super()._lower(rec)
        if prog is None:
            return None
        if prog.size != self.n:
            self.vm_skipped = "the output is not a vector of the states"
            return None
        code, aux, V, A, dim, out, nvar, n = (prog.code, prog.aux, prog.V, prog.A,
                                              prog.dim, prog.out, prog.nvar, self.n)
        from ..autodiff.vm.kernel import jacobian as jac
        status = _status

        def fn(x):
            f = np.empty(n)
            J = np.empty((n, dim))
            st = jac(code, aux, V, A, dim, out, nvar, n, x, f, J)
            if st != OK:
                return status(st)
            return 0.0, np.concatenate([f, J.ravel()])
        prog.fn = fn
        return prog

    def _add(self, rec, key):
        super()._add(rec, key)
        progs = self._programs.get(key)
        self._prog = progs[0] if progs and self.fallback is None else None

    # -- inputs ---------------------------------------------------------------------
    def params(self, args):
        """The float arguments, flattened: the program's inputs after ``t`` and ``y``."""
        if not self.pos:
            return _EMPTY
        return np.concatenate([np.ravel(np.asarray(args[j], dtype=float))
                               for j in self.pos])

    def _x(self, t, y, p):
        x = np.empty(self.dim)
        x[0] = t
        x[1:1 + self.n] = y
        x[1 + self.n:] = p
        return x

    # -- evaluations ----------------------------------------------------------------
    def _full(self, t, y, p):
        """``(f, J)`` through the checked path (guards, re-recording, spot checks, the
        eager tape at domain errors); None once the evaluator has fallen back."""
        if self.fallback is not None:
            return None
        # (after a fallback here, _call still returns the eager tape's result)
        r = self._call(self._x(t, y, p), (self.dim,))
        progs = self._programs.get((self.dim,))
        self._prog = progs[0] if progs and self.fallback is None else None
        flat = np.asarray(r[1], dtype=float)
        n = self.n
        return flat[:n].copy(), flat[n:].reshape(n, self.dim)

    def _direct(self, y, size):
        """The program to call directly, or None (a check is due, or ``y`` is not a
        float vector of ``size`` - the kernels do not check bounds: the full path)."""
        p = self._prog
        if p is None or type(y) is not np.ndarray or y.dtype != _F64 or y.ndim != 1 or \
                y.shape[0] != size or self._check_at is not None or \
                self._replays + 1 >= self._next_check:
            return None
        return p

    def value(self, t, y, p):
        prog = self._direct(y, self.n)
        if prog is not None:
            f = np.empty(self.n)
            with self._lock:
                st = self._kk.rhs_value(prog.code, prog.aux, prog.V, prog.out, self.n, t,
                                        y, p, f)
            if st == OK:
                self._replays += 1
                return f
        r = self._full(t, y, p)
        return None if r is None else r[0]

    def jacobian(self, t, y, p):
        """``(f, J)`` with ``J = [df/dt, df/dy, df/dp]`` (n x (1 + n + P))."""
        prog = self._direct(y, self.n)
        if prog is not None:
            n = self.n
            f = np.empty(n)
            J = np.empty((n, self.dim))
            with self._lock:
                st = self._kk.rhs_jacobian(prog.code, prog.aux, prog.V, prog.A, self.dim,
                                           prog.out, prog.nvar, n, t, y, p, f, J)
            if st == OK:
                self._replays += 1
                return f, J
        return self._full(t, y, p)

    def vjp(self, t, y, p, w):
        """``(f, w^T J)``."""
        prog = self._direct(y, self.n) if w.shape == (self.n,) else None
        if prog is not None:
            n = self.n
            f = np.empty(n)
            g = np.empty(self.dim)
            with self._lock:
                st = self._kk.rhs_vjp(prog.code, prog.aux, prog.V, prog.A, self.dim,
                                      prog.out, prog.nvar, n, t, y, p, w, f, g)
            if st == OK:
                self._replays += 1
                return f, g
        r = self._full(t, y, p)
        return None if r is None else (r[0], w @ r[1])

    def tangent(self, t, z, p, D, k):
        """The tangent system's right-hand side at ``z = [y, V.ravel()]``: ``[f, (V J_y^T
        + D J_p^T).ravel()]`` with ``D`` the directions of ``p`` (:meth:`directions`)."""
        n = self.n
        prog = self._direct(z, n * (1 + k)) if D.k == k else None
        if prog is not None:
            res = np.empty(n * (1 + k))
            with self._lock:
                st = self._kk.rhs_tangent(prog.code, prog.aux, prog.V, prog.A, self.dim,
                                          prog.out, prog.nvar, n, t, z, p, D.ptr, D.idx,
                                          D.val, k, self._J, res)
            if st == OK:
                self._replays += 1
                return res
        r = self._full(t, z[:n], p)
        if r is None:
            return None
        f, J = r
        res = np.empty(n * (1 + k))
        res[:n] = f
        res[n:] = (z[n:].reshape(k, n) @ J[:, 1:1 + n].T + D.dense @ J[:, 1 + n:].T).ravel()
        return res

    def directions(self, mask, D, k):
        """The directions ``D`` of the masked arguments as one (k, P) matrix over all
        of ``p`` (:class:`Directions`), or None if one is a data argument."""
        last = self._last_directions
        if last is not None and last[0] == k and last[1] == tuple(mask) and \
                len(last[2]) == len(D) and all(a is b for a, b in zip(last[2], D)):
            return last[3]          # (the same arrays as last time: ode._plan's)
        got = self._directions_of(mask, D, k)
        if got is not None and all(not d.flags.writeable for d in D):
            self._last_directions = (k, tuple(mask), tuple(D), got)
        return got

    def _directions_of(self, mask, D, k):
        out = np.zeros((k, self.P))
        where = {j: i for i, j in enumerate(self.pos)}
        for j, d in zip(mask, D):
            i = where.get(j)
            if i is None:
                return None             # a direction in a data argument: not ours
            a, b = self.offsets[i], self.offsets[i + 1]
            out[:, a:b] = np.reshape(d, (k, b - a))
        # (a sensitivity system's directions are the same unit vectors at every
        # solve: their compressed form is kept)
        key = (k, out.tobytes())
        cache = self._directions
        got = cache.get(key)
        if got is None:
            if len(cache) >= 16:
                cache.pop(next(iter(cache)))
            got = cache[key] = Directions(out)
        return got

    def split(self, Jp, mask):
        """Columns of the masked arguments of ``Jp`` (n x P or P), one block each."""
        where = {j: i for i, j in enumerate(self.pos)}
        out = []
        for j in mask:
            i = where[j]
            out.append(Jp[..., self.offsets[i]:self.offsets[i + 1]])
        return out

    @property
    def ok(self):
        """Usable (what ode_rhs's retaped entries say as ``ok``)."""
        return self.fallback is None

    def covers(self, mask):
        """Whether every argument in ``mask`` is an input of the program."""
        return all(j in self.pos for j in mask)

    def tangent_pays(self, D):
        """Whether the tangents are cheaper by the compiled Jacobian (n sweeps, then the
        ``k x n x n`` and ``n x nnz(D)`` contractions) than by the vector forward pass,
        whose cost grows as ``k`` times f's operations: large systems with many
        directions keep the forward pass (measured: benchmarks/ode.py, chain N)."""
        n = self.n
        return n * (D.k * n + D.val.size) <= TANGENT_MAX_WORK


class Directions:
    """Tangent directions of ``p``: the dense (k, P) matrix and its rows in compressed
    form (``ptr``, ``idx``, ``val``) for the kernel."""

    __slots__ = ("dense", "k", "ptr", "idx", "val")

    def __init__(self, dense):
        self.dense = dense
        self.k = dense.shape[0]
        rows, cols = np.nonzero(dense)
        self.ptr = np.searchsorted(rows, np.arange(self.k + 1)).astype(np.int64)
        self.idx = cols.astype(np.int64)
        self.val = np.ascontiguousarray(dense[rows, cols], dtype=np.float64)


def rhs_prefers_forward(n, nodes):
    """OdeRHS._choose's rule (scalar code favours sweeps for more states)."""
    from .ode_rhs import _prefers_forward
    return _prefers_forward(n, nodes)


def _status(st):
    if st == DOMAIN:
        raise FloatingPointError("outside an argument's domain: the eager tape decides")
    return int(st) - 1


_EMPTY = np.zeros(0)
_F64 = np.dtype(np.float64)


def evaluator(rhs, t, y, args):
    """The shared compiled evaluator of ``rhs.F`` with these data arguments, once it
    has been asked for ``COMPILE_AFTER`` times; None before, or when turned off here
    or by ``ode_rhs.RETAPE_AFTER = None`` (f on the eager tape). Evaluators live in
    :mod:`.ode_rhs`'s cache of retaped right-hand sides, beside its own entries."""
    from . import ode_rhs as r
    if COMPILE_AFTER is None or r.RETAPE_AFTER is None:
        return None
    from ..autodiff.vm.kernel import available
    if not available():
        return None
    fkey = getattr(rhs, "key", rhs.F)
    if fkey in _UNLOWERABLE:
        return None             # not lowerable with other data either: not tried again
    key = ("compiled", fkey, rhs.n) + tuple(
        ("p", np.shape(a)) if _is_param(a) else r._data_key(a) for a in args)
    cache = r._cache
    with r._cache_lock:
        e = cache.get(key)
        if e is None:
            e = cache[key] = [0, None, (rhs.F,) + tuple(args)]
            if len(cache) > r._CACHE_SIZE:
                cache.popitem(last=False)
        else:
            cache.move_to_end(key)
        e[0] += 1
        c = e[1]
        if c is not None or e[0] < COMPILE_AFTER:
            return None if c is _BUILDING else c
        e[1] = _BUILDING
    # recorded outside the lock: f may itself solve an ODE (an algebraic residual
    # integrating one), whose right-hand side comes here too; meanwhile other callers
    # of this f evaluate their own way
    try:
        c = CompiledRHS(rhs, t, y, args)
    except BaseException:
        e[1] = None
        raise
    e[1] = c
    if c.fallback is not None:
        _UNLOWERABLE[fkey] = c.fallback
        if len(_UNLOWERABLE) > 64:
            _UNLOWERABLE.pop(next(iter(_UNLOWERABLE)))
    return c


_BUILDING = object()


# functions whose first recording did not lower (a primitive without a rule, a value
# read with value_of, a super node): other data would not change that, and a recording
# can cost a solve (an algebraic residual that integrates an ODE)
_UNLOWERABLE = {}
