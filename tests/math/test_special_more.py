"""Issue 21's special functions (lmultiply, log_inv_logit_diff, log_falling_factorial,
log_rising_factorial, owens_t, lambert_w0/wm1, choose): values against scipy,
derivatives against closed forms and central differences over shapes and
broadcasting, Hessians, edges, scipy.special ufuncs on traced values."""

import doctest
import math

import numpy as np
import pytest
import scipy.special as sps

import stanlite as sl

INV_E = math.exp(-1.0)


def _u(lo, hi):
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def _lild_ref(x, y):
    return np.log(sps.expit(x) - sps.expit(y))


def _npdf(x):
    return np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)


# name: (function, reference, samplers, reference partial derivatives)
BINARY = {
    "lmultiply": (sl.lmultiply, lambda a, b: a * np.log(b), (_u(-3, 3), _u(0.1, 5)),
                  (lambda a, b: np.log(b), lambda a, b: a / b)),
    "log_inv_logit_diff": (
        sl.log_inv_logit_diff, _lild_ref, (_u(0.5, 4), _u(-4, 0.3)),
        (lambda x, y: sps.expit(x) * (1 - sps.expit(x)) / (sps.expit(x) - sps.expit(y)),
         lambda x, y: -sps.expit(y) * (1 - sps.expit(y)) / (sps.expit(x) - sps.expit(y)))),
    "log_falling_factorial": (
        sl.log_falling_factorial, lambda x, n: sps.gammaln(x + 1) - sps.gammaln(x - n + 1),
        (_u(3, 9), _u(0.2, 2.5)),
        (lambda x, n: sps.psi(x + 1) - sps.psi(x - n + 1), lambda x, n: sps.psi(x - n + 1))),
    "log_rising_factorial": (
        sl.log_rising_factorial, lambda x, n: sps.gammaln(x + n) - sps.gammaln(x),
        (_u(0.3, 6), _u(-0.2, 3)),
        (lambda x, n: sps.psi(x + n) - sps.psi(x), lambda x, n: sps.psi(x + n))),
    "owens_t": (sl.owens_t, sps.owens_t, (_u(-3, 3), _u(-2, 2)),
                (lambda h, a: -0.5 * _npdf(h) * sps.erf(a * h / np.sqrt(2)),
                 lambda h, a: np.exp(-0.5 * h * h * (1 + a * a)) / (2 * np.pi * (1 + a * a)))),
}

UNARY = {
    "lambert_w0": (sl.lambert_w0, lambda x: sps.lambertw(x, 0).real, _u(-0.3, 5.0)),
    "lambert_wm1": (sl.lambert_wm1, lambda x: sps.lambertw(x, -1).real, _u(-0.35, -0.01)),
}

SHAPES = [((), ()), ((4,), (4,)), ((3, 1), (4,)), ((), (2, 3))]


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize("sa,sb", SHAPES)
def test_binary_value_gradient(name, sa, sb):
    fn, ref, (ra, rb), (da, db) = BINARY[name]
    rng = np.random.default_rng(abs(hash((name, sa, sb))) % 2 ** 32)
    a = ra(rng, sa)
    b = rb(rng, sb)
    a = float(a) if sa == () else a
    b = float(b) if sb == () else b
    np.testing.assert_allclose(fn(a, b), ref(a, b), rtol=1e-12, atol=1e-14)
    ga, gb = sl.grad(lambda x, y: sl.sum(fn(x, y)), (0, 1))(a, b)
    out = np.broadcast_shapes(np.shape(a), np.shape(b))
    want_a = np.broadcast_to(da(a, b), out)
    want_b = np.broadcast_to(db(a, b), out)
    np.testing.assert_allclose(ga, _sum_to(want_a, np.shape(a)), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(gb, _sum_to(want_b, np.shape(b)), rtol=1e-9, atol=1e-12)
    assert sl.check_grad(lambda x, y: sl.sum(fn(x, y) ** 2),
                         (np.asarray(a, float), np.asarray(b, float))).passed


def _sum_to(x, shape):
    while x.ndim > len(shape):
        x = x.sum(axis=0)
    for i, s in enumerate(shape):
        if s == 1 and x.shape[i] != 1:
            x = x.sum(axis=i, keepdims=True)
    return x


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_second_order(name):
    fn, ref, (ra, rb), _ = BINARY[name]
    rng = np.random.default_rng(5)
    x = np.array([ra(rng, ()), rb(rng, ())])
    f = lambda z: fn(z[0], z[1]) * (1.0 + z[0] * z[1])    # noqa: E731 (mixes the rules)
    assert sl.check_hessian(f, x).passed
    # closed form of the plain function's Hessian by differences of the gradient
    H = sl.hessian(lambda z: fn(z[0], z[1]))(x)
    h = 1e-5
    fd = np.array([(sl.grad(lambda z: fn(z[0], z[1]))(x + h * e)
                    - sl.grad(lambda z: fn(z[0], z[1]))(x - h * e)) / (2 * h)
                   for e in np.eye(2)])
    np.testing.assert_allclose(H, fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(H, H.T, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", [(), (5,), (2, 3)])
def test_lambert_value_gradient_hessian(name, shape):
    fn, ref, r = UNARY[name]
    x = r(np.random.default_rng(len(shape)), shape)
    x = float(x) if shape == () else x
    w = ref(x)
    np.testing.assert_allclose(fn(x), w, rtol=1e-13)
    np.testing.assert_allclose(np.asarray(fn(x)) * np.exp(fn(x)), x, rtol=1e-12,
                               atol=1e-15)
    g = sl.grad(lambda v: sl.sum(fn(v)))(x)
    np.testing.assert_allclose(g, w / (np.asarray(x) * (1 + w)), rtol=1e-10)
    assert sl.check_grad(lambda v: sl.sum(sl.sin(fn(v))), np.asarray(x, float)).passed
    xs = np.ravel(np.asarray(x, float))[:2]
    assert sl.check_hessian(lambda v: sl.sum(fn(v) ** 3), xs).passed


def test_lambert_edges():
    assert sl.lambert_w0(-INV_E) == -1.0 and sl.lambert_wm1(-INV_E) == -1.0
    assert sl.lambert_w0(-INV_E * (1 - 1e-15)) == pytest.approx(-1.0, abs=1e-7)
    assert sl.lambert_wm1(-INV_E * (1 - 1e-15)) == pytest.approx(-1.0, abs=1e-7)
    assert sl.grad(sl.lambert_w0)(0.0) == 1.0
    assert math.isnan(sl.lambert_w0(-0.5)) and math.isnan(sl.lambert_wm1(-0.5))
    assert math.isnan(sl.lambert_wm1(0.5))
    assert sl.lambert_wm1(0.0) == -math.inf
    assert sl.lambert_w0(math.inf) == math.inf
    np.testing.assert_array_equal(np.isnan(sl.lambert_w0(np.array([-1.0, 0.0, 1.0]))),
                                  [True, False, False])


def test_lmultiply_edges():
    assert sl.lmultiply(0.0, 0.0) == 0.0
    np.testing.assert_array_equal(sl.lmultiply(np.zeros(2), np.array([0.0, 3.0])), 0.0)
    assert sl.lmultiply(2.0, 0.0) == -math.inf
    assert sl.multiply_log is sl.lmultiply
    # the gradient in b where a = 0, b > 0 is 0; in a it is log(b)
    ga, gb = sl.grad(sl.lmultiply, (0, 1))(0.0, 2.0)
    assert ga == math.log(2.0) and gb == 0.0


def test_log_inv_logit_diff_edges_and_tails():
    assert sl.log_inv_logit_diff(1.0, 1.0) == -math.inf
    assert np.isnan(sl.log_inv_logit_diff(np.array([0.0]), np.array([1.0]))).all()
    # deep left tail: inv_logit(x) underflows relative to 1 but not in logs
    x, y = -700.0, -701.0
    want = x + math.log1p(-math.exp(y - x))
    assert sl.log_inv_logit_diff(x, y) == pytest.approx(want, rel=1e-14)
    # right tail: inv_logit(40) - inv_logit(39) = e^-39 (1 - e^-1) to double precision
    want = -39.0 + math.log1p(-math.exp(-1.0))
    assert sl.log_inv_logit_diff(40.0, 39.0) == pytest.approx(want, rel=1e-12)
    gx, gy = sl.grad(sl.log_inv_logit_diff, (0, 1))(40.0, 39.0)
    assert np.isfinite(gx) and np.isfinite(gy)


def test_factorials_edges():
    assert sl.log_falling_factorial(5.0, 2.0) == pytest.approx(math.log(20.0), rel=1e-14)
    assert sl.log_rising_factorial(5.0, 2.0) == pytest.approx(math.log(30.0), rel=1e-14)
    assert math.isnan(sl.log_falling_factorial(-1.0, 1.0))
    assert math.isnan(sl.log_rising_factorial(-1.0, 1.0))


def test_owens_t_closed_forms():
    # T(0, a) = arctan(a) / (2 pi);  T(h, 1) = Phi(h) (1 - Phi(h)) / 2
    for a in (0.3, 1.0, 4.0):
        assert sl.owens_t(0.0, a) == pytest.approx(math.atan(a) / (2 * math.pi), rel=1e-14)
    for h in (-1.0, 0.5, 2.0):
        p = sps.ndtr(h)
        assert sl.owens_t(h, 1.0) == pytest.approx(0.5 * p * (1 - p), rel=1e-12)


def test_choose():
    assert sl.choose(5, 2) == 10 and type(sl.choose(5, 2)) is int
    assert sl.choose(2, 5) == 0 and sl.choose(0, 0) == 1
    assert sl.choose(60, 30) == math.comb(60, 30)
    got = sl.choose(np.array([[5], [6]]), np.array([0, 2, 7]))
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, sps.comb([[5], [6]], [0, 2, 7], exact=False))
    assert sl.choose(5.0, 2.0) == 10
    with pytest.raises(sl.DomainError, match="choose: n must be non-negative, but is -1"):
        sl.choose(-1, 0)
    with pytest.raises(sl.DomainError, match="choose: k must be non-negative"):
        sl.choose(3, np.array([1, -2]))
    with pytest.raises(ValueError, match="choose: k must be an integer"):
        sl.choose(3, 1.5)
    with pytest.raises(sl.DomainError, match="overflows"):
        sl.choose(np.array([200]), 100)
    with pytest.raises(sl.DifferentiationError, match="choose: n is an integer argument"):
        sl.grad(lambda x: sl.choose(x, 2))(5.0)


@pytest.mark.parametrize("ufunc,fn,x", [
    (sps.gammaln, sl.lgamma, np.array([0.5, 3.0])),
    (sps.psi, sl.digamma, np.array([0.5, 3.0])),
    (sps.digamma, sl.digamma, np.array([0.5, 3.0])),
    (sps.gamma, sl.tgamma, np.array([0.5, 3.0])),
    (sps.erf, sl.erf, np.array([-0.5, 1.0])),
    (sps.erfc, sl.erfc, np.array([-0.5, 1.0])),
    (sps.ndtr, sl.Phi, np.array([-0.5, 1.0])),
    (sps.log_ndtr, sl.log_Phi, np.array([-0.5, 1.0])),
    (sps.ndtri, sl.inv_Phi, np.array([0.2, 0.7])),
    (sps.expit, sl.inv_logit, np.array([-0.5, 1.0])),
])
def test_scipy_special_ufuncs_on_traced_values(ufunc, fn, x):
    g = sl.grad(lambda v: sl.sum(ufunc(v)))(x)
    np.testing.assert_array_equal(g, sl.grad(lambda v: sl.sum(fn(v)))(x))
    np.testing.assert_allclose(sl.value_of(sl.grad(lambda v: ufunc(v[0]))(x)[0]),
                               sl.grad(fn)(float(x[0])), rtol=1e-15)


def test_scipy_special_binary_ufuncs_on_traced_values():
    g = sl.grad(lambda v: sps.betaln(v[0], v[1]))(np.array([1.5, 2.5]))
    np.testing.assert_allclose(g, sl.grad(lambda v: sl.lbeta(v[0], v[1]))(
        np.array([1.5, 2.5])), rtol=1e-15)
    g = sl.grad(lambda v: sps.owens_t(v[0], v[1]))(np.array([0.5, 1.5]))
    assert sl.check_grad(lambda v: sps.owens_t(v[0], v[1]), np.array([0.5, 1.5])).passed


def test_a_model_of_the_new_functions_runs_in_the_interpreter():
    # (it fell back to the Python replay while owens_t had no interpreter op)
    class M(sl.Model):
        x = sl.param.real()
        y = sl.param.real(lower=0)

        def log_prob(self, x, y):
            return (sl.normal_lpdf(x, 0, 1) + sl.lmultiply(2.0, y) - y
                    + sl.log(2.0 * sl.owens_t(x, 0.5) + 0.1) + sl.lambert_w0(y))

    m = M()
    rng = np.random.default_rng(3)
    for _ in range(3):
        z = rng.normal(size=2)
        lp, g = m.log_density_gradient(z)
        tape = m._gradient(z, True)                 # the eager tape
        assert lp == pytest.approx(tape[0], rel=1e-12)
        np.testing.assert_allclose(g, tape[1], rtol=1e-12)
        h = 1e-6
        fd = [(m.log_density(z + h * e) - m.log_density(z - h * e)) / (2 * h)
              for e in np.eye(2)]
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)
    from stanlite.autodiff.vm import kernel
    r = m.compiled_gradient()
    assert r.vm_skipped is None or not kernel.available(), r.vm_skipped


@pytest.mark.parametrize("fn", [sl.lmultiply, sl.log_inv_logit_diff, sl.log_falling_factorial,
                                sl.log_rising_factorial, sl.owens_t, sl.lambert_w0,
                                sl.lambert_wm1, sl.choose])
def test_docstring_examples(fn):
    r = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for t in doctest.DocTestFinder().find(fn, fn.__name__, globs={}):
        r.run(t)
    assert r.failures == 0 and r.tries > 0


def test_lambert_w_near_the_branch_point_against_mpmath():
    # scipy's lambertw(x, -1) loses up to 5 digits within 1e-9 of -1/e (2e-5 relative
    # at -1/e + 1e-10): the branch-point series is used there
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    for d in (1e-16, 1e-14, 1e-12, 1e-10, 1e-8, 1e-7, 1e-6, 1e-4):
        x = -INV_E + d
        for branch, fn in ((0, sl.lambert_w0), (-1, sl.lambert_wm1)):
            want = float(mpmath.lambertw(mpmath.mpf(x), branch).real)
            assert fn(x) == pytest.approx(want, rel=1e-13), (branch, d)


def test_log_inv_logit_diff_both_tails_far():
    # inv_logit(40) - inv_logit(-40) = 1 - 2 e^-40 (to double precision): log is -2e^-40
    assert sl.log_inv_logit_diff(40.0, -40.0) == pytest.approx(-2.0 * math.exp(-40.0),
                                                                rel=1e-12, abs=0.0)
