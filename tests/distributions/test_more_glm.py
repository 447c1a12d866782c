"""categorical_logit_glm and neg_binomial_2_log_glm: values against scipy/numpy and
against the composed (non-GLM) densities, gradients w.r.t. every real argument (x
included) and nested AD against finite differences, shapes, domain errors."""

import numpy as np
import pytest
import scipy.stats as st
from scipy.special import log_softmax

import stanlite as sl


# --------------------------------------------------------------------------------------
# categorical_logit_glm
# --------------------------------------------------------------------------------------
def _cat_ref(y, x, alpha, beta):
    eta = np.atleast_2d(x) @ beta + alpha
    ls = log_softmax(eta, axis=-1)
    y = np.asarray(y)
    if np.ndim(x) == 1:
        return ls[0, y - 1]
    return ls[np.arange(len(ls)), np.broadcast_to(y, (len(ls),)) - 1]


def _cat_args(rng, N=6, K=3, C=4, one_row=False, y_scalar=False):
    x = rng.normal(size=K if one_row else (N, K))
    y = 2 if y_scalar else rng.integers(1, C + 1, N)
    return (y, x, rng.normal(size=C) * 0.5, rng.normal(size=(K, C)) * 0.7)


@pytest.mark.parametrize("variant", [{}, {"one_row": True}, {"y_scalar": True},
                                     {"one_row": True, "y_scalar": True}, {"C": 2}])
def test_categorical_logit_glm(check, rng, variant):
    args = _cat_args(rng, **variant)
    check.all(sl.categorical_logit_glm_lpmf, _cat_ref, args, (1, 2, 3))
    y, x, alpha, beta = args
    n = max(np.size(y), len(np.atleast_2d(x)))
    rows = np.broadcast_to(np.atleast_2d(x), (n, x.shape[-1]))
    composed = sum(sl.categorical_logit_lpmf(int(yy), xx @ beta + alpha)
                   for yy, xx in zip(np.broadcast_to(y, (n,)), rows))
    assert np.isclose(sl.categorical_logit_glm_lpmf(*args), composed, rtol=1e-12)


@pytest.mark.parametrize("variant", [{}, {"one_row": True}, {"y_scalar": True},
                                     {"one_row": True, "y_scalar": True}])
def test_categorical_logit_glm_pointwise(check, rng, variant):
    args = _cat_args(rng, **variant)
    check.pointwise(sl.categorical_logit_glm_lpmf, _cat_ref, args, (1, 2, 3))


def test_categorical_logit_glm_closed_form_gradient(rng):
    y, x, alpha, beta = _cat_args(rng, N=40, K=5, C=3)
    v, (gx, ga, gb) = sl.value_and_grad(sl.categorical_logit_glm_lpmf, (1, 2, 3))(
        y, x, alpha, beta)
    eta = x @ beta + alpha
    R = np.eye(3)[y - 1] - np.exp(log_softmax(eta, axis=1))
    np.testing.assert_allclose(gb, x.T @ R, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(ga, R.sum(0), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gx, R @ beta.T, rtol=1e-10, atol=1e-12)


def test_categorical_logit_glm_extremes():
    # a predictor of 1000: log_softmax without overflow
    x = np.array([[1000.0], [-1000.0]])
    beta = np.array([[1.0, 0.0]])
    v = sl.categorical_logit_glm_lpmf(np.array([2, 2]), x, np.zeros(2), beta)
    assert np.isclose(v, -1000.0)


def test_categorical_logit_glm_checks(check, rng):
    y, x, alpha, beta = _cat_args(rng)
    fn = sl.categorical_logit_glm_lpmf
    check.domain(fn, (y, x, alpha, beta), 0, np.full(6, 5), r"y\[0\] must be a category in 1..4")
    check.domain(fn, (y, x, alpha, beta), 0, 0, "y")
    for reduce in (True, False):
        with pytest.raises(sl.DomainError, match="categorical_logit_glm_lpmf: beta"):
            fn(y, x, alpha, np.full((3, 4), np.inf), reduce=reduce)
    with pytest.raises(ValueError, match=r"alpha must have shape \(4,\)"):
        fn(y, x, np.zeros(3), beta)
    with pytest.raises(ValueError, match=r"beta must have shape \(3, C\)"):
        fn(y, x, alpha, np.zeros((2, 4)))
    with pytest.raises(ValueError, match=r"y must be an int or have shape \(6,\)"):
        fn(y[:3], x, alpha, beta)
    with pytest.raises(sl.DifferentiationError):
        sl.grad(lambda yy: fn(yy, x, alpha, beta))(np.ones(6))


# --------------------------------------------------------------------------------------
# neg_binomial_2_log_glm
# --------------------------------------------------------------------------------------
def _nb_ref(y, x, alpha, beta, phi):
    mu = np.exp(x @ beta + alpha)
    return st.nbinom.logpmf(y, phi, phi / (mu + phi))


def _nb_args(rng, N=7, K=3, alpha_vec=False, phi_vec=False, y_scalar=False):
    x = rng.normal(size=(N, K))
    beta = rng.normal(size=K) * 0.5
    alpha = rng.normal(size=N) * 0.3 if alpha_vec else 0.4
    phi = rng.uniform(0.5, 4.0, N) if phi_vec else 2.3
    y = 3 if y_scalar else rng.poisson(2.0, N)
    return (y, x, alpha, beta, phi)


@pytest.mark.parametrize("variant", [{}, {"alpha_vec": True}, {"phi_vec": True},
                                     {"y_scalar": True},
                                     {"alpha_vec": True, "phi_vec": True}])
def test_neg_binomial_2_log_glm(check, rng, variant):
    args = _nb_args(rng, **variant)
    check.all(sl.neg_binomial_2_log_glm_lpmf, _nb_ref, args, (1, 2, 3, 4))
    y, x, alpha, beta, phi = args
    assert np.isclose(sl.neg_binomial_2_log_glm_lpmf(*args),
                      sl.neg_binomial_2_log_lpmf(y, x @ beta + alpha, phi), rtol=1e-12)


@pytest.mark.parametrize("variant", [{}, {"alpha_vec": True, "phi_vec": True},
                                     {"y_scalar": True}])
def test_neg_binomial_2_log_glm_pointwise(check, rng, variant):
    args = _nb_args(rng, **variant)
    check.pointwise(sl.neg_binomial_2_log_glm_lpmf, _nb_ref, args, (1, 2, 3, 4))
    assert np.shape(sl.neg_binomial_2_log_glm_lpmf(*args, reduce=False)) == (7,)


def test_neg_binomial_2_log_glm_large_predictor():
    # exp(800) overflows; the log1p_exp form does not
    x = np.array([[800.0]])
    v = sl.neg_binomial_2_log_glm_lpmf([2], x, 0.0, np.array([1.0]), 1.5)
    assert np.isfinite(v)
    assert np.isclose(v, sl.neg_binomial_2_log_lpmf(2, 800.0, 1.5), rtol=1e-12)


def test_neg_binomial_2_log_glm_checks(check, rng):
    args = _nb_args(rng)
    fn = sl.neg_binomial_2_log_glm_lpmf
    check.domain(fn, args, 4, -1.0, "neg_binomial_2_log_glm_lpmf: phi")
    check.domain(fn, args, 0, np.full(7, -1), "y")
    check.domain(fn, args, 0, np.full(7, 1.5), "y")
    for reduce in (True, False):
        with pytest.raises(sl.DomainError, match="neg_binomial_2_log_glm_lpmf: beta"):
            fn(args[0], args[1], args[2], np.array([np.nan, 0.0, 0.0]), args[4],
               reduce=reduce)
    with pytest.raises(ValueError, match=r"phi must be a scalar or have shape \(7,\)"):
        fn(*args[:4], np.ones(3))
    with pytest.raises(ValueError, match=r"beta must have shape \(3,\)"):
        fn(*args[:3], np.ones(2), args[4])
