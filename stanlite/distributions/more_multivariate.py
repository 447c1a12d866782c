"""More multivariate densities: precision and Cholesky parameterisations, covariance
matrices. Stan's definitions (functions reference):

* ``multi_normal_prec_lpdf(y | mu, Omega)``: the multivariate normal with precision
  ``Omega = Sigma^-1`` (symmetric positive definite). Stan has no ``_rng``.
* ``multi_student_t_cholesky_lpdf(y | nu, mu, L)``: the multivariate Student-t with
  the scale matrix's Cholesky factor (``Sigma = L L^T``); ``_rng(nu, mu, L)``.
* ``lkj_cov_lpdf(W | mu, sigma, eta)``: a covariance matrix ``W`` whose standard
  deviations ``sqrt(W_kk)`` are ``lognormal(mu_k, sigma_k)`` and whose correlation
  matrix ``D^-1 W D^-1`` is ``lkj_corr(eta)`` (``mu``, ``sigma`` vectors or scalars).
  Deprecated in Stan (it has no ``_rng``), kept for the programs that use it.
* ``wishart_cholesky_lpdf(L_W | nu, L_S)``: the density of the Cholesky factor of a
  ``Wishart(nu, L_S L_S^T)`` matrix, ``Wishart(L_W L_W^T | nu, L_S L_S^T) |J|`` with
  ``log |J| = K log 2 + sum_k (K - k + 1) log L_W[k, k]`` (1-based k);
  ``wishart_cholesky_rng(nu, L_S)``.

Shapes, checks and the gradient convention for matrix arguments are those of
:mod:`.multivariate` (``y``, ``mu`` one vector or an (N, K) array of them; the
gradient w.r.t. a symmetric matrix is the symmetric gradient of the formula with
independent entries; a Cholesky factor's gradient is lower triangular). Each density
is one fused node computing its value and closed-form partials from one Cholesky
factorisation. ``reduce=False`` gives one value per vector of ``y``/``mu`` (``()``
for one vector); a density of one matrix gives its one value.

>>> import numpy as np, stanlite as sl
>>> round(sl.multi_normal_prec_lpdf(np.ones(2), np.zeros(2), 2.0 * np.eye(2)), 6)
-3.14473
"""

import numpy as np

from .. import math as sm
from ..autodiff.var import shape_of, value_of
from .fused import check_finite, check_positive, fused, pointwise
from .multivariate import (HALF_LOG_TWO_PI, LOG_TWO, _arr, _bartlett, _centered, _chol,
                           _check_cholesky_factor, _check_nu_dims,
                           _check_scalar, _check_symmetric, _inv_from_chol,
                           _lkj_log_const, _lmgamma, _log_diag_sum, _mst_draws,
                           _mst_kernel, _mst_rng_args, _mst_terms, _mT, _out, _per_vector,
                           _square, _vector_checks)
from .rng import as_generator

__all__ = ["multi_normal_prec_lpdf",
           "multi_student_t_cholesky_lpdf", "multi_student_t_cholesky_rng",
           "lkj_cov_lpdf",
           "wishart_cholesky_lpdf", "wishart_cholesky_rng"]


def _as_rows(g, sr):
    """An (N, K) partial back to the shape ``sr`` of a single vector."""
    return sm.reshape(g, sr) if len(sr) == 1 else g


def _lower_mask(K):
    return np.tril(np.ones((K, K)))


# --------------------------------------------------------------------------------------
# multi_normal_prec
# --------------------------------------------------------------------------------------
def _multi_normal_prec(need, y, mu, Omega):
    """sum_n log N(y_n | mu_n, Omega^-1) = -N K/2 log(2 pi) + N/2 log det Omega
    - 1/2 sum_n r_n^T Omega r_n;  d/dy_n = -Omega r_n = -d/dmu_n,
    d/dOmega = 1/2 (N Omega^-1 - sum_n r_n r_n^T)."""
    L = _chol("multi_normal_prec_lpdf", "Omega", Omega)
    R, n, sr = _centered(y, mu)
    K = shape_of(L)[-1]
    OR = R @ Omega                                      # rows Omega r_n   (N, K)
    lp = -0.5 * sm.sum(R * OR) + n * _log_diag_sum(L) - n * K * HALF_LOG_TWO_PI
    parts = [None, None, None]
    if need[0]:
        parts[0] = -_as_rows(OR, sr)
    if need[1]:
        parts[1] = _as_rows(OR, sr)
    if need[2]:
        parts[2] = 0.5 * (n * _inv_from_chol(L) - _mT(R) @ R)
    return lp, parts


_multi_normal_prec_node = fused("multi_normal_prec_lpdf", _multi_normal_prec,
                                _vector_checks("multi_normal_prec_lpdf", "Omega",
                                               _check_symmetric))


@pointwise(_multi_normal_prec_node, broadcast=False)
def _multi_normal_prec_terms(y, mu, Omega):
    L = _chol("multi_normal_prec_lpdf", "Omega", Omega)
    R, n, sr = _centered(y, mu)
    v = (-0.5 * sm.sum(R * (R @ Omega), axis=1) + _log_diag_sum(L)
         - shape_of(L)[-1] * HALF_LOG_TWO_PI)
    return _per_vector(v, y, mu)


def multi_normal_prec_lpdf(y, mu, Omega, *, reduce=True):
    """Multivariate normal log density with a precision matrix, summed over vectors:

        log MultiNormalPrec(y | mu, Omega) = -K/2 log(2 pi) + 1/2 log det Omega
                                             - 1/2 (y - mu)^T Omega (y - mu)

    ``y``, ``mu``: ``(K,)`` or ``(N, K)``; ``Omega``: ``(K, K)`` symmetric positive
    definite. Equals ``multi_normal_lpdf(y, mu, inv(Omega))`` without the inverse.

    >>> import numpy as np, stanlite as sl
    >>> O = np.array([[2.0, 0.5], [0.5, 1.0]])
    >>> bool(np.isclose(sl.multi_normal_prec_lpdf(np.ones(2), np.zeros(2), O),
    ...                 sl.multi_normal_lpdf(np.ones(2), np.zeros(2), np.linalg.inv(O))))
    True
    """
    return _out(_multi_normal_prec_node(_arr(y), _arr(mu), _arr(Omega), reduce=reduce))


# --------------------------------------------------------------------------------------
# multi_student_t_cholesky
# --------------------------------------------------------------------------------------
def _multi_student_t_cholesky(need, y, nu, mu, L):
    """sum_n log MultiStudentT(y_n | nu, mu_n, L L^T) (the kernel of
    ``multi_student_t_lpdf`` given the factor): with z_n = L^-1 r_n, q_n = |z_n|^2,
    w_n = (nu+K)/(nu+q_n) and a_n = L^-T z_n (= Sigma^-1 r_n), d/dy_n = -w_n a_n =
    -d/dmu_n and d/dL = tril(sum_n w_n a_n z_n^T) - N diag(1/L_kk)."""
    return _mst_kernel(need, y, nu, mu, L, True)


_multi_student_t_cholesky_node = fused("multi_student_t_cholesky_lpdf",
                                       _multi_student_t_cholesky,
                                       _vector_checks("multi_student_t_cholesky_lpdf",
                                                      "L", _check_cholesky_factor))


pointwise(_multi_student_t_cholesky_node, broadcast=False)(_mst_terms)


def multi_student_t_cholesky_lpdf(y, nu, mu, L, *, reduce=True):
    """Multivariate Student-t log density with the scale's Cholesky factor
    (``Sigma = L L^T``), summed over the vectors of ``y``/``mu``:

        log MultiStudentTCholesky(y | nu, mu, L) = lgamma((nu + K)/2) - lgamma(nu/2)
            - K/2 log(nu pi) - sum_k log L_kk
            - (nu + K)/2 log(1 + |L^-1 (y - mu)|^2 / nu)

    ``nu > 0``, ``L`` lower triangular with a positive diagonal. Equals
    ``multi_student_t_lpdf(y, nu, mu, L @ L.T)``; the gradient w.r.t. ``L`` is lower
    triangular.

    >>> import numpy as np, stanlite as sl
    >>> round(sl.multi_student_t_cholesky_lpdf(np.ones(2), 4.0, np.zeros(2), np.eye(2)), 6)
    -3.054272
    """
    return _out(_multi_student_t_cholesky_node(_arr(y), _arr(nu), _arr(mu), _arr(L), reduce=reduce))


def multi_student_t_cholesky_rng(nu, mu, L, rng=None):
    """Draws shaped like ``mu``: ``mu + sqrt(w) L z``, ``w = nu / chi2_nu``."""
    fn = "multi_student_t_cholesky_rng"
    L = np.asarray(value_of(L), dtype=float)
    K = _square(fn, "L", L)
    nu, mu, n = _mst_rng_args(fn, nu, mu, K)
    _check_cholesky_factor(fn, "L", L)
    return _mst_draws(nu, mu, L, n, rng)


# --------------------------------------------------------------------------------------
# lkj_cov
# --------------------------------------------------------------------------------------
def _lkj_cov(need, W, mu, sigma, eta):
    """With h_k = log sqrt(W_kk) (the log standard deviations), z_k = (h_k - mu_k)/sigma_k:

        sum_k [-h_k - log sigma_k - log(2 pi)/2 - z_k^2/2]          (lognormal sds)
        - log c_K(eta) + (eta - 1) (log det W - sum_k log W_kk)     (lkj_corr)

    since log det(D^-1 W D^-1) = log det W - sum_k log W_kk. Partials:
    d/dW = (eta - 1)(W^-1 - diag(1/W_kk)) - diag((1 + z_k/sigma_k) / (2 W_kk)),
    d/dmu = z/sigma, d/dsigma = (z^2 - 1)/sigma, d/deta = d(-log c_K) + log det corr.
    """
    L = _chol("lkj_cov_lpdf", "W", W)
    K = shape_of(L)[-1]
    d = sm.diagonal(W)
    ld = sm.log(d)
    h = 0.5 * ld
    inv_s = 1.0 / sigma
    z = (h - mu) * inv_s
    ls = sm.log(sigma) + np.zeros(K)
    ldc = 2.0 * _log_diag_sum(L) - sm.sum(ld)              # log det of the correlation
    c, dc = _lkj_log_const(eta, K)
    lp = (sm.sum(-h - ls - 0.5 * z * z) - K * HALF_LOG_TWO_PI + c + (eta - 1.0) * ldc)
    parts = [None, None, None, None]
    if need[0]:
        diag = -(1.0 + z * inv_s) / (2.0 * d) - (eta - 1.0) / d
        parts[0] = (eta - 1.0) * _inv_from_chol(L) + sm.diag_matrix(diag)
    if need[1]:
        parts[1] = z * inv_s
    if need[2]:
        parts[2] = (z * z - 1.0) * inv_s
    if need[3]:
        parts[3] = dc() + ldc
    return lp, parts


def _check_lkj_cov(W, mu, sigma, eta):
    fn = "lkj_cov_lpdf"
    K = _square(fn, "W", W)
    for arg, v in (("mu", mu), ("sigma", sigma)):
        if np.shape(v) not in ((), (K,)):
            raise ValueError(f"{fn}: {arg} must be a scalar or have shape ({K},) (one "
                             f"per row of W), got shape {np.shape(v)}")
    check_finite(fn, "mu", mu)
    check_positive(fn, "sigma", sigma)
    _check_scalar(fn, "eta", eta)
    _check_symmetric(fn, "W", W)


_lkj_cov_node = fused("lkj_cov_lpdf", _lkj_cov, _check_lkj_cov)


def lkj_cov_lpdf(W, mu, sigma, eta, *, reduce=True):
    """LKJ log density of a covariance matrix with lognormal standard deviations:

        log LkjCov(W | mu, sigma, eta) = sum_k log LogNormal(sqrt(W_kk) | mu_k, sigma_k)
                                         + log LkjCorr(D^-1 W D^-1 | eta),

    ``D = diag(sqrt(W_kk))``; ``W`` symmetric positive definite, ``mu`` finite and
    ``sigma > 0`` (each a scalar or one per dimension), ``eta > 0``. As Stan's, the
    density multiplies the two without the Jacobian of ``W -> (sds, correlation)``;
    Stan deprecates it in favour of separate ``lkj_corr`` and ``lognormal`` statements.

    >>> import numpy as np, stanlite as sl
    >>> W = np.array([[4.0, 1.0], [1.0, 1.0]])
    >>> C = np.array([[1.0, 0.5], [0.5, 1.0]])
    >>> bool(np.isclose(sl.lkj_cov_lpdf(W, 0.0, 1.0, 2.0),
    ...                 sl.lognormal_lpdf(np.array([2.0, 1.0]), 0.0, 1.0)
    ...                 + sl.lkj_corr_lpdf(C, 2.0)))
    True
    """
    return _out(_lkj_cov_node(_arr(W), _arr(mu), _arr(sigma), _arr(eta), reduce=reduce))


# --------------------------------------------------------------------------------------
# wishart_cholesky
# --------------------------------------------------------------------------------------
def _wishart_cholesky(need, LW, nu, LS):
    """K log 2 (1 - nu/2) - log Gamma_K(nu/2) + sum_k (nu - k) log LW_kk
    - nu sum_k log LS_kk - 1/2 |M|_F^2,  M = LS^-1 LW  (1-based k).

    d/dLW = diag((nu - k)/LW_kk) - tril(LS^-T M);
    d/dLS = tril(LS^-T M M^T) - nu diag(1/LS_kk);
    d/dnu = -K/2 log 2 - 1/2 sum_j psi(nu/2 - j/2) + sum log LW_kk - sum log LS_kk.
    """
    K = shape_of(LW)[-1]
    M = sm.mdivide_left_tri_low(LS, LW)
    dw = sm.diagonal(LW)
    ldw = sm.log(dw)
    lds = _log_diag_sum(LS)
    lmg, dlmg = _lmgamma(K, 0.5 * nu)
    k = np.arange(1, K + 1, dtype=float)
    lp = (K * LOG_TWO * (1.0 - 0.5 * nu) - lmg + sm.sum((nu - k) * ldw) - nu * lds
          - 0.5 * sm.sum(M * M))
    parts = [None, None, None]
    if need[0] or need[2]:
        mask = _lower_mask(K)
        B = _mT(sm.mdivide_right_tri_low(_mT(M), LS))      # LS^-T M
        if need[0]:
            parts[0] = sm.diag_matrix((nu - k) / dw) - mask * B
        if need[2]:
            parts[2] = mask * (B @ _mT(M)) - nu * sm.diag_matrix(1.0 / sm.diagonal(LS))
    if need[1]:
        parts[1] = -0.5 * K * LOG_TWO - 0.5 * dlmg() + sm.sum(ldw) - lds
    return lp, parts


def _check_wishart_cholesky(LW, nu, LS):
    fn = "wishart_cholesky_lpdf"
    K = _square(fn, "L_W", LW)
    _square(fn, "L_S", LS, K)
    _check_nu_dims(fn, nu, K)
    _check_cholesky_factor(fn, "L_W", LW)
    _check_cholesky_factor(fn, "L_S", LS)


_wishart_cholesky_node = fused("wishart_cholesky_lpdf", _wishart_cholesky,
                               _check_wishart_cholesky)
# densities of one matrix: the pointwise form is the one value
for _node in (_lkj_cov_node, _wishart_cholesky_node):
    pointwise(_node, broadcast=False)(_node)
del _node


def wishart_cholesky_lpdf(L_W, nu, L_S, *, reduce=True):
    """Log density of the Cholesky factor ``L_W`` of a Wishart matrix:

        log WishartCholesky(L_W | nu, L_S) = log Wishart(L_W L_W^T | nu, L_S L_S^T)
            + K log 2 + sum_k (K - k + 1) log L_W[k, k]

    (1-based k; the second line is the log Jacobian of ``L -> L L^T``). ``nu > K - 1``;
    ``L_W``, ``L_S`` lower triangular with positive diagonals. The gradients w.r.t.
    both factors are lower triangular.

    >>> import numpy as np, stanlite as sl
    >>> round(sl.wishart_cholesky_lpdf(np.eye(2), 3.0, np.eye(2)), 6)
    -2.14473
    """
    return _out(_wishart_cholesky_node(_arr(L_W), _arr(nu), _arr(L_S), reduce=reduce))


def wishart_cholesky_rng(nu, L_S, size=None, rng=None):
    """The Cholesky factor of a Wishart(nu, L_S L_S^T) draw: ``L_S A`` with ``A`` the
    Bartlett factor (lower triangular, positive diagonal). ``size`` (an extension)
    draws a stack ``size + (K, K)``."""
    fn = "wishart_cholesky_rng"
    L_S = np.asarray(value_of(L_S), dtype=float)
    K = _square(fn, "L_S", L_S)
    nu = np.asarray(value_of(nu), dtype=float)
    _check_nu_dims(fn, nu, K)
    _check_cholesky_factor(fn, "L_S", L_S)
    shape = () if size is None else ((size,) if np.ndim(size) == 0 else tuple(size))
    return L_S @ _bartlett(as_generator(rng), float(nu), K, shape)
