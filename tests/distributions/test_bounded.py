"""Positive- and unit-interval-support distributions (stanlite.distributions.bounded):
lpdf/lcdf/lccdf against scipy.stats, gradients w.r.t. every argument (jointly and one
at a time) and nested AD (JVP, Hessian) against finite differences, broadcasting,
the CDF derivatives w.r.t. shape parameters against mpmath, support conventions,
domain errors naming the argument, and rng moments."""

import math

import mpmath as mp
import numpy as np
import pytest
import scipy.stats as st

import stanlite as sl
from stanlite.distributions import bounded


def _u(lo, hi):
    return lambda rng, shape: rng.uniform(lo, hi, shape)


# name: (scipy frozen distribution from the parameters, generators for (y, *params))
DISTS = {
    "lognormal": (lambda mu, s: st.lognorm(s=s, scale=np.exp(mu)),
                  (_u(0.2, 4.0), _u(-0.5, 0.5), _u(0.5, 1.5))),
    "chi_square": (lambda nu: st.chi2(nu), (_u(0.3, 5.0), _u(1.0, 6.0))),
    "inv_chi_square": (lambda nu: st.invgamma(0.5 * nu, scale=0.5),
                       (_u(0.1, 1.5), _u(1.0, 6.0))),
    "scaled_inv_chi_square": (lambda nu, s: st.invgamma(0.5 * nu, scale=0.5 * nu * s * s),
                              (_u(0.3, 3.0), _u(1.5, 6.0), _u(0.5, 1.5))),
    "exponential": (lambda b: st.expon(scale=1.0 / b), (_u(0.1, 3.0), _u(0.5, 2.0))),
    "gamma": (lambda a, b: st.gamma(a, scale=1.0 / b),
              (_u(0.2, 4.0), _u(0.6, 4.0), _u(0.5, 2.0))),
    "inv_gamma": (lambda a, b: st.invgamma(a, scale=b),
                  (_u(0.2, 3.0), _u(0.8, 4.0), _u(0.5, 2.0))),
    "weibull": (lambda a, s: st.weibull_min(a, scale=s),
                (_u(0.2, 3.0), _u(0.6, 3.0), _u(0.5, 2.0))),
    "frechet": (lambda a, s: st.invweibull(a, scale=s),
                (_u(0.3, 3.0), _u(0.8, 3.0), _u(0.5, 2.0))),
    "pareto": (lambda m, a: st.pareto(a, scale=m),
               (_u(1.2, 4.0), _u(0.4, 1.0), _u(0.5, 3.0))),
    "pareto_type_2": (lambda mu, lam, a: st.lomax(a, loc=mu, scale=lam),
                      (_u(0.1, 3.0), _u(-1.0, 0.0), _u(0.5, 2.0), _u(0.5, 3.0))),
    "beta": (lambda a, b: st.beta(a, b), (_u(0.05, 0.95), _u(0.6, 4.0), _u(0.6, 4.0))),
    "beta_proportion": (lambda mu, k: st.beta(mu * k, (1.0 - mu) * k),
                        (_u(0.05, 0.95), _u(0.2, 0.8), _u(2.0, 8.0))),
}
KINDS = {"lpdf": "logpdf", "lcdf": "logcdf", "lccdf": "logsf"}


def _shapes(nargs):
    """Broadcasting patterns: vector y with scalar params, all vectors, a matrix y
    with a row of params, a scalar y with vector params."""
    return [((5,),) + ((),) * (nargs - 1),
            ((4,),) * nargs,
            ((3, 2), (2,)) + ((),) * (nargs - 2),
            ((),) + ((3,),) * (nargs - 1)]


CASES = [(name, kind, shapes) for name, (_, gens) in DISTS.items() for kind in KINDS
         for shapes in _shapes(len(gens))]


def _args(rng, name, shapes):
    gens = DISTS[name][1]
    args = [g(rng, s) for g, s in zip(gens, shapes)]
    return tuple(float(a) if np.ndim(a) == 0 else a for a in args)


def _ref(name, kind):
    dist = DISTS[name][0]
    return lambda y, *p: getattr(dist(*p), KINDS[kind])(y)


@pytest.mark.parametrize("name,kind,shapes", CASES,
                         ids=[f"{n}_{k}_{i}" for n, k, _ in CASES[::4] for i in range(4)])
def test_against_scipy_and_finite_differences(check, rng, name, kind, shapes):
    args = _args(rng, name, shapes)
    fn = getattr(sl, f"{name}_{kind}")
    check.value(fn, _ref(name, kind), args, rtol=1e-9)
    check.grad(fn, args, tuple(range(len(args))))


NESTED = [(name, kind) for name in DISTS for kind in KINDS]


@pytest.mark.parametrize("name,kind", NESTED)
def test_nested_ad(check, rng, name, kind):
    # forward mode and forward-over-reverse Hessians w.r.t. every argument: for the
    # gamma/beta families' CDFs this differentiates the shape moments twice
    shapes = ((2,),) + ((),) * (len(DISTS[name][1]) - 1)
    args = _args(rng, name, shapes)
    check.nested(getattr(sl, f"{name}_{kind}"), args, tuple(range(len(args))))


def test_known_values():
    # Stan's own unit-test values and closed forms
    assert sl.gamma_lpdf(1.0, 2.0, 2.0) == pytest.approx(-0.6137056388801093, rel=1e-14)
    assert sl.gamma_lpdf(2.0, 0.25, 0.75) == pytest.approx(
        st.gamma.logpdf(2.0, 0.25, scale=1 / 0.75), rel=1e-14)
    assert sl.exponential_lpdf(2.0, 3.0) == pytest.approx(math.log(3.0) - 6.0, rel=1e-15)
    assert sl.exponential_lccdf(2.0, 3.0) == -6.0
    assert sl.weibull_lccdf(2.0, 2.0, 4.0) == pytest.approx(-0.25, rel=1e-15)
    assert sl.frechet_lcdf(2.0, 2.0, 4.0) == pytest.approx(-4.0, rel=1e-15)
    assert sl.pareto_lccdf(4.0, 2.0, 3.0) == pytest.approx(3.0 * math.log(0.5), rel=1e-15)
    assert sl.beta_lcdf(0.3, 1.0, 1.0) == pytest.approx(math.log(0.3), rel=1e-15)
    assert sl.beta_proportion_lpdf(0.3, 0.4, 5.0) == pytest.approx(
        sl.beta_lpdf(0.3, 2.0, 3.0), rel=1e-14)
    assert sl.chi_square_lpdf(3.0, 4.0) == pytest.approx(
        sl.gamma_lpdf(3.0, 2.0, 0.5), rel=1e-14)
    assert sl.inv_chi_square_lcdf(0.7, 3.0) == pytest.approx(
        sl.scaled_inv_chi_square_lcdf(0.7, 3.0, 1.0 / math.sqrt(3.0)), rel=1e-13)


# -- the shape derivatives of the incomplete gamma/beta CDFs, against mpmath ----------
def _mp_dlog(F, a, h=None):
    mp.mp.dps = 40
    return float(mp.diff(F, mp.mpf(a)))


@pytest.mark.parametrize("a,x", [(0.3, 0.01), (2.5, 1.0), (4.0, 12.0), (40.0, 30.0),
                                 (0.05, 3.0), (300.0, 340.0)])
def test_gamma_shape_derivative_vs_mpmath(a, x):
    mp.mp.dps = 40
    dp = _mp_dlog(lambda t: mp.log(mp.gammainc(t, 0, x, regularized=True)), a)
    dq = _mp_dlog(lambda t: mp.log(mp.gammainc(t, x, mp.inf, regularized=True)), a)
    # gamma with beta = 1: lcdf = log P(alpha, y), lccdf = log Q(alpha, y)
    gp = sl.grad(lambda t: sl.gamma_lcdf(x, t, 1.0))(a)
    gq = sl.grad(lambda t: sl.gamma_lccdf(x, t, 1.0))(a)
    assert gp == pytest.approx(dp, rel=1e-10, abs=1e-12)
    assert gq == pytest.approx(dq, rel=1e-10, abs=1e-12)
    # second derivative (the moment of log t squared) through the nested Hessian
    d2p = float(mp.diff(lambda t: mp.log(mp.gammainc(t, 0, x, regularized=True)),
                        mp.mpf(a), 2))
    hp = sl.hessian(lambda v: sl.gamma_lcdf(x, v[0], 1.0))(np.array([a]))[0, 0]
    assert hp == pytest.approx(d2p, rel=1e-8, abs=1e-10)


@pytest.mark.parametrize("a,b,x", [(2.0, 3.0, 0.4), (0.5, 0.5, 0.01), (0.3, 8.0, 0.2),
                                   (30.0, 40.0, 0.3), (5.0, 0.2, 0.999)])
def test_beta_shape_derivatives_vs_mpmath(a, b, x):
    mp.mp.dps = 40

    def F(s, t, upper):
        i = mp.betainc(s, t, 0, x, regularized=True)
        return mp.log(1 - i) if upper else mp.log(i)
    for upper, fn in ((False, sl.beta_lcdf), (True, sl.beta_lccdf)):
        da = float(mp.diff(lambda s: F(s, mp.mpf(b), upper), mp.mpf(a)))
        db = float(mp.diff(lambda t: F(mp.mpf(a), t, upper), mp.mpf(b)))
        g = sl.grad(lambda p: fn(x, p[0], p[1]))(np.array([a, b]))
        np.testing.assert_allclose(g, [da, db], rtol=1e-10, atol=1e-12)


def test_cdf_tails_beyond_underflow():
    # P(50, 1e-8) ~ 1e-464 underflows a double: the log comes from the quadrature
    mp.mp.dps = 30
    want = float(mp.log(mp.gammainc(50, 0, mp.mpf("1e-8"), regularized=True)))
    assert sl.gamma_lcdf(1e-8, 50.0, 1.0) == pytest.approx(want, rel=1e-12)
    want = float(mp.log(mp.gammainc(2, 800, mp.inf, regularized=True)))
    assert sl.gamma_lccdf(800.0, 2.0, 1.0) == pytest.approx(want, rel=1e-12)
    want = float(mp.log(mp.betainc(60, 3, 0, mp.mpf("1e-6"), regularized=True)))
    assert sl.beta_lcdf(1e-6, 60.0, 3.0) == pytest.approx(want, rel=1e-12)
    # and the gradient there stays finite (hazard in logs, moments as ratios)
    g = sl.grad(lambda p: sl.gamma_lcdf(1e-8, p[0], p[1]))(np.array([50.0, 1.0]))
    assert np.all(np.isfinite(g))
    # near 1 the log CDF is log1p(-Q): accurate, not rounded to 0
    assert sl.gamma_lcdf(80.0, 2.0, 1.0) == pytest.approx(-81.0 * math.exp(-80.0), rel=1e-12)


def test_moment_primitives_nest_to_third_order():
    # d^3/da^3 log P(a, x): the moment recursion has no order limit
    x = 2.0

    def f(v):
        return sl.gamma_lcdf(x, v[0], 1.0)
    mp.mp.dps = 40
    want = float(mp.diff(lambda t: mp.log(mp.gammainc(t, 0, x, regularized=True)),
                         mp.mpf(1.7), 3))
    g3 = sl.grad(lambda v: sl.hessian(f)(v)[0, 0])(np.array([1.7]))[0]
    assert g3 == pytest.approx(want, rel=1e-7)


# -- support conventions (Stan's) ---------------------------------------------------
def test_outside_support_is_minus_infinity_with_zero_gradient():
    cases = [
        (sl.pareto_lpdf, (np.array([0.5, 2.0]), 1.0, 2.0)),
        (sl.inv_gamma_lpdf, (np.array([-1.0, 2.0]), 1.0, 2.0)),
        (sl.inv_chi_square_lpdf, (0.0, 3.0)),
        (sl.scaled_inv_chi_square_lpdf, (-2.0, 3.0, 1.0)),
        (sl.lognormal_lpdf, (np.array([0.0, 1.0]), 0.0, 1.0)),
        (sl.weibull_lpdf, (-0.5, 2.0, 1.0)),
        (sl.gamma_lcdf, (np.array([0.0, 1.0]), 2.0, 1.0)),
        (sl.beta_lccdf, (np.array([0.2, 1.0]), 2.0, 3.0)),
        (sl.pareto_lcdf, (np.array([0.5, 2.0]), 1.0, 2.0)),
        (sl.pareto_type_2_lcdf, (0.0, 0.0, 1.0, 2.0)),
        (sl.exponential_lccdf, (np.inf, 2.0)),
    ]
    for fn, args in cases:
        assert fn(*args) == -np.inf, fn.__name__
        g = sl.grad(lambda p: fn(args[0], *[p[i] for i in range(len(args) - 1)]))(
            np.array([float(np.ravel(a)[0]) for a in args[1:]]))
        assert np.all(g == 0), fn.__name__


def test_cdf_ends_contribute_zero():
    # an element where the CDF (or CCDF) is 1 adds 0 and no gradient
    y = np.array([0.0, 1.3])
    assert sl.gamma_lccdf(y, 2.0, 1.5) == pytest.approx(sl.gamma_lccdf(1.3, 2.0, 1.5))
    g = sl.grad(lambda p: sl.gamma_lccdf(y, p[0], p[1]))(np.array([2.0, 1.5]))
    g1 = sl.grad(lambda p: sl.gamma_lccdf(1.3, p[0], p[1]))(np.array([2.0, 1.5]))
    np.testing.assert_allclose(g, g1, rtol=1e-12)
    assert sl.gamma_lcdf(np.inf, 2.0, 1.5) == 0.0
    assert sl.beta_lcdf(np.array([1.0, 0.4]), 2.0, 3.0) == pytest.approx(
        sl.beta_lcdf(0.4, 2.0, 3.0))
    assert sl.pareto_lccdf(np.array([0.5, 3.0]), 1.0, 2.0) == pytest.approx(
        2.0 * math.log(1.0 / 3.0))
    assert sl.weibull_lccdf(0.0, 2.0, 1.0) == 0.0
    assert sl.frechet_lcdf(np.inf, 2.0, 1.0) == 0.0
    assert sl.lognormal_lccdf(0.0, 0.0, 1.0) == 0.0


def test_boundary_values_of_densities():
    # 0 log 0 = 0: the exponential member of each family is finite at y = 0
    assert sl.gamma_lpdf(0.0, 1.0, 2.0) == pytest.approx(math.log(2.0))
    assert sl.chi_square_lpdf(0.0, 2.0) == pytest.approx(-math.log(2.0))
    assert sl.weibull_lpdf(0.0, 1.0, 2.0) == pytest.approx(-math.log(2.0))
    assert sl.beta_lpdf(np.array([0.0, 1.0]), 1.0, 1.0) == 0.0
    assert sl.gamma_lpdf(0.0, 3.0, 1.0) == -np.inf
    assert sl.gamma_lpdf(0.0, 0.5, 1.0) == np.inf
    assert sl.pareto_lpdf(1.0, 1.0, 2.0) == pytest.approx(math.log(2.0))


DOMAIN = [
    # (function, valid args, index, bad value, argument name in the message)
    (sl.lognormal_lpdf, (1.0, 0.0, 1.0), 0, -1.0, "y"),
    (sl.lognormal_lpdf, (1.0, 0.0, 1.0), 1, np.inf, "mu"),
    (sl.lognormal_lcdf, (1.0, 0.0, 1.0), 2, 0.0, "sigma"),
    (sl.chi_square_lpdf, (1.0, 2.0), 0, -1.0, "y"),
    (sl.chi_square_lccdf, (1.0, 2.0), 1, 0.0, "nu"),
    (sl.inv_chi_square_lpdf, (1.0, 2.0), 0, np.nan, "y"),
    (sl.inv_chi_square_lcdf, (1.0, 2.0), 0, -1.0, "y"),
    (sl.inv_chi_square_lpdf, (1.0, 2.0), 1, -2.0, "nu"),
    (sl.scaled_inv_chi_square_lpdf, (1.0, 2.0, 1.0), 2, 0.0, "s"),
    (sl.scaled_inv_chi_square_lccdf, (1.0, 2.0, 1.0), 1, np.inf, "nu"),
    (sl.exponential_lpdf, (1.0, 2.0), 0, -1.0, "y"),
    (sl.exponential_lcdf, (1.0, 2.0), 1, 0.0, "beta"),
    (sl.gamma_lpdf, (1.0, 2.0, 1.0), 0, -1.0, "y"),
    (sl.gamma_lpdf, (1.0, 2.0, 1.0), 0, np.array([1.0, -1.0]), r"y\[1\]"),
    (sl.gamma_lcdf, (1.0, 2.0, 1.0), 1, 0.0, "alpha"),
    (sl.gamma_lccdf, (1.0, 2.0, 1.0), 2, -1.0, "beta"),
    (sl.inv_gamma_lpdf, (1.0, 2.0, 1.0), 2, np.array([1.0, np.nan]), r"beta\[1\]"),
    (sl.inv_gamma_lcdf, (1.0, 2.0, 1.0), 0, -1.0, "y"),
    (sl.weibull_lpdf, (1.0, 2.0, 1.0), 0, np.inf, "y"),
    (sl.weibull_lcdf, (1.0, 2.0, 1.0), 1, 0.0, "alpha"),
    (sl.weibull_lccdf, (1.0, 2.0, 1.0), 2, -1.0, "sigma"),
    (sl.frechet_lpdf, (1.0, 2.0, 1.0), 0, 0.0, "y"),
    (sl.frechet_lcdf, (1.0, 2.0, 1.0), 1, np.inf, "alpha"),
    (sl.pareto_lpdf, (2.0, 1.0, 2.0), 1, 0.0, "y_min"),
    (sl.pareto_lpdf, (2.0, 1.0, 2.0), 0, np.nan, "y"),
    (sl.pareto_lccdf, (2.0, 1.0, 2.0), 2, -1.0, "alpha"),
    (sl.pareto_type_2_lpdf, (2.0, 1.0, 1.0, 2.0), 0, 0.5, "y"),
    (sl.pareto_type_2_lpdf, (2.0, 1.0, 1.0, 2.0), 1, np.inf, "mu"),
    (sl.pareto_type_2_lcdf, (2.0, 1.0, 1.0, 2.0), 2, 0.0, "lambda"),
    (sl.pareto_type_2_lccdf, (2.0, 1.0, 1.0, 2.0), 3, -1.0, "alpha"),
    (sl.beta_lpdf, (0.5, 2.0, 2.0), 0, 1.5, "theta"),
    (sl.beta_lcdf, (0.5, 2.0, 2.0), 1, 0.0, "alpha"),
    (sl.beta_lccdf, (0.5, 2.0, 2.0), 2, np.inf, "beta"),
    (sl.beta_proportion_lpdf, (0.5, 0.4, 2.0), 0, -0.1, "theta"),
    (sl.beta_proportion_lpdf, (0.5, 0.4, 2.0), 1, 1.0, "mu"),
    (sl.beta_proportion_lcdf, (0.5, 0.4, 2.0), 1, 0.0, "mu"),
    (sl.beta_proportion_lccdf, (0.5, 0.4, 2.0), 2, 0.0, "kappa"),
]


@pytest.mark.parametrize("fn,args,i,bad,arg", DOMAIN,
                         ids=[f"{d[0].__name__}-{d[4]}" for d in DOMAIN])
def test_domain_errors(check, fn, args, i, bad, arg):
    check.domain(fn, args, i, bad, arg)
    with pytest.raises(sl.DomainError, match=fn.__name__):
        a = list(args)
        a[i] = bad
        fn(*a)


def test_gamma_negative_y_message():
    with pytest.raises(sl.DomainError, match=r"gamma_lpdf: y must be non-negative, "
                                             r"but is -1.0"):
        sl.gamma_lpdf(-1.0, 2.0, 1.0)


def test_one_node_per_density():
    from stanlite.autodiff.tape import current_tape
    from stanlite.autodiff.var import Var
    x = np.linspace(0.1, 0.9, 50)
    with sl.nested():
        t = current_tape()
        for fn in (sl.beta_lpdf, sl.beta_lcdf, sl.gamma_lccdf):
            a = Var(2.0)
            n0 = len(t.nodes)
            fn(x, a, 3.0)
            assert len(t.nodes) - n0 == 1, fn.__name__


# -- rng -------------------------------------------------------------------------------
RNG = [
    # (rng function, params, scipy frozen distribution)
    (sl.lognormal_rng, (0.3, 0.5), st.lognorm(s=0.5, scale=np.exp(0.3))),
    (sl.chi_square_rng, (3.5,), st.chi2(3.5)),
    (sl.inv_chi_square_rng, (10.0,), st.invgamma(5.0, scale=0.5)),
    (sl.scaled_inv_chi_square_rng, (10.0, 1.5), st.invgamma(5.0, scale=5.0 * 2.25)),
    (sl.exponential_rng, (2.5,), st.expon(scale=0.4)),
    (sl.gamma_rng, (2.5, 4.0), st.gamma(2.5, scale=0.25)),
    (sl.inv_gamma_rng, (6.0, 2.0), st.invgamma(6.0, scale=2.0)),
    (sl.weibull_rng, (1.7, 2.0), st.weibull_min(1.7, scale=2.0)),
    (sl.frechet_rng, (6.0, 2.0), st.invweibull(6.0, scale=2.0)),
    (sl.pareto_rng, (1.5, 6.0), st.pareto(6.0, scale=1.5)),
    (sl.pareto_type_2_rng, (-1.0, 2.0, 6.0), st.lomax(6.0, loc=-1.0, scale=2.0)),
    (sl.beta_rng, (2.0, 5.0), st.beta(2.0, 5.0)),
    (sl.beta_proportion_rng, (0.3, 10.0), st.beta(3.0, 7.0)),
]


@pytest.mark.parametrize("fn,params,ref", RNG, ids=[r[0].__name__ for r in RNG])
def test_rng_moments(fn, params, ref):
    n = 40000
    d = fn(*[np.full(n, p) if i == 0 else p for i, p in enumerate(params)], rng=7)
    assert d.shape == (n,)
    mean, var = ref.stats("mv")
    # mean within 4 Monte Carlo standard errors; variance within 4 of its own (the
    # parameters above keep the fourth moment finite)
    assert abs(d.mean() - mean) < 4 * math.sqrt(var / n)
    m4 = ref.moment(4) - 4 * mean * ref.moment(3) + 6 * mean ** 2 * ref.moment(2) \
        - 3 * mean ** 4
    assert abs(d.var() - var) < 4 * math.sqrt((m4 - var ** 2) / n)
    # a scalar draw is a float; broadcasting of vector parameters
    assert isinstance(fn(*params, rng=1), float)
    assert fn(*[np.full((2, 3), p) for p in params], rng=1).shape == (2, 3)


@pytest.mark.parametrize("name,params,match", [
    ("gamma", (1.0, -1.0), "gamma_rng: beta"),
    ("beta_proportion", (1.2, 3.0), "beta_proportion_rng: mu"),
    ("pareto_type_2", (0.0, 0.0, 1.0), "pareto_type_2_rng: lambda"),
])
def test_rng_checks_parameters(name, params, match):
    with pytest.raises(sl.DomainError, match=match):
        getattr(sl, f"{name}_rng")(*params)


def test_public_names():
    for name in DISTS:
        for kind in ("lpdf", "lcdf", "lccdf", "rng"):
            f = getattr(sl, f"{name}_{kind}")
            assert f.__doc__ and f.__name__ == f"{name}_{kind}"
    assert set(bounded.__all__) <= set(dir(sl))
