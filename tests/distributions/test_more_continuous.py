"""rayleigh and loglogistic: lpdf/lcdf/lccdf against scipy.stats (rayleigh, fisk),
gradients and nested AD against finite differences under broadcasting, the ends of
the support, domain errors naming the argument, rng moments within Monte Carlo error."""

import numpy as np
import pytest
import scipy.stats as st

import stanlite as sl

# name: (scipy frozen distribution of the parameters, samplers of (y, *params))
DISTS = {
    "rayleigh": (lambda s: st.rayleigh(scale=s),
                 (lambda r, n: r.uniform(0.1, 4.0, n), lambda r, n: r.uniform(0.5, 2.5, n))),
    "loglogistic": (lambda a, b: st.fisk(b, scale=a),
                    (lambda r, n: r.uniform(0.1, 5.0, n), lambda r, n: r.uniform(0.5, 3.0, n),
                     lambda r, n: r.uniform(0.6, 4.0, n))),
}
KINDS = {"lpdf": "logpdf", "lcdf": "logcdf", "lccdf": "logsf"}


def _shapes(nargs):
    """vector y with scalar params; all vectors; a matrix y with a row of params; a
    scalar y with vector params."""
    return [((5,),) + ((),) * (nargs - 1), ((4,),) * nargs,
            ((3, 2), (2,)) + ((),) * (nargs - 2), ((),) + ((3,),) * (nargs - 1)]


CASES = [(name, kind, i) for name in DISTS for kind in KINDS for i in range(4)]


@pytest.mark.parametrize("name,kind,i", CASES)
def test_against_scipy_and_finite_differences(check, rng, name, kind, i):
    dist, gens = DISTS[name]
    shapes = _shapes(len(gens))[i]
    args = tuple(float(a) if np.ndim(a) == 0 else a
                 for a in (g(rng, s) for g, s in zip(gens, shapes)))
    ref = lambda y, *p: getattr(dist(*p), KINDS[kind])(y)          # noqa: E731
    check.all(getattr(sl, f"{name}_{kind}"), ref, args, tuple(range(len(args))), rtol=1e-9)
    check.pointwise(getattr(sl, f"{name}_{kind}"), ref, args, tuple(range(len(args))),
                    rtol=1e-9)


def test_closed_form_gradients():
    y, s = 1.7, 1.3
    gy, gs = sl.grad(sl.rayleigh_lpdf, (0, 1))(y, s)
    assert np.isclose(gy, 1 / y - y / s ** 2) and np.isclose(gs, -2 / s + y ** 2 / s ** 3)
    y, a, b = 1.7, 2.1, 3.3
    t = b * np.log(y / a)
    p = 1 / (1 + np.exp(-t))
    g = sl.grad(sl.loglogistic_lpdf, (0, 1, 2))(y, a, b)
    np.testing.assert_allclose(g, [(b - 1 - 2 * b * p) / y, b * (2 * p - 1) / a,
                                   1 / b + np.log(y / a) * (1 - 2 * p)], rtol=1e-12)


def test_ends_of_the_support():
    for lpdf, params in ((sl.rayleigh_lpdf, (1.0,)), (sl.loglogistic_lpdf, (1.0, 2.0))):
        assert lpdf(0.0, *params) == -np.inf
        assert lpdf(np.inf, *params) == -np.inf
    for name, params in (("rayleigh", (1.3,)), ("loglogistic", (1.3, 2.0))):
        lcdf, lccdf = getattr(sl, f"{name}_lcdf"), getattr(sl, f"{name}_lccdf")
        assert lcdf(0.0, *params) == -np.inf and lccdf(0.0, *params) == 0.0
        assert lcdf(np.inf, *params) == 0.0 and lccdf(np.inf, *params) == -np.inf
        # elementwise: each end on its own
        ends = np.array([0.0, 1.1, np.inf])
        np.testing.assert_array_equal(lcdf(ends, *params, reduce=False)[[0, 2]], [-np.inf, 0])
        np.testing.assert_array_equal(lccdf(ends, *params, reduce=False)[[0, 2]], [0, -np.inf])
        lpdf = getattr(sl, f"{name}_lpdf")
        assert np.all(lpdf(ends, *params, reduce=False)[[0, 2]] == -np.inf)
        # an element at an end where the CDF is 1 contributes 0 to the sum
        y = np.array([0.0, 1.1])
        assert np.isclose(lccdf(y, *params), lccdf(1.1, *params))
        g = sl.grad(lambda p: lccdf(y, p, *params[1:]))(params[0])
        assert np.isclose(g, sl.grad(lambda p: lccdf(1.1, p, *params[1:]))(params[0]))
    # far tails keep their precision
    assert np.isclose(sl.rayleigh_lcdf(1e-5, 1.0), np.log(0.5e-10), rtol=1e-9)
    assert np.isclose(sl.rayleigh_lccdf(40.0, 1.0), -800.0)
    assert np.isclose(sl.loglogistic_lccdf(1e30, 1.0, 2.0), -60 * np.log(10), rtol=1e-12)
    assert np.isclose(sl.loglogistic_lcdf(1e-30, 1.0, 2.0), -60 * np.log(10), rtol=1e-12)


@pytest.mark.parametrize("kind", list(KINDS))
def test_domain_errors(check, kind):
    fn = getattr(sl, f"rayleigh_{kind}")
    check.domain(fn, (1.0, 1.0), 0, -0.5, f"rayleigh_{kind}: y must be non-negative")
    check.domain(fn, (1.0, 1.0), 0, np.nan, "y")
    check.domain(fn, (1.0, 1.0), 1, 0.0, "sigma must be positive")
    fn = getattr(sl, f"loglogistic_{kind}")
    check.domain(fn, (1.0, 1.0, 2.0), 0, np.array([1.0, -1.0]), r"y\[1\]")
    check.domain(fn, (1.0, 1.0, 2.0), 1, -1.0, "alpha")
    check.domain(fn, (1.0, 1.0, 2.0), 2, np.inf, "beta")
    with pytest.raises(sl.DomainError, match="rayleigh_rng: sigma"):
        sl.rayleigh_rng(-1.0)
    with pytest.raises(sl.DomainError, match="loglogistic_rng: beta"):
        sl.loglogistic_rng(1.0, 0.0)


def _mean_within(draws, mean, var, k=4.0):
    """|sample mean - mean| within k Monte Carlo standard errors."""
    assert abs(draws.mean() - mean) < k * np.sqrt(var / draws.size), (draws.mean(), mean)


def test_rng_moments():
    S = 40000
    s = 1.7
    d = sl.rayleigh_rng(np.full(S, s), rng=21)
    assert d.shape == (S,) and d.min() > 0
    var = (4 - np.pi) / 2 * s ** 2
    _mean_within(d, s * np.sqrt(np.pi / 2), var)
    _mean_within(d ** 2, 2 * s ** 2, 8 * s ** 4 - 4 * s ** 4)      # E y^4 = 8 s^4
    a, b = 2.0, 5.0                                                 # beta > 4: 4 moments
    d = sl.loglogistic_rng(a, np.full(S, b), rng=22)
    frozen = st.fisk(b, scale=a)
    _mean_within(d, frozen.mean(), frozen.var())
    _mean_within(d ** 2, frozen.moment(2), frozen.moment(4) - frozen.moment(2) ** 2)
    # the median is alpha: P(y < alpha) = 1/2
    assert abs(np.mean(d < a) - 0.5) < 4 * np.sqrt(0.25 / S)
    assert isinstance(sl.rayleigh_rng(1.0, rng=1), float)
    assert sl.loglogistic_rng(np.ones((2, 3)), 2.0, rng=1).shape == (2, 3)
