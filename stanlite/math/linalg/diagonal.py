"""Diagonals and trace: ``diagonal``, ``diag_matrix``, ``add_diag`` and ``trace``.

Gathering the diagonal (``diagonal``) and scattering a vector onto it
(``_diag_embed``) are linear and each other's transpose, so each one's VJP is the
other and each JVP is the operation itself applied to the tangent.
"""

import numpy as np

from ...autodiff.extend import batch_shape, broadcast_to, defjvp, defvjp, primitive
from ...autodiff.var import shape_of
from ...autodiff.vm import program as _program
from ...autodiff.vm.program import deflower as _deflower
from .common import _as_float, _check_matrix, _fail, _per_matrix, _scalar_out


# --------------------------------------------------------------------------------------
# diagonals and trace
# --------------------------------------------------------------------------------------
@primitive
def _diag_embed(v, shape):
    """zeros(shape) with ``v`` on the diagonal of the last two axes."""
    z = np.zeros(shape)
    k = min(shape[-2:])
    idx = np.arange(k)
    z[..., idx, idx] = v
    return z


@primitive
def diagonal(m):
    """The diagonal of a matrix (of each matrix of a stack) as a vector."""
    m = _as_float(m)
    _check_matrix("diagonal", "M", m.shape)
    return np.diagonal(m, axis1=-2, axis2=-1).copy()


# gather and scatter of the diagonal are each other's transpose
defvjp(_diag_embed, lambda g, ans, v, shape: diagonal(g), None)
defvjp(diagonal, lambda g, ans, m: _diag_embed(g, shape_of(m)))
# both linear: the tangent goes through the same operation (over the last two axes)
defjvp(_diag_embed, lambda t, ans, v, shape: _diag_embed(
    t, batch_shape(t, v) + tuple(shape)), None)
defjvp(diagonal, lambda t, ans, m: diagonal(t))


def diag_matrix(v):
    """The square matrix with diagonal ``v`` (stacks of vectors give stacks)."""
    s = shape_of(v)
    if len(s) == 0:
        _fail("diag_matrix", "v must be a vector, got a scalar")
    return _diag_embed(v, s + (s[-1],))


@primitive
def add_diag(m, d):
    """``M`` plus ``d`` on its diagonal (``d`` a scalar or a vector of the diagonal's
    length, ``min(rows, cols)``)."""
    r = np.array(m, dtype=np.float64)
    _check_matrix("add_diag", "M", r.shape)
    k = min(r.shape[-2:])
    d = _as_float(d)
    if d.ndim > 0 and d.shape[-1] != k:
        _fail("add_diag", f"d must be a scalar or a vector of length {k} for M of "
                          f"shape {r.shape}, got shape {d.shape}")
    idx = np.arange(k)
    r[..., idx, idx] += d
    return r


# M_bar = G; d_bar = diag(G) (summed to a scalar d by the core)
defvjp(add_diag, lambda g, ans, m, d: g, lambda g, ans, m, d: diagonal(g))


def _add_diag_jvp_d(t, ans, m, d):
    # dC = diag(dd): the tangent of d broadcast along the diagonal, then embedded
    B = batch_shape(t, d)
    so = shape_of(ans)
    k = min(so[-2:])
    return _diag_embed(broadcast_to(t, B + so[:-2] + (k,), len(B)), B + so)


defjvp(add_diag, lambda t, ans, m, d: t, _add_diag_jvp_d)
_deflower(add_diag, _program.add_diag_rule)


@primitive
def trace(a):
    """Sum of the diagonal (per matrix of a stack)."""
    a = _as_float(a)
    _check_matrix("trace", "A", a.shape)
    return _scalar_out(np.trace(a, axis1=-2, axis2=-1))


# d tr(A) = tr(dA)  ->  A_bar = g I
defvjp(trace, lambda g, ans, a: _per_matrix(g) * np.eye(*shape_of(a)[-2:]))
defjvp(trace, lambda t, ans, a: trace(t))
