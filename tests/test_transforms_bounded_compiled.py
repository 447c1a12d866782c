"""A ``lower``-and-``upper`` bounded parameter under sl.compile: its transform records
the same graph at every point (no decision on the signs of the free values), so a
vector of any length replays - in the compiled interpreter where numba is available -
instead of re-recording each sign pattern until the eager tape takes over with a
CompileWarning (warnings are errors here). Values stay inside [lower, upper]."""

import numpy as np
import pytest

import stanlite as sl
from stanlite import transforms as T
from stanlite.autodiff.vm import kernel

from testkit import central_gradient


class _Unit(sl.Model):
    K = sl.data.int()
    theta = sl.param.vector("K", lower=0, upper=1)
    sigma = sl.param.real(lower=-2.5, upper=4.0)

    def log_prob(self, theta, sigma):
        return sl.beta_lpdf(theta, 2.0, 3.0) + sl.normal_lpdf(sigma, 0.5, 1.0)


def test_a_bounded_vector_replays_at_mixed_sign_points():
    m = _Unit(K=10)
    rng = np.random.default_rng(20)
    for _ in range(20):
        x = 2.0 * rng.standard_normal(m.dim)          # mixed signs at every point
        lp, g = m.log_density_gradient(x)
        e_lp, e_g = m._gradient(m._point(x), True)   # the eager tape
        assert abs(lp - e_lp) <= 1e-12 * abs(e_lp)
        np.testing.assert_allclose(g, e_g, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(g, central_gradient(m.log_density, x), rtol=1e-6, atol=1e-7)
    r = m._retaped[True]
    assert r.fallback is None and r.programs == 1
    if kernel.available():
        assert r.compiled and r.vm_skipped is None, r.vm_skipped


def test_the_bounded_transform_lowers_to_the_interpreter():
    if not kernel.available():
        pytest.skip("numba unavailable: the Python replay runs")
    t = T.make("vector", lower=-1.0, upper=3.0)
    f = lambda x: sl.sum(t.constrain(x, (12,))[0]) + t.constrain(x, (12,))[1]
    x0 = np.linspace(-3.0, 3.0, 12)
    vg = sl.compile(f, x0, verify=False)
    ref = sl.value_and_grad(f)
    rng = np.random.default_rng(3)
    for x in [x0, -x0] + [rng.standard_normal(12) * 5 for _ in range(5)]:
        v, g = vg(x)
        ev, eg = ref(x)
        assert abs(v - ev) <= 1e-12 * max(1.0, abs(ev))
        np.testing.assert_allclose(g, eg, rtol=1e-12, atol=1e-15)
    assert vg.programs == 1 and vg.compiled and vg.vm_skipped is None, vg.vm_skipped


def test_values_equal_the_sign_split_formula_to_rounding():
    lb, ub = -2.5, 4.0
    x = np.linspace(-30.0, 30.0, 121)
    y, lj = T.make("vector", lower=lb, upper=ub).constrain(x, x.shape)
    s = 1.0 / (1.0 + np.exp(-x))
    old = np.where(x > 0, ub - (ub - lb) / (1.0 + np.exp(x)), lb + (ub - lb) * s)
    np.testing.assert_allclose(y, old, rtol=0, atol=4 * np.spacing(ub))
    want = np.sum(np.log(ub - lb) - np.logaddexp(0.0, -x) - np.logaddexp(0.0, x))
    assert abs(float(lj) - want) <= 1e-12 * abs(want)


@pytest.mark.parametrize("lb, ub", [(0.0, 1.0), (-2.8598546e1, 5.46712987e1),
                                    (-1.30315723e-3, -7.11903589e-19), (1e-3, 1e5)])
def test_constrained_values_stay_inside_the_bounds(lb, ub):
    # lb + (ub - lb) rounds above ub for the second and third pairs: the span is an ulp
    # smaller there, so y <= ub for every x; y reaches lb, and ub to the rounding of
    # the larger bound's magnitude, for |x| large
    x = np.concatenate([np.linspace(-800.0, 800.0, 401), [-np.inf, np.inf]])
    for t, shape in ((T.make("vector", lower=lb, upper=ub), x.shape),
                     (T.make("vector", lower=np.full(x.size, lb),
                             upper=np.full(x.size, ub)), x.shape)):
        y, _ = t.constrain(x, shape)
        assert np.all(y >= lb) and np.all(y <= ub)
        assert y[0] == lb and y[-1] <= ub and ub - y[-1] <= 2 * np.spacing(max(-lb, ub))
    for v in (-800.0, 800.0, 0.3):
        ys, _ = T.make("real", lower=lb, upper=ub).constrain(np.array([v]), ())
        assert lb <= ys <= ub
