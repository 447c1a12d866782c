"""The implicit leapfrog step as one compiled call (samplers/rhmc_step_jit.py) against
the Python step it replaces (samplers/rhmc.py, SoftAbsMetric._step): the same
trajectory to the fixed points' tolerance, the same failures, the same retries; and
the step really running compiled (issue 24: an RHMC step's cost)."""

import numpy as np
import pytest

from stanlite.models.neal_funnel import NealFunnel
from stanlite.samplers import rhmc
from stanlite.samplers import rhmc_step_jit as SJ
from stanlite.samplers.hamiltonian import Point
from stanlite.samplers.rhmc import SoftAbsMetric

pytestmark = pytest.mark.skipif(not SJ.available(), reason="numba not available")


def _trajectory(model, q, compiled, eps, n, alpha=30.0, max_halvings=0, seed=5):
    met = SoftAbsMetric(q.shape[0], alpha=alpha, max_halvings=max_halvings)
    met.compiled_step = compiled
    lp, g = model.log_density_gradient(q)
    z = met.start(model, Point(q, None, lp, g), np.random.default_rng(seed))
    out = []
    steps = [eps] * n if np.isscalar(eps) else eps
    for e in steps:
        z = met.step(model, z, e)
        out.append(z)
        if z.h == np.inf:
            break
    return out


def _warm(model, q):
    """Two Python steps: the programs' first replays are checked against the eager
    tape, after which they are offered to compiled loops."""
    _trajectory(model, q, False, 0.1, 2)


@pytest.mark.parametrize("D,eps", [(4, 0.1), (10, 0.15)])
def test_compiled_step_follows_the_python_step(D, eps):
    m = NealFunnel(D=D)
    q = np.random.default_rng(D).normal(size=D) * 0.7
    _warm(m, q)
    rhmc.reset_profile()
    a = _trajectory(m, q, False, eps, 25)
    assert rhmc.PROFILE["kernel_steps"] == 0
    rhmc.reset_profile()
    b = _trajectory(m, q, True, eps, 25)
    P = rhmc.PROFILE
    # (a new metric's first step is Python's: it compiles the sweep program)
    assert P["kernel_steps"] == P["steps"] - 1 == 24 and P["handoffs"] == 0
    assert P["sweeps"] >= 25 and P["hessians"] >= 25 and P["p_iterations"] > 0
    assert len(a) == len(b) == 25
    # both solve the fixed points to 1e-8 in the metric's norm; the iterates differ
    # by rounding, so the ends agree to about that tolerance
    for za, zb in zip(a, b):
        np.testing.assert_allclose(zb.q, za.q, rtol=0, atol=1e-6)
        np.testing.assert_allclose(zb.p, za.p, rtol=0, atol=1e-6)
        np.testing.assert_allclose(zb.grad, za.grad, rtol=1e-6, atol=1e-6)
        assert zb.h == pytest.approx(za.h, abs=1e-6)
        # the geometry the compiled step hands over is the one at its end
        geo = SoftAbsMetric(D, alpha=30.0).geometry(m, zb.q)
        np.testing.assert_allclose(zb.aux.lam, geo.lam, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(zb.aux.J, geo.J, rtol=1e-8, atol=1e-9)
        assert zb.aux.logdet == pytest.approx(geo.logdet, rel=1e-10)
        np.testing.assert_allclose(zb.aux.force, za.aux.force, rtol=0, atol=1e-5)


def test_compiled_step_is_reversible():
    m = NealFunnel(D=6)
    q = np.random.default_rng(3).normal(size=6) * 0.5
    _warm(m, q)
    z0 = _trajectory(m, q, True, 0.1, 1)[0]
    met = SoftAbsMetric(6, alpha=30.0)
    fwd = met.step(m, z0, 0.12)
    back = met.step(m, Point(fwd.q, fwd.p, fwd.lp, fwd.grad, fwd.v, fwd.h,
                             fwd.aux.fresh()), -0.12)
    assert rhmc.PROFILE["kernel_steps"] > 0
    np.testing.assert_allclose(back.q, z0.q, atol=1e-7)
    np.testing.assert_allclose(back.p, z0.p, atol=1e-7)


def test_compiled_step_fails_where_the_python_step_fails():
    """A step too large for the funnel's curvature: both fail (a divergence), and
    with retries both rescue or refuse it the same way."""
    m = NealFunnel(D=5)
    q = np.array([-0.9, -0.07, 0.32, 0.05, -0.27])
    _warm(m, q)
    for halvings in (0, 3):
        rhmc.reset_profile()
        # (two small steps first: a new metric's first step is Python's; then steps
        # far beyond the fold, where both fail whatever the rounding - near the
        # fold's edge whether an iteration converges can turn on the last digit)
        eps = [0.1, 0.1, 4.0, 4.0]
        a = _trajectory(m, q, False, eps, 0, alpha=12.0, max_halvings=halvings)
        pa = dict(rhmc.PROFILE)
        rhmc.reset_profile()
        b = _trajectory(m, q, True, eps, 0, alpha=12.0, max_halvings=halvings)
        pb = dict(rhmc.PROFILE)
        assert pb["kernel_steps"] > 0
        assert [z.h == np.inf for z in a] == [z.h == np.inf for z in b]
        assert pa["fp_failures"] == pb["fp_failures"] > 0
        assert (pa["retries"], pa["rescued"], pa["irreversible"]) == \
            (pb["retries"], pb["rescued"], pb["irreversible"])
