"""normal and std_normal: lpdf/lcdf/lccdf against scipy.stats, gradients and nested
AD against finite differences, broadcasting, domain errors, rng moments."""

import numpy as np
import pytest
import scipy.stats as st

import stanlite as sl


@pytest.mark.parametrize("shapes", [((5,), (), ()), ((4,), (4,), (4,)), ((3, 2), (2,), ()),
                                    ((), (3,), (3,))])
@pytest.mark.parametrize("kind", ["lpdf", "lcdf", "lccdf"])
def test_normal(check, rng, shapes, kind):
    sy, sm_, ss = shapes
    args = (rng.normal(size=sy) * 2, rng.normal(size=sm_), rng.uniform(0.5, 2.0, ss))
    fn = getattr(sl, f"normal_{kind}")
    ref = {"lpdf": st.norm.logpdf, "lcdf": st.norm.logcdf, "lccdf": st.norm.logsf}[kind]
    check.all(fn, ref, args, (0, 1, 2))


@pytest.mark.parametrize("kind", ["lpdf", "lcdf", "lccdf"])
def test_std_normal(check, rng, kind):
    fn = getattr(sl, f"std_normal_{kind}")
    ref = {"lpdf": st.norm.logpdf, "lcdf": st.norm.logcdf, "lccdf": st.norm.logsf}[kind]
    for y in (rng.normal(size=6), 0.7):
        check.all(fn, ref, (y,), (0,))


def test_tails_stay_finite():
    # log Phi(-40) ~ -804.6: the naive log(Phi) would be log(0) = -inf
    assert np.isclose(sl.normal_lcdf(-40.0, 0.0, 1.0), st.norm.logcdf(-40.0))
    g = sl.grad(lambda y: sl.normal_lcdf(y, 0.0, 1.0))(-40.0)
    assert np.isclose(g, 40.0249, rtol=1e-4)          # Mills ratio ~ -y
    assert np.isclose(sl.normal_lccdf(40.0, 0.0, 1.0), st.norm.logsf(40.0))


def test_domain_errors(check):
    for fn in (sl.normal_lpdf, sl.normal_lcdf, sl.normal_lccdf):
        check.domain(fn, (1.0, 0.0, 1.0), 2, 0.0, "sigma")
        check.domain(fn, (1.0, 0.0, 1.0), 2, np.array([1.0, -2.0]), r"sigma\[1\]")
        check.domain(fn, (1.0, 0.0, 1.0), 1, np.inf, "mu")
        check.domain(fn, (1.0, 0.0, 1.0), 0, np.nan, "y")


def test_one_node_per_density():
    x = np.ones(1000)
    with sl.nested():
        from stanlite.autodiff.tape import current_tape
        from stanlite.autodiff.var import Var
        t = current_tape()
        mu = Var(0.0)
        n0 = len(t.nodes)
        sl.normal_lpdf(x, mu, 2.0)
        assert len(t.nodes) - n0 == 1


def test_rng_moments():
    d = sl.normal_rng(np.full(20000, 1.5), 2.0, rng=3)
    assert d.shape == (20000,)
    se = 2.0 / np.sqrt(20000)
    assert abs(d.mean() - 1.5) < 4 * se
    assert isinstance(sl.normal_rng(0.0, 1.0, rng=1), float)
    assert sl.std_normal_rng(size=(3, 2), rng=1).shape == (3, 2)


def test_plain_path_for_constant_location_and_scale():
    # normal_lpdf(y, mu, sigma) with numbers mu and sigma (a prior) takes its own path:
    # value against scipy, gradient in y against central differences, float and vector
    import scipy.stats as st
    rng = np.random.default_rng(11)
    for mu, sigma in ((0, 2.5), (1.5, 0.3), (-2.0, 1)):
        y = rng.normal(mu, 2 * sigma, 7)
        assert sl.normal_lpdf(y, mu, sigma) == pytest.approx(
            st.norm.logpdf(y, mu, sigma).sum(), rel=1e-13)
        sl.assert_grad(lambda v: sl.normal_lpdf(v, mu, sigma), y)
        sl.assert_grad(lambda v: sl.normal_lpdf(v[0], mu, sigma) * 1.0, y[:1])
        g = sl.grad(lambda v: sl.normal_lpdf(v, mu, sigma))(y)
        np.testing.assert_allclose(g, -(y - mu) / sigma ** 2, rtol=1e-13)
        t = float(y[0])
        np.testing.assert_allclose(sl.grad(lambda v: sl.normal_lpdf(v, mu, sigma))(t),
                                   -(t - mu) / sigma ** 2, rtol=1e-13)
