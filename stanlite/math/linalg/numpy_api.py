"""numpy's linear-algebra functions on traced values, and the vector norms.

Registers stanlite's functions for ``np.dot``, ``np.matmul``, ``np.trace``,
``np.diagonal``, ``np.diag``, ``np.outer``, ``np.clip``, ``np.flip``,
``np.linalg.{inv, solve, det, cholesky, norm, matrix_power, qr, svd}`` so that numpy
code runs on ``Var``s (``FUNCTIONS`` / ``UFUNCS`` of :mod:`stanlite.autodiff.var`);
defines Stan's ``norm1`` and ``norm2``. Everything here is composed from the other
linalg modules, so it has no rules of its own.
"""

import numpy as np

from ...autodiff.var import FUNCTIONS, UFUNCS, guarded, shape_of
from ..arithmetic import fabs
from ..elementwise import sqrt
from ..reductions import sum as _rsum
from ..structure import reshape, transpose, where
from .common import _matrix2, _mT
from .products import matmul, dot, matrix_power
from .diagonal import diagonal, diag_matrix, trace
from .solves import cholesky_decompose, inverse, mdivide_left, determinant
from .decompositions import qr_thin_Q, _qr_r_of, singular_values, svd_U, svd_V


# --------------------------------------------------------------------------------------
# numpy protocol
# --------------------------------------------------------------------------------------
def _last_two(a, axis1, axis2, fname):
    """Move ``axis1``, ``axis2`` of ``a`` to the end (numpy's diagonal/trace axes)."""
    nd = len(shape_of(a))
    a1, a2 = axis1 % nd, axis2 % nd
    if a1 == nd - 2 and a2 == nd - 1:
        return a
    rest = [i for i in range(nd) if i not in (a1, a2)]
    return transpose(a, tuple(rest + [a1, a2]))


def _np_offset(offset, fname):
    if offset != 0:
        raise TypeError(f"numpy.{fname} with offset={offset} is not supported on "
                        "stanlite Vars")


def _np_trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    _np_offset(offset, "trace")
    return trace(_last_two(a, axis1, axis2, "trace"))


def _np_diagonal(a, offset=0, axis1=0, axis2=1):
    _np_offset(offset, "diagonal")
    return diagonal(_last_two(a, axis1, axis2, "diagonal"))


def _np_diag(v, k=0):
    _np_offset(k, "diag")
    nd = len(shape_of(v))
    if nd == 1:
        return diag_matrix(v)
    if nd == 2:
        return diagonal(v)
    raise ValueError("numpy.diag: input must be 1-D or 2-D")


def _np_cholesky(a, upper=False):
    L = cholesky_decompose(a)
    return _mT(L) if upper else L


UFUNCS[np.matmul] = matmul
FUNCTIONS.update({
    np.dot: dot, np.matmul: matmul,
    np.trace: _np_trace, np.diagonal: _np_diagonal, np.diag: _np_diag,
    np.linalg.inv: inverse, np.linalg.solve: mdivide_left, np.linalg.det: determinant,
    np.linalg.cholesky: _np_cholesky,
})


# --------------------------------------------------------------------------------------
# norms, and numpy's outer / clip / flip / linalg.norm on traced values
# --------------------------------------------------------------------------------------
def norm1(x):
    """The L1 norm ``sum |x_i|`` of a vector (Stan's ``norm1``; derivative sign(x_i),
    0 at 0).

    >>> import numpy as np, stanlite as sl
    >>> float(sl.norm1(np.array([3.0, -4.0])))
    7.0
    """
    return _rsum(fabs(x))


def norm2(x):
    """The Euclidean norm ``sqrt(sum x_i^2)`` of a vector (Stan's ``norm2``; its
    gradient x / |x| is undefined at 0).

    >>> import numpy as np, stanlite as sl
    >>> float(sl.norm2(np.array([3.0, -4.0])))
    5.0
    """
    return sqrt(_rsum(x * x))


def _np_outer(a, b, out=None):
    from ..structure import flatten
    if out is not None:
        raise TypeError("numpy.outer: out= is not supported on stanlite traced values")
    return reshape(flatten(a), (-1, 1)) * reshape(flatten(b), (1, -1))


def _np_clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None, **kw):
    # derivative 1 inside the interval, 0 outside (to the bound, if it is traced);
    # at a bound, the value's side (numpy's clip returns the bound there).
    # numpy >= 2.1 also spells the bounds min=/max=
    if out is not None or kw:
        raise TypeError("numpy.clip: only (a, a_min, a_max) are supported on stanlite "
                        "traced values")
    a_min = min if a_min is None else a_min
    a_max = max if a_max is None else a_max
    if a_min is None and a_max is None:
        raise ValueError("numpy.clip: one of a_min, a_max must be given")
    r = a
    if a_min is not None:
        r = where(guarded(lambda x, lo: np.asarray(x) < lo, r, a_min), a_min, r)
    if a_max is not None:
        r = where(guarded(lambda x, hi: np.asarray(x) > hi, r, a_max), a_max, r)
    return r


def _np_flip(m, axis=None):
    nd = len(shape_of(m))
    axes = range(nd) if axis is None else (
        (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis))
    axes = {int(a) % nd for a in axes}
    idx = tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(nd))
    return m[idx]


def _np_norm(x, ord=None, axis=None, keepdims=False):
    nd = len(shape_of(x))
    if axis is None and (ord is None or ord == "fro") and nd >= 1:
        r = sqrt(_rsum(x * x))
        return reshape(r, (1,) * nd) if keepdims else r
    if axis is None:
        axis = tuple(range(nd)) if nd <= 2 else None
    if isinstance(axis, (int, np.integer)) or (isinstance(axis, tuple) and len(axis) == 1):
        ax = axis if isinstance(axis, (int, np.integer)) else axis[0]
        if ord is None or ord == 2:
            return sqrt(_rsum(x * x, axis=ax, keepdims=keepdims))
        if ord == 1:
            return _rsum(fabs(x), axis=ax, keepdims=keepdims)
        if ord == np.inf:
            from ..reductions import max as _rmax
            return _rmax(fabs(x), axis=ax, keepdims=keepdims)
        if ord == -np.inf:
            from ..reductions import min as _rmin
            return _rmin(fabs(x), axis=ax, keepdims=keepdims)
        if isinstance(ord, (int, float)) and ord > 0:
            return _rsum(fabs(x) ** ord, axis=ax, keepdims=keepdims) ** (1.0 / ord)
    elif nd == 2 and not keepdims and tuple(int(a) % 2 for a in axis) == (0, 1):
        if ord == "nuc":
            return _rsum(singular_values(x))
        if ord == 2:
            return singular_values(x)[0]
        if ord in (1, -1, np.inf, -np.inf):
            from ..reductions import max as _rmax, min as _rmin
            s = _rsum(fabs(x), axis=0 if ord in (1, -1) else 1)
            return _rmax(s) if ord > 0 else _rmin(s)
    raise TypeError(f"numpy.linalg.norm(ord={ord!r}, axis={axis!r}, keepdims={keepdims}) "
                    "is not supported on stanlite traced values")


def _np_matrix_power(a, n):
    return matrix_power(a, n)


# np.linalg.qr/svd of a traced matrix give stanlite's factors, whose column signs
# (diag(R) >= 0; U's largest entries positive) may differ from numpy's on plain arrays
def _np_qr(a, mode="reduced"):
    if mode != "reduced":
        raise TypeError(f"numpy.linalg.qr(mode={mode!r}) is not supported on stanlite "
                        "traced values (only 'reduced': sl.qr_thin_Q, sl.qr_thin_R)")
    q = qr_thin_Q(a)
    return q, _qr_r_of(q, a)


def _np_svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    if not compute_uv:
        return singular_values(a)
    m, n = _matrix2("svd", a)
    if full_matrices and m != n:
        raise TypeError("numpy.linalg.svd of a traced non-square matrix needs "
                        "full_matrices=False (the thin SVD: sl.svd_U, sl.svd_V)")
    return svd_U(a), singular_values(a), _mT(svd_V(a))


FUNCTIONS.update({
    np.outer: _np_outer, np.clip: _np_clip, np.flip: _np_flip,
    np.linalg.norm: _np_norm, np.linalg.matrix_power: _np_matrix_power,
    np.linalg.qr: _np_qr, np.linalg.svd: _np_svd,
    np.fliplr: lambda m: _np_flip(m, 1), np.flipud: lambda m: _np_flip(m, 0),
})
