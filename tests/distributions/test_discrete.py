"""Discrete distributions: lpmf/lcdf/lccdf against scipy.stats, gradients w.r.t. every
real parameter and nested AD (JVP, Hessian) against finite differences, boundary
values, domain errors (integer arguments, supports), rng moments."""

import numpy as np
import pytest
import scipy.stats as st
from scipy.special import expit

import stanlite as sl

from testkit import ordinal_cases, ordered_reference


def ints(rng, lo, hi, size):
    return rng.integers(lo, hi + 1, size=size)


# --------------------------------------------------------------------------------------
# lpmf values, gradients and nested AD
# --------------------------------------------------------------------------------------
def _cases(rng):
    n01 = ints(rng, 0, 1, 6)
    cnt = ints(rng, 0, 9, 6)
    N = cnt + ints(rng, 0, 5, 6)
    u = lambda lo, hi, s=6: rng.uniform(lo, hi, s)  # noqa: E731
    return {
        "bernoulli": (sl.bernoulli_lpmf, lambda n, t: st.bernoulli.logpmf(n, t),
                      [(n01, u(0.1, 0.9)), (n01, 0.35), (1, u(0.2, 0.8, 3))], (1,)),
        "bernoulli_logit": (sl.bernoulli_logit_lpmf,
                            lambda n, a: st.bernoulli.logpmf(n, expit(a)),
                            [(n01, u(-3, 3)), (n01, 0.4)], (1,)),
        "binomial": (sl.binomial_lpmf, st.binom.logpmf,
                     [(cnt, N, u(0.1, 0.9)), (cnt, N, 0.3), (cnt, 15, u(0.2, 0.7))], (2,)),
        "binomial_logit": (sl.binomial_logit_lpmf,
                           lambda n, N, a: st.binom.logpmf(n, N, expit(a)),
                           [(cnt, N, u(-2, 2)), (cnt, N, -0.3)], (2,)),
        "beta_binomial": (sl.beta_binomial_lpmf, st.betabinom.logpmf,
                          [(cnt, N, u(0.5, 3), u(0.5, 3)), (cnt, N, 1.7, u(0.5, 4))],
                          (2, 3)),
        "poisson": (sl.poisson_lpmf, st.poisson.logpmf,
                    [(cnt, u(0.5, 8)), (cnt, 3.2), (4, u(1, 5, 3))], (1,)),
        "poisson_log": (sl.poisson_log_lpmf, lambda n, a: st.poisson.logpmf(n, np.exp(a)),
                        [(cnt, u(-1, 2)), (cnt, 1.1)], (1,)),
        "neg_binomial": (sl.neg_binomial_lpmf,
                         lambda n, a, b: st.nbinom.logpmf(n, a, b / (1 + b)),
                         [(cnt, u(0.5, 4), u(0.2, 2)), (cnt, 2.5, 0.7)], (1, 2)),
        "neg_binomial_2": (sl.neg_binomial_2_lpmf,
                           lambda n, m, p: st.nbinom.logpmf(n, p, p / (m + p)),
                           [(cnt, u(0.5, 8), u(0.5, 5)), (cnt, 4.0, u(0.5, 5))], (1, 2)),
        "neg_binomial_2_log": (sl.neg_binomial_2_log_lpmf,
                               lambda n, e, p: st.nbinom.logpmf(n, p, p / (np.exp(e) + p)),
                               [(cnt, u(-1, 2), u(0.5, 5)), (cnt, 0.8, 2.0)], (1, 2)),
    }


@pytest.mark.parametrize("name", list(_cases(np.random.default_rng(0))))
def test_lpmf(check, rng, name):
    fn, ref, arg_sets, diff = _cases(rng)[name]
    for args in arg_sets:
        check.all(fn, ref, args, diff)


def test_categorical(check, rng):
    theta = np.array([0.1, 0.2, 0.3, 0.4])
    y = np.array([1, 4, 4, 2, 3, 4])
    check.value(sl.categorical_lpmf, lambda y, t: np.log(t[y - 1]), (y, theta))
    check.value(sl.categorical_lpmf, lambda y, t: np.log(t[y - 1]), (3, theta))
    # theta lives on the simplex: differentiate through softmax(z) (the gradient
    # w.r.t. theta itself is then exercised by the chain rule)
    z0 = rng.normal(size=4)
    f = lambda z: sl.categorical_lpmf(y, sl.softmax(z))  # noqa: E731
    sl.assert_grad(f, z0)
    sl.assert_jvp(f, z0)
    sl.assert_hessian(f, z0)
    g = sl.grad(lambda t: sl.categorical_lpmf(y, t))(theta)
    np.testing.assert_allclose(g, np.bincount(y - 1, minlength=4) / theta)


def test_categorical_logit(check, rng):
    beta = rng.normal(size=5)
    y = np.array([5, 1, 2, 2, 3])
    ref = lambda y, b: b[y - 1] - np.log(np.sum(np.exp(b)))  # noqa: E731
    check.all(sl.categorical_logit_lpmf, ref, (y, beta), (1,))
    check.all(sl.categorical_logit_lpmf, ref, (2, beta), (1,))


def test_multinomial(check, rng):
    theta = np.array([0.2, 0.5, 0.3])
    y = np.array([3, 0, 4])
    check.value(sl.multinomial_lpmf, lambda y, t: st.multinomial.logpmf(y, y.sum(), t),
                (y, theta))
    z0 = rng.normal(size=3)
    f = lambda z: sl.multinomial_lpmf(y, sl.softmax(z))  # noqa: E731
    sl.assert_grad(f, z0)
    sl.assert_hessian(f, z0)
    # a zero count against a zero probability: 0 log 0 = 0
    assert np.isclose(sl.multinomial_lpmf([2, 0], [1.0, 0.0]), 0.0)


def _ol_ref(k, eta, c):
    return ordered_reference(expit, k, eta, c)


def test_ordered_logistic(check, rng):
    for args in ordinal_cases(rng).values():
        check.all(sl.ordered_logistic_lpmf, _ol_ref, args, (1, 2))


def test_ordered_logistic_far_cutpoints():
    # inv_logit(40) - inv_logit(-40) = 1 - 2e-18: the naive difference is exact here,
    # but the log of a tiny middle mass must not be -inf
    v = sl.ordered_logistic_lpmf(2, 0.0, np.array([-1e-9, 1e-9]))
    assert np.isclose(v, np.log(expit(1e-9) - expit(-1e-9)), rtol=1e-6)
    v = sl.ordered_logistic_lpmf(1, 60.0, np.array([0.0, 1.0]))
    assert np.isclose(v, -60.0, rtol=1e-12)


def test_hypergeometric(check):
    n = np.array([0, 1, 2, 3])
    check.value(sl.hypergeometric_lpmf,
                lambda n, N, a, b: st.hypergeom.logpmf(n, a + b, a, N), (n, 5, 4, 6))
    check.value(sl.hypergeometric_lpmf,
                lambda n, N, a, b: st.hypergeom.logpmf(n, a + b, a, N), (2, 3, 2, 7))


# --------------------------------------------------------------------------------------
# CDFs
# --------------------------------------------------------------------------------------
def _cdf_cases(rng):
    u = lambda lo, hi, s=5: rng.uniform(lo, hi, s)  # noqa: E731
    n = np.array([0, 1, 3, 6, 12])
    return {
        "bernoulli": (st.bernoulli, lambda t: (t,), [(np.array([0, 0, 0]), u(0.1, 0.9, 3)),
                                                    (0, 0.3)], (1,)),
        "binomial": (st.binom, lambda N, t: (N, t),
                     [(n, np.array([3, 4, 8, 9, 20]), u(0.1, 0.9)), (n, 14, 0.4)], (2,)),
        "beta_binomial": (st.betabinom, lambda N, a, b: (N, a, b),
                          [(n, np.array([3, 4, 8, 9, 20]), u(0.5, 3), u(0.5, 3)),
                           (n, 14, 2.0, 0.6)], (2, 3)),
        "poisson": (st.poisson, lambda lam: (lam,), [(n, u(0.5, 9)), (n, 4.0)], (1,)),
        "neg_binomial": (st.nbinom, lambda a, b: (a, b / (1 + b)),
                         [(n, u(0.5, 4), u(0.2, 2)), (n, 2.5, 0.4)], (1, 2)),
        "neg_binomial_2": (st.nbinom, lambda m, p: (p, p / (m + p)),
                           [(n, u(1, 8), u(0.5, 5)), (n, 4.0, 1.5)], (1, 2)),
    }


@pytest.mark.parametrize("kind", ["lcdf", "lccdf"])
@pytest.mark.parametrize("name", list(_cdf_cases(np.random.default_rng(0))))
def test_cdf(check, rng, name, kind):
    dist, params, arg_sets, diff = _cdf_cases(rng)[name]
    fn = getattr(sl, f"{name}_{kind}")
    meth = dist.logcdf if kind == "lcdf" else dist.logsf

    def ref(n, *p):
        return meth(n, *params(*p))
    for args in arg_sets:
        check.all(fn, ref, args, diff, rtol=1e-9)


@pytest.mark.parametrize("kind", ["lcdf", "lccdf"])
def test_nb_cdf_tails(check, kind):
    # far in either tail the summed side is the small one, so the derivative of the
    # tiny log probability keeps its precision (no cancellation against 1)
    n = np.array([0, 2, 30, 60, 150])
    mu, phi = 6.0, 1.3
    meth = st.nbinom.logcdf if kind == "lcdf" else st.nbinom.logsf
    fn = getattr(sl, f"neg_binomial_2_{kind}")
    ref = lambda n, m, p: meth(n, p, p / (m + p))  # noqa: E731
    check.value(fn, ref, (n, mu, phi), rtol=1e-8)
    for i in range(len(n)):
        check.grad(fn, (n[i], mu, phi), (1, 2), rtol=1e-5)
    check.nested(fn, (n[:4], mu, phi), (1, 2))


def test_nb_upper_tail_derivative_exact():
    # d/dalpha log P(X > n) far in the upper tail vs a high-precision reference:
    # sum of the tail score times the mass, computed term by term in long double
    a, b, n = 2.0, 0.5, 60
    p = b / (1 + b)
    k = np.arange(n + 1, 2000)
    from scipy.special import gammaln, digamma
    lt = gammaln(k + a) - gammaln(k + 1) - gammaln(a) + a * np.log(p) + k * np.log1p(-p)
    w = np.exp(lt - lt.max())
    score = digamma(k + a) - digamma(a) + np.log(p)
    want = float(np.sum(w * score) / np.sum(w))
    got = sl.grad(lambda x: sl.neg_binomial_lccdf(n, x, b))(a)
    assert np.isclose(got, want, rtol=1e-10)
    assert sl.neg_binomial_lccdf(n, a, b) < -20


def test_cdf_edges():
    # n below the support: lcdf = -inf, lccdf = 0; at/above the top: lcdf = 0
    assert sl.poisson_lcdf(-1, 2.0) == -np.inf
    assert sl.poisson_lccdf(-1, 2.0) == 0.0
    assert sl.binomial_lcdf(5, 5, 0.3) == 0.0
    assert sl.binomial_lccdf(5, 5, 0.3) == -np.inf
    assert sl.beta_binomial_lcdf(np.array([5, 7]), 5, 1.0, 2.0) == 0.0
    assert sl.neg_binomial_lcdf(np.array([-1, 3]), 1.0, 2.0) == -np.inf
    assert np.isclose(sl.neg_binomial_lccdf(np.array([-1, 3]), 1.0, 2.0),
                      st.nbinom.logsf(3, 1.0, 2 / 3))
    assert sl.bernoulli_lcdf(1, 0.3) == 0.0
    # mixed in-support and out-of-support elements: gradients of the others only
    g = sl.grad(lambda t: sl.binomial_lcdf(np.array([2, 9]), 6, t))(0.3)
    assert np.isclose(g, sl.grad(lambda t: sl.binomial_lcdf(2, 6, t))(0.3))


# --------------------------------------------------------------------------------------
# boundaries and stable forms
# --------------------------------------------------------------------------------------
def test_boundaries():
    assert sl.bernoulli_lpmf(np.array([0, 0]), 0.0) == 0.0
    assert sl.bernoulli_lpmf(np.array([1, 0]), 1.0) == -np.inf
    assert sl.bernoulli_lpmf(np.array([1, 1]), np.array([1.0, 1.0])) == 0.0
    assert sl.binomial_lpmf(0, 5, 0.0) == 0.0
    assert sl.binomial_lpmf(np.array([5, 5]), 5, np.array([1.0, 1.0])) == 0.0
    assert sl.poisson_lpmf(0, 0.0) == 0.0
    assert sl.poisson_lpmf(1, 0.0) == -np.inf
    assert sl.poisson_lpmf(np.array([0, 0]), np.array([0.0, 1.0])) == -1.0
    assert sl.poisson_lpmf(2, np.inf) == -np.inf
    assert sl.poisson_log_lpmf(np.array([0, 0]), np.array([-np.inf, 0.0])) == -1.0
    assert sl.poisson_log_lpmf(1, -np.inf) == -np.inf
    assert sl.poisson_log_lpmf(3, 800.0) == -np.inf
    assert sl.beta_binomial_lpmf(np.array([6, 1]), 5, 1.0, 1.0) == -np.inf


def test_stable_forms():
    # bernoulli_logit far in the tails: log inv_logit(-800) = -800, no overflow
    assert np.isclose(sl.bernoulli_logit_lpmf(1, -800.0), -800.0)
    assert sl.bernoulli_logit_lpmf(0, -800.0) == 0.0
    assert np.isclose(sl.grad(lambda a: sl.bernoulli_logit_lpmf(1, a))(-800.0), 1.0)
    assert np.isclose(sl.grad(lambda a: sl.bernoulli_logit_lpmf(0, a))(40.0), -1.0)
    # binomial_logit at large |alpha|
    assert np.isclose(sl.binomial_logit_lpmf(0, 5, -700.0), 0.0)
    assert np.isclose(sl.binomial_logit_lpmf(5, 5, -700.0), -3500.0)
    # poisson_log: exp(alpha) is never logged back
    assert np.isclose(sl.poisson_log_lpmf(3, -50.0), 3 * -50.0 - np.exp(-50.0) - np.log(6))
    # neg_binomial_2_log with a large eta: no exp(eta) overflow
    v = sl.neg_binomial_2_log_lpmf(3, 800.0, 2.0)
    want = sl.lchoose(4.0, 3) + 3 * (800 - np.log(2.0)) - 5 * (800 - np.log(2.0))
    assert np.isfinite(v) and np.isclose(v, want)
    g = sl.grad(lambda e: sl.neg_binomial_2_log_lpmf(3, e, 2.0))(800.0)
    assert np.isclose(g, 3 - 5.0)
    # very large phi: neg_binomial_2 -> Poisson
    assert np.isclose(sl.neg_binomial_2_lpmf(4, 3.0, 1e9), st.poisson.logpmf(4, 3.0),
                      rtol=1e-7)


def test_integer_outcomes_as_floats():
    assert sl.poisson_lpmf(np.array([1.0, 3.0]), 2.0) == sl.poisson_lpmf([1, 3], 2.0)
    assert sl.categorical_lpmf(np.array([2.0]), [0.5, 0.5]) == np.log(0.5)


def test_one_node_per_density():
    from stanlite.autodiff.tape import current_tape
    from stanlite.autodiff.var import Var
    n = np.arange(50) % 7
    with sl.nested():
        t = current_tape()
        a, b = Var(2.0), Var(1.5)
        for f in (lambda: sl.neg_binomial_2_lpmf(n, a, b), lambda: sl.poisson_lpmf(n, a),
                  lambda: sl.beta_binomial_lpmf(n, 9, a, b),
                  lambda: sl.neg_binomial_lcdf(n, a, b)):
            n0 = len(t.nodes)
            f()
            assert len(t.nodes) - n0 == 1


# --------------------------------------------------------------------------------------
# domain errors
# --------------------------------------------------------------------------------------
def test_domain_errors(check):
    cnt = np.array([0, 2, 3])
    # a float outcome or size that is not an integer
    check.domain(sl.poisson_lpmf, (cnt, 2.0), 0, 2.5, r"poisson_lpmf: n must be an integer")
    check.domain(sl.poisson_lpmf, (cnt, 2.0), 0, np.array([1.0, 2.5]), r"n\[1\]")
    check.domain(sl.binomial_lpmf, (cnt, 5, 0.3), 1, 5.5, "N must be an integer")
    check.domain(sl.binomial_lpmf, (cnt, 5, 0.3), 1, 2, "n")
    check.domain(sl.binomial_lpmf, (cnt, 5, 0.3), 2, 1.2, "theta")
    check.domain(sl.bernoulli_lpmf, (cnt % 2, 0.3), 0, np.array([0, 2]), r"n\[1\]")
    check.domain(sl.bernoulli_lpmf, (cnt % 2, 0.3), 1, -0.1, "theta")
    check.domain(sl.bernoulli_logit_lpmf, (1, 0.3), 1, np.nan, "alpha")
    check.domain(sl.binomial_logit_lpmf, (1, 4, 0.3), 2, np.inf, "alpha")
    check.domain(sl.beta_binomial_lpmf, (cnt, 5, 1.0, 2.0), 2, 0.0, "alpha")
    check.domain(sl.beta_binomial_lpmf, (cnt, 5, 1.0, 2.0), 3, -1.0, "beta")
    check.domain(sl.beta_binomial_lpmf, (cnt, 5, 1.0, 2.0), 0, 1.5, "n")
    check.domain(sl.poisson_lpmf, (cnt, 2.0), 0, -1, "n")
    check.domain(sl.poisson_lpmf, (cnt, 2.0), 1, -2.0, "lambda")
    check.domain(sl.poisson_log_lpmf, (cnt, 2.0), 1, np.nan, "alpha")
    check.domain(sl.neg_binomial_lpmf, (cnt, 2.0, 1.0), 1, 0.0, "alpha")
    check.domain(sl.neg_binomial_lpmf, (cnt, 2.0, 1.0), 2, np.inf, "beta")
    check.domain(sl.neg_binomial_2_lpmf, (cnt, 2.0, 1.0), 1, -1.0, "mu")
    check.domain(sl.neg_binomial_2_lpmf, (cnt, 2.0, 1.0), 2, 0.0, "phi")
    check.domain(sl.neg_binomial_2_log_lpmf, (cnt, 2.0, 1.0), 1, np.inf, "eta")
    check.domain(sl.neg_binomial_2_log_lpmf, (cnt, 2.0, 1.0), 2, -1.0, "phi")
    check.domain(sl.neg_binomial_lcdf, (cnt, 2.0, 1.0), 0, 0.5, "n")
    check.domain(sl.poisson_lccdf, (cnt, 2.0), 1, -1.0, "lambda")
    theta = np.array([0.2, 0.8])
    check.domain(sl.categorical_lpmf, (1, theta), 0, 0, "y")           # 1-based
    check.domain(sl.categorical_lpmf, (1, theta), 0, 3, "y")
    check.domain(sl.categorical_lpmf, (1, theta), 0, 1.5, "y")
    check.domain(sl.categorical_lpmf, (1, theta), 1, np.array([0.3, 0.8]), "theta")
    check.domain(sl.categorical_lpmf, (1, theta), 1, np.array([-0.2, 1.2]), "theta")
    check.domain(sl.categorical_logit_lpmf, (1, theta), 1, np.array([0.0, np.nan]), "beta")
    check.domain(sl.multinomial_lpmf, ([1, 2], theta), 0, [1, -2], "y")
    # a y of the wrong size is a programming error (a ValueError), not a rejection
    with pytest.raises(ValueError, match="y must have the size of theta") as e:
        sl.multinomial_lpmf([1, 2, 3], theta)
    assert not isinstance(e.value, sl.DomainError)
    c = np.array([-1.0, 0.5, 2.0])
    check.domain(sl.ordered_logistic_lpmf, (2, 0.0, c), 0, 5, "k")
    check.domain(sl.ordered_logistic_lpmf, (2, 0.0, c), 0, 0, "k")
    check.domain(sl.ordered_logistic_lpmf, (2, 0.0, c), 2, np.array([0.0, -1.0, 2.0]), "c")
    check.domain(sl.ordered_logistic_lpmf, (2, 0.0, c), 1, np.inf, "eta")
    check.domain(sl.hypergeometric_lpmf, (2, 5, 4, 6), 0, 5, "n")
    check.domain(sl.hypergeometric_lpmf, (2, 5, 4, 6), 1, 11, "N")
    check.domain(sl.hypergeometric_lpmf, (2, 5, 4, 6), 2, 4.5, "a")


def test_integer_arguments_are_not_differentiable():
    with pytest.raises(sl.DifferentiationError):
        sl.grad(lambda n: sl.poisson_lpmf(n, 2.0))(3.0)
    with pytest.raises(sl.DifferentiationError):
        sl.grad(lambda N: sl.binomial_lpmf(1, N, 0.5))(3.0)


# --------------------------------------------------------------------------------------
# rng
# --------------------------------------------------------------------------------------
def _moments(d, mean, var, k=5.0):
    d = np.asarray(d, dtype=float)
    n = d.size
    assert abs(d.mean() - mean) < k * np.sqrt(var / n), (d.mean(), mean)
    # the variance of the sample variance ~ (m4 - var^2)/n; a loose bound from var
    assert abs(d.var() - var) < k * np.sqrt(2.0 * var * var / n + 6 * var * (1 + var) / n) \
        + 1e-12, (d.var(), var)


def test_rng_moments():
    S = 40000
    t = np.full(S, 0.3)
    _moments(sl.bernoulli_rng(t, rng=1), 0.3, 0.21)
    _moments(sl.bernoulli_logit_rng(np.full(S, 0.5), rng=2), expit(0.5),
             expit(0.5) * (1 - expit(0.5)))
    _moments(sl.binomial_rng(np.full(S, 12), 0.25, rng=3), 3.0, 12 * 0.25 * 0.75)
    _moments(sl.binomial_logit_rng(12, np.full(S, 0.0), rng=4), 6.0, 3.0)
    a, b, N = 2.0, 3.0, 10
    m = N * a / (a + b)
    v = N * a * b * (a + b + N) / ((a + b) ** 2 * (a + b + 1))
    _moments(sl.beta_binomial_rng(N, np.full(S, a), b, rng=5), m, v)
    _moments(sl.poisson_rng(np.full(S, 4.5), rng=6), 4.5, 4.5)
    _moments(sl.poisson_log_rng(np.full(S, np.log(4.5)), rng=7), 4.5, 4.5)
    a, b = 2.5, 0.5
    _moments(sl.neg_binomial_rng(np.full(S, a), b, rng=8), a / b, a / b ** 2 * (b + 1))
    mu, phi = 3.0, 2.0
    _moments(sl.neg_binomial_2_rng(np.full(S, mu), phi, rng=9), mu, mu + mu ** 2 / phi)
    _moments(sl.neg_binomial_2_log_rng(np.full(S, np.log(mu)), phi, rng=10), mu,
             mu + mu ** 2 / phi)
    theta = np.array([0.1, 0.6, 0.3])
    y = sl.categorical_rng(theta, size=S, rng=11)
    assert y.min() >= 1 and y.max() <= 3
    freq = np.bincount(y - 1, minlength=3) / S
    assert np.all(np.abs(freq - theta) < 5 * np.sqrt(theta * (1 - theta) / S))
    y = sl.categorical_logit_rng(np.log(theta), size=S, rng=12)
    freq = np.bincount(y - 1, minlength=3) / S
    assert np.all(np.abs(freq - theta) < 5 * np.sqrt(theta * (1 - theta) / S))
    ys = np.array([sl.multinomial_rng(theta, 20, rng=g) for g in range(2000)])
    assert np.all(ys.sum(axis=1) == 20)
    assert np.all(np.abs(ys.mean(0) - 20 * theta) < 5 * np.sqrt(20 * theta * (1 - theta)
                                                                  / 2000))
    c = np.array([-1.0, 0.2, 1.5])
    k = sl.ordered_logistic_rng(np.full(S, 0.4), c, rng=13)
    p = -np.diff(np.concatenate([[1.0], expit(0.4 - c), [0.0]]))
    freq = np.bincount(k - 1, minlength=4) / S
    assert np.all(np.abs(freq - p) < 5 * np.sqrt(p * (1 - p) / S))
    h = sl.hypergeometric_rng(np.full(S, 5), 4, 6, rng=14)
    _moments(h, 5 * 4 / 10, 5 * 0.4 * 0.6 * (10 - 5) / 9)


def test_rng_types():
    assert isinstance(sl.poisson_rng(3.0, rng=1), int)
    assert isinstance(sl.bernoulli_rng(0.5, rng=1), int)
    assert isinstance(sl.categorical_rng([0.5, 0.5], rng=1), int)
    assert isinstance(sl.ordered_logistic_rng(0.0, [-1.0, 1.0], rng=1), int)
    assert isinstance(sl.hypergeometric_rng(3, 4, 5, rng=1), int)
    d = sl.binomial_rng(np.array([3, 4]), np.array([[0.2], [0.7]]), rng=1)
    assert d.shape == (2, 2) and d.dtype == np.int64
    assert sl.multinomial_rng([0.2, 0.8], 5, rng=1).dtype == np.int64
    with pytest.raises(sl.DomainError, match="lambda"):
        sl.poisson_rng(2.0 ** 31)
    with pytest.raises(sl.DomainError, match="N"):
        sl.binomial_rng(2.5, 0.3)
