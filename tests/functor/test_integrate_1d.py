"""integrate_1d: values against closed forms and scipy.integrate.quad, gradients in
theta and in the limits against closed forms and central differences, Hessians,
Stan's xc convention, data arguments, errors, use inside a model."""

import math

import numpy as np
import pytest
import scipy.special as sps
from scipy.integrate import quad

import stanlite as sl


def gauss(x, xc, th, x_r, x_i):
    return sl.exp(-th[0] * x * x)


def beta_density(x, xc, th, x_r, x_i):
    # Stan's users' guide example: xc = 1 - x near the upper limit keeps its precision
    a, b = th[0], th[1]
    one_minus_x = xc if x > 0.5 else 1.0 - x
    return sl.exp((a - 1.0) * math.log(x) + (b - 1.0) * math.log(one_minus_x)
                  - sl.lbeta(a, b))


@pytest.mark.parametrize("a,b,want", [
    (-np.inf, np.inf, lambda t: math.sqrt(math.pi / t)),
    (0.0, np.inf, lambda t: 0.5 * math.sqrt(math.pi / t)),
    (-np.inf, 0.0, lambda t: 0.5 * math.sqrt(math.pi / t)),
    (-0.5, 1.5, lambda t: 0.5 * math.sqrt(math.pi / t)
     * (math.erf(1.5 * math.sqrt(t)) + math.erf(0.5 * math.sqrt(t)))),
])
def test_gaussian_integral_value_gradient_hessian(a, b, want):
    th = np.array([1.7])
    np.testing.assert_allclose(sl.integrate_1d(gauss, a, b, th), want(1.7), rtol=1e-9)
    h = 1e-5
    d1 = (want(1.7 + h) - want(1.7 - h)) / (2 * h)
    d2 = (want(1.7 + h) - 2 * want(1.7) + want(1.7 - h)) / h ** 2
    g = sl.grad(lambda t: sl.integrate_1d(gauss, a, b, t))(th)
    np.testing.assert_allclose(g, [d1], rtol=1e-7)
    H = sl.hessian(lambda t: sl.integrate_1d(gauss, a, b, t))(th)
    np.testing.assert_allclose(H, [[d2]], rtol=1e-4)


def test_beta_density_integrates_to_one_with_zero_gradient():
    th = np.array([0.7, 2.5])
    v, g = sl.value_and_grad(lambda t: sl.integrate_1d(beta_density, 0.0, 1.0, t))(th)
    assert abs(v - 1.0) < 1e-8
    np.testing.assert_allclose(g, 0.0, atol=1e-7)


def test_incomplete_beta_against_scipy_and_finite_differences():
    th = np.array([2.3, 1.6])

    def f(t):
        return sl.integrate_1d(beta_density, 0.0, 0.4, t)
    np.testing.assert_allclose(f(th), sps.betainc(2.3, 1.6, 0.4), rtol=1e-9)
    assert sl.check_grad(f, th).passed
    assert sl.check_hessian(f, th, rtol=1e-5, atol=1e-6).passed


def test_limits_are_differentiable():
    th = np.array([0.8])

    def f(ab):
        return sl.integrate_1d(gauss, ab[0], ab[1], th)
    ab = np.array([-0.3, 1.1])
    g = sl.grad(f)(ab)
    np.testing.assert_allclose(g, [-math.exp(-0.8 * 0.09), math.exp(-0.8 * 1.21)],
                               rtol=1e-12)
    assert sl.check_grad(f, ab).passed
    H = sl.hessian(f)(ab)     # d2/da2 = -f'(a), d2/db2 = f'(b), mixed 0
    fp = lambda x: -1.6 * x * math.exp(-0.8 * x * x)    # noqa: E731
    np.testing.assert_allclose(H, [[-fp(-0.3), 0.0], [0.0, fp(1.1)]], atol=1e-12)
    # limits and theta together
    assert sl.check_grad(lambda z: sl.integrate_1d(gauss, z[0], z[1], z[2:]),
                         np.array([-0.3, 1.1, 0.8])).passed


def test_data_arguments_and_against_quad():
    def f(x, xc, th, x_r, x_i):
        return th[0] * sl.exp(-x_r[0] * x) * x ** x_i[0] + th[1] * sl.sin(x)
    th = np.array([1.3, -0.4])
    got = sl.integrate_1d(f, 0.0, 3.0, th, [0.7], [2])
    want = quad(lambda x: 1.3 * math.exp(-0.7 * x) * x ** 2 - 0.4 * math.sin(x), 0, 3,
                epsabs=0, epsrel=1e-12)[0]
    np.testing.assert_allclose(got, want, rtol=1e-10)
    g = sl.grad(lambda t: sl.integrate_1d(f, 0.0, 3.0, t, [0.7], [2]))(th)
    want_g = [quad(lambda x: math.exp(-0.7 * x) * x ** 2, 0, 3, epsrel=1e-12)[0],
              1.0 - math.cos(3.0)]
    np.testing.assert_allclose(g, want_g, rtol=1e-9)


def test_theta_as_a_list_of_traced_scalars_and_relative_tolerance():
    def f(th):
        return sl.integrate_1d(gauss, 0.0, 2.0, [th[0]], relative_tolerance=1e-4)
    v = f(np.array([1.0]))
    np.testing.assert_allclose(v, 0.5 * math.sqrt(math.pi) * math.erf(2.0), rtol=1e-4)
    assert sl.check_grad(f, np.array([1.0]), rtol=1e-4).passed


def test_xc_follows_stan():
    seen = []

    def f(x, xc, th, x_r, x_i):
        seen.append((x, xc))
        return 1.0
    assert abs(sl.integrate_1d(f, 2.0, 5.0) - 3.0) < 1e-12
    for x, xc in seen:
        want = 2.0 - x if x - 2.0 <= 5.0 - x else 5.0 - x
        assert xc == want
    seen.clear()
    sl.integrate_1d(lambda x, xc, th, r, i: seen.append(xc) or sl.exp(-x), 0.0, np.inf)
    assert all(math.isnan(c) for c in seen)


def test_equal_limits_and_theta_free_integrand():
    assert sl.integrate_1d(gauss, 1.0, 1.0, np.array([1.0])) == 0.0
    g = sl.grad(lambda t: sl.integrate_1d(lambda x, xc, th, r, i: x * x, 0.0, 1.0, t))(
        np.array([1.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0])


def test_integral_that_cancels_to_zero_is_accepted():
    # int_{-1}^{1} x^3 = 0: no relative accuracy is possible; |f|'s integral is the scale
    v = sl.integrate_1d(lambda x, xc, th, r, i: th[0] * x ** 3, -1.0, 1.0, np.array([2.0]))
    assert abs(v) < 1e-12


def test_errors():
    with pytest.raises(sl.DomainError, match="lower limit a = 2.0 must be less than"):
        sl.integrate_1d(gauss, 2.0, 1.0, np.array([1.0]))
    with pytest.raises(sl.DomainError, match="integrate_1d: a must not be NaN"):
        sl.integrate_1d(gauss, np.nan, 1.0, np.array([1.0]))
    with pytest.raises(ValueError, match="theta must be a 1-D array"):
        sl.integrate_1d(gauss, 0.0, 1.0, np.ones((2, 2)))
    with pytest.raises(ValueError, match="relative_tolerance must be positive"):
        sl.integrate_1d(gauss, 0.0, 1.0, np.array([1.0]), relative_tolerance=0.0)
    with pytest.raises(TypeError, match="f must be a function"):
        sl.integrate_1d(3.0, 0.0, 1.0)
    with pytest.raises(sl.DomainError, match="integrand is NaN"):
        sl.integrate_1d(lambda x, xc, th, r, i: sl.log(th[0] - x), 0.0, 2.0, np.array([1.0]))
    with pytest.raises(sl.SolverError, match="integrate_1d: the error estimate"):
        sl.integrate_1d(lambda x, xc, th, r, i: 1.0 / x, 0.0, 1.0)


def test_a_parameter_captured_by_the_integrand_is_an_error():
    # Stan's integrand sees parameters only through theta; a closure over a traced
    # value would lose its derivative, so it is refused
    def f(s):
        return sl.integrate_1d(lambda x, xc, th, r, i: sl.exp(-s * x), 0.0, 1.0)
    assert f(2.0) == pytest.approx((1 - math.exp(-2.0)) / 2.0, rel=1e-12)
    with pytest.raises(sl.DifferentiationError, match="other than theta"):
        sl.grad(f)(2.0)


def test_inside_a_model():
    class Truncated(sl.Model):
        """y ~ normal(mu, 1) truncated below at 0, the normaliser by integrate_1d."""
        y = sl.data.vector(3)
        mu = sl.param.real()

        def log_prob(self, mu):
            z = sl.integrate_1d(lambda x, xc, th, r, i: sl.exp(-0.5 * (x - th[0]) ** 2),
                                0.0, np.inf, sl.stack([mu]))
            return sl.normal_lpdf(mu, 0, 1) - 0.5 * sl.sum((self.y - mu) ** 2) - 3 * sl.log(z)

    m = Truncated(y=np.array([0.5, 1.2, 2.0]))

    def exact(mu):
        return (-0.5 * mu * mu - 0.5 * math.log(2 * math.pi)
                - 0.5 * np.sum((m.y - mu) ** 2)
                - 3 * math.log(math.sqrt(2 * math.pi) * sps.ndtr(mu)))
    for mu in (0.3, -0.4):
        lp, g = m.log_density_gradient(np.array([mu]))
        np.testing.assert_allclose(lp, exact(mu), rtol=1e-9)
        h = 1e-6
        np.testing.assert_allclose(g, [(exact(mu + h) - exact(mu - h)) / (2 * h)],
                                   rtol=1e-6)
    # no interpreter rule: the gradient is replayed as Python, one recording
    r = m.compiled_gradient()
    assert not r.compiled and "integrate_1d" in r.vm_skipped
