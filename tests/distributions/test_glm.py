"""Fused GLMs: value and gradient against the composed (non-fused) form and against
numpy, gradients w.r.t. every real argument (x included) against finite differences,
nested AD (JVP, Hessian), shapes of alpha/sigma/y, stable extremes, checks."""

import numpy as np
import pytest
import scipy.stats as st
from scipy.special import expit

import stanlite as sl
from stanlite.distributions import glm as glm_module


def _data(rng, N=7, K=3):
    x = rng.normal(size=(N, K))
    beta = rng.normal(size=K) * 0.5
    return x, beta


# composed references: the same model from the elementwise fused densities
def _normal_composed(y, x, alpha, beta, sigma):
    return sl.normal_lpdf(y, x @ beta + alpha, sigma)


def _bern_composed(y, x, alpha, beta):
    return sl.bernoulli_logit_lpmf(y, x @ beta + alpha)


def _pois_composed(y, x, alpha, beta):
    return sl.poisson_log_lpmf(y, x @ beta + alpha)


def _normal_ref(y, x, alpha, beta, sigma):
    return st.norm.logpdf(y, x @ beta + alpha, sigma)


def _bern_ref(y, x, alpha, beta):
    return st.bernoulli.logpmf(y, expit(x @ beta + alpha))


def _pois_ref(y, x, alpha, beta):
    return st.poisson.logpmf(y, np.exp(x @ beta + alpha))


def _glm_args(rng, family, N=7, K=3, alpha_vec=False, sigma_vec=False, y_scalar=False):
    x, beta = _data(rng, N, K)
    alpha = rng.normal(size=N) * 0.3 if alpha_vec else 0.4
    if family == "normal":
        y = 0.7 if y_scalar else rng.normal(size=N)
        sigma = rng.uniform(0.5, 2.0, N) if sigma_vec else 1.3
        return (y, x, alpha, beta, sigma), (0, 1, 2, 3, 4)
    if family == "bernoulli":
        y = 1 if y_scalar else rng.integers(0, 2, N)
    else:
        y = 2 if y_scalar else rng.poisson(2.0, N)
    return (y, x, alpha, beta), (1, 2, 3)


FAMILIES = {
    "normal": (sl.normal_id_glm_lpdf, _normal_composed, _normal_ref),
    "bernoulli": (sl.bernoulli_logit_glm_lpmf, _bern_composed, _bern_ref),
    "poisson": (sl.poisson_log_glm_lpmf, _pois_composed, _pois_ref),
}


VARIANTS = [(f, v) for f in FAMILIES
            for v in ({}, {"alpha_vec": True}, {"y_scalar": True})]
VARIANTS += [("normal", {"sigma_vec": True}), ("normal", {"sigma_vec": True,
                                                          "alpha_vec": True})]


@pytest.mark.parametrize("family, variant", VARIANTS)
def test_glm_vs_reference_and_fd(check, rng, family, variant):
    fn, composed, ref = FAMILIES[family]
    args, diff = _glm_args(rng, family, **variant)
    # value against scipy and against the composed form
    check.value(fn, ref, args)
    assert np.isclose(fn(*args), composed(*args), rtol=1e-12)
    # gradient against finite differences (x included), and nested AD
    check.grad(fn, args, diff)
    check.nested(fn, args, diff)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_glm_gradient_matches_composed(rng, family):
    fn, composed, _ = FAMILIES[family]
    args, diff = _glm_args(rng, family, N=9, K=4, alpha_vec=True)
    for i in diff:
        def f_of(g):
            def f(v):
                a = list(args)
                a[i] = sl.reshape(v, np.shape(args[i])) if np.ndim(args[i]) else v[0]
                return g(*a)
            return f
        x0 = np.ravel(np.asarray(args[i], dtype=float))
        np.testing.assert_allclose(sl.grad(f_of(fn))(x0), sl.grad(f_of(composed))(x0),
                                   rtol=1e-11, atol=1e-12)


def _np_logistic(y, x, alpha, beta):
    eta = x @ beta + alpha
    lp = np.sum(y * eta - np.logaddexp(0.0, eta))
    r = y - expit(eta)
    return lp, r.sum(), x.T @ r, np.outer(r, beta)


@pytest.mark.parametrize("N", [50, 5000])      # both sides of the small-N form
def test_logistic_against_numpy(rng, N):
    K = 4
    x, beta = _data(rng, N, K)
    y = rng.integers(0, 2, N)
    alpha = -0.3
    lp, ga, gb, gx = _np_logistic(y, x, alpha, beta)
    w = np.concatenate([[alpha], beta])
    v, g = sl.value_and_grad(lambda w: sl.bernoulli_logit_glm_lpmf(y, x, w[0], w[1:]))(w)
    assert np.isclose(v, lp, rtol=1e-12)
    np.testing.assert_allclose(g, np.concatenate([[ga], gb]), rtol=1e-10, atol=1e-10)
    # gradient w.r.t. the design matrix: outer(r, beta)
    gxs = sl.grad(lambda xx: sl.bernoulli_logit_glm_lpmf(y, xx, alpha, beta))(x)
    np.testing.assert_allclose(gxs, gx, rtol=1e-10, atol=1e-12)
    # value-only call (no tape) agrees
    assert np.isclose(sl.bernoulli_logit_glm_lpmf(y, x, alpha, beta), lp, rtol=1e-12)


@pytest.mark.parametrize("N", [40, 3000])
def test_normal_and_poisson_against_numpy(rng, N):
    K = 3
    x, beta = _data(rng, N, K)
    alpha = rng.normal(size=N) * 0.2
    sigma = 1.7
    y = rng.normal(size=N)
    mu = x @ beta + alpha
    z = (y - mu) / sigma
    r = z / sigma
    v, (gy, gx, ga, gb, gs) = sl.value_and_grad(sl.normal_id_glm_lpdf, (0, 1, 2, 3, 4))(
        y, x, alpha, beta, sigma)
    assert np.isclose(v, np.sum(st.norm.logpdf(y, mu, sigma)), rtol=1e-12)
    np.testing.assert_allclose(gb, x.T @ r, rtol=1e-10)
    np.testing.assert_allclose(ga, r, rtol=1e-10)
    np.testing.assert_allclose(gy, -r, rtol=1e-10)
    np.testing.assert_allclose(gx, np.outer(r, beta), rtol=1e-10)
    assert np.isclose(gs, np.sum((z * z - 1) / sigma), rtol=1e-10)

    yc = rng.poisson(2.0, N)
    eta = x @ beta + alpha
    rp = yc - np.exp(eta)
    v, (ga, gb) = sl.value_and_grad(
        lambda a, b: sl.poisson_log_glm_lpmf(yc, x, a, b), (0, 1))(alpha, beta)
    assert np.isclose(v, np.sum(st.poisson.logpmf(yc, np.exp(eta))), rtol=1e-12)
    np.testing.assert_allclose(gb, x.T @ rp, rtol=1e-10)
    np.testing.assert_allclose(ga, rp, rtol=1e-10)


def test_hessians(rng):
    N, K = 30, 3
    x, beta = _data(rng, N, K)
    y = rng.integers(0, 2, N)
    w0 = np.concatenate([[0.2], beta])
    xt = np.hstack([np.ones((N, 1)), x])
    H = sl.hessian(lambda w: sl.bernoulli_logit_glm_lpmf(y, x, w[0], w[1:]))(w0)
    p = expit(xt @ w0)
    np.testing.assert_allclose(H, -(xt * (p * (1 - p))[:, None]).T @ xt, rtol=1e-10)
    Hc = sl.hessian(lambda w: sl.bernoulli_logit_lpmf(y, x @ w[1:] + w[0]))(w0)
    np.testing.assert_allclose(H, Hc, rtol=1e-10, atol=1e-12)

    yc = rng.poisson(2.0, N)
    H = sl.hessian(lambda w: sl.poisson_log_glm_lpmf(yc, x, w[0], w[1:]))(w0)
    np.testing.assert_allclose(H, -(xt * np.exp(xt @ w0)[:, None]).T @ xt, rtol=1e-10)

    # normal with (alpha, beta, log sigma)
    yn = rng.normal(size=N)
    v0 = np.concatenate([w0, [0.3]])

    def fn(v, g):
        return g(yn, x, v[0], v[1:K + 1], sl.exp(v[K + 1]))
    H = sl.hessian(lambda v: fn(v, sl.normal_id_glm_lpdf))(v0)
    Hc = sl.hessian(lambda v: fn(v, _normal_composed))(v0)
    np.testing.assert_allclose(H, Hc, rtol=1e-10, atol=1e-10)
    s = np.exp(0.3)
    np.testing.assert_allclose(H[:K + 1, :K + 1], -xt.T @ xt / s ** 2, rtol=1e-10)


def test_stable_extremes():
    x = np.array([[1000.0], [-1000.0], [0.5]])
    b = np.array([1.0])
    y = np.array([0, 1, 1])
    want = -2000.0 + np.log(expit(0.5))
    assert np.isclose(sl.bernoulli_logit_glm_lpmf(y, x, 0.0, b), want)
    v, g = sl.value_and_grad(lambda b: sl.bernoulli_logit_glm_lpmf(y, x, 0.0, b))(b)
    assert np.isclose(v, want)
    assert np.isclose(g[0], -1000.0 - 1000.0 + 0.5 * (1 - expit(0.5)))
    # large N uses the other (in-place exp/log1p) form: same extremes
    xb = np.repeat(x, 1000, axis=0)
    yb = np.repeat(y, 1000)
    assert np.isclose(sl.bernoulli_logit_glm_lpmf(yb, xb, 0.0, b), 1000 * want)
    v, g = sl.value_and_grad(lambda b: sl.bernoulli_logit_glm_lpmf(yb, xb, 0.0, b))(b)
    assert np.isclose(v, 1000 * want) and np.isclose(g[0], 1000 * (-2000.0 + 0.5 * (
        1 - expit(0.5))))
    # poisson: exp overflow is the limit -inf, not NaN
    assert sl.poisson_log_glm_lpmf([1], np.array([[800.0]]), 0.0, b) == -np.inf


def test_large_counts_use_lgamma():
    x = np.zeros((2, 1))
    y = np.array([3, 2 ** 21])
    lam = np.exp(0.5)
    want = np.sum(st.poisson.logpmf(y, lam))
    assert np.isclose(sl.poisson_log_glm_lpmf(y, x, 0.5, np.array([0.0])), want, rtol=1e-12)
    assert np.isclose(sl.poisson_log_glm_lpmf(y.astype(float), x, 0.5, np.array([0.0])),
                      want, rtol=1e-12)


def test_one_node():
    from stanlite.autodiff.tape import current_tape
    from stanlite.autodiff.var import Var
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 4))
    y = rng.integers(0, 2, 50)
    with sl.nested():
        t = current_tape()
        a, b = Var(0.1), Var(np.zeros(4))
        n0 = len(t.nodes)
        sl.bernoulli_logit_glm_lpmf(y, x, a, b)
        assert len(t.nodes) - n0 == 1


def test_checks(check, rng):
    x, beta = _data(rng, 4, 2)
    yb = np.array([0, 1, 1, 0])
    check.domain(sl.bernoulli_logit_glm_lpmf, (yb, x, 0.0, beta), 0,
                 np.array([0, 2, 1, 0]), r"y\[1\] must be 0 or 1")
    check.domain(sl.bernoulli_logit_glm_lpmf, (yb, x, 0.0, beta), 0,
                 np.array([0, 0.5, 1, 0]), r"y\[1\] must be an integer")
    check.domain(sl.bernoulli_logit_glm_lpmf, (yb, x, 0.0, beta), 0,
                 np.array([0, -1, 1, 0]), r"y\[1\]")
    check.domain(sl.poisson_log_glm_lpmf, (yb, x, 0.0, beta), 0, np.array([0, -1, 1, 0]),
                 r"y\[1\]")
    check.domain(sl.poisson_log_glm_lpmf, (yb, x, 0.0, beta), 0, np.array([0, 2.5, 1, 0]),
                 "integer")
    yn = rng.normal(size=4)
    check.domain(sl.normal_id_glm_lpdf, (yn, x, 0.0, beta, 1.0), 4, 0.0, "sigma")
    check.domain(sl.normal_id_glm_lpdf, (yn, x, 0.0, beta, 1.0), 4,
                 np.array([1.0, 1.0, -1.0, 1.0]), r"sigma\[2\]")
    # deferred finiteness checks name the culprit
    xbad = x.copy()
    xbad[2, 1] = np.nan
    check.domain(sl.normal_id_glm_lpdf, (yn, x, 0.0, beta, 1.0), 1, xbad, r"x\[2, 1\]")
    check.domain(sl.bernoulli_logit_glm_lpmf, (yb, x, 0.0, beta), 1, xbad, r"x\[2, 1\]")
    big = np.repeat(xbad, 1000, axis=0)           # the large-N form checks the same
    with pytest.raises(sl.DomainError, match=r"x\[2000, 1\]"):
        sl.value_and_grad(lambda b: sl.bernoulli_logit_glm_lpmf(np.repeat(yb, 1000), big,
                                                                 0.0, b))(beta)
    check.domain(sl.poisson_log_glm_lpmf, (yb, x, 0.0, beta), 3, np.array([np.inf, 0.0]),
                 r"beta\[0\]")
    check.domain(sl.normal_id_glm_lpdf, (yn, x, 0.0, beta, 1.0), 0,
                 np.array([0.0, np.nan, 0.0, 0.0]), r"y\[1\]")
    # shapes
    with pytest.raises(ValueError, match="beta must have shape"):
        sl.bernoulli_logit_glm_lpmf(yb, x, 0.0, np.zeros(3))
    with pytest.raises(ValueError, match="alpha must be a scalar or have shape"):
        sl.bernoulli_logit_glm_lpmf(yb, x, np.zeros(3), beta)
    with pytest.raises(ValueError, match="x must be an"):
        sl.poisson_log_glm_lpmf(yb, x[0], 0.0, beta)
    with pytest.raises(ValueError, match="sigma"):
        sl.normal_id_glm_lpdf(yn, x, 0.0, beta, np.ones(5))
    # integer outcomes are not differentiable
    with pytest.raises(sl.DifferentiationError):
        sl.grad(lambda yy: sl.poisson_log_glm_lpmf(yy, x, 0.0, beta))(np.ones(4))


def test_small_form_threshold_is_exercised():
    # the two plain forms of bernoulli_logit_glm meet at _SMALL rows
    assert 50 <= glm_module._SMALL < 5000


def test_outcome_arrays_that_cannot_change_are_checked_once(rng):
    # a read-only y (model data) has its check and its signs kept between calls; a
    # writable one is looked at every time, so changing it is seen
    x, beta = _data(rng, N=400, K=3)
    y = (rng.random(400) < 0.5).astype(np.int64)
    ref = sl.bernoulli_logit_glm_lpmf(y.copy(), x, 0.2, beta)
    ro = y.copy()
    ro.setflags(write=False)
    for _ in range(2):
        assert sl.bernoulli_logit_glm_lpmf(ro, x, 0.2, beta) == ref
    g1 = sl.grad(lambda b: sl.bernoulli_logit_glm_lpmf(ro, x, 0.2, b))(beta)
    g2 = sl.grad(lambda b: sl.bernoulli_logit_glm_lpmf(y.copy(), x, 0.2, b))(beta)
    np.testing.assert_array_equal(g1, g2)
    w = y.copy()
    sl.bernoulli_logit_glm_lpmf(w, x, 0.2, beta)
    w[0] = 2                                    # a writable array may change: checked
    with pytest.raises(sl.DomainError, match="0 or 1"):
        sl.bernoulli_logit_glm_lpmf(w, x, 0.2, beta)
    w[0] = 1 - y[0]
    assert sl.bernoulli_logit_glm_lpmf(w, x, 0.2, beta) != ref
    bad = np.where(np.arange(400) == 3, 5, y)
    bad.setflags(write=False)                   # a failed check is not remembered
    for _ in range(2):
        with pytest.raises(sl.DomainError, match="0 or 1"):
            sl.bernoulli_logit_glm_lpmf(bad, x, 0.2, beta)


def _read_only(*arrays):
    out = []
    for a in arrays:
        a = np.array(a)
        a.setflags(write=False)
        out.append(a)
    return out


@pytest.mark.parametrize("N", [30, 3000])
def test_logistic_data_form_against_numpy(rng, N, monkeypatch):
    # x and y as model data (read-only) with a number alpha: the signed design
    # [s, s x] is formed once per (y, x) and one exp does the elementwise work
    K = 4
    x, beta = _data(rng, N, K)
    y = rng.integers(0, 2, N)
    xr, yr = _read_only(x, y)
    made = []
    real = glm_module._signed_design
    monkeypatch.setattr(glm_module, "_signed_design",
                        lambda y, x: made.append(1) or real(y, x))
    for alpha in (-0.3, 1.1):
        lp, ga, gb, _ = _np_logistic(y, x, alpha, beta)
        w = np.concatenate([[alpha], beta])
        v, g = sl.value_and_grad(
            lambda w: sl.bernoulli_logit_glm_lpmf(yr, xr, w[0], w[1:]))(w)
        assert np.isclose(v, lp, rtol=1e-12)
        np.testing.assert_allclose(g, np.concatenate([[ga], gb]), rtol=1e-10, atol=1e-10)
        assert np.isclose(sl.bernoulli_logit_glm_lpmf(yr, xr, alpha, beta), lp,
                          rtol=1e-12)
    assert len(made) == 1                     # kept between calls
    # central differences at a random point of the coefficients
    f = lambda w: sl.bernoulli_logit_glm_lpmf(yr, xr, w[0], w[1:])  # noqa: E731
    w = rng.normal(size=K + 1) * 0.5
    g = sl.grad(f)(w)
    h = 1e-6
    fd = [(f(w + h * e) - f(w - h * e)) / (2 * h) for e in np.eye(K + 1)]
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)
    # a writable copy of x takes the |t| form: the same numbers
    v1 = sl.value_and_grad(f)(w)
    v2 = sl.value_and_grad(lambda w: sl.bernoulli_logit_glm_lpmf(y, x, w[0], w[1:]))(w)
    assert np.isclose(v1[0], v2[0], rtol=1e-13)
    np.testing.assert_allclose(v1[1], v2[1], rtol=1e-11, atol=1e-13)


def test_logistic_data_form_overflow_and_bad_coefficients():
    # exp(-t) overflows for t < -709: the |t| form takes over, with the stable result
    x = np.repeat(np.array([[1000.0], [-1000.0], [0.5]]), 200, axis=0)
    y = np.repeat(np.array([0, 1, 1]), 200)
    xr, yr = _read_only(x, y)
    b = np.array([1.0])
    want = 200 * (-2000.0 + np.log(expit(0.5)))
    v, g = sl.value_and_grad(lambda b: sl.bernoulli_logit_glm_lpmf(yr, xr, 0.0, b))(b)
    assert np.isclose(v, want, rtol=1e-12)
    assert np.isclose(g[0], 200 * (-2000.0 + 0.5 * (1 - expit(0.5))), rtol=1e-12)
    # a NaN coefficient is named, not returned
    with pytest.raises(sl.DomainError, match=r"beta\[0\]"):
        sl.bernoulli_logit_glm_lpmf(yr, xr, 0.0, np.array([np.nan]))
    with pytest.raises(sl.DomainError, match="alpha"):
        sl.bernoulli_logit_glm_lpmf(yr, xr, np.inf, b)
    # a read-only design matrix given directly (not validated as model data) with a
    # NaN: named too, by its row and column
    xbad = x.copy()
    xbad[7, 0] = np.nan
    xbad, = _read_only(xbad)
    with pytest.raises(sl.DomainError, match=r"x\[7, 0\]"):
        sl.value_and_grad(lambda b: sl.bernoulli_logit_glm_lpmf(yr, xbad, 0.0, b))(b)


def test_constant_cache_follows_every_array():
    # a result derived from two data arrays is dropped when either array goes
    import gc
    import importlib
    fused = importlib.import_module("stanlite.distributions.fused")
    calls = []

    def compute(a, b):
        calls.append(1)
        return a + b
    a, b = _read_only(np.ones(3), np.arange(3.0))
    r1 = fused.once_for_constants(("test-pair",), (a, b), compute)
    assert fused.once_for_constants(("test-pair",), (a, b), compute) is r1
    assert len(calls) == 1 and not r1.flags.writeable
    keys = [k for k in fused._CONSTANT_CACHE if k[0] == ("test-pair",)]
    assert len(keys) == 1
    del b
    gc.collect()
    assert not [k for k in fused._CONSTANT_CACHE if k[0] == ("test-pair",)]
    c, = _read_only(np.zeros(3))
    np.testing.assert_array_equal(fused.once_for_constants(("test-pair",), (a, c),
                                                           compute), np.ones(3))
    assert len(calls) == 2
