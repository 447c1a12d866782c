"""The compiled pieces of an implicit leapfrog step (samplers/rhmc_kernels.py) against
the numpy formulas they replace, and the fixed points' restart from the plain start
when the previous step's predictor leads the iteration astray (issue 24)."""

import math

import numpy as np
import pytest

from stanlite.models.neal_funnel import NealFunnel
from stanlite.samplers import rhmc
from stanlite.samplers import rhmc_kernels as K
from stanlite.samplers.hamiltonian import Point
from stanlite.samplers.rhmc import Geometry, SoftAbsMetric


def _indefinite(rng, n):
    B = rng.standard_normal((n, n))
    # eigenvalues of both signs, two nearly equal (the divided differences' close
    # pairs) and one near zero (SoftAbs's floor)
    Q, _ = np.linalg.qr(B)
    lam = np.concatenate([[-3.0, 1e-4, 0.7, 0.7 + 1e-9], np.linspace(-1, 5, max(n - 4, 0))])[:n]
    return (Q * lam) @ Q.T


@pytest.mark.parametrize("n,alpha", [(2, 0.5), (6, 3.0), (12, 40.0)])
def test_geometry_matches_the_numpy_formulas(n, alpha, rng):
    A = _indefinite(rng, n)
    A[0, 1] += 1e-12                    # symmetrised inside
    geo = Geometry(np.zeros(n), A, alpha)
    lam, Q = np.linalg.eigh(0.5 * (A + A.T))
    f = rhmc.softabs(lam, alpha)
    Sigma = (Q * f) @ Q.T
    np.testing.assert_allclose(geo.metric, Sigma, rtol=1e-12, atol=1e-12 * f.max())
    assert geo.logdet == pytest.approx(np.linalg.slogdet(Sigma)[1], rel=1e-12, abs=1e-12)
    p = rng.standard_normal(n)
    v = np.linalg.solve(Sigma, p)
    np.testing.assert_allclose(geo.velocity(p), v, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(K.softabs_velocity(A, alpha, p), v, rtol=1e-9, atol=1e-12)
    # M = Q (-1/2 J o u u^T + 1/2 diag(J_kk / f_k)) Q^T, u = diag(1/f) Q^T p
    J = rhmc.softabs_divided_differences(lam, alpha)
    u = (Q.T @ p) / f
    inner = -0.5 * J * np.outer(u, u) + np.diag(0.5 * np.diag(J) / f)
    np.testing.assert_allclose(geo.trace_matrix(p), Q @ inner @ Q.T, rtol=1e-9,
                               atol=1e-12 * np.abs(inner).max())


def test_softabs_functions_keep_the_input_shape():
    lam = np.array([[-2.0, 0.0], [1e-3, 40.0]])
    f = rhmc.softabs(lam, 1.0)
    assert f.shape == (2, 2)
    assert f[0, 1] == 1.0 and f[1, 1] == 40.0
    assert rhmc.softabs(0.0, 2.0).shape == ()
    assert rhmc.softabs_derivative(lam, 1.0).shape == (2, 2)


def test_anderson_step_is_the_least_squares_update(rng):
    n, depth = 7, 4
    x, fx, wf = rng.standard_normal(n), rng.standard_normal(n), rng.standard_normal(n)
    dX, dF, dW = (rng.standard_normal((n, depth)) for _ in range(3))
    for count in range(depth + 1):
        out = K.anderson_step(x, fx, wf, dX, dF, dW, count, 0.7)
        if count == 0:
            expect = x + 0.7 * fx
        else:
            g = np.linalg.lstsq(dW[:, :count], wf, rcond=None)[0]
            expect = x - dX[:, :count] @ g + 0.7 * (fx - dF[:, :count] @ g)
        np.testing.assert_allclose(out, expect, rtol=1e-10, atol=1e-12)


def test_fixed_points_restart_without_a_misleading_predictor():
    """A step whose momentum iteration starts from a far-off predictor (the last
    step's force) is solved again from the plain start: the same step as without
    the predictor, where it used to be a divergence."""
    m = NealFunnel(D=5)
    q = np.array([-0.5, 0.3, -0.2, 0.4, 0.1])
    lp, g = m.log_density_gradient(q)
    met = SoftAbsMetric(5, alpha=10.0, max_halvings=0)
    z = met.start(m, Point(q, None, lp, g), np.random.default_rng(2))
    plain = met.step(m, z, 0.1)
    assert math.isfinite(plain.h)
    geo = z.aux
    poisoned = Geometry.__new__(Geometry)
    for k in Geometry.__slots__:
        setattr(poisoned, k, getattr(geo, k))
    poisoned.force = np.full(5, 1e6)            # the predictor p0 - eps/2 force
    zp = Point(z.q, z.p, z.lp, z.grad, z.v, z.h, poisoned)
    rhmc.reset_profile()
    again = met.step(m, zp, 0.1)
    assert rhmc.PROFILE["restarts"] == 1
    assert math.isfinite(again.h)
    np.testing.assert_allclose(again.q, plain.q, atol=1e-7)
    np.testing.assert_allclose(again.p, plain.p, atol=1e-7)
