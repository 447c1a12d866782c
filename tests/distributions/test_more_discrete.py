"""beta_neg_binomial (lpmf, lcdf, lccdf) against scipy.stats.betanbinom and
dirichlet_multinomial against scipy.stats.dirichlet_multinomial: values, gradients
w.r.t. every real parameter and nested AD against finite differences with
broadcasting, edges of the support, domain errors, rng moments within Monte Carlo
error (fixed seeds)."""

import mpmath as mp
import numpy as np
import pytest
import scipy.stats as st
from scipy.special import betaln, gammaln, logsumexp

import stanlite as sl

KINDS = {"lpmf": "logpmf", "lcdf": "logcdf", "lccdf": "logsf"}


def _bnb_cases(rng):
    """(integer r: scipy's betanbinom takes only those, real r) argument sets."""
    n = rng.integers(0, 9, 6)
    u = lambda lo, hi, s=6: rng.uniform(lo, hi, s)       # noqa: E731
    whole = [(n, rng.integers(1, 6, 6).astype(float), u(1.5, 4), u(0.5, 3)),
             (n, 3.0, 3.1, 1.7),                             # vector n, scalar params
             (4, np.array([1.0, 2.0, 5.0]), 2.2, u(0.5, 3, 3)),
             (n.reshape(2, 3), np.array([2.0, 1.0, 4.0]), 2.6, 1.3)]
    real = [(n, u(0.5, 4), u(1.5, 4), u(0.5, 3)), (n.reshape(2, 3), u(0.5, 4, 3), 2.6, 1.3)]
    return whole, real


def _bnb_formula(kind):
    """The mass from its definition (any real r), its CDF by summation over 0..n."""
    def logpmf(n, r, a, b):
        return (gammaln(n + r) - gammaln(n + 1) - gammaln(r) + betaln(n + b, r + a)
                - betaln(a, b))

    def logcdf(n, r, a, b):
        n, r, a, b = np.broadcast_arrays(n, r, a, b)
        return np.vectorize(lambda n, r, a, b: logsumexp(logpmf(np.arange(n + 1), r, a, b)))(
            n, r, a, b)
    return {"lpmf": logpmf, "lcdf": logcdf,
            "lccdf": lambda *args: np.log1p(-np.exp(logcdf(*args)))}[kind]


@pytest.mark.parametrize("kind", list(KINDS))
def test_beta_neg_binomial(check, rng, kind):
    fn = getattr(sl, f"beta_neg_binomial_{kind}")
    whole, real = _bnb_cases(rng)
    for args in whole:
        check.all(fn, getattr(st.betanbinom, KINDS[kind]), args, (1, 2, 3), rtol=1e-9)
    for args in real:
        check.all(fn, _bnb_formula(kind), args, (1, 2, 3), rtol=1e-9)


@pytest.mark.parametrize("kind", list(KINDS))
def test_beta_neg_binomial_pointwise(check, rng, kind):
    fn = getattr(sl, f"beta_neg_binomial_{kind}")
    whole, real = _bnb_cases(rng)
    check.pointwise(fn, getattr(st.betanbinom, KINDS[kind]), whole[0], (1, 2, 3), rtol=1e-9)
    check.pointwise(fn, _bnb_formula(kind), real[1], (1, 2, 3), rtol=1e-9)
    if kind != "lpmf":
        # below the support on its own: P(X <= -1) = 0
        v = fn(np.array([-1, 2]), 2.0, 3.0, 1.5, reduce=False)
        assert v[0] == (0.0 if kind == "lccdf" else -np.inf)
        assert np.isclose(v[1], getattr(st.betanbinom, KINDS[kind])(2, 2, 3.0, 1.5))
        check.nested(lambda r: sl.sum(fn(np.array([0, 4]), r, 3.0, 1.5, reduce=False)),
                     (np.array([2.0, 1.5]),), (0,))


def test_beta_neg_binomial_closed_form_and_edges():
    n, r, a, b = 3, 2.0, 3.0, 1.5
    g = sl.grad(sl.beta_neg_binomial_lpmf, (1, 2, 3))(n, r, a, b)
    from scipy.special import digamma as psi
    pt = psi(n + r + a + b)
    want = [psi(n + r) - psi(r) + psi(a + r) - pt, psi(a + r) - pt - psi(a) + psi(a + b),
            psi(n + b) - pt - psi(b) + psi(a + b)]
    np.testing.assert_allclose(g, want, rtol=1e-12)
    # below the support: P(X <= -1) = 0, P(X > -1) = 1
    assert sl.beta_neg_binomial_lcdf(-1, r, a, b) == -np.inf
    assert sl.beta_neg_binomial_lccdf(np.array([-1, -3]), r, a, b) == 0.0
    v = sl.beta_neg_binomial_lccdf(np.array([-1, 2]), r, a, b)
    assert np.isclose(v, st.betanbinom.logsf(2, r, a, b), rtol=1e-12)
    gr = sl.grad(lambda r_: sl.beta_neg_binomial_lccdf(np.array([-1, 2]), r_, a, b))(r)
    assert np.isclose(gr, sl.grad(lambda r_: sl.beta_neg_binomial_lccdf(2, r_, a, b))(r))
    # a large r: lgamma(n + r) - lgamma(r) would cancel (mpmath, 40 digits)
    with mp.workdps(40):
        want = float(mp.loggamma(3 + 1e8) - mp.loggamma(4) - mp.loggamma(1e8)
                     + mp.log(mp.beta(3 + 1.5, 1e8 + 2.0)) - mp.log(mp.beta(2.0, 1.5)))
    assert np.isclose(sl.beta_neg_binomial_lpmf(3, 1e8, 2.0, 1.5), want, rtol=1e-14)
    # a heavy tail: the CDF at a large n (a sum of 2001 terms) is still exact
    assert np.isclose(sl.beta_neg_binomial_lcdf(2000, r, 0.8, b),
                      st.betanbinom.logcdf(2000, r, 0.8, b), rtol=1e-9)


def test_beta_neg_binomial_domain_errors(check):
    args = (2, 2.0, 3.0, 1.5)
    fn = sl.beta_neg_binomial_lpmf
    check.domain(fn, args, 0, -1, "beta_neg_binomial_lpmf: n must be an integer >= 0")
    check.domain(fn, args, 0, 1.5, "n must be an integer")
    check.domain(fn, args, 1, 0.0, "r must be positive")
    check.domain(fn, args, 2, -1.0, "alpha")
    check.domain(fn, args, 3, np.inf, "beta")
    check.domain(sl.beta_neg_binomial_lcdf, args, 2, np.nan, "beta_neg_binomial_lcdf: alpha")
    with pytest.raises(sl.DifferentiationError):
        sl.grad(lambda n: fn(n, 2.0, 3.0, 1.5))(2.0)
    with pytest.raises(sl.DomainError, match="beta_neg_binomial_rng: r"):
        sl.beta_neg_binomial_rng(-1.0, 3.0, 1.5)


def test_beta_neg_binomial_rng():
    S = 40000
    r, a, b = 2.5, 6.0, 1.5           # alpha > 4: the variance of the variance is finite
    d = sl.beta_neg_binomial_rng(np.full(S, r), a, b, rng=51)
    assert d.dtype == np.int64 and d.shape == (S,) and d.min() >= 0
    m = r * b / (a - 1)
    v = r * b * (r + a - 1) * (b + a - 1) / ((a - 2) * (a - 1) ** 2)
    assert abs(d.mean() - m) < 4 * np.sqrt(v / S)
    # P(X <= 1) against the CDF (a real r: the formula's), within its standard error
    p1 = np.exp(_bnb_formula("lcdf")(1, r, a, b))
    assert abs(np.mean(d <= 1) - p1) < 4 * np.sqrt(p1 * (1 - p1) / S)
    assert isinstance(sl.beta_neg_binomial_rng(r, a, b, rng=1), int)


# --------------------------------------------------------------------------------------
# dirichlet_multinomial
# --------------------------------------------------------------------------------------
def _dm_ref(y, alpha):
    y = np.atleast_2d(y)
    alpha = np.broadcast_to(alpha, y.shape if np.ndim(alpha) == 1 else np.shape(alpha))
    y = np.broadcast_to(y, alpha.shape)
    return np.array([st.dirichlet_multinomial.logpmf(yy, aa, int(yy.sum()))
                     for yy, aa in zip(y, alpha)])


def test_dirichlet_multinomial(check, rng):
    K = 4
    y = rng.integers(0, 6, K)
    check.all(sl.dirichlet_multinomial_lpmf, _dm_ref, (y, rng.uniform(0.3, 3, K)), (1,))
    Y = rng.integers(0, 6, (3, K))
    check.all(sl.dirichlet_multinomial_lpmf, _dm_ref, (Y, rng.uniform(0.3, 3, K)), (1,))
    check.all(sl.dirichlet_multinomial_lpmf, _dm_ref, (Y, rng.uniform(0.3, 3, (3, K))), (1,))
    check.all(sl.dirichlet_multinomial_lpmf, _dm_ref, (y, rng.uniform(0.3, 3, (3, K))), (1,))
    # N = 0 has probability 1 (Stan); K = 1 too
    assert sl.dirichlet_multinomial_lpmf(np.zeros(3, int), np.ones(3)) == 0.0
    g = sl.grad(lambda a: sl.dirichlet_multinomial_lpmf(np.zeros(3, int), a))(np.ones(3))
    assert np.all(g == 0.0)
    assert np.isclose(sl.dirichlet_multinomial_lpmf([5], [0.7]), 0.0, atol=1e-14)
    # large concentrations tend to the multinomial, without cancellation (mpmath)
    theta = np.array([0.2, 0.3, 0.5])
    y, a = np.array([2, 1, 4]), 1e9 * theta
    assert np.isclose(sl.dirichlet_multinomial_lpmf(y, a),
                      sl.multinomial_lpmf(y, theta), rtol=1e-6)
    with mp.workdps(40):
        want = float(mp.loggamma(1e9) + mp.loggamma(8) - mp.loggamma(7 + 1e9)
                     + sum(mp.loggamma(int(k) + mp.mpf(float(b))) - mp.loggamma(float(b))
                           - mp.loggamma(int(k) + 1) for k, b in zip(y, a)))
    assert np.isclose(sl.dirichlet_multinomial_lpmf(y, a), want, rtol=1e-13)


def test_dirichlet_multinomial_pointwise(check, rng):
    Y = rng.integers(0, 6, (3, 4))
    Y[1] = 0                                        # N = 0: exactly 0
    alpha = rng.uniform(0.3, 3, 4)
    check.pointwise(sl.dirichlet_multinomial_lpmf, _dm_ref, (Y, alpha), (1,))
    assert sl.dirichlet_multinomial_lpmf(Y, alpha, reduce=False)[1] == 0.0
    one = sl.dirichlet_multinomial_lpmf(Y[0], alpha, reduce=False)
    assert np.shape(one) == () and np.isclose(one, _dm_ref(Y[0], alpha)[0])


def test_dirichlet_multinomial_domain_errors(check):
    fn = sl.dirichlet_multinomial_lpmf
    args = (np.array([1, 2]), np.array([1.0, 2.0]))
    check.domain(fn, args, 0, np.array([1, -2]), r"dirichlet_multinomial_lpmf: y\[1\]")
    check.domain(fn, args, 0, np.array([1.5, 2.0]), "y")
    check.domain(fn, args, 1, np.array([1.0, 0.0]), r"alpha\[1\] must be positive")
    with pytest.raises(ValueError, match="do not match"):
        fn(np.array([1, 2, 3]), np.ones(2))
    with pytest.raises(sl.DifferentiationError):
        sl.grad(lambda y: fn(y, np.ones(2)))(np.array([1.0, 2.0]))
    with pytest.raises(sl.DomainError, match="dirichlet_multinomial_rng: N"):
        sl.dirichlet_multinomial_rng(np.ones(2), -1)
    with pytest.raises(sl.DomainError, match="dirichlet_multinomial_rng: alpha"):
        sl.dirichlet_multinomial_rng(np.array([1.0, -1.0]), 3)


def test_dirichlet_multinomial_rng():
    alpha, N, S = np.array([0.5, 2.0, 3.5]), 12, 20000
    g = np.random.default_rng(61)
    d = np.array([sl.dirichlet_multinomial_rng(alpha, N, rng=g) for _ in range(S)])
    assert d.dtype == np.int64 and np.all(d.sum(axis=1) == N)
    a0 = alpha.sum()
    p = alpha / a0
    mean = N * p
    var = N * p * (1 - p) * (N + a0) / (1 + a0)
    assert np.all(np.abs(d.mean(axis=0) - mean) < 4 * np.sqrt(var / S))
    # the overdispersion: the sample variance against the exact one
    se_var = np.sqrt(np.var((d - mean) ** 2, axis=0) / S)
    assert np.all(np.abs(d.var(axis=0) - var) < 4 * se_var)
    assert np.all(sl.dirichlet_multinomial_rng(alpha, 0, rng=1) == 0)
