"""Helpers shared by the linear-algebra modules of :mod:`stanlite.math.linalg`.

The matrix transpose and symmetric part of a stack of matrices (``_mT``, ``_sym``),
the forward-mode padding of a tangent's batch axes (``_pad``, see the package
docstring), and the argument checks. The checks raise ``ValueError`` naming the
function for a bad shape (a programming error) and :class:`~stanlite.DomainError`
for a value outside the domain (NaN, asymmetry), which a sampler treats as a
rejected proposal. Every helper is valid on plain arrays and on traced values.
"""

import numpy as np

from ...autodiff.extend import batch_shape
from ...autodiff.var import shape_of
from ...errors import DomainError
from ..structure import reshape, transpose


def _mT(x):
    """Swap the last two axes (the matrix transpose of a stack of matrices)."""
    n = len(shape_of(x))
    if n < 2:
        return x
    axes = list(range(n))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    return transpose(x, tuple(axes))


def _sym(x):
    """(X + X^T) / 2 over the last two axes."""
    return 0.5 * (x + _mT(x))


def _per_matrix(g):
    """A per-matrix scalar (or stack of them) shaped to broadcast against matrices."""
    s = shape_of(g)
    return g if s == () else reshape(g, s + (1, 1))


def _pad(t, x, nd):
    """Forward mode: the tangent ``t`` of ``x`` (batch axes ``B`` leading) with unit
    axes inserted after ``B`` so that its non-batch part has ``nd`` axes. Stacks then
    broadcast against primal values (right-aligned) without meeting the batch axes."""
    xs = shape_of(x)
    miss = nd - len(xs)
    if miss <= 0:
        return t
    return reshape(t, batch_shape(t, x) + (1,) * miss + xs)


def _tril_mask(n, m=None):
    return np.tril(np.ones((n, n if m is None else m)))


def _as_float(x):
    return np.asarray(x, dtype=np.float64)


def _scalar_out(r):
    return float(r) if np.ndim(r) == 0 else r


def _fail(fname, msg):
    raise ValueError(f"{fname}: {msg}")


def _domain(fname, msg):
    # a value outside the function's domain (a singular or indefinite matrix, a NaN):
    # during sampling it rejects the proposal, as Stan's domain errors do; _fail is
    # for the shapes and types of the arguments, which are programming errors
    raise DomainError(f"{fname}: {msg}")


def _check_matrix(fname, name, s):
    if len(s) < 2:
        _fail(fname, f"{name} must be a matrix (or a stack of matrices), got shape {s}")


def _check_square(fname, name, s):
    _check_matrix(fname, name, s)
    if s[-1] != s[-2]:
        _fail(fname, f"{name} must be square, got shape {s}")


def _check_rows(fname, sa, sb, aname="A", bname="b"):
    """``b`` (vector or matrix) must have as many rows as ``A`` has columns."""
    if len(sb) == 0:
        _fail(fname, f"{bname} must be a vector or a matrix, got a scalar")
    nb = sb[0] if len(sb) == 1 else sb[-2]
    if nb != sa[-1]:
        _fail(fname, f"shapes {sa} ({aname}) and {sb} ({bname}) do not match: {aname} "
                     f"has {sa[-1]} columns, {bname} has {nb} rows")


def _check_right(fname, sa, sb, aname):
    """For ``b A^-1``: ``A`` square and ``b`` (a row vector or a matrix) with as many
    columns as ``A`` has rows."""
    _check_square(fname, aname, sa)
    if len(sb) == 0 or sb[-1] != sa[-2]:
        _fail(fname, f"shapes {sb} (b) and {sa} ({aname}) do not match: b must have "
                     f"{sa[-2]} columns")


def _check_symmetric(fname, a, name="A"):
    """Stan's check_symmetric, relative to the matrix's scale; NaN fails."""
    if a.size == 0 or (a == np.swapaxes(a, -1, -2)).all():
        return                  # exactly symmetric (and so no NaN): one pass, no scale
    if np.isnan(a).any():
        _domain(fname, f"{name} contains NaN")
    scale = max(1.0, float(np.max(np.abs(a))))
    err = float(np.max(np.abs(a - np.swapaxes(a, -1, -2))))
    if not err <= 1e-8 * scale:
        _domain(fname, f"{name} is not symmetric (max |{name} - {name}^T| = {err:.3g})")


def _factor_symmetric(fname, a, factor, failure):
    """``factor(A)`` (a numpy factorisation: Cholesky, eigh) of ``a`` checked square and
    symmetric; numpy's LinAlgError becomes a DomainError ``"fname: failure"``."""
    a = _as_float(a)
    _check_square(fname, "A", a.shape)
    _check_symmetric(fname, a)
    try:
        return factor(a)
    except np.linalg.LinAlgError:
        raise DomainError(f"{fname}: {failure}") from None


def _matrix2(fname, a, name="A"):
    s = shape_of(a)
    if len(s) != 2:
        _fail(fname, f"{name} must be a matrix (2-D), got shape {s}")
    return s


def _nan_check(fname, a):
    if np.isnan(a).any():
        _domain(fname, "A contains NaN")
