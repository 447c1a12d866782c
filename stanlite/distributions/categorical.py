"""Distributions over categories: ``categorical`` (probabilities ``theta``, a
simplex), ``categorical_logit`` (log-odds ``beta``) and ``multinomial`` (a count
vector).

Categories are **1-based** (``1..K``), exactly as in Stan. ``categorical_lpmf(y,
theta)`` takes an int or an int array of outcomes and sums their log masses (the
counts of each category times ``log theta``); ``multinomial_lpmf(y, theta)`` is the
log mass of one count vector. The probability vector is checked as a simplex
(non-negative, summing to 1 within ``SIMPLEX_TOL``). One fused node each
(:mod:`.fused`); draws with ``_rng``.

>>> import numpy as np, stanlite as sl
>>> round(sl.categorical_lpmf(np.array([1, 3, 3]), np.array([0.2, 0.3, 0.5])), 6)
-2.995732
"""

import numpy as np
import scipy.special as sps

from .. import math as sm
from ..autodiff.var import value_of
from .discrete import (_check_category, _check_simplex, _idata, _int_draws, _pointwise, _quiet,
                       _rng_ints, _size, _xdiv, _xlog)
from .fused import check_finite, check_integer, fused
from .rng import as_generator

__all__ = ["categorical_lpmf", "categorical_rng", "categorical_logit_lpmf",
           "categorical_logit_rng", "multinomial_lpmf", "multinomial_rng"]


# ======================================================================================
# categorical and multinomial (1-based categories, as in Stan)
# ======================================================================================
def _counts(y, K):
    y = np.asarray(value_of(y), dtype=np.int64).ravel()
    return np.bincount(y - 1, minlength=K).astype(float)


@_quiet
def _categorical(need, y, theta):
    """log Categorical(y | theta) = sum_i log theta[y_i]  (y_i in 1..K);
    with counts c_k: sum_k c_k log theta_k,  d/dtheta_k = c_k / theta_k."""
    c = _counts(y, _size(theta))
    return sm.sum(_xlog(c, theta)), [None, _xdiv(c, theta) if need[1] else None]


@_quiet
def _categorical_logit(need, y, beta):
    """log CategoricalLogit(y | beta) = sum_i (beta[y_i] - log_sum_exp(beta));
    d/dbeta = c - n softmax(beta)."""
    K = _size(beta)
    c = _counts(y, K)
    n = float(np.sum(c))
    lse = sm.log_sum_exp(beta)
    lp = sm.sum(c * beta) - n * lse
    return lp, [None, c - n * sm.exp(beta - lse) if need[1] else None]


def _check_categorical(y, theta):
    fn = "categorical_lpmf"
    _check_simplex(fn, "theta", theta)
    _check_category(fn, "y", y, np.size(theta))


def _check_categorical_logit(y, beta):
    fn = "categorical_logit_lpmf"
    b = np.asarray(beta)
    if b.ndim != 1 or b.size == 0:
        raise ValueError(f"{fn}: beta must be a non-empty vector, but has shape {b.shape}")
    check_finite(fn, "beta", b)
    _check_category(fn, "y", y, b.size)


categorical_lpmf = fused("categorical_lpmf", _categorical, _check_categorical, nondiff=(0,))
categorical_lpmf.__doc__ = """Categorical log mass, summed over the outcomes ``y`` (int or int array).

    Categorical(y | theta) = theta[y],  y in 1..K (1-based, as in Stan), theta a
    K-simplex.

    >>> import stanlite as sl
    >>> round(sl.categorical_lpmf(2, [0.25, 0.75]), 6)
    -0.287682
    """
categorical_logit_lpmf = fused("categorical_logit_lpmf", _categorical_logit,
                               _check_categorical_logit, nondiff=(0,))
categorical_logit_lpmf.__doc__ = """Categorical log mass with log-odds ``beta``, summed.

    CategoricalLogit(y | beta) = Categorical(y | softmax(beta)),  y in 1..K (1-based).

    >>> import stanlite as sl
    >>> round(sl.categorical_logit_lpmf([1, 2], [0.0, 0.0]), 6)
    -1.386294
    """


def _draw_categorical(g, p, size):
    """1-based category draws from the probability vector ``p`` by inverse CDF."""
    cdf = np.cumsum(p)
    u = g.random(size) * cdf[-1]
    return np.minimum(np.searchsorted(cdf, u, side="right"), p.size - 1) + 1


def categorical_rng(theta, rng=None, *, size=None):
    """Categorical(theta) draws in 1..K (an int; an int array of ``size`` if given)."""
    theta = np.asarray(value_of(theta), dtype=float)
    _check_simplex("categorical_rng", "theta", theta)
    return _int_draws(_draw_categorical(as_generator(rng), theta, size))


def categorical_logit_rng(beta, rng=None, *, size=None):
    """CategoricalLogit(beta) draws in 1..K (an int; an int array of ``size`` if given)."""
    beta = np.asarray(value_of(beta), dtype=float)
    check_finite("categorical_logit_rng", "beta", beta)
    p = np.exp(beta - np.max(beta))
    return _int_draws(_draw_categorical(as_generator(rng), p / p.sum(), size))


# --------------------------------------------------------------------------------------
@_quiet
def _multinomial(need, y, theta):
    """log Multinomial(y | theta) = lgamma(N + 1) - sum_k lgamma(y_k + 1) + sum_k y_k log
    theta_k,  N = sum_k y_k;  d/dtheta_k = y_k / theta_k."""
    y = np.asarray(_idata(y), dtype=float)
    base = float(sps.gammaln(y.sum() + 1.0) - sps.gammaln(y + 1.0).sum())
    return base + sm.sum(_xlog(y, theta)), [None, _xdiv(y, theta) if need[1] else None]


def _check_multinomial(y, theta):
    fn = "multinomial_lpmf"
    _check_simplex(fn, "theta", theta)
    check_integer(fn, "y", y, 0)
    if np.shape(y) != np.shape(theta):
        raise ValueError(f"{fn}: y must have the size of theta ({np.size(theta)}), "
                         f"but has shape {np.shape(y)}")


multinomial_lpmf = fused("multinomial_lpmf", _multinomial, _check_multinomial, nondiff=(0,))
multinomial_lpmf.__doc__ = """Multinomial log mass of the count vector ``y``.

    Multinomial(y | theta) = N! / prod_k y_k! prod_k theta_k^y_k,  N = sum_k y_k,
    y_k >= 0, theta a K-simplex.

    >>> import stanlite as sl
    >>> round(sl.multinomial_lpmf([1, 2], [0.5, 0.5]), 6)
    -0.980829
    """


def multinomial_rng(theta, N, rng=None):
    """One Multinomial(N, theta) count vector (an int array of theta's size)."""
    theta = np.asarray(value_of(theta), dtype=float)
    _check_simplex("multinomial_rng", "theta", theta)
    N = int(_rng_ints("multinomial_rng", "N", N))
    return np.asarray(as_generator(rng).multinomial(N, theta / theta.sum()), dtype=np.int64)


@_pointwise(categorical_lpmf, broadcast=False)
def _categorical_terms(y, theta):
    """One value per outcome (the shape of ``y``)."""
    y = np.asarray(value_of(y), dtype=np.int64)
    return sm.log(theta[y - 1])     # (indexed first: no log of a zero not chosen)


@_pointwise(categorical_logit_lpmf, broadcast=False)
def _categorical_logit_terms(y, beta):
    y = np.asarray(value_of(y), dtype=np.int64)
    return beta[y - 1] - sm.log_sum_exp(beta)


@_pointwise(multinomial_lpmf, broadcast=False)
def _multinomial_terms(y, theta):
    """One count vector: the value itself (shape ())."""
    return multinomial_lpmf(y, theta)
