"""Reductions and vector functions: sums, means, norms, softmax, sorting.

    d sum(x) = sum(dx)      (adjoint: broadcast ``g`` back over the reduced axes)
"""

import numpy as np

from ..autodiff.extend import broadcast_to, defvjp, primitive
from ..autodiff.var import FUNCTIONS, Var, shape_of
from .structure import reshape

__all__ = ["sum", "mean"]

_builtin_sum = sum


def _reduced_shape(shape, axis, keepdims):
    """Shape of the result with the reduced axes kept as length 1."""
    if axis is None:
        return tuple(1 for _ in shape)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(a % len(shape) for a in axes)
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _expand_back(g, x, axis, keepdims):
    """Broadcast a reduction's adjoint back to the input's shape."""
    shape = shape_of(x)
    if not keepdims:
        g = reshape(g, _reduced_shape(shape, axis, keepdims))
    return broadcast_to(g, shape)


@primitive
def _sum(x, axis=None, keepdims=False):
    r = np.sum(x, axis=axis, keepdims=keepdims)
    return float(r) if np.ndim(r) == 0 else r


defvjp(_sum, lambda g, ans, x, axis=None, keepdims=False: _expand_back(g, x, axis, keepdims))


def sum(x, axis=None, keepdims=False):
    """Sum of elements (over ``axis``, all by default); a list of scalars is summed
    pairwise with ``+``."""
    if isinstance(x, (list, tuple)):
        return _builtin_sum(x[1:], x[0]) if x else 0.0
    return _sum(x, axis, keepdims)


def mean(x, axis=None, keepdims=False):
    """Arithmetic mean over ``axis`` (all by default)."""
    shape = shape_of(x)
    if axis is None:
        n = int(np.prod(shape, dtype=np.int64))
    else:
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        n = int(np.prod([shape[a] for a in axes], dtype=np.int64))
    return _sum(x, axis, keepdims) / n


FUNCTIONS.update({
    np.sum: lambda a, axis=None, dtype=None, out=None, keepdims=False, **k: sum(a, axis, keepdims),
    np.mean: lambda a, axis=None, dtype=None, out=None, keepdims=False, **k: mean(a, axis, keepdims),
})
Var.sum = lambda self, axis=None, keepdims=False: sum(self, axis, keepdims)
Var.mean = lambda self, axis=None, keepdims=False: mean(self, axis, keepdims)
