"""The runtime of generated replay code (:mod:`.codegen`): the names a replay
function's globals hold (``_RUNTIME``), each helper mirroring an eager-tape step.
"""

import math

import numpy as np

from .extend import _normalize, _sum_to_shape_raw
from .fpstate import ignore_fp, restore_fp

_f64 = np.float64


def _norm(ans):
    """extend._record's normalisation of a primitive's result."""
    t = type(ans)
    if t is float or t is np.ndarray and ans.ndim and ans.dtype == _f64:
        return ans
    return _normalize(ans)


def _same(a, b):
    """Did a guard give the same result as when it was recorded?"""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(a, b)
    if type(a) is tuple and type(b) is tuple:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b) or (a != a and b != b)
    except (TypeError, ValueError):
        return False


def _dot_all(g, v):
    return float(np.dot(g.ravel(), v.ravel()))


def _copy_in(a, shape):
    """_bp_getitem: an adjoint buffer the sweep owns, from a borrowed/lazy one."""
    if type(a) is float:
        return np.full(shape, a)
    return np.array(a, dtype=float)


def _shaped_partials(P, shapes):
    """A fused kernel's partials with each array one of its recorded shape: a kernel
    may give a scalar partial where an argument is an array (``0.0`` beside a log
    density of -inf: poisson_lpmf at lambda = inf); the eager tape broadcasts it, the
    replay's rules were written for the recorded kind."""
    P = list(P)
    for i, shape in shapes:
        if type(P[i]) is not np.ndarray:
            P[i] = np.full(shape, P[i], dtype=float)
    return P


_RUNTIME = {
    "_np": np, "_ndarray": np.ndarray, "_shaped_partials": _shaped_partials, "_math": math, "_float": float, "_norm": _norm, "_same": _same,
    "_zeros": np.zeros, "_full": np.full, "_array": np.array, "_matmul": np.matmul,
    "_dot": np.dot, "_dot_all": _dot_all, "_add_at": np.add.at, "_copy_in": _copy_in,
    "_sts": _sum_to_shape_raw, "_array_equal": np.array_equal,
    "_inf": math.inf, "_nan": math.nan, "_f64": _f64,
    "_ignore_fp": ignore_fp, "_restore_fp": restore_fp,     # around fused kernels
}

