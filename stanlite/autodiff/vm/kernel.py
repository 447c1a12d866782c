"""The compiled tape interpreter: one forward and one reverse kernel for every program.

A lowered program (:mod:`.program`) is a table of instructions (:mod:`.opcodes`) over
one value buffer ``V`` and one adjoint buffer ``A``. :func:`forward` runs the table
top to bottom, :func:`reverse` bottom to top, each dispatching on the op code; they
are compiled by numba once per install (``cache=True``) and then serve every model,
so no model waits for a compiler (../shared/reviews/compiled-prototype.md, design A:
~2-3 ns of dispatch per instruction, 0.24 us for eight schools inside a compiled loop).

:func:`value_grad` is the entry point from Python and from compiled samplers
(``samplers/nuts_jit.py`` calls it inside the NUTS trajectory): copy ``q`` into the
parameter region of ``V``, run forward, clear the adjoints, seed the output's adjoint
with 1, run reverse, copy the gradient out.

What lives here: the two sweeps' loop over instructions, the elementwise dispatch, data
movement (COPY, GATHER, SEGSUM, the passes' SUMN), guards and checks, and the entry
points. The ops with loops of their own - summed log densities, reductions, matrix
products, factorisations, log_mix - are declared beside their primitives in
stanlite/math and stanlite/distributions (:mod:`.declare`), compiled there
(:mod:`.sweeps`), and reach the sweeps through the generated dispatch of
``ops_generated.py``, as the elementwise ops through ``unary_generated.py`` /
``binary_generated.py``.

Numerics. Every op computes what the eager tape's primitive computes, in the same
stable form (log1p, log_sum_exp with the max shifted out, ...), elementwise and in
index order, so results agree with the tape to rounding (not bit for bit: sums are
accumulated in another order and numba's libm calls may differ in the last ulp). The
kernels never decide a hard case: a value outside an argument's domain or a
non-finite log density returns ``DOMAIN`` and the caller evaluates that point on the
eager tape, which raises the domain error or returns the inf/NaN it always does.

Without numba the same functions run as plain Python (a debugging aid only: the
callers do not select this backend then, see :func:`available`).
"""

import math

import numpy as np

from .opcodes import (A as FA, ADD, B as FB, C as FC, CHECK_POSITIVE, COPY, DOMAIN,
                      GATHER, GUARD_BOUNDS, GUARD_CMP, GUARD_POSITIVE, LOG_MIX, MASK,
                      N as FN, OK, OP, OUT, SA, SB, SC, SEGSUM, SUMN, X1, X2, X3)

from . import opcodes as _O
# the compiler decorator and the scalar helpers (shared with the generated unary ops);
# the elementwise unary ops themselves are generated from the derivatives declared
# beside each primitive (vm/generate.py writes unary_generated.py)
from .scalar import _jit, njit
from .unary_generated import unary as _unary, unary_vjp as _unary_vjp
# ... and the elementwise binary ops' loops (vm/generate.py writes binary_generated.py)
from .binary_generated import (binary as _binary, binary1 as _binary1,
                               binary1_dx as _binary1_dx, binary1_dy as _binary1_dy,
                               binary_vjp as _binary_vjp)
# ... and the array ops' sweeps, declared beside their primitives in stanlite/math and
# stanlite/distributions (vm/declare.py) and compiled there (vm/sweeps.py), through
# the dispatch vm/generate_ops.py writes
from .ops_generated import (array_forward as _array_forward, array_reverse as _array_reverse,
                            density_grad as _density_grad, density_value as _density_value)

# the second range of binary op codes (opcodes.py: ATAN2 ...)
_BINARY_LO, _BINARY_HI = 120, 140
_UNARY_LO, _UNARY_HI = 140, 160             # the second range of unary ops (opcodes.py)

__all__ = ["available", "forward", "reverse", "value_grad", "value_only", "jacobian",
           "jacobian_rows", "vjp_rows", "load_point", "finite_outputs", "warm"]

# small pieces of the kernels and of their callers' loops (ode_kernels, ode_steppers),
# inlined into them by numba's IR inliner: a compiled call to such a piece cost more
# than its work on these paths (the ODE steppers split into plain compiled calls ran
# 10-18% slower)
inline_jit = _jit if njit is None else njit(inline="always", cache=True, nogil=True,
                                            error_model="numpy")


def available():
    """Whether the compiled interpreter is usable (numba importable, not disabled)."""
    return njit is not None


@_jit
def _compare(k, x, y):
    """Python's comparison number ``k`` (GUARD_CMP: < <= > >= == !=) of two floats."""
    if k == 0:
        return x < y
    if k == 1:
        return x <= y
    if k == 2:
        return x > y
    if k == 3:
        return x >= y
    if k == 4:
        return x == y
    return x != y


# ---- the two sweeps ------------------------------------------------------------------
@_jit
def forward(code, aux, V):
    """Run every instruction; -> status (OK, DOMAIN, or 1 + a failed guard's index)."""
    for r in range(code.shape[0]):
        op = code[r, OP]
        n = code[r, FN]
        o = code[r, OUT]
        a = code[r, FA]
        if op <= 7 or _BINARY_LO <= op < _BINARY_HI:       # elementwise binary
            if op == LOG_MIX:                               # declared: special.py
                if _array_forward(op, V, aux, code, r) != OK:
                    return DOMAIN
            elif n == 1:                                    # scalar code
                V[o] = _binary1(op, V[a], V[code[r, FB]])
            else:
                _binary(op, n, V, o, a, code[r, SA], code[r, FB], code[r, SB])
        elif op < 40 or _UNARY_LO <= op < _UNARY_HI:
            for i in range(n):
                V[o + i] = _unary(op, V[a + i])
        elif op == SUMN:
            t = code[r, X1]
            s = 0.0
            for i in range(code[r, X2]):
                s += V[aux[t + i]]
            V[o] = s
        elif op == GATHER:
            t = code[r, X1]
            for i in range(n):
                V[o + i] = V[aux[t + i]]
        elif op == COPY:
            sa = code[r, SA]
            for i in range(n):
                V[o + i] = V[a + i * sa]
        elif op == SEGSUM:
            t = code[r, X1]
            for i in range(n):
                V[o + i] = 0.0
            for i in range(code[r, X2]):
                V[o + aux[t + i]] += V[a + i]
        elif op < 60:                   # reductions, products, factorisations: declared
            st = _array_forward(op, V, aux, code, r)
            if st != OK:
                return st
        elif op < 90:                   # a summed log density (declared beside it)
            st, lp = _density_value(op, V, code, r, n, a, code[r, SA], code[r, FB],
                                    code[r, SB], code[r, FC], code[r, SC])
            if st != OK:
                return st
            V[o] = lp
        elif op == GUARD_POSITIVE:
            t = code[r, X1]
            for i in range(n):
                if (V[a + i] > 0.0) != (aux[t + i] != 0):
                    return 1 + code[r, X2]
        elif op == GUARD_BOUNDS:
            lo = V[a]
            hi = V[code[r, FB]]
            if not lo < hi:
                return DOMAIN
            case = (1 if math.isfinite(lo) else 0) + (2 if math.isfinite(hi) else 0)
            if case != code[r, X1]:
                return 1 + code[r, X2]
        elif op == _O.CHECK_ARG:
            kind = code[r, X1]
            for i in range(n):
                v = V[a + i]
                if kind == 0:
                    bad = v != v
                elif kind == 1:
                    bad = not math.isfinite(v)
                elif kind == 2:
                    bad = not (math.isfinite(v) and v > 0.0)
                elif kind == 3:
                    bad = not (math.isfinite(v) and v >= 0.0)
                elif kind == 4:
                    bad = not (v >= 0.0 and v <= 1.0)
                else:
                    bad = not v > 0.0
                if bad:
                    return DOMAIN
        elif op == CHECK_POSITIVE:
            strict = code[r, X1] != 0
            for i in range(n):
                v = V[a + i]
                if not math.isfinite(v) or v < 0.0 or (strict and v == 0.0):
                    return DOMAIN
        elif op == GUARD_CMP:
            if _compare(code[r, X1], V[a], V[code[r, FB]]) != (code[r, X3] != 0):
                return 1 + code[r, X2]
        else:
            return DOMAIN
    return OK


@_jit
def reverse(code, aux, V, A):
    """Push every instruction's adjoint into its arguments (bottom to top)."""
    for r in range(code.shape[0] - 1, -1, -1):
        op = code[r, OP]
        m = code[r, MASK]
        if m == 0:
            continue
        n = code[r, FN]
        o = code[r, OUT]
        a = code[r, FA]
        if op <= 7 or _BINARY_LO <= op < _BINARY_HI:       # elementwise binary
            if op == LOG_MIX:
                _array_reverse(op, V, A, aux, code, r)
            elif n == 1:                                    # scalar code
                b = code[r, FB]
                g = A[o]
                if m & 1:
                    A[a] += _binary1_dx(op, g, V[a], V[b], V[o])
                if m & 2:
                    A[b] += _binary1_dy(op, g, V[a], V[b], V[o])
            else:
                _binary_vjp(op, m, n, V, A, o, a, code[r, SA], code[r, FB], code[r, SB])
        elif op < 40 or _UNARY_LO <= op < _UNARY_HI:
            for i in range(n):
                A[a + i] += _unary_vjp(op, A[o + i], V[a + i], V[o + i])
        elif op == SUMN:
            t = code[r, X1]
            g = A[o]
            for i in range(code[r, X2]):
                A[aux[t + i]] += g
        elif op == GATHER:
            t = code[r, X1]
            for i in range(n):
                A[aux[t + i]] += A[o + i]
        elif op == COPY:
            sa = code[r, SA]
            for i in range(n):
                A[a + i * sa] += A[o + i]
        elif op == SEGSUM:
            t = code[r, X1]
            for i in range(code[r, X2]):
                A[a + i] += A[o + aux[t + i]]
        elif op < 60:
            _array_reverse(op, V, A, aux, code, r)
        elif op < 90:
            _density_grad(op, V, A, code, r, A[o], m, n, a, code[r, SA], code[r, FB],
                          code[r, SB], code[r, FC], code[r, SC])


@_jit
def value_grad(code, aux, V, A, dim, out, nvar, q, g):
    """lp and its gradient (into ``g``) at ``q``; -> (status, lp).

    ``V[:dim]`` are the parameters, ``V[out]`` the log density, ``A[:nvar]`` the
    adjoints that a call clears (constants live above ``nvar``)."""
    for i in range(dim):
        V[i] = q[i]
    st = forward(code, aux, V)
    if st != OK:
        return st, 0.0
    lp = V[out]
    if not math.isfinite(lp):
        return DOMAIN, lp
    for i in range(nvar):
        A[i] = 0.0
    A[out] = 1.0
    reverse(code, aux, V, A)
    for i in range(dim):
        gi = A[i]
        if not math.isfinite(gi):
            return DOMAIN, lp
        g[i] = gi
    return OK, lp


@_jit
def value_only(code, aux, V, dim, out, size, q, res):
    """The forward pass alone at ``q``: ``res[:size] = V[out:out + size]``; -> status."""
    for i in range(dim):
        V[i] = q[i]
    st = forward(code, aux, V)
    if st != OK:
        return st
    for i in range(size):
        res[i] = V[out + i]
    return OK


@inline_jit
def load_point(V, t, y, n, p):
    """An ODE right-hand side's inputs ``x = (t, y[:n], p)`` into its values ``V``."""
    V[0] = t
    for i in range(n):
        V[1 + i] = y[i]
    for m in range(p.shape[0]):
        V[1 + n + m] = p[m]


@inline_jit
def finite_outputs(V, out, nout, f):
    """``f[:nout] = V[out:out + nout]`` after :func:`forward`; -> status (DOMAIN when a
    value is not finite: the eager tape decides)."""
    for i in range(nout):
        v = V[out + i]
        if not math.isfinite(v):
            return DOMAIN
        f[i] = v
    return OK


@_jit
def jacobian_rows(code, aux, V, A, dim, out, nvar, nout, f, J):
    """After :func:`forward`: the vector output ``f[:nout] = V[out:out + nout]`` and its
    Jacobian ``J[:nout, :dim]``, one reverse sweep per output seeded with a unit
    vector (cheap when outputs are few: an ODE right-hand side's states); -> status
    (DOMAIN when a value or a derivative is not finite: the eager tape decides)."""
    st = finite_outputs(V, out, nout, f)
    if st != OK:
        return st
    for i in range(nout):
        for j in range(nvar):
            A[j] = 0.0
        A[out + i] = 1.0
        reverse(code, aux, V, A)
        for j in range(dim):
            gj = A[j]
            if not math.isfinite(gj):
                return DOMAIN
            J[i, j] = gj
    return OK


@_jit
def tangent_rows(J, z, n, k, ptr, idx, val, res):
    """``res[n + b n + i] = sum_c J[i, 1 + c] z[n + b n + c] + sum_q J[i, 1 + n + idx[q]]
    val[q]`` for ``b < k``: the Jacobian rows of an ODE right-hand side at ``(t, y, p)``
    (columns t, y, p) applied to the sensitivity block ``V_b`` and the directions
    ``D_b`` of ``p`` in compressed form (``D[b, idx[q]] = val[q]`` for ``ptr[b] <= q <
    ptr[b + 1]``): the forward sensitivity system's right-hand side."""
    for b in range(k):
        zb = n + b * n
        for i in range(n):
            s = 0.0
            for c in range(n):
                s += J[i, 1 + c] * z[zb + c]
            for q in range(ptr[b], ptr[b + 1]):
                s += J[i, 1 + n + idx[q]] * val[q]
            res[zb + i] = s


@_jit
def jacobian(code, aux, V, A, dim, out, nvar, nout, x, f, J):
    """A vector-output program's value ``f`` and Jacobian ``J`` (``nout x dim``) at
    ``x``: forward once, then :func:`jacobian_rows`; -> status."""
    for i in range(dim):
        V[i] = x[i]
    st = forward(code, aux, V)
    if st != OK:
        return st
    return jacobian_rows(code, aux, V, A, dim, out, nvar, nout, f, J)


@_jit
def vjp_rows(code, aux, V, A, dim, out, nvar, nout, w, f, g):
    """After :func:`forward`: ``f = V[out:out + nout]`` and ``g = w^T J`` in one reverse
    sweep seeded with ``w``; -> status (DOMAIN on a non-finite value or derivative)."""
    st = finite_outputs(V, out, nout, f)
    if st != OK:
        return st
    for j in range(nvar):
        A[j] = 0.0
    for i in range(nout):
        A[out + i] = w[i]
    reverse(code, aux, V, A)
    for j in range(dim):
        gj = A[j]
        if not math.isfinite(gj):
            return DOMAIN
        g[j] = gj
    return OK


def drop_stale_cache(dispatchers, tag):
    """Drop numba's on-disk cache of ``dispatchers`` when this interpreter's source
    (this file, the op codes, the scalar helpers, the generated elementwise ops and
    dispatch, :mod:`.sweeps`, every file declaring an array op's sweeps and the
    numbers those read) changed since it was written.

    numba keys a cached function on its own file's time stamp only; a function that
    calls the interpreter (a compiled sampler) or reads the op codes (this file's
    kernels) carries their machine code in its cache, and would run the old
    instructions after an edit or an upgrade that kept ``__pycache__``. The source
    hash is kept beside the cache (``<tag>.vm-deps``)."""
    if njit is None:
        return
    from . import opcodes, scalar as _scalar, sweeps, unary_generated as _generated
    from . import binary_generated as _generated2, ops_generated as _ops
    from .stale_cache import flush_when_changed
    flush_when_changed(dispatchers, tag,
                       (__file__, opcodes.__file__, _scalar.__file__, _generated.__file__,
                        _generated2.__file__, _ops.__file__, sweeps.__file__,
                        *sweeps.sources()), "vm-deps", extra=sweeps.fingerprint())


def warm():
    """Compile (or load from numba's cache) the kernels: ~0.2 s when cached."""
    if njit is None:
        return
    code = np.zeros((1, 14), dtype=np.int64)
    code[0, 0] = ADD
    code[0, 1] = 1
    code[0, 2] = 1
    V = np.zeros(3)
    A = np.zeros(3)
    aux = np.zeros(1, dtype=np.int64)
    value_grad(code, aux, V, A, 1, 1, 2, np.zeros(1), np.zeros(1))
    value_only(code, aux, V, 1, 1, 1, np.zeros(1), np.zeros(1))


# the kernels read the op codes (another file) as compile-time constants
drop_stale_cache([d for d in list(globals().values())
                  if hasattr(d, "_cache") and hasattr(d, "py_func")], "kernel")
