"""Linear algebra with matrix adjoints (Giles 2008, "An extended collection of matrix
derivative results for forward and reverse mode AD").

    C = A B:   A_bar = C_bar B^T,   B_bar = A^T C_bar      (vectors handled as numpy does)
"""

import numpy as np

from ..autodiff.extend import defvjp, primitive
from ..autodiff.var import FUNCTIONS, UFUNCS, shape_of
from .structure import reshape, transpose

__all__ = ["matmul", "dot"]


def _mT(x):
    """Swap the last two axes (the matrix transpose of a stack of matrices)."""
    n = len(shape_of(x))
    if n < 2:
        return x
    axes = list(range(n))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    return transpose(x, tuple(axes))


@primitive
def matmul(a, b):
    """``a @ b`` with numpy's rules for vectors (1-D operands) and stacks."""
    r = np.matmul(a, b)
    return float(r) if np.ndim(r) == 0 else r


def _matmul_vjp_a(g, ans, a, b):
    na, nb = len(shape_of(a)), len(shape_of(b))
    if nb == 1:
        if na == 1:             # inner product: a_bar = g b
            return g * b
        # (..., m, n) @ (n,) -> (..., m): a_bar = g[..., :, None] * b
        return reshape(g, shape_of(g) + (1,)) * b
    if na == 1:                 # (n,) @ (..., n, k) -> (..., k): a_bar = B g
        return matmul(b, reshape(g, shape_of(g) + (1,)))[..., 0] if len(shape_of(b)) > 2 \
            else matmul(b, g)
    return matmul(g, _mT(b))


def _matmul_vjp_b(g, ans, a, b):
    na, nb = len(shape_of(a)), len(shape_of(b))
    if na == 1:
        if nb == 1:
            return g * a
        # (n,) @ (..., n, k): b_bar = a[:, None] * g[..., None, :]
        return reshape(a, (shape_of(a)[0], 1)) * reshape(g, shape_of(g)[:-1] + (1, shape_of(g)[-1]))
    if nb == 1:                 # (..., m, n) @ (n,): b_bar = A^T g
        if na == 2:
            return matmul(g, a)
        return matmul(reshape(g, shape_of(g)[:-1] + (1, shape_of(g)[-1])), a)[..., 0, :]
    return matmul(_mT(a), g)


defvjp(matmul, _matmul_vjp_a, _matmul_vjp_b)


def dot(a, b):
    """``np.dot`` for vectors and matrices (matmul semantics for ndim <= 2)."""
    if len(shape_of(a)) == 0 or len(shape_of(b)) == 0:
        return a * b
    return matmul(a, b)


UFUNCS[np.matmul] = matmul
FUNCTIONS.update({np.dot: dot, np.matmul: matmul})
