"""Multivariate distributions: vectors, simplexes, correlation and covariance matrices.

Every ``<name>_lpdf`` is one fused node (see :mod:`.fused`) whose kernel factors each
matrix argument once by Cholesky and computes the value and the closed-form partials
from the factors with triangular solves (no explicit inverse where a solve will do).
The kernels use stanlite operations only, so the same code runs as plain numpy on the
hot path and on traced values under nested AD (Hessians).

Parameterisations, supports and normalising constants are Stan's:

* ``multi_normal_lpdf(y | mu, Sigma)``, ``multi_normal_cholesky_lpdf(y | mu, L)``,
  ``multi_student_t_lpdf(y | nu, mu, Sigma)``: ``y`` and ``mu`` are each one vector
  ``(K,)`` or an array of vectors ``(N, K)`` (two arrays must have the same N); the
  value is the sum over the N vectors and the one factorisation of ``Sigma`` is shared.
* ``dirichlet_lpdf(theta | alpha)``: ``theta`` a simplex (or an array of simplexes),
  ``alpha`` a positive vector (or an array of them).
* ``lkj_corr_lpdf(Omega | eta)``, ``lkj_corr_cholesky_lpdf(L | eta)``: the LKJ
  distribution on correlation matrices (Lewandowski, Kurowicka & Joe 2009).
* ``wishart_lpdf(W | nu, Sigma)``, ``inv_wishart_lpdf(W | nu, Sigma)``.

``reduce=False`` gives one value per vector (``(N,)`` for ``(N, K)`` arguments, ``()``
for one vector) instead of their sum; a density of one matrix gives its one value.

Argument checks raise :class:`~stanlite.errors.DomainError` naming the function and
the argument: ``Sigma``/``W`` symmetric (to ``1e-8`` relative, as the math library's
``cholesky_decompose``) and positive definite, Cholesky-factor arguments lower
triangular (exact zeros above the diagonal) with a positive diagonal, ``Omega`` a
correlation matrix (unit diagonal to ``1e-8``), ``theta`` a simplex (non-negative,
summing to 1 within ``1e-8``). Mismatched shapes raise ``ValueError``.

Gradient convention for matrix arguments
----------------------------------------
The gradient w.r.t. a symmetric-matrix argument (``Sigma``, ``W``, ``Omega``) is, as
in Stan, the gradient of the density formula with every entry treated as an
independent variable; for these formulas it is a symmetric matrix ``G`` (for
``multi_normal``, ``G = 1/2 sum_n (Sigma^-1 r_n r_n^T Sigma^-1 - Sigma^-1)``). Moving
the symmetric pair ``(i, j)`` and ``(j, i)`` together by ``eps`` therefore changes
the log density by ``2 eps G_ij`` (``eps G_ii`` on the diagonal). This is also the
convention of the math library's symmetric functions (``cholesky_decompose``,
``log_determinant_spd``), so gradients agree whether a density is called directly
or composed from them; under nested AD the matrix is treated through its symmetric
part. A Cholesky-factor argument gets zeros above the diagonal (only the lower
triangle is read). ``theta`` of ``dirichlet`` gets the unconstrained gradient
``(alpha - 1) / theta`` (Stan's); only its projection on the simplex's tangent
space (rows summing to 0) is a directional derivative.

Example
-------
>>> import numpy as np, stanlite as sl
>>> round(sl.multi_normal_lpdf(np.zeros(2), np.zeros(2), np.eye(2)), 6)
-1.837877
>>> round(sl.lkj_corr_lpdf(np.eye(3), 1.0), 6)      # uniform: -log(pi^2 / 2)
-1.596313
"""

import inspect

import numpy as np
from scipy.linalg import solve_triangular

from .. import math as sm
from ..autodiff.var import Box, shape_of, value_of
from ..errors import DomainError
from .fused import (check_finite, check_integer, check_not_nan, check_positive, fused,
                    full_shape, once_for_constant, pointwise)
from .rng import as_generator

__all__ = ["multi_normal_lpdf", "multi_normal_rng",
           "multi_normal_cholesky_lpdf", "multi_normal_cholesky_rng",
           "multi_student_t_lpdf", "multi_student_t_rng",
           "dirichlet_lpdf", "dirichlet_rng",
           "lkj_corr_lpdf", "lkj_corr_rng",
           "lkj_corr_cholesky_lpdf", "lkj_corr_cholesky_rng",
           "wishart_lpdf", "wishart_rng",
           "inv_wishart_lpdf", "inv_wishart_rng"]

LOG_PI = float(np.log(np.pi))
LOG_TWO = float(np.log(2.0))
HALF_LOG_TWO_PI = 0.5 * float(np.log(2.0 * np.pi))
SYM_TOL = 1e-8          # symmetry, unit diagonal, simplex sum (Stan's CONSTRAINT_TOLERANCE)


# --------------------------------------------------------------------------------------
# helpers (valid on plain and traced values)
# --------------------------------------------------------------------------------------
def _mT(x):
    return sm.swapaxes(x, -1, -2)


def _arr(x):
    """User input to a float array (traced values pass through)."""
    return x if isinstance(x, Box) else np.asarray(x, dtype=float)


def _out(v):
    """A plain scalar result as a Python float (traced results and the arrays of
    ``reduce=False`` pass through)."""
    if isinstance(v, Box) or type(v) is np.ndarray and v.ndim:
        return v
    return float(v)


def _chol(fn, arg, S):
    """The Cholesky factor of ``S``; not positive definite -> DomainError.
    Computed once for a constant (read-only data) ``S``."""
    return once_for_constant(("chol", fn, arg), S, lambda S: _chol_now(fn, arg, S))


def _chol_now(fn, arg, S):
    try:
        return sm.cholesky_decompose(S)
    except DomainError as e:
        # the factorisation's own domain failure (not positive definite, not
        # symmetric, NaN) said in this density's words; anything else as it is
        if not str(e).startswith("cholesky_decompose:"):
            raise
        ev = float(np.linalg.eigvalsh(np.asarray(value_of(S), dtype=float))[0])
        raise DomainError(f"{fn}: {arg} must be positive definite, but its smallest "
                          f"eigenvalue is {ev!r}") from None


def _inv_from_chol(L):
    """``(L L^T)^-1 = L^-T L^-1`` from one triangular solve against the identity."""
    li = sm.mdivide_left_tri_low(L, np.eye(shape_of(L)[-1]))
    return _mT(li) @ li


def _log_diag_sum(L):
    return sm.sum(sm.log(sm.diagonal(L)))


def _lmgamma(K, x):
    """log of the multivariate gamma function Gamma_K(x), and its derivative in x."""
    j = 0.5 * np.arange(K)
    return (0.25 * K * (K - 1) * LOG_PI + sm.sum(sm.lgamma(x - j)),
            lambda: sm.sum(sm.digamma(x - j)))


def _lkj_log_const(eta, K):
    """log of the LKJ normalising constant, ``-log c_K(eta)``, and d/deta of it.

    Lewandowski, Kurowicka & Joe (2009, sec. 3.2, the C-vine/onion derivation) give
    the integral of ``det(Omega)^(eta - 1)`` over K x K correlation matrices as

        c_K(eta) = prod_{m=1}^{K-1} [2^(2 eta - 2 + m) B(b_m, b_m)]^m,  b_m = eta + (m-1)/2

    (m = K - k). With Legendre's duplication formula, 2^(2b - 1) B(b, b) =
    sqrt(pi) Gamma(b) / Gamma(b + 1/2), and the product telescopes to

        -log c_K(eta) = (K-1) lgamma(eta + (K-1)/2)
                        - sum_{k=1}^{K-1} [k/2 log(pi) + lgamma(eta + (K-1-k)/2)],

    the expression Stan's ``do_lkj_constant`` evaluates (its separate branch for
    ``eta == 1`` equals this one at ``eta = 1``).
    """
    if K < 2:
        return 0.0, (lambda: 0.0)
    k = np.arange(1, K)
    a = eta + 0.5 * (K - 1)
    b = eta + 0.5 * (K - 1 - k)
    val = (K - 1) * sm.lgamma(a) - 0.25 * K * (K - 1) * LOG_PI - sm.sum(sm.lgamma(b))
    return val, (lambda: (K - 1) * sm.digamma(a) - sm.sum(sm.digamma(b)))


# --------------------------------------------------------------------------------------
# argument checks (plain values)
# --------------------------------------------------------------------------------------
def _square(fn, arg, x, K=None):
    s = np.shape(x)
    if len(s) != 2 or s[0] != s[1]:
        raise ValueError(f"{fn}: {arg} must be a square matrix, got shape {s}")
    if K is not None and s[0] != K:
        raise ValueError(f"{fn}: {arg} must be {K} x {K} to match the other arguments, "
                         f"got shape {s}")
    return s[0]


def _check_symmetric(fn, arg, x):
    once_for_constant(("symmetric", fn, arg), x, lambda x: _check_symmetric_now(fn, arg, x))


def _check_symmetric_now(fn, arg, x):
    x = np.asarray(x, dtype=float)
    check_finite(fn, arg, x)
    if x.size == 0:
        return
    d = np.abs(x - x.T)
    scale = max(1.0, float(np.max(np.abs(x))))
    if not float(np.max(d)) <= SYM_TOL * scale:
        i, j = np.unravel_index(int(np.argmax(d)), d.shape)
        raise DomainError(f"{fn}: {arg} must be symmetric, but {arg}[{i}, {j}] = "
                          f"{float(x[i, j])!r} and {arg}[{j}, {i}] = {float(x[j, i])!r}")


def _check_cholesky_factor(fn, arg, x):
    """Lower triangular (exact zeros above the diagonal), positive diagonal (checked
    once for constant data)."""
    once_for_constant(("cholesky_factor", fn, arg), x,
                      lambda x: _check_cholesky_factor_now(fn, arg, x))


def _check_cholesky_factor_now(fn, arg, x):
    x = np.asarray(x, dtype=float)
    check_finite(fn, arg, x)
    up = np.triu(x, 1)
    if np.any(up != 0):
        i, j = np.argwhere(up != 0)[0]
        raise DomainError(f"{fn}: {arg} must be lower triangular, but {arg}[{i}, {j}] = "
                          f"{float(x[i, j])!r}")
    d = np.diagonal(x)
    if np.any(d <= 0):
        i = int(np.argmax(d <= 0))
        raise DomainError(f"{fn}: {arg} must have a positive diagonal, but "
                          f"{arg}[{i}, {i}] = {float(d[i])!r}")


def _check_unit_diagonal(fn, arg, x):
    once_for_constant(("unit_diagonal", fn, arg), x,
                      lambda x: _check_unit_diagonal_now(fn, arg, x))


def _check_unit_diagonal_now(fn, arg, x):
    d = np.diagonal(np.asarray(x, dtype=float))
    bad = np.abs(d - 1.0) > SYM_TOL
    if np.any(bad):
        i = int(np.argmax(bad))
        raise DomainError(f"{fn}: {arg} must be a correlation matrix (unit diagonal), "
                          f"but {arg}[{i}, {i}] = {float(d[i])!r}")


def _check_simplex(fn, arg, x):
    x = np.asarray(x, dtype=float)
    check_not_nan(fn, arg, x)
    neg = x < 0
    if np.any(neg):
        idx = tuple(int(i) for i in np.argwhere(neg)[0])
        raise DomainError(f"{fn}: {arg} must be a simplex, but {arg}[{', '.join(map(str, idx))}]"
                          f" = {float(x[idx])!r} is negative")
    s = np.sum(x, axis=-1)
    bad = np.abs(s - 1.0) > SYM_TOL
    if np.any(bad):
        if s.ndim:
            r = int(np.argmax(bad))
            raise DomainError(f"{fn}: {arg}[{r}] must be a simplex, but it sums to "
                              f"{float(s[r])!r}")
        raise DomainError(f"{fn}: {arg} must be a simplex, but it sums to {float(s)!r}")


def _rows(fn, arg, x, K):
    """Number of vectors in ``x`` ((K,) -> None, (N, K) -> N)."""
    s = np.shape(x)
    if len(s) not in (1, 2) or s[-1] != K:
        raise ValueError(f"{fn}: {arg} must be a vector of length {K} or an array of "
                         f"such vectors (N, {K}), got shape {s}")
    return None if len(s) == 1 else s[0]


def _check_locations(fn, K, y, mu):
    ny = _rows(fn, "y", y, K)
    nm = _rows(fn, "mu", mu, K)
    if ny is not None and nm is not None and ny != nm:
        raise ValueError(f"{fn}: y and mu hold different numbers of vectors "
                         f"({ny} and {nm})")
    check_not_nan(fn, "y", y)
    check_finite(fn, "mu", mu)


def _check_nu_dims(fn, nu, K):
    check_finite(fn, "nu", nu)
    if np.ndim(nu) != 0:
        raise ValueError(f"{fn}: nu must be a scalar, got shape {np.shape(nu)}")
    if not float(nu) > K - 1:
        raise DomainError(f"{fn}: nu must be greater than K - 1 = {K - 1}, but is "
                          f"{float(nu)!r}")


def _check_scalar(fn, arg, x):
    if np.ndim(x) != 0:
        raise ValueError(f"{fn}: {arg} must be a scalar, got shape {np.shape(x)}")
    check_positive(fn, arg, x)


def _vector_checks(fn, arg, check_matrix):
    """The checks of a density of vectors ``y`` around ``mu`` with a ``K x K`` matrix
    ``arg`` (checked by ``check_matrix``), called ``(y, mu, M)`` or, for the Student-t
    densities, ``(y, nu, mu, M)`` with a positive scalar ``nu``. (Its ``*rest``
    signature leaves the parameters' names to the kernel's.)"""
    def check(y, *rest):
        *nu, mu, M = rest
        K = _square(fn, arg, M)
        if nu:
            _check_scalar(fn, "nu", nu[0])
        _check_locations(fn, K, y, mu)
        check_matrix(fn, arg, M)
    return check


# --------------------------------------------------------------------------------------
# multivariate normal (covariance and Cholesky parameterisations)
# --------------------------------------------------------------------------------------
def _centered(y, mu):
    """``r = y - mu`` as an (N, K) matrix, the N of the broadcast, and r's own shape."""
    r = y - mu
    s = shape_of(r)
    if len(s) == 1:
        return sm.reshape(r, (1, s[0])), 1, s
    return r, s[0], s


def _mvn_parts(need, L, R, Z, n, sr, iy, imu, iL, parts, cholesky):
    """Partials shared by the two parameterisations: ``Sigma^-1 r_n`` by a second
    triangular solve, then the closed forms."""
    if not (need[iy] or need[imu] or need[iL]):
        return
    at = sm.mdivide_right_tri_low(_mT(Z), L)            # rows Sigma^-1 r_n    (N, K)
    if need[iy] or need[imu]:
        g = sm.reshape(at, sr) if len(sr) == 1 else at
        if need[iy]:
            parts[iy] = -g
        if need[imu]:
            parts[imu] = g
    if need[iL]:
        K = shape_of(L)[-1]
        if cholesky:
            # d/dL of -1/2 |L^-1 r|^2 - log det L: tril(L^-T Z Z^T) - N diag(1/L_kk)
            mask = np.tril(np.ones((K, K)))
            parts[iL] = mask * (_mT(at) @ _mT(Z)) - n * sm.diag_matrix(1.0 / sm.diagonal(L))
        else:
            # 1/2 (sum_n Sigma^-1 r_n r_n^T Sigma^-1 - N Sigma^-1)
            parts[iL] = 0.5 * (_mT(at) @ at - n * _inv_from_chol(L))


def _multi_normal(need, y, mu, Sigma):
    """sum_n log N(y_n | mu_n, Sigma) = -N K/2 log(2 pi) - N/2 log det Sigma
    - 1/2 sum_n r_n^T Sigma^-1 r_n,  r_n = y_n - mu_n."""
    L = _chol("multi_normal_lpdf", "Sigma", Sigma)
    R, n, sr = _centered(y, mu)
    K = shape_of(L)[-1]
    Z = sm.mdivide_left_tri_low(L, _mT(R))               # L^-1 r_n as columns (K, N)
    lp = -0.5 * sm.sum(Z * Z) - n * sm.sum(sm.log(sm.diagonal(L))) - n * K * HALF_LOG_TWO_PI
    parts = [None, None, None]
    _mvn_parts(need, L, R, Z, n, sr, 0, 1, 2, parts, False)
    return lp, parts


_multi_normal_node = fused("multi_normal_lpdf", _multi_normal,
                           _vector_checks("multi_normal_lpdf", "Sigma", _check_symmetric))


def multi_normal_lpdf(y, mu, Sigma, *, reduce=True):
    """Multivariate normal log density, summed over the vectors of ``y``/``mu``.

        log MultiNormal(y | mu, Sigma) = -K/2 log(2 pi) - 1/2 log det Sigma
                                         - 1/2 (y - mu)^T Sigma^-1 (y - mu)

    ``y``, ``mu``: ``(K,)`` or ``(N, K)``; ``Sigma``: ``(K, K)`` symmetric positive
    definite (one Cholesky factorisation shared by all N vectors). The gradient
    w.r.t. ``Sigma`` is the symmetric ``1/2 sum_n (Sigma^-1 r_n r_n^T Sigma^-1 -
    Sigma^-1)`` (see the module's gradient convention).

    >>> import numpy as np, stanlite as sl
    >>> S = np.array([[2.0, 0.5], [0.5, 1.0]])
    >>> round(sl.multi_normal_lpdf(np.array([[1.0, 0.0], [0.0, 1.0]]), np.zeros(2), S), 6)
    -5.092513
    """
    return _out(_multi_normal_node(_arr(y), _arr(mu), _arr(Sigma), reduce=reduce))


def _multi_normal_cholesky(need, y, mu, L):
    """The same density with ``Sigma = L L^T`` given by its Cholesky factor."""
    R, n, sr = _centered(y, mu)
    K = shape_of(L)[-1]
    Z = sm.mdivide_left_tri_low(L, _mT(R))
    lp = -0.5 * sm.sum(Z * Z) - n * _log_diag_sum(L) - n * K * HALF_LOG_TWO_PI
    parts = [None, None, None]
    _mvn_parts(need, L, R, Z, n, sr, 0, 1, 2, parts, True)
    return lp, parts


_multi_normal_cholesky_node = fused(
    "multi_normal_cholesky_lpdf", _multi_normal_cholesky,
    _vector_checks("multi_normal_cholesky_lpdf", "L", _check_cholesky_factor))


def multi_normal_cholesky_lpdf(y, mu, L, *, reduce=True):
    """Multivariate normal log density with the covariance's Cholesky factor,
    ``Sigma = L L^T``, summed over the vectors of ``y``/``mu``:

        log MultiNormal(y | mu, L L^T) = -K/2 log(2 pi) - sum_k log L_kk
                                         - 1/2 |L^-1 (y - mu)|^2

    ``L``: lower triangular with a positive diagonal. Its gradient is lower
    triangular: ``tril(sum_n L^-T z_n z_n^T) - N diag(1 / L_kk)``, ``z_n = L^-1 r_n``.

    >>> import numpy as np, stanlite as sl
    >>> L = np.linalg.cholesky(np.array([[2.0, 0.5], [0.5, 1.0]]))
    >>> round(sl.multi_normal_cholesky_lpdf(np.array([[1.0, 0.0], [0.0, 1.0]]),
    ...                                     np.zeros(2), L), 6)
    -5.092513
    """
    return _out(_multi_normal_cholesky_node(_arr(y), _arr(mu), _arr(L), reduce=reduce))


def _mvn_draws(mu, L, rng, scale=None):
    mu = np.asarray(value_of(mu), dtype=float)
    z = as_generator(rng).standard_normal(mu.shape)
    d = z @ L.T
    if scale is not None:
        d = d * (scale if mu.ndim == 1 else scale[:, None])
    return mu + d


def _mvn_rng_matrix(fn, mu, name, S, check_S):
    """The matrix argument ``name`` of multi-normal rng ``fn`` as floats, after the
    checks both forms make: square, ``mu``'s rows of its size and finite, then its own
    ``check_S`` (symmetric; a Cholesky factor)."""
    S = np.asarray(value_of(S), dtype=float)
    K = _square(fn, name, S)
    _rows(fn, "mu", value_of(mu), K)
    check_finite(fn, "mu", value_of(mu))
    check_S(fn, name, S)
    return S


def multi_normal_rng(mu, Sigma, rng=None):
    """Draws from MultiNormal(mu, Sigma): one vector per vector of ``mu``
    (``mu`` ``(K,)`` -> ``(K,)``, ``(N, K)`` -> ``(N, K)``)."""
    fn = "multi_normal_rng"
    Sigma = _mvn_rng_matrix(fn, mu, "Sigma", Sigma, _check_symmetric)
    return _mvn_draws(mu, _chol(fn, "Sigma", Sigma), rng)


def multi_normal_cholesky_rng(mu, L, rng=None):
    """Draws from MultiNormal(mu, L L^T), shaped like ``mu``: ``mu + L z``."""
    L = _mvn_rng_matrix("multi_normal_cholesky_rng", mu, "L", L, _check_cholesky_factor)
    return _mvn_draws(mu, L, rng)


# --------------------------------------------------------------------------------------
# multivariate Student-t
# --------------------------------------------------------------------------------------
def _multi_student_t(need, y, nu, mu, Sigma):
    """sum_n log MultiStudentT(y_n | nu, mu_n, Sigma), q_n = r_n^T Sigma^-1 r_n:

        lgamma((nu+K)/2) - lgamma(nu/2) - K/2 log(nu pi) - 1/2 log det Sigma
        - (nu+K)/2 log1p(q_n / nu)

    with w_n = (nu+K)/(nu+q_n): d/dy_n = -w_n Sigma^-1 r_n = -d/dmu_n,
    d/dSigma = 1/2 sum_n (w_n Sigma^-1 r_n r_n^T Sigma^-1 - Sigma^-1),
    d/dnu = N/2 (psi((nu+K)/2) - psi(nu/2) - K/nu)
            + sum_n [-1/2 log1p(q_n/nu) + w_n q_n / (2 nu)].
    """
    return _mst_kernel(need, y, nu, mu, _chol("multi_student_t_lpdf", "Sigma", Sigma),
                       False)


def _mst_kernel(need, y, nu, mu, L, cholesky):
    """The multivariate Student-t kernel from the scale's Cholesky factor ``L``; the
    matrix partial w.r.t. ``Sigma = L L^T`` (symmetric convention) or, with
    ``cholesky``, w.r.t. ``L``: tril(sum_n w_n Sigma^-1 r_n z_n^T) - N diag(1/L_kk),
    z_n = L^-1 r_n (multi_student_t_cholesky)."""
    R, n, sr = _centered(y, mu)
    K = shape_of(L)[-1]
    Z = sm.mdivide_left_tri_low(L, _mT(R))               # (K, N)
    q = sm.sum(Z * Z, axis=0)                            # (N,)
    hk = 0.5 * (nu + K)
    l1 = sm.log1p(q / nu)
    lp = (n * (sm.lgamma(hk) - sm.lgamma(0.5 * nu) - 0.5 * K * (sm.log(nu) + LOG_PI))
          - n * _log_diag_sum(L) - hk * sm.sum(l1))
    parts = [None, None, None, None]
    if need[0] or need[2] or need[3] or need[1]:
        w = (nu + K) / (nu + q)                          # (N,)
        if need[1]:
            parts[1] = (0.5 * n * (sm.digamma(hk) - sm.digamma(0.5 * nu) - K / nu)
                        + sm.sum(0.5 * w * q / nu - 0.5 * l1))
        if need[0] or need[2] or need[3]:
            at = sm.mdivide_right_tri_low(_mT(Z), L)     # rows Sigma^-1 r_n
            wat = sm.reshape(w, (n, 1)) * at
            if need[0] or need[2]:
                g = sm.reshape(wat, sr) if len(sr) == 1 else wat
                if need[0]:
                    parts[0] = -g
                if need[2]:
                    parts[2] = g
            if need[3] and cholesky:
                parts[3] = (np.tril(np.ones((K, K))) * (_mT(wat) @ _mT(Z))
                            - n * sm.diag_matrix(1.0 / sm.diagonal(L)))
            elif need[3]:
                parts[3] = 0.5 * (_mT(wat) @ at - n * _inv_from_chol(L))
    return lp, parts


_multi_student_t_node = fused("multi_student_t_lpdf", _multi_student_t,
                              _vector_checks("multi_student_t_lpdf", "Sigma",
                                             _check_symmetric))


def multi_student_t_lpdf(y, nu, mu, Sigma, *, reduce=True):
    """Multivariate Student-t log density, summed over the vectors of ``y``/``mu``:

        log MultiStudentT(y | nu, mu, Sigma) = lgamma((nu + K)/2) - lgamma(nu/2)
            - K/2 log(nu) - K/2 log(pi) - 1/2 log det Sigma
            - (nu + K)/2 log(1 + (y - mu)^T Sigma^-1 (y - mu) / nu)

    ``nu > 0`` (finite) degrees of freedom, ``Sigma`` the symmetric positive-definite
    scale matrix (the covariance is ``nu/(nu - 2) Sigma`` for ``nu > 2``).

    >>> import numpy as np, stanlite as sl
    >>> round(sl.multi_student_t_lpdf(np.ones(2), 4.0, np.zeros(2), np.eye(2)), 6)
    -3.054272
    """
    return _out(_multi_student_t_node(_arr(y), _arr(nu), _arr(mu), _arr(Sigma),
                                      reduce=reduce))


def multi_student_t_rng(nu, mu, Sigma, rng=None):
    """Draws shaped like ``mu``: ``mu + sqrt(w) L z`` with ``w ~ InvGamma(nu/2, nu/2)``
    (``= nu / chi2_nu``) and ``Sigma = L L^T``."""
    fn = "multi_student_t_rng"
    Sigma = np.asarray(value_of(Sigma), dtype=float)
    K = _square(fn, "Sigma", Sigma)
    nu, mu, n = _mst_rng_args(fn, nu, mu, K)
    _check_symmetric(fn, "Sigma", Sigma)
    return _mst_draws(nu, mu, _chol(fn, "Sigma", Sigma), n, rng)


def _mst_rng_args(fn, nu, mu, K):
    """``(nu, mu, n)`` of a multivariate Student-t rng, checked (after the scale's
    shape, before its values): ``n`` the number of vectors in ``mu`` (None: one)."""
    nu = np.asarray(value_of(nu), dtype=float)
    _check_scalar(fn, "nu", nu)
    mu = np.asarray(value_of(mu), dtype=float)
    n = _rows(fn, "mu", mu, K)
    check_finite(fn, "mu", mu)
    return nu, mu, n


def _mst_draws(nu, mu, L, n, rng):
    """``mu + sqrt(w) L z`` with ``w = nu / chi2_nu``, one ``w`` per vector."""
    g = as_generator(rng)
    w = float(nu) / g.chisquare(float(nu), size=() if n is None else (n,))
    return _mvn_draws(mu, L, g, np.sqrt(w))


# --------------------------------------------------------------------------------------
# Dirichlet
# --------------------------------------------------------------------------------------
def _dirichlet(need, theta, alpha):
    """sum_n [lgamma(sum_k alpha_nk) - sum_k lgamma(alpha_nk)
              + sum_k (alpha_nk - 1) log theta_nk]

    d/dtheta = (alpha - 1)/theta;  d/dalpha = psi(sum alpha) - psi(alpha) + log theta.
    """
    st, sa = shape_of(theta), shape_of(alpha)
    rows = np.broadcast_shapes(st, sa)[:-1]
    n = int(np.prod(rows, dtype=np.int64))
    reps = n // max(1, int(np.prod(sa[:-1], dtype=np.int64)))
    lt = sm.log(theta)
    asum = sm.sum(alpha, axis=-1, keepdims=True)
    am1 = alpha - 1.0
    lp = reps * (sm.sum(sm.lgamma(asum)) - sm.sum(sm.lgamma(alpha))) + sm.sum(am1 * lt)
    parts = [None, None]
    if need[0]:
        parts[0] = am1 / theta
    if need[1]:
        parts[1] = (sm.digamma(asum) - sm.digamma(alpha)) + lt
    return lp, parts


def _check_dirichlet(theta, alpha):
    fn = "dirichlet_lpdf"
    st, sa = np.shape(theta), np.shape(alpha)
    for arg, s in (("theta", st), ("alpha", sa)):
        if len(s) not in (1, 2):
            raise ValueError(f"{fn}: {arg} must be a vector or an array of vectors "
                             f"(N, K), got shape {s}")
    if st[-1] != sa[-1] or (len(st) == len(sa) == 2 and st[0] != sa[0]):
        raise ValueError(f"{fn}: shapes {st} (theta) and {sa} (alpha) do not match")
    check_positive(fn, "alpha", alpha)
    _check_simplex(fn, "theta", theta)


_dirichlet_node = fused("dirichlet_lpdf", _dirichlet, _check_dirichlet)


def dirichlet_lpdf(theta, alpha, *, reduce=True):
    """Dirichlet log density, summed over the simplexes of ``theta``/``alpha``:

        log Dirichlet(theta | alpha) = lgamma(sum_k alpha_k) - sum_k lgamma(alpha_k)
                                       + sum_k (alpha_k - 1) log theta_k

    ``theta``: a K-simplex ``(K,)`` or an array of them ``(N, K)``; ``alpha``: positive
    ``(K,)`` or ``(N, K)``. The gradient w.r.t. ``theta`` is ``(alpha - 1)/theta``,
    each entry treated as free (Stan's convention).

    >>> import numpy as np, stanlite as sl
    >>> round(sl.dirichlet_lpdf(np.array([0.2, 0.3, 0.5]), np.array([1.0, 2.0, 3.0])), 6)
    1.504077
    """
    return _out(_dirichlet_node(_arr(theta), _arr(alpha), reduce=reduce))


def dirichlet_rng(alpha, rng=None):
    """A simplex (or one per row of ``alpha``) from Dirichlet(alpha): normalised gamma
    draws, in log space when some ``alpha < 1`` (``log G(alpha + 1) + log(U)/alpha``,
    so that tiny concentrations do not underflow to an all-zero draw)."""
    fn = "dirichlet_rng"
    alpha = np.asarray(value_of(alpha), dtype=float)
    if alpha.ndim not in (1, 2):
        raise ValueError(f"{fn}: alpha must be a vector or an array of vectors (N, K), "
                         f"got shape {alpha.shape}")
    check_positive(fn, "alpha", alpha)
    g = as_generator(rng)
    if np.all(alpha >= 1.0):
        x = g.standard_gamma(alpha)
        return x / np.sum(x, axis=-1, keepdims=True)
    lx = np.log(g.standard_gamma(alpha + 1.0)) + np.log(g.random(alpha.shape)) / alpha
    lx = lx - np.max(lx, axis=-1, keepdims=True)
    x = np.exp(lx)
    return x / np.sum(x, axis=-1, keepdims=True)


# --------------------------------------------------------------------------------------
# LKJ on correlation matrices and their Cholesky factors
# --------------------------------------------------------------------------------------
def _lkj_corr(need, Omega, eta):
    """-log c_K(eta) + (eta - 1) log det Omega;
    d/dOmega = (eta - 1) Omega^-1;  d/deta = d(-log c_K)/deta + log det Omega."""
    L = _chol("lkj_corr_lpdf", "Omega", Omega)
    K = shape_of(L)[-1]
    c, dc = _lkj_log_const(eta, K)
    logdet = 2.0 * _log_diag_sum(L) if K else 0.0
    lp = c + (eta - 1.0) * logdet
    parts = [None, None]
    if need[0]:
        parts[0] = (eta - 1.0) * _inv_from_chol(L)
    if need[1]:
        parts[1] = dc() + logdet
    return lp, parts


def _check_lkj(fn, arg, *matrix_checks):
    """The argument check of LKJ density ``fn`` of the matrix named ``arg``: square,
    eta a scalar, then each of ``matrix_checks`` on the matrix."""
    def check(X, eta):
        _square(fn, arg, X)
        _check_scalar(fn, "eta", eta)
        for c in matrix_checks:
            c(fn, arg, X)
    # the density's parameter names (read by fused.parameter_names)
    check.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in (arg, "eta")])
    return check


_lkj_corr_node = fused("lkj_corr_lpdf", _lkj_corr,
                       _check_lkj("lkj_corr_lpdf", "Omega", _check_symmetric,
                                  _check_unit_diagonal))


def lkj_corr_lpdf(Omega, eta, *, reduce=True):
    """LKJ log density of a K x K correlation matrix ``Omega``, shape ``eta > 0``:

        log LkjCorr(Omega | eta) = (eta - 1) log det Omega - log c_K(eta),
        -log c_K(eta) = (K-1) lgamma(eta + (K-1)/2)
                        - sum_{k=1}^{K-1} [k/2 log(pi) + lgamma(eta + (K-1-k)/2)]

    (Lewandowski, Kurowicka & Joe 2009; Stan's ``do_lkj_constant``), the density
    w.r.t. Lebesgue measure on the K(K-1)/2 off-diagonal entries. For K = 2 the
    correlation is ``2 Beta(eta, eta) - 1``. ``Omega`` must be symmetric positive
    definite with a unit diagonal; its gradient is ``(eta - 1) Omega^-1`` (see the
    module's gradient convention).

    >>> import numpy as np, stanlite as sl
    >>> round(sl.lkj_corr_lpdf(np.array([[1.0, 0.3], [0.3, 1.0]]), 2.0), 6)
    -0.381993
    """
    return _out(_lkj_corr_node(_arr(Omega), _arr(eta), reduce=reduce))


def _lkj_corr_cholesky(need, L, eta):
    """-log c_K(eta) + sum_{k=2}^K (K - k + 2 eta - 2) log L_kk (1-based k);
    d/dL_kk = (K - k + 2 eta - 2)/L_kk (zero for k = 1 and off the diagonal);
    d/deta = d(-log c_K)/deta + 2 sum_{k>=2} log L_kk."""
    K = shape_of(L)[-1]
    c, dc = _lkj_log_const(eta, K)
    if K < 2:
        return c, [0.0 * L if need[0] else None, dc() if need[1] else None]
    d = sm.diagonal(L)
    ld = sm.log(d)
    rows = np.arange(K)
    base = np.where(rows > 0, K - 1 - rows, 0).astype(float)    # K - k, 1-based k
    mask = (rows > 0).astype(float)
    coef = base + (2.0 * eta - 2.0) * mask
    lp = c + sm.sum(coef * ld)
    parts = [None, None]
    if need[0]:
        parts[0] = sm.diag_matrix(coef / d)
    if need[1]:
        parts[1] = dc() + 2.0 * sm.sum(mask * ld)
    return lp, parts


_lkj_corr_cholesky_node = fused("lkj_corr_cholesky_lpdf", _lkj_corr_cholesky,
                                _check_lkj("lkj_corr_cholesky_lpdf", "L",
                                           _check_cholesky_factor))


def lkj_corr_cholesky_lpdf(L, eta, *, reduce=True):
    """LKJ log density of the Cholesky factor ``L`` of a correlation matrix:

        log LkjCholesky(L | eta) = -log c_K(eta) + sum_{k=2}^K (K - k + 2 eta - 2) log L_kk

    i.e. ``LkjCorr(L L^T | eta)`` times the Jacobian ``prod_k L_kk^(K-k)`` of
    ``L -> L L^T`` (``c_K`` as in :func:`lkj_corr_lpdf`). As in Stan, ``L`` is
    checked to be lower triangular with a positive diagonal; the unit length of its
    rows is the caller's (or the ``cholesky_factor_corr`` transform's) business. The
    gradient w.r.t. ``L`` is diagonal: ``(K - k + 2 eta - 2) / L_kk`` for k >= 2.

    >>> import numpy as np, stanlite as sl
    >>> L = np.linalg.cholesky(np.array([[1.0, 0.3], [0.3, 1.0]]))
    >>> round(sl.lkj_corr_cholesky_lpdf(L, 2.0), 6)
    -0.381993
    """
    return _out(_lkj_corr_cholesky_node(_arr(L), _arr(eta), reduce=reduce))


def _check_lkj_rng(fn, K, eta):
    check_integer(fn, "K", K, lower=1)
    _check_scalar(fn, "eta", np.asarray(value_of(eta), dtype=float))


def lkj_corr_cholesky_rng(K, eta, size=None, rng=None):
    """The Cholesky factor of a draw from LkjCorr(eta) (K x K), by the C-vine method of
    Lewandowski, Kurowicka & Joe (2009): the partial correlation of ``(i, j)`` given
    ``0..i-1`` is ``2 Beta(b_i, b_i) - 1`` with ``b_i = eta + (K - 2 - i)/2``
    (0-based level i), and row j of L is built from its partial correlations,
    ``L_ji = p_ij sqrt(1 - sum_{m<i} L_jm^2)``, ``L_jj = sqrt(1 - sum_{m<j} L_jm^2)``.

    ``size`` (an extension to Stan's signature) draws a stack ``size + (K, K)``.
    """
    fn = "lkj_corr_cholesky_rng"
    _check_lkj_rng(fn, K, eta)
    K = int(K)
    eta = float(value_of(eta))
    g = as_generator(rng)
    shape = () if size is None else ((size,) if np.ndim(size) == 0 else tuple(size))
    L = np.zeros(shape + (K, K))
    L[..., 0, 0] = 1.0
    rem = np.ones(shape + (K,))          # 1 - sum_{m<i} L_jm^2, per row j
    for i in range(K - 1):
        b = eta + 0.5 * (K - 2 - i)
        p = 2.0 * g.beta(b, b, size=shape + (K - 1 - i,)) - 1.0      # rows j > i
        s = np.sqrt(rem[..., i + 1:])
        L[..., i + 1:, i] = p * s
        rem[..., i + 1:] = rem[..., i + 1:] * (1.0 - p * p)
    idx = np.arange(1, K)
    L[..., idx, idx] = np.sqrt(rem[..., 1:])
    return L


def lkj_corr_rng(K, eta, size=None, rng=None):
    """A K x K correlation matrix from LkjCorr(eta): ``L L^T`` of
    :func:`lkj_corr_cholesky_rng` (C-vine), with the diagonal set to exactly 1."""
    _check_lkj_rng("lkj_corr_rng", K, eta)
    L = lkj_corr_cholesky_rng(K, eta, size=size, rng=rng)
    om = L @ np.swapaxes(L, -1, -2)
    idx = np.arange(int(K))
    om[..., idx, idx] = 1.0
    return om


# --------------------------------------------------------------------------------------
# Wishart and inverse Wishart
# --------------------------------------------------------------------------------------
def _wishart_pieces(fn, W, nu, Sigma, inverse=False):
    """What the Wishart and inverse Wishart densities share: the Cholesky factors L_W
    and L_S, K, log det W and log det Sigma, log Gamma_K(nu/2) (and its derivative's
    thunk), and M = L_S^-1 L_W (L_W^-1 L_S with ``inverse``), whose squared norm is
    the trace term."""
    LW = _chol(fn, "W", W)
    LS = _chol(fn, "Sigma", Sigma)
    K = shape_of(LW)[-1]
    M = sm.mdivide_left_tri_low(LW, LS) if inverse else sm.mdivide_left_tri_low(LS, LW)
    ldw = 2.0 * _log_diag_sum(LW)
    lds = 2.0 * _log_diag_sum(LS)
    lmg, dlmg = _lmgamma(K, 0.5 * nu)
    return LW, LS, K, M, ldw, lds, lmg, dlmg


def _wishart(need, W, nu, Sigma):
    """-nu K/2 log 2 - log Gamma_K(nu/2) - nu/2 log det Sigma
    + (nu - K - 1)/2 log det W - 1/2 tr(Sigma^-1 W),
    tr(Sigma^-1 W) = |L_S^-1 L_W|_F^2.

    d/dW = 1/2 ((nu - K - 1) W^-1 - Sigma^-1);
    d/dSigma = 1/2 (Sigma^-1 W Sigma^-1 - nu Sigma^-1), Sigma^-1 W Sigma^-1 = B B^T,
    B = L_S^-T L_S^-1 L_W;
    d/dnu = -K/2 log 2 - 1/2 sum_j psi(nu/2 - j/2) - 1/2 log det Sigma + 1/2 log det W.
    """
    LW, LS, K, M, ldw, lds, lmg, dlmg = _wishart_pieces("wishart_lpdf", W, nu, Sigma)
    lp = (-0.5 * nu * K * LOG_TWO - lmg - 0.5 * nu * lds + 0.5 * (nu - K - 1.0) * ldw
          - 0.5 * sm.sum(M * M))
    parts = [None, None, None]
    if need[0] or need[2]:
        si = _inv_from_chol(LS)
        if need[0]:
            parts[0] = 0.5 * ((nu - K - 1.0) * _inv_from_chol(LW) - si)
        if need[2]:
            bt = sm.mdivide_right_tri_low(_mT(M), LS)        # B^T
            parts[2] = 0.5 * (_mT(bt) @ bt - nu * si)
    if need[1]:
        parts[1] = -0.5 * K * LOG_TWO - 0.5 * dlmg() - 0.5 * lds + 0.5 * ldw
    return lp, parts


def _inv_wishart(need, W, nu, Sigma):
    """-nu K/2 log 2 - log Gamma_K(nu/2) + nu/2 log det Sigma
    - (nu + K + 1)/2 log det W - 1/2 tr(Sigma W^-1),
    tr(Sigma W^-1) = |L_W^-1 L_S|_F^2.

    d/dW = 1/2 (W^-1 Sigma W^-1 - (nu + K + 1) W^-1), W^-1 Sigma W^-1 = B B^T,
    B = L_W^-T L_W^-1 L_S;  d/dSigma = 1/2 (nu Sigma^-1 - W^-1);
    d/dnu = -K/2 log 2 - 1/2 sum_j psi(nu/2 - j/2) + 1/2 log det Sigma - 1/2 log det W.
    """
    LW, LS, K, M, ldw, lds, lmg, dlmg = _wishart_pieces("inv_wishart_lpdf", W, nu, Sigma,
                                                        inverse=True)
    lp = (-0.5 * nu * K * LOG_TWO - lmg + 0.5 * nu * lds - 0.5 * (nu + K + 1.0) * ldw
          - 0.5 * sm.sum(M * M))
    parts = [None, None, None]
    if need[0] or need[2]:
        wi = _inv_from_chol(LW)
        if need[0]:
            bt = sm.mdivide_right_tri_low(_mT(M), LW)        # B^T
            parts[0] = 0.5 * (_mT(bt) @ bt - (nu + K + 1.0) * wi)
        if need[2]:
            parts[2] = 0.5 * (nu * _inv_from_chol(LS) - wi)
    if need[1]:
        parts[1] = -0.5 * K * LOG_TWO - 0.5 * dlmg() + 0.5 * lds - 0.5 * ldw
    return lp, parts


def _check_wishart(fn):
    def check(W, nu, Sigma):
        K = _square(fn, "W", W)
        _square(fn, "Sigma", Sigma, K)
        _check_nu_dims(fn, nu, K)
        _check_symmetric(fn, "W", W)
        _check_symmetric(fn, "Sigma", Sigma)
    return check


_wishart_node = fused("wishart_lpdf", _wishart, _check_wishart("wishart_lpdf"))
_inv_wishart_node = fused("inv_wishart_lpdf", _inv_wishart, _check_wishart("inv_wishart_lpdf"))


def wishart_lpdf(W, nu, Sigma, *, reduce=True):
    """Wishart log density of a K x K symmetric positive-definite ``W``:

        log Wishart(W | nu, Sigma) = -nu K/2 log 2 - log Gamma_K(nu/2)
            - nu/2 log det Sigma + (nu - K - 1)/2 log det W - 1/2 tr(Sigma^-1 W),

    ``Gamma_K(x) = pi^(K(K-1)/4) prod_{j=1}^K Gamma(x + (1 - j)/2)``; degrees of
    freedom ``nu > K - 1``, scale ``Sigma`` symmetric positive definite (mean
    ``nu Sigma``).

    >>> import numpy as np, stanlite as sl
    >>> round(sl.wishart_lpdf(np.eye(2), 3.0, np.eye(2)), 6)
    -3.531024
    """
    return _out(_wishart_node(_arr(W), _arr(nu), _arr(Sigma), reduce=reduce))


def inv_wishart_lpdf(W, nu, Sigma, *, reduce=True):
    """Inverse-Wishart log density of a K x K symmetric positive-definite ``W``:

        log InvWishart(W | nu, Sigma) = -nu K/2 log 2 - log Gamma_K(nu/2)
            + nu/2 log det Sigma - (nu + K + 1)/2 log det W - 1/2 tr(Sigma W^-1),

    ``nu > K - 1``, ``Sigma`` symmetric positive definite (mean
    ``Sigma / (nu - K - 1)`` for ``nu > K + 1``).

    >>> import numpy as np, stanlite as sl
    >>> round(sl.inv_wishart_lpdf(np.eye(2), 3.0, np.eye(2)), 6)
    -3.531024
    """
    return _out(_inv_wishart_node(_arr(W), _arr(nu), _arr(Sigma), reduce=reduce))


def _bartlett(g, nu, K, shape):
    """Lower-triangular A with A_ii = sqrt(chi2(nu - i)) (0-based i), N(0, 1) below:
    A A^T ~ Wishart(nu, I) (Bartlett decomposition)."""
    A = np.tril(g.standard_normal(shape + (K, K)), -1)
    idx = np.arange(K)
    A[..., idx, idx] = np.sqrt(g.chisquare(nu - idx, size=shape + (K,)))
    return A


def _wishart_rng_args(fn, nu, Sigma, size):
    Sigma = np.asarray(value_of(Sigma), dtype=float)
    K = _square(fn, "Sigma", Sigma)
    nu = np.asarray(value_of(nu), dtype=float)
    _check_nu_dims(fn, nu, K)
    _check_symmetric(fn, "Sigma", Sigma)
    L = _chol(fn, "Sigma", Sigma)
    shape = () if size is None else ((size,) if np.ndim(size) == 0 else tuple(size))
    return float(nu), K, L, shape


def wishart_rng(nu, Sigma, size=None, rng=None):
    """A draw from Wishart(nu, Sigma): ``(L A)(L A)^T`` with ``Sigma = L L^T`` and A
    from the Bartlett decomposition. ``size`` (an extension) draws a stack."""
    nu, K, L, shape = _wishart_rng_args("wishart_rng", nu, Sigma, size)
    X = L @ _bartlett(as_generator(rng), nu, K, shape)
    W = X @ np.swapaxes(X, -1, -2)
    return 0.5 * (W + np.swapaxes(W, -1, -2))


def inv_wishart_rng(nu, Sigma, size=None, rng=None):
    """A draw from InvWishart(nu, Sigma), the inverse of a Wishart(nu, Sigma^-1) draw.
    With ``Sigma = L L^T``, ``Sigma^-1 = L^-T L^-1`` and the Wishart draw
    ``L^-T A A^T L^-1``, so the result is ``(L A^-T)(L A^-T)^T`` (one triangular
    solve, no inverse). ``size`` (an extension) draws a stack."""
    nu, K, L, shape = _wishart_rng_args("inv_wishart_rng", nu, Sigma, size)
    A = _bartlett(as_generator(rng), nu, K, shape)
    out = np.empty(shape + (K, K))
    eye = np.eye(K)
    for i in np.ndindex(*shape):
        ait = solve_triangular(A[i], eye, lower=True).T     # A^-T
        X = L @ ait
        W = X @ X.T
        out[i] = 0.5 * (W + W.T)
    return out


# interpreter lowerings (autodiff/vm): forward and back substitution in the kernel
from ..autodiff.vm.program import deflower as _deflower, mvn_cholesky_rule  # noqa: E402
from . import mvn_sweeps as _mvn_sweeps  # noqa: E402,F401  (MVN_CHOLESKY's sweeps)

_deflower(_multi_normal_cholesky_node, mvn_cholesky_rule)


# --------------------------------------------------------------------------------------
# elementwise forms (``reduce=False``, see :mod:`.fused`): one value per vector
# --------------------------------------------------------------------------------------
def _per_vector(v, y, mu):
    """``v`` (N,) as the batch shape of ``y - mu``: () for one vector."""
    return sm.reshape(v, ()) if len(np.broadcast_shapes(shape_of(y), shape_of(mu))) == 1 \
        else v


def _mvn_terms(y, mu, L):
    """log MultiNormal(y_n | mu_n, L L^T) per vector."""
    R, n, sr = _centered(y, mu)
    K = shape_of(L)[-1]
    Z = sm.mdivide_left_tri_low(L, _mT(R))
    v = -0.5 * sm.sum(Z * Z, axis=0) - _log_diag_sum(L) - K * HALF_LOG_TWO_PI
    return _per_vector(v, y, mu)


@pointwise(_multi_normal_node, broadcast=False)
def _multi_normal_terms(y, mu, Sigma):
    return _mvn_terms(y, mu, _chol("multi_normal_lpdf", "Sigma", Sigma))


pointwise(_multi_normal_cholesky_node, broadcast=False)(_mvn_terms)


@pointwise(_multi_student_t_node, broadcast=False)
def _multi_student_t_terms(y, nu, mu, Sigma):
    return _mst_terms(y, nu, mu, _chol("multi_student_t_lpdf", "Sigma", Sigma))


def _mst_terms(y, nu, mu, L):
    """log MultiStudentT(y_n | nu, mu_n, L L^T) per vector."""
    R, n, sr = _centered(y, mu)
    K = shape_of(L)[-1]
    Z = sm.mdivide_left_tri_low(L, _mT(R))
    hk = 0.5 * (nu + K)
    v = (sm.lgamma(hk) - sm.lgamma(0.5 * nu) - 0.5 * K * (sm.log(nu) + LOG_PI)
         - _log_diag_sum(L) - hk * sm.log1p(sm.sum(Z * Z, axis=0) / nu))
    return _per_vector(v, y, mu)


@pointwise(_dirichlet_node, broadcast=False)
def _dirichlet_terms(theta, alpha):
    batch = np.broadcast_shapes(shape_of(theta)[:-1], shape_of(alpha)[:-1])
    v = (sm.lgamma(sm.sum(alpha, axis=-1)) - sm.sum(sm.lgamma(alpha), axis=-1)
         + sm.sum((alpha - 1.0) * sm.log(theta), axis=-1))
    return full_shape(v, np.zeros(batch))


def _one_value(node):
    """A density of one matrix: its pointwise form is its value (shape ())."""
    pointwise(node, broadcast=False)(node)


for _node in (_lkj_corr_node, _lkj_corr_cholesky_node, _wishart_node, _inv_wishart_node):
    _one_value(_node)
del _node
