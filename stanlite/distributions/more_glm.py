"""Two more fused GLMs with Stan's argument order and shapes (see :mod:`.glm`)::

    categorical_logit_glm_lpmf(y | x, alpha, beta)
    neg_binomial_2_log_glm_lpmf(y | x, alpha, beta, phi)

``categorical_logit_glm``: ``y`` categories in ``1..C`` (1-based, an int or (N,)),
``x`` the (N, K) design matrix or one (K,) row shared by every outcome, ``alpha`` the
(C,) intercepts, ``beta`` the (K, C) coefficients; the linear predictor of row n is
``x_n beta + alpha`` (C,) and ``y_n ~ categorical_logit`` of it. With ``R`` the
(N, C) matrix ``onehot(y) - softmax(eta)`` (``d lp / d eta``): ``d/dbeta = x^T R``,
``d/dalpha = sum_n R_n``, ``d/dx = R beta^T``.

``neg_binomial_2_log_glm``: ``y`` counts (an int or (N,)), ``x`` (N, K), ``alpha``
a scalar or (N,), ``beta`` (K,), ``phi`` > 0 a scalar or (N,); ``y_n ~
neg_binomial_2_log(alpha_n + x_n beta, phi_n)``. The elementwise value and partials
are those of :func:`~stanlite.neg_binomial_2_log_lpmf` (no ``exp(eta)`` overflow);
the linear-predictor partial is carried to ``x``, ``alpha`` and ``beta`` as in every
GLM.

``reduce=False`` gives one value per outcome (per row of ``x``) instead of the sum.

>>> import numpy as np, stanlite as sl
>>> x = np.array([[1.0, 0.5], [-0.3, 2.0]])
>>> beta = np.array([[0.2, -0.1, 0.4], [0.0, 0.3, -0.2]])
>>> round(sl.categorical_logit_glm_lpmf(np.array([1, 3]), x, np.zeros(3), beta), 6)
-2.835027
>>> round(sl.categorical_logit_lpmf(1, x[0] @ beta)
...       + sl.categorical_logit_lpmf(3, x[1] @ beta), 6)
-2.835027
"""

import numpy as np

from .. import math as sm
from ..autodiff.var import Box, guarded, shape_of, value_of
from .counts import _neg_binomial_2_log, neg_binomial_2_log_lpmf
from .discrete import _check_category
from .fused import check_finite, check_positive, fp_ignored, fused, pointwise
from .glm import _check_count, _check_shapes, _lazy_finite, _linear_parts, _per_row

__all__ = ["categorical_logit_glm_lpmf", "neg_binomial_2_log_glm_lpmf"]


# ======================================================================================
# categorical_logit_glm
# ======================================================================================
def _outcome_counts(y, n_rows, C):
    """(n_rows, C) counts: row n holds a 1 at y_n (x a matrix), or the counts of all
    outcomes (x one shared row)."""
    y = np.asarray(value_of(y), dtype=np.int64)
    Y = np.zeros((n_rows, C))
    if n_rows == 1:
        Y[0] = np.bincount(y.ravel() - 1, minlength=C)
    else:
        Y[np.arange(n_rows), np.broadcast_to(y, (n_rows,)) - 1] = 1.0
    return Y


def _categorical_logit_glm(need, y, x, alpha, beta):
    """sum_n (eta_n[y_n] - log_sum_exp(eta_n)),  eta = x beta + alpha  (N, C);
    R = onehot(y) - n_row softmax(eta) = d lp / d eta."""
    one_row = len(shape_of(x)) == 1
    X = sm.reshape(x, (1, -1)) if one_row else x
    C = shape_of(beta)[1]
    with fp_ignored():
        eta = sm.matmul(X, beta) + alpha
        Y = _outcome_counts(y, shape_of(eta)[0], C)
        n_row = Y.sum(axis=1)
        m = np.max(np.asarray(value_of(eta)), axis=1, keepdims=True)   # (a constant)
        e = sm.exp(eta - m)
        s = sm.sum(e, axis=1)
        lse = sm.log(s) + m[:, 0]
        lp = sm.sum(Y * eta) - sm.sum(n_row * lse)
        if not isinstance(lp, Box) and not np.isfinite(lp):
            _lazy_finite("categorical_logit_glm_lpmf", lp,
                         (("x", x), ("alpha", alpha), ("beta", beta)))
        parts = [None] * 4
        if need[1] or need[2] or need[3]:
            R = Y - sm.reshape(n_row / s, (-1, 1)) * e
            if need[1]:
                gx = sm.matmul(R, sm.swapaxes(beta, 0, 1))
                parts[1] = sm.reshape(gx, (-1,)) if one_row else gx
            if need[2]:
                parts[2] = sm.sum(R, axis=0)
            if need[3]:
                parts[3] = sm.matmul(sm.swapaxes(X, 0, 1), R)
    return lp, parts


def _check_categorical_logit_glm(y, x, alpha, beta):
    fn = "categorical_logit_glm_lpmf"
    xs, bs, als = np.shape(x), np.shape(beta), np.shape(alpha)
    if len(xs) not in (1, 2):
        raise ValueError(f"{fn}: x must be an (N, K) matrix or a (K,) row, but has "
                         f"shape {xs}")
    K = xs[-1]
    if len(bs) != 2 or bs[0] != K:
        raise ValueError(f"{fn}: beta must have shape ({K}, C) to match x {xs}, but has "
                         f"shape {bs}")
    C = bs[1]
    if als != (C,):
        raise ValueError(f"{fn}: alpha must have shape ({C},) (one intercept per "
                         f"category of beta), but has shape {als}")
    ys = np.shape(y)
    if len(xs) == 2 and ys not in ((), (xs[0],)):
        raise ValueError(f"{fn}: y must be an int or have shape ({xs[0]},) (one per row "
                         f"of x), but has shape {ys}")
    _check_category(fn, "y", y, C)


categorical_logit_glm_lpmf = fused("categorical_logit_glm_lpmf", _categorical_logit_glm,
                                   _check_categorical_logit_glm, nondiff=(0,))
categorical_logit_glm_lpmf.__doc__ = """Multi-logit regression log mass, one fused node.

    categorical_logit_glm(y | x, alpha, beta) = prod_n CategoricalLogit(y_n | alpha + x_n beta)

    ``y`` in 1..C (an int or (N,)), ``x`` (N, K) or one (K,) row, ``alpha`` (C,),
    ``beta`` (K, C). Equals ``sum_n categorical_logit_lpmf(y_n, alpha + x_n @ beta)``.

    >>> import numpy as np, stanlite as sl
    >>> round(sl.categorical_logit_glm_lpmf(2, np.array([1.0, -1.0]), np.zeros(2),
    ...                                     np.array([[0.5, 0.0], [0.0, 0.5]])), 6)
    -1.313262
    """


@pointwise(categorical_logit_glm_lpmf, broadcast=False)
def _categorical_logit_glm_terms(y, x, alpha, beta):
    """One log mass per outcome: log_softmax(x_n beta + alpha)[y_n] (shape of y, or
    (N,) for one y and an (N, K) x); the finite checks the summed kernel defers run
    first, in its order."""
    x, alpha, beta = (_f64_or_traced(a) for a in (x, alpha, beta))
    for name, v in (("x", x), ("alpha", alpha), ("beta", beta)):
        # (guarded: a compiled replay checks again)
        guarded(check_finite, "categorical_logit_glm_lpmf", name, v)
    one_row = len(shape_of(x)) == 1
    eta = sm.matmul(sm.reshape(x, (1, -1)) if one_row else x, beta) + alpha
    ls = eta - sm.log_sum_exp(eta, axis=1, keepdims=True)
    y = np.asarray(value_of(y), dtype=np.int64)
    if one_row:
        return ls[np.zeros(y.shape, np.int64), y - 1]
    n = shape_of(eta)[0]
    return ls[np.arange(n), np.broadcast_to(y, (n,)) - 1]


def _f64_or_traced(a):
    return a if isinstance(a, Box) else np.asarray(a, dtype=float)


# ======================================================================================
# neg_binomial_2_log_glm
# ======================================================================================
def _neg_binomial_2_log_glm(need, y, x, alpha, beta, phi):
    """sum_n log NegBinomial2Log(y_n | eta_n, phi_n), eta = alpha + x beta; the
    elementwise kernel gives r = d lp / d eta and d/dphi."""
    lin = need[1] or need[2] or need[3]
    with fp_ignored():
        eta = sm.matmul(x, beta) + alpha
        lp, (_, r, dphi) = _neg_binomial_2_log((False, lin, need[4]), y, eta, phi)
        if not isinstance(lp, Box) and not np.isfinite(lp):
            _lazy_finite("neg_binomial_2_log_glm_lpmf", lp,
                         (("x", x), ("alpha", alpha), ("beta", beta)))
        parts = [None] * 5
        if lin:
            _linear_parts(parts, need, r, x, alpha, beta)
        if need[4]:
            parts[4] = dphi if shape_of(phi) != () else sm.sum(dphi)
    return lp, parts


def _check_neg_binomial_2_log_glm(y, x, alpha, beta, phi):
    fn = "neg_binomial_2_log_glm_lpmf"
    N = _check_shapes(fn, y, x, alpha, beta)
    ps = np.shape(phi)
    if ps not in ((), (N,)):
        raise ValueError(f"{fn}: phi must be a scalar or have shape ({N},) (one per row "
                         f"of x), but has shape {ps}")
    _check_count(fn, y)
    check_positive(fn, "phi", phi)


neg_binomial_2_log_glm_lpmf = fused("neg_binomial_2_log_glm_lpmf", _neg_binomial_2_log_glm,
                                    _check_neg_binomial_2_log_glm, nondiff=(0,))
neg_binomial_2_log_glm_lpmf.__doc__ = """Negative binomial log-linear regression, one fused node.

    neg_binomial_2_log_glm(y | x, alpha, beta, phi)
        = prod_n NegBinomial2Log(y_n | alpha_n + x_n . beta, phi_n)

    ``y`` counts >= 0 (an int or (N,)), ``x`` (N, K), ``alpha`` scalar or (N,), ``beta``
    (K,), ``phi`` > 0 scalar or (N,). Equals
    ``neg_binomial_2_log_lpmf(y, alpha + x @ beta, phi)``.

    >>> import numpy as np, stanlite as sl
    >>> x = np.array([[1.0, 2.0], [0.5, -1.0]])
    >>> round(sl.neg_binomial_2_log_glm_lpmf([3, 0], x, 0.1, np.array([0.2, 0.1]), 2.0), 6)
    -3.079138
    """


# one value per row: neg_binomial_2_log_lpmf's pointwise form at the linear predictor
_per_row(neg_binomial_2_log_glm_lpmf, neg_binomial_2_log_lpmf, ("x", "alpha", "beta"))
