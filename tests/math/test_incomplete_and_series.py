"""The special functions of stanlite.math.incomplete (regularized incomplete gamma and
beta in logs, their conditional-moment shape derivatives) and stanlite.math.cdf_series
(Student-t, skew-normal and von Mises CDFs): values against scipy.special, every
derivative (shapes included) against central differences at random points, second
derivatives (Hessians through the moment rules) against differences of the gradient,
forward mode against reverse mode, underflow of the tails against mpmath."""

import math

import mpmath
import numpy as np
import pytest
import scipy.special as sps
import scipy.stats as st

import stanlite as sl
from stanlite.math import cdf_series, incomplete

RNG = np.random.default_rng(20261127)


def _cd(f, x, i, h=1e-5):
    """Central difference of scalar f w.r.t. argument i (Richardson-refined)."""
    def at(d):
        y = list(x)
        y[i] = y[i] + d
        return float(f(*y))
    d1 = (at(h) - at(-h)) / (2 * h)
    d2 = (at(2 * h) - at(-2 * h)) / (4 * h)
    return (4 * d1 - d2) / 3


def _grad(f, x, i):
    def g(v):
        y = list(x)
        y[i] = v
        return f(*y)
    return float(sl.grad(g)(float(x[i])))


# ---------------------------------------------------------------------------------------
# incomplete gamma / beta
# ---------------------------------------------------------------------------------------
GAMMA_POINTS = [(RNG.uniform(0.3, 8.0), RNG.uniform(0.05, 12.0)) for _ in range(6)]
BETA_POINTS = [(RNG.uniform(0.3, 6.0), RNG.uniform(0.3, 6.0), RNG.uniform(0.05, 0.95))
               for _ in range(6)]


@pytest.mark.parametrize("a,x", GAMMA_POINTS)
def test_log_gamma_p_q_values(a, x):
    assert incomplete.log_gamma_p(a, x) == pytest.approx(np.log(sps.gammainc(a, x)),
                                                         rel=1e-12, abs=1e-14)
    assert incomplete.log_gamma_q(a, x) == pytest.approx(np.log(sps.gammaincc(a, x)),
                                                         rel=1e-12, abs=1e-14)


@pytest.mark.parametrize("a,b,x", BETA_POINTS)
def test_log_inc_beta_values(a, b, x):
    assert incomplete.log_inc_beta(a, b, x) == pytest.approx(
        np.log(sps.betainc(a, b, x)), rel=1e-12, abs=1e-14)
    assert incomplete.log1m_inc_beta(a, b, x) == pytest.approx(
        np.log(sps.betaincc(a, b, x)), rel=1e-12, abs=1e-14)


@pytest.mark.parametrize("a,x", GAMMA_POINTS)
@pytest.mark.parametrize("f", [incomplete.log_gamma_p, incomplete.log_gamma_q])
def test_gamma_gradients_against_differences(f, a, x):
    for i in range(2):
        assert _grad(f, (a, x), i) == pytest.approx(_cd(f, (a, x), i), rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("a,b,x", BETA_POINTS)
@pytest.mark.parametrize("f", [incomplete.log_inc_beta, incomplete.log1m_inc_beta])
def test_beta_gradients_against_differences(f, a, b, x):
    for i in range(3):
        assert _grad(f, (a, b, x), i) == pytest.approx(_cd(f, (a, b, x), i),
                                                       rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("upper", [0, 1])
def test_gamma_moment_is_the_shape_derivative(upper):
    # d/da log P = E[log t | t < x] - digamma(a)
    a, x = 2.7, 1.9
    f = incomplete.log_gamma_q if upper else incomplete.log_gamma_p
    m = incomplete.gamma_tail_moment(1, upper, a, x)
    assert m - sps.digamma(a) == pytest.approx(_cd(f, (a, x), 0), rel=1e-7)


def test_second_derivatives_against_differences_of_the_gradient():
    def f(p):
        return incomplete.log_gamma_p(p[0], p[1]) + incomplete.log_inc_beta(
            p[0], 1.5, p[1] / 4.0)
    p = np.array([2.3, 1.7])
    H = sl.hessian(f)(p)
    g = sl.grad(f)
    h = 1e-5
    for j in range(2):
        e = np.zeros(2)
        e[j] = h
        col = (g(p + e) - g(p - e)) / (2 * h)
        np.testing.assert_allclose(H[:, j], col, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(H, H.T, rtol=1e-10)


def test_forward_mode_matches_reverse():
    def f(p):
        return incomplete.log1m_inc_beta(p[0], p[1], 0.4) + incomplete.log_gamma_q(p[0], 3.0)
    p = np.array([1.8, 2.6])
    g = sl.grad(f)(p)
    for j in range(2):
        v = np.zeros(2)
        v[j] = 1.0
        assert sl.jvp(f)(p, v)[1] == pytest.approx(g[j], rel=1e-10)


def test_underflowing_tail_against_mpmath():
    # scipy's P(a, x) underflows here; the quadrature keeps the log
    a, x = 30.0, 1e-12
    ref = float(mpmath.log(mpmath.gammainc(a, 0, x, regularized=True)))
    assert incomplete.log_gamma_p(a, x) == pytest.approx(ref, rel=1e-10)
    a, b, x = 40.0, 2.0, 1e-9
    ref = float(mpmath.log(mpmath.betainc(a, b, 0, x, regularized=True)))
    assert incomplete.log_inc_beta(a, b, x) == pytest.approx(ref, rel=1e-10)


def test_elementwise_on_arrays():
    a = np.array([0.5, 2.0, 7.0])
    x = np.array([0.3, 2.0, 5.0])
    np.testing.assert_allclose(incomplete.log_gamma_p(a, x), np.log(sps.gammainc(a, x)),
                               rtol=1e-12)
    g = sl.grad(lambda v: sl.sum(incomplete.log_gamma_p(v, x)))(a)
    for i in range(3):
        assert g[i] == pytest.approx(_cd(incomplete.log_gamma_p, (a[i], x[i]), 0), rel=1e-6)


# ---------------------------------------------------------------------------------------
# CDF series
# ---------------------------------------------------------------------------------------
T_POINTS = [(RNG.uniform(-6.0, 6.0), RNG.uniform(0.5, 30.0)) for _ in range(6)]


@pytest.mark.parametrize("t,nu", T_POINTS)
def test_student_t_log_cdf(t, nu):
    f = cdf_series.student_t_log_cdf
    assert f(t, nu) == pytest.approx(st.t.logcdf(t, nu), rel=1e-11)
    for i in range(2):
        assert _grad(f, (t, nu), i) == pytest.approx(_cd(f, (t, nu), i), rel=1e-6, abs=1e-9)
    # the nu-derivative is the series primitive, itself differentiable once more in nu
    d = cdf_series.student_t_log_cdf_dnu
    assert d(t, nu) == pytest.approx(_cd(f, (t, nu), 1), rel=1e-6, abs=1e-9)
    assert _grad(d, (t, nu), 1) == pytest.approx(_cd(d, (t, nu), 1), rel=1e-5, abs=1e-9)


@pytest.mark.parametrize("z,alpha", [(-1.3, 2.0), (0.4, -3.0), (2.2, 0.7), (-0.2, -0.5)])
def test_skew_normal_log_cdf(z, alpha):
    f = cdf_series.skew_normal_log_cdf
    assert f(z, alpha) == pytest.approx(st.skewnorm.logcdf(z, alpha), rel=1e-10)
    for i in range(2):
        assert _grad(f, (z, alpha), i) == pytest.approx(_cd(f, (z, alpha), i), rel=1e-6,
                                                        abs=1e-9)


@pytest.mark.parametrize("c,h,kappa", [(0.1, 0.5, 2.0), (-1.0, 0.9, 0.3), (0.5, 2.0, 8.0)])
def test_von_mises_log_mass(c, h, kappa):
    f = cdf_series.von_mises_log_mass[0]
    ref = math.log(st.vonmises.cdf(c + h, kappa) - st.vonmises.cdf(c - h, kappa))
    assert f(c, h, kappa) == pytest.approx(ref, rel=1e-9)
    for i in range(3):
        assert _grad(f, (c, h, kappa), i) == pytest.approx(_cd(f, (c, h, kappa), i),
                                                           rel=1e-6, abs=1e-9)
    # k = 1: the kappa-derivative of the mass over the mass
    assert cdf_series.von_mises_log_mass[1](c, h, kappa) == pytest.approx(
        _cd(f, (c, h, kappa), 2), rel=1e-6, abs=1e-9)
