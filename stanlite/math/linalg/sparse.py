"""Compressed sparse row (CSR) matrices in Stan's 1-based layout:
``csr_matrix_times_vector`` (differentiable in the values and the vector) and
``csr_extract`` (for data).

The sparsity pattern is fixed data (``_CSR``); the product is one primitive
``_csr_mv`` whose VJP in the vector is the same product with the transposed pattern.
"""

import numpy as np

from ...autodiff.extend import defjvp, defvjp, primitive
from ...autodiff.var import Box, shape_of
from .common import _as_float, _fail


# --------------------------------------------------------------------------------------
# compressed sparse row (CSR) matrix times a dense vector, Stan's 1-based layout
# --------------------------------------------------------------------------------------
class _CSR:
    """The fixed pattern of an m x n sparse matrix: the row and column of each stored
    value (0-based); ``T`` is the transposed pattern (rows and columns swapped)."""

    __slots__ = ("m", "n", "rows", "cols", "_t")

    def __init__(self, m, n, rows, cols):
        self.m, self.n, self.rows, self.cols = m, n, rows, cols
        self._t = None

    @property
    def T(self):
        if self._t is None:
            self._t = _CSR(self.n, self.m, self.cols, self.rows)
            self._t._t = self
        return self._t


@primitive
def _csr_mv(p, w, b):
    """y_i = sum over stored (i, j, w) of w b_j; leading batch axes of w and b (forward
    mode) broadcast."""
    w = _as_float(w)
    b = _as_float(b)
    prod = w * b[..., p.cols]
    if prod.ndim == 1:
        return np.bincount(p.rows, weights=prod, minlength=p.m)
    batch = prod.shape[:-1]
    k = int(np.prod(batch, dtype=np.int64))
    idx = (p.rows[None, :] + p.m * np.arange(k)[:, None]).ravel()
    return np.bincount(idx, weights=prod.reshape(-1), minlength=k * p.m).reshape(
        batch + (p.m,))


def _csr_vjp_w(g, ans, p, w, b):
    # d y_i / d w_k = b_{col k} for k in row i
    return g[p.rows] * b[p.cols]


def _csr_vjp_b(g, ans, p, w, b):
    # b_bar = A^T g: the transposed pattern with the same values
    return _csr_mv(p.T, w, g)


defvjp(_csr_mv, None, _csr_vjp_w, _csr_vjp_b)
defjvp(_csr_mv, None, lambda t, ans, p, w, b: _csr_mv(p, t, b),
       lambda t, ans, p, w, b: _csr_mv(p, w, t))


def _int_vector(fname, name, v):
    a = np.asarray(v)
    if a.ndim != 1 or (a.size and a.dtype.kind not in "iu"
                       and not np.all(np.asarray(a, dtype=float) % 1 == 0)):
        _fail(fname, f"{name} must be a 1-D array of integers, got {v!r}")
    return a.astype(np.int64)


def csr_matrix_times_vector(m, n, w, v, u, b):
    """The product of the m x n sparse matrix stored in compressed sparse row form
    (Stan's layout, 1-based) with the dense vector b (Stan's
    ``csr_matrix_times_vector``): ``w`` the non-zero values row by row, ``v`` their
    column indices (1..n), ``u`` the index in w of each row's first value (size
    m + 1, ``u[m]`` one past the last). Differentiable in ``w`` and ``b``.

    >>> import numpy as np, stanlite as sl
    >>> # [[1, 0, 2], [0, 3, 0]] @ [1, 1, 1]
    >>> sl.csr_matrix_times_vector(2, 3, np.array([1.0, 2.0, 3.0]), [1, 3, 2], [1, 3, 4],
    ...                            np.ones(3))
    array([3., 3.])
    """
    fname = "csr_matrix_times_vector"
    m, n = int(m), int(n)
    if m < 1 or n < 1:
        _fail(fname, f"m and n must be positive, got m = {m}, n = {n}")
    vv = _int_vector(fname, "v", v)
    uu = _int_vector(fname, "u", u)
    w = w if isinstance(w, Box) else _as_float(w)       # lists too
    b = b if isinstance(b, Box) else _as_float(b)
    sw, sb = shape_of(w), shape_of(b)
    if len(sw) != 1:
        _fail(fname, f"w must be a vector, got shape {sw}")
    if sb != (n,):
        _fail(fname, f"b must be a vector of size n = {n}, got shape {sb}")
    if uu.size != m + 1:
        _fail(fname, f"u must have m + 1 = {m + 1} elements, got {uu.size}")
    if vv.size != sw[0]:
        _fail(fname, f"v and w must have the same size, got {vv.size} and {sw[0]}")
    if uu[0] != 1 or np.any(np.diff(uu) < 0) or uu[-1] - 1 != sw[0]:
        _fail(fname, f"u must be non-decreasing from 1 to size(w) + 1 = {sw[0] + 1}, got "
                     f"{uu.tolist()}")
    if vv.size and (vv.min() < 1 or vv.max() > n):
        _fail(fname, f"v (column indices) must be in 1..n = 1..{n}, got {vv.tolist()}")
    rows = np.repeat(np.arange(m), np.diff(uu))
    return _csr_mv(_CSR(m, n, rows, vv - 1), w, b)


def csr_extract(a):
    """``(w, v, u)`` of a dense matrix in Stan's CSR layout (1-based; see
    :func:`csr_matrix_times_vector`), for data.

    >>> import numpy as np, stanlite as sl
    >>> sl.csr_extract(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]]))
    (array([1., 2., 3.]), array([1, 3, 2]), array([1, 3, 4]))
    """
    a = _as_float(a)
    if a.ndim != 2:
        _fail("csr_extract", f"a must be a matrix, got shape {a.shape}")
    r, c = np.nonzero(a)
    u = np.concatenate([[0], np.cumsum(np.bincount(r, minlength=a.shape[0]))]) + 1
    return a[r, c], c + 1, u
