"""Matrices parametrised through a Cholesky factor: :class:`CholeskyFactorCorr`,
:class:`CorrMatrix` (canonical partial correlations through ``tanh``, Lewandowski,
Kurowicka and Joe 2009), :class:`CholeskyFactorCov` and :class:`CovMatrix` (a lower
triangle with a log-scale diagonal, Stan's row-major order).

The correlation pair share ``_corr_cholesky`` (the factor and the ``log(1 - z^2)``
terms) and the covariance pair ``_chol_factor``; the index tables are cached per size
(``_corr_constants``, ``_chol_constants``), so a constrain is vectorized with no loop
over K.
"""

from functools import lru_cache

import numpy as np

from ..math import (concatenate, cumulative_sum, exp, log_inv_logit, log1m_inv_logit,
                    multiply_lower_tri_self_transpose, reshape, swapaxes, tanh, where)
from ..math import sum as _sum
from .base import (CONSTRAINT_TOLERANCE, _Structured, _first, _idx, _loc, _nan_message,
                   _num, _size)


_LOG2 = float(np.log(2.0))
_LOG4 = float(np.log(4.0))


# --------------------------------------------------------------------------------------
# matrices: Cholesky factors, correlation and covariance matrices
# --------------------------------------------------------------------------------------
@lru_cache(maxsize=64)
def _corr_constants(K):
    """Index tables for K x K correlation factors (row-major strictly lower order)."""
    r, c = np.tril_indices(K, -1)
    m = r.size
    gather = np.full(K * K, m, dtype=np.intp)          # slot m holds a zero
    gather[r * K + c] = np.arange(m)
    eye = np.eye(K)
    coef_L = 1.0 + 0.5 * (r - c - 1)                   # tanh + z -> L (strictly lower)
    coef_corr = 1.0 + 0.5 * (K - c - 2)                # tanh + z -> Omega
    lower = np.tril(np.ones((K, K), dtype=bool), -1)
    for a in (gather, eye, coef_L, coef_corr, lower):
        a.setflags(write=False)
    return r, c, gather, eye, coef_L, coef_corr, lower


def _to_square(v, gather, batch, K):
    ext = concatenate([v, np.zeros(batch + (1,))], axis=-1)
    return reshape(ext[..., gather], batch + (K, K))


def _corr_cholesky(x, batch, K):
    """(L, log(1 - z^2)) from the free CPC reals (tanh-transformed, row-major)."""
    r, c, gather, eye, _, _, _ = _corr_constants(K)
    z = tanh(x)
    two = 2.0 * x
    w = (log_inv_logit(two) + log1m_inv_logit(two)) + _LOG4     # log(1 - tanh(x)^2)
    Z = _to_square(z, gather, batch, K)
    W = _to_square(w, gather, batch, K)
    # S[i, j] = sum_{j' < j} log(1 - z_ij'^2): log of the squared length left in row i
    cs = cumulative_sum(W, axis=-1)
    S = concatenate([np.zeros(batch + (K, 1)), cs[..., :-1]], axis=-1)
    L = (Z + eye) * exp(0.5 * S)
    return L, w


def _corr_free_from_L(L, K):
    r, c = np.tril_indices(K, -1)
    sq = L * L
    before = np.cumsum(sq, axis=-1) - sq               # sum_{j' < j} L_ij'^2
    z = L[..., r, c] / np.sqrt(1.0 - before[..., r, c])
    return np.arctanh(z)


def _square_dims(name, dims):
    if dims[0] != dims[1]:
        raise ValueError(f"{name}: needs a square shape, got {dims}")


def _lower_tri_message(v):
    K0, K1 = v.shape[-2:]
    upper = np.triu(np.ones((K0, K1), dtype=bool), 1)
    i = _first((v != 0) & upper)
    if i is not None:
        return f"must be lower triangular, but {_loc(i)}is {_num(v[i])}"
    return None


def _diag_positive_message(v):
    d = np.diagonal(v, axis1=-2, axis2=-1)
    i = _first(~(d > 0))
    if i is not None:
        j = i + (i[-1],)
        return f"must have a positive diagonal, but {_loc(j)}is {_num(v[j])}"
    return None


def _symmetric_message(v):
    t = np.swapaxes(v, -1, -2)
    i = _first(np.abs(v - t) > CONSTRAINT_TOLERANCE)
    if i is not None:
        j = i[:-2] + (i[-1], i[-2])
        return (f"must be symmetric (within {CONSTRAINT_TOLERANCE:g}), but {_loc(i)}is "
                f"{_num(v[i])} and {_loc(j)}is {_num(v[j])}")
    return None


def _pos_def_message(v):
    try:
        np.linalg.cholesky(0.5 * (v + np.swapaxes(v, -1, -2)))
    except np.linalg.LinAlgError:
        return "must be positive definite, but is not"
    return None


class _Correlation(_Structured):
    """Shared half of :class:`CholeskyFactorCorr` and :class:`CorrMatrix`: a K x K
    object from the ``K(K-1)/2`` canonical partial correlations (``_corr_cholesky``)."""

    core = 2

    def _check_dims(self, dims):
        _square_dims(self.name, dims)

    def _core_free(self, dims):
        return dims[0] * (dims[0] - 1) // 2


class CholeskyFactorCorr(_Correlation):
    """Cholesky factor of a correlation matrix from ``K(K-1)/2`` free reals.

    The free reals are mapped by ``tanh`` to canonical partial correlations ``z_ij`` in
    (-1, 1) (row-major over the strictly lower triangle), then
    ``L_ij = z_ij sqrt(1 - sum_{j'<j} L_ij'^2)`` for ``j < i`` and
    ``L_ii = sqrt(1 - sum_{j<i} L_ij^2)``. The log Jacobian of the strictly lower
    entries is ``sum_{i>j} log(1 - z_ij^2) (1 + (i - j - 1)/2)`` (0-based), computed in
    closed form (vectorized, no loop over K). Flat in ``x + log_jac`` means flat in
    ``L``; LKJ(1) on ``L L^T`` needs ``lkj_corr_cholesky_lpdf(L, 1)`` on top, as in Stan.

    >>> import numpy as np
    >>> L, lj = CholeskyFactorCorr().constrain(np.array([np.arctanh(0.6)]), (2, 2))
    >>> np.round(L, 12)
    array([[1. , 0. ],
           [0.6, 0.8]])
    """

    name = "cholesky_factor_corr"

    def _constrain(self, x, batch, dims):
        K = dims[0]
        L, w = _corr_cholesky(x, batch, K)
        coef = _corr_constants(K)[4]
        return L, _sum(w * coef)

    def _violation(self, v, dims):
        msg = (_nan_message(v) or _lower_tri_message(v) or _diag_positive_message(v))
        if msg:
            return msg
        s = np.sum(v * v, axis=-1)
        i = _first(~(np.abs(s - 1.0) <= CONSTRAINT_TOLERANCE))
        if i is not None:
            return (f"must have rows of unit length (within {CONSTRAINT_TOLERANCE:g} on the "
                    f"squared norm), but row {_idx(i)} has squared norm {_num(s[i])}")
        return None

    def _unconstrain(self, v, dims):
        return _corr_free_from_L(v, dims[0])


class CorrMatrix(_Correlation):
    """Correlation matrix ``Omega = L L^T`` with ``L`` from :class:`CholeskyFactorCorr`
    (``K(K-1)/2`` free reals). The log Jacobian of the strictly lower entries of
    ``Omega`` is ``sum_{i>j} log(1 - z_ij^2) (1 + (K - j - 2)/2)`` (0-based ``j``): the
    tanh term plus the CPC-to-correlation term of Lewandowski, Kurowicka and Joe (2009).
    A flat density in ``x + log_jac`` is LKJ(1), uniform over correlation matrices.
    """

    name = "corr_matrix"

    def _constrain(self, x, batch, dims):
        K = dims[0]
        L, w = _corr_cholesky(x, batch, K)
        _, _, _, eye, _, coef, lower = _corr_constants(K)
        om = multiply_lower_tri_self_transpose(L)
        om = where(lower, om, where(lower.T, swapaxes(om, -1, -2), 1.0))
        return om, _sum(w * coef)

    def _violation(self, v, dims):
        msg = _nan_message(v) or _symmetric_message(v)
        if msg:
            return msg
        d = np.diagonal(v, axis1=-2, axis2=-1)
        i = _first(~(np.abs(d - 1.0) <= CONSTRAINT_TOLERANCE))
        if i is not None:
            j = i + (i[-1],)
            return (f"must have a unit diagonal (within {CONSTRAINT_TOLERANCE:g}), but "
                    f"{_loc(j)}is {_num(v[j])}")
        return _pos_def_message(v)

    def _unconstrain(self, v, dims):
        L = np.linalg.cholesky(0.5 * (v + np.swapaxes(v, -1, -2)))
        return _corr_free_from_L(L, dims[0])


@lru_cache(maxsize=64)
def _chol_constants(M, N):
    """Index tables for an M x N Cholesky factor (Stan's row-major order)."""
    r, c = np.tril_indices(M, 0, N)
    n = r.size
    diag = np.flatnonzero(r == c)                      # positions of L_kk in x
    gather = np.full(M * N, n + N, dtype=np.intp)      # slot n + N holds a zero
    gather[r * N + c] = np.arange(n)
    gather[np.arange(N) * (N + 1)] = n + np.arange(N)
    lower = np.tril(np.ones((M, N), dtype=bool), -1)
    for a in (r, c, diag, gather, lower):
        a.setflags(write=False)
    return r, c, diag, gather, lower


def _chol_factor(x, batch, M, N):
    """(L, the free diagonal reals) for an M x N Cholesky factor."""
    _, _, diag, gather, _ = _chol_constants(M, N)
    xd = x[..., diag]
    ext = concatenate([x, exp(xd), np.zeros(batch + (1,))], axis=-1)
    return reshape(ext[..., gather], batch + (M, N)), xd


def _chol_free(L, M, N):
    r, c, diag, _, _ = _chol_constants(M, N)
    x = L[..., r, c].copy()
    x[..., diag] = np.log(x[..., diag])
    return x


class CholeskyFactorCov(_Structured):
    """Cholesky factor of a covariance matrix, shape ``(M, N)`` with ``M >= N``:
    ``N(N+1)/2 + (M-N)N`` free reals filled row by row into the lower trapezoid, the
    diagonal as ``exp``; ``log_jac`` is the sum of the free diagonal reals.

    >>> import numpy as np
    >>> CholeskyFactorCov().constrain(np.array([0.0, 2.0, 0.0]), (2, 2))[0]
    array([[1., 0.],
           [2., 1.]])
    """

    name = "cholesky_factor_cov"
    core = 2

    def _check_dims(self, dims):
        if dims[0] < dims[1]:
            raise ValueError(f"{self.name}: needs rows >= columns, got shape {dims}")

    def _core_free(self, dims):
        M, N = dims
        return N * (N + 1) // 2 + (M - N) * N

    def _constrain(self, x, batch, dims):
        L, xd = _chol_factor(x, batch, *dims)
        return L, _sum(xd)

    def _violation(self, v, dims):
        return _nan_message(v) or _lower_tri_message(v) or _diag_positive_message(v)

    def _unconstrain(self, v, dims):
        return _chol_free(v, *dims)


class CovMatrix(_Structured):
    """Covariance matrix ``Sigma = L L^T`` with ``L`` lower triangular and a log-scale
    diagonal (``K + K(K-1)/2`` free reals, Stan's order). The log Jacobian of the lower
    triangle of ``Sigma`` is ``K log 2 + sum_k (K - k + 2) log L_kk`` (1-based ``k``).

    >>> import numpy as np
    >>> S, lj = CovMatrix().constrain(np.array([0.0, 1.0, 0.0]), (2, 2))
    >>> S
    array([[1., 1.],
           [1., 2.]])
    """

    name = "cov_matrix"
    core = 2

    def _check_dims(self, dims):
        _square_dims(self.name, dims)

    def _core_free(self, dims):
        K = dims[0]
        return K + K * (K - 1) // 2

    def _constrain(self, x, batch, dims):
        K = dims[0]
        L, xd = _chol_factor(x, batch, K, K)
        lower = _chol_constants(K, K)[4]
        S = multiply_lower_tri_self_transpose(L)
        S = where(lower.T, swapaxes(S, -1, -2), S)     # exactly symmetric
        coef = K + 1.0 - np.arange(K)                  # K - k + 2 for 1-based k
        return S, _sum(xd * coef) + _LOG2 * K * _size(batch)

    def _violation(self, v, dims):
        return _nan_message(v) or _symmetric_message(v) or _pos_def_message(v)

    def _unconstrain(self, v, dims):
        K = dims[0]
        L = np.linalg.cholesky(0.5 * (v + np.swapaxes(v, -1, -2)))
        return _chol_free(L, K, K)
