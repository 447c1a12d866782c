"""stanlite.math.special: values against scipy, gradients against finite differences
(first and second order), forward mode (JVPs, forward-over-reverse Hessians, third
derivatives), closed-form derivatives, edge values and the clear error for the
missing derivatives."""

import math

import numpy as np
import pytest
import scipy.special as sps

import stanlite as sl
from stanlite.errors import DifferentiationError


def _u(lo, hi):
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def _phi_approx_ref(x):
    return sps.expit(0.07056 * x ** 3 + 1.5976 * x)


def _npdf(x):
    return np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)


# name: (stanlite function, scipy reference, reference derivative, domain sampler)
UNARY = {
    "lgamma": (sl.lgamma, sps.gammaln, sps.psi, _u(0.2, 8.0)),
    "lgamma_neg": (sl.lgamma, sps.gammaln, sps.psi, _u(-2.8, -2.2)),
    "digamma": (sl.digamma, sps.psi, lambda x: sps.polygamma(1, x), _u(0.3, 8.0)),
    "trigamma": (sl.trigamma, lambda x: sps.polygamma(1, x), lambda x: sps.polygamma(2, x),
                 _u(0.3, 8.0)),
    "tgamma": (sl.tgamma, sps.gamma, lambda x: sps.gamma(x) * sps.psi(x), _u(0.3, 4.0)),
    "erf": (sl.erf, sps.erf, lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x), _u(-2.5, 2.5)),
    "erfc": (sl.erfc, sps.erfc, lambda x: -2 / np.sqrt(np.pi) * np.exp(-x * x),
             _u(-2.5, 2.5)),
    "Phi": (sl.Phi, sps.ndtr, _npdf, _u(-4.0, 4.0)),
    "log_Phi": (sl.log_Phi, sps.log_ndtr, lambda x: _npdf(x) / sps.ndtr(x), _u(-8.0, 4.0)),
    "Phi_approx": (sl.Phi_approx, _phi_approx_ref,
                   lambda x: _phi_approx_ref(x) * (1 - _phi_approx_ref(x))
                   * (3 * 0.07056 * x ** 2 + 1.5976), _u(-3.0, 3.0)),
    "inv_Phi": (sl.inv_Phi, sps.ndtri, lambda p: 1 / _npdf(sps.ndtri(p)), _u(0.02, 0.98)),
}
UNARY_SHAPES = {"scalar": (), "vector": (5,), "matrix": (2, 3)}


def _lchoose_ref(n, k):
    return sps.gammaln(n + 1) - sps.gammaln(k + 1) - sps.gammaln(n - k + 1)


def _gamma_density(a, x):
    return np.exp((a - 1) * np.log(x) - x - sps.gammaln(a))


def _ive_ratio(v, z):
    return (sps.ive(v - 1, z) + sps.ive(v + 1, z)) / (2 * sps.ive(v, z))


# name: (function, reference, per-argument samplers, differentiable argument indices,
#        reference derivatives of the differentiable arguments)
MULTI = {
    "lbeta": (sl.lbeta, sps.betaln, (_u(0.3, 6.0), _u(0.3, 6.0)), (0, 1),
              (lambda a, b: sps.psi(a) - sps.psi(a + b),
               lambda a, b: sps.psi(b) - sps.psi(a + b))),
    # n in (3, 12) covers both branches (lgamma form below 8, beta form above)
    "lchoose": (sl.lchoose, _lchoose_ref, (_u(3.0, 12.0), _u(0.2, 2.5)), (0, 1),
                (lambda n, k: sps.psi(n + 1) - sps.psi(n - k + 1),
                 lambda n, k: sps.psi(n - k + 1) - sps.psi(k + 1))),
    "log_sum_exp": (sl.log_sum_exp, np.logaddexp, (_u(-5.0, 5.0), _u(-5.0, 5.0)), (0, 1),
                    (lambda a, b: sps.expit(a - b), lambda a, b: sps.expit(b - a))),
    "log_mix": (sl.log_mix,
                lambda t, a, b: np.log(t * np.exp(a) + (1 - t) * np.exp(b)),
                (_u(0.05, 0.95), _u(-5.0, 5.0), _u(-5.0, 5.0)), (0, 1, 2),
                (lambda t, a, b: (np.exp(a) - np.exp(b)) / (t * np.exp(a) + (1 - t) * np.exp(b)),
                 lambda t, a, b: t * np.exp(a) / (t * np.exp(a) + (1 - t) * np.exp(b)),
                 lambda t, a, b: (1 - t) * np.exp(b) / (t * np.exp(a) + (1 - t) * np.exp(b)))),
    "inc_beta": (sl.inc_beta, sps.betainc, (_u(0.5, 4.0), _u(0.5, 4.0), _u(0.05, 0.95)), (2,),
                 (lambda a, b, x: x ** (a - 1) * (1 - x) ** (b - 1) / sps.beta(a, b),)),
    "gamma_p": (sl.gamma_p, sps.gammainc, (_u(0.5, 5.0), _u(0.2, 6.0)), (1,),
                (_gamma_density,)),
    "gamma_q": (sl.gamma_q, sps.gammaincc, (_u(0.5, 5.0), _u(0.2, 6.0)), (1,),
                (lambda a, x: -_gamma_density(a, x),)),
    "log_modified_bessel_first_kind": (
        sl.log_modified_bessel_first_kind, lambda v, z: np.log(sps.iv(v, z)),
        (_u(0.0, 5.0), _u(0.2, 10.0)), (1,), (_ive_ratio,)),
}
MULTI_SHAPES = {
    "scalar": [(), (), ()],
    "vector": [(5,), (5,), (5,)],
    "broadcast": [(3, 1), (4,), (1, 4)],
    "mixed": [(), (5,), (5,)],
}


def _sample(spec, shapes, seed):
    rng = np.random.default_rng(seed)
    out = []
    for sampler, shape in zip(spec, shapes):
        a = sampler(rng, shape)
        out.append(float(a) if np.ndim(a) == 0 else a)
    return out


def _merge(args, idx, vals):
    """``args`` with ``args[i]`` replaced by ``v`` for each ``(i, v)`` in ``zip(idx,
    vals)``."""
    new = dict(zip(idx, vals))
    return [new.get(i, a) for i, a in enumerate(args)]


def _hessian_check(f, args, diff):
    """For each differentiable argument k: d/d(all differentiable) of df/dk (each
    traced at the outer level, the inner gradient taken over k): every VJP is itself
    differentiated, including the mixed second derivatives."""
    for k in diff:
        def h(*d, k=k):
            full = _merge(args, diff, d)

            def inner(y):
                return sl.sum(f(*_merge(full, (k,), (y,))))
            return sl.grad(inner)(full[k])
        sl.assert_grad(h, tuple(np.asarray(args[i]) for i in diff))


# --------------------------------------------------------------------------------------
# unary functions
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", list(UNARY_SHAPES))
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_value_and_grad(name, shape):
    f, ref, dref, dom = UNARY[name]
    x = _sample([dom], [UNARY_SHAPES[shape]], seed=1)[0]
    y = f(x)
    if shape == "scalar":
        assert type(y) is float  # the math-module fast path returns floats
    np.testing.assert_allclose(y, ref(x), rtol=1e-13, atol=1e-300)
    sl.assert_grad(lambda t: sl.sum(f(t)), x)
    sl.assert_grad(f, x)  # array-valued output, random cotangents
    g = sl.grad(lambda t: sl.sum(f(t)))(x)
    np.testing.assert_allclose(g, dref(np.asarray(x)), rtol=1e-12)


@pytest.mark.parametrize("shape", ["scalar", "vector"])
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_second_order(name, shape):
    f, _, _, dom = UNARY[name]
    x = _sample([dom], [UNARY_SHAPES[shape]], seed=2)[0]
    _hessian_check(f, [x], (0,))


def test_closed_form_second_derivatives():
    x = np.array([0.4, 1.3, 2.7, 6.1])
    d2 = sl.grad(lambda y: sl.sum(sl.grad(lambda z: sl.sum(sl.lgamma(z)))(y)))
    np.testing.assert_allclose(d2(x), sps.polygamma(1, x), rtol=1e-12)
    d3 = sl.grad(lambda y: sl.sum(sl.grad(lambda z: sl.sum(sl.trigamma(z)))(y)))
    np.testing.assert_allclose(d3(x), sps.polygamma(3, x), rtol=1e-12)
    # Phi'' = -x phi(x)
    t = np.array([-2.0, -0.3, 0.0, 1.7])
    dphi = sl.grad(lambda y: sl.sum(sl.grad(lambda z: sl.sum(sl.Phi(z)))(y)))
    np.testing.assert_allclose(dphi(t), -t * _npdf(t), rtol=1e-12, atol=1e-16)


# --------------------------------------------------------------------------------------
# functions of several arguments
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", list(MULTI_SHAPES))
@pytest.mark.parametrize("name", list(MULTI))
def test_multi_value_and_grad(name, shape):
    f, ref, doms, diff, drefs = MULTI[name]
    args = _sample(doms, MULTI_SHAPES[shape], seed=3)
    y = f(*args)
    np.testing.assert_allclose(y, ref(*args), rtol=1e-12)
    if shape == "scalar":
        assert isinstance(y, float)

    def fd(*d):
        return f(*_merge(args, diff, d))
    sl.assert_grad(fd, tuple(np.asarray(args[i]) for i in diff))
    for i, dref in zip(diff, drefs):
        g = sl.grad(lambda t, i=i: sl.sum(f(*_merge(args, (i,), (t,)))))(args[i])
        full = np.broadcast_to(dref(*args), np.broadcast(*args).shape)
        expect = sl.sum_to_shape(full, np.shape(args[i]))
        np.testing.assert_allclose(g, expect, rtol=1e-10)


@pytest.mark.parametrize("shape", ["scalar", "broadcast"])
@pytest.mark.parametrize("name", list(MULTI))
def test_multi_second_order(name, shape):
    f, _, doms, diff, _ = MULTI[name]
    args = _sample(doms, MULTI_SHAPES[shape], seed=4)
    _hessian_check(f, args, diff)


@pytest.mark.parametrize("f, nargs, bad", [
    (sl.inc_beta, 3, 0), (sl.inc_beta, 3, 1), (sl.gamma_p, 2, 0), (sl.gamma_q, 2, 0),
    (sl.log_modified_bessel_first_kind, 2, 0)])
def test_missing_derivatives_raise(f, nargs, bad):
    args = [0.5] * nargs

    def fun(t):
        return f(*_merge(args, (bad,), (t,)))
    with pytest.raises(DifferentiationError, match="not differentiable"):
        sl.grad(fun)(1.5)
    # also when the argument is traced at an outer level only (nested differentiation)
    x_idx = nargs - 1
    with pytest.raises(DifferentiationError):
        sl.grad(lambda t: sl.grad(
            lambda x: f(*_merge(args, (bad, x_idx), (t, x))))(0.5))(1.5)
    # forward mode: directly, over a reverse gradient, and in a Hessian
    name = f.__name__
    msg = f"argument {bad} of '{name}' is not differentiable"
    with pytest.raises(DifferentiationError, match=msg):
        sl.jvp(fun)(1.5, 1.0)
    # over a reverse gradient in x, only the x-derivative's tangent is needed (forward
    # tangents are computed on demand): where that derivative is written in
    # differentiable operations the mixed derivative is right, otherwise it raises
    def dfdx(t):
        return sl.grad(lambda x: f(*_merge(args, (bad, x_idx), (t, x))))(0.5)
    try:
        mixed = sl.jvp(dfdx)(1.5, 1.0)[1]
    except DifferentiationError as e:
        assert "not differentiable" in str(e)
    else:
        h = 1e-5
        assert mixed == pytest.approx((dfdx(1.5 + h) - dfdx(1.5 - h)) / (2 * h), rel=1e-7)
    with pytest.raises(DifferentiationError, match=msg):
        sl.hessian(lambda z: f(*_merge(args, (bad, x_idx), (z[0], z[1]))))(
            np.array([1.5, 0.5]))


# --------------------------------------------------------------------------------------
# log_sum_exp (reduction form) and log_mix
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, False), (1, True),
                                            (-1, False), ((0, 1), False), (None, True)])
def test_log_sum_exp_reduce(axis, keepdims):
    rng = np.random.default_rng(5)
    x = rng.normal(0, 3, (3, 4))
    y = sl.log_sum_exp(x, axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(y, sps.logsumexp(x, axis=axis, keepdims=keepdims),
                               rtol=1e-14)
    sl.assert_grad(lambda t: sl.log_sum_exp(t, axis=axis, keepdims=keepdims), x)
    g = sl.grad(lambda t: sl.sum(sl.log_sum_exp(t, axis=axis, keepdims=keepdims)))(x)
    ax = tuple(range(x.ndim)) if axis is None else axis
    np.testing.assert_allclose(g, sps.softmax(x, axis=ax), rtol=1e-13)
    _hessian_check(lambda t: sl.log_sum_exp(t, axis=axis, keepdims=keepdims), [x], (0,))
    # forward mode: the tangent sums over the reduced axes after the batch axes
    sl.assert_jvp(lambda t: sl.log_sum_exp(t, axis=axis, keepdims=keepdims), x)
    w = rng.normal(size=np.shape(y))
    sl.assert_hessian(lambda z: sl.sum(
        sl.log_sum_exp(sl.reshape(z, (3, 4)), axis=axis, keepdims=keepdims) * w), x.ravel())


def test_log_sum_exp_scalar_vector_and_list():
    assert sl.log_sum_exp(2.5) == 2.5
    assert sl.grad(sl.log_sum_exp)(2.5) == 1.0
    x = np.array([0.3, -1.2, 2.0])
    sl.assert_grad(sl.log_sum_exp, x)
    # Stan's log_sum_exp(array[] real): a list of scalars (plain or traced)
    g = sl.grad(lambda t: sl.log_sum_exp([t[0], t[1], 1.0]))(x[:2])
    np.testing.assert_allclose(g, sps.softmax([0.3, -1.2, 1.0])[:2], rtol=1e-14)
    # numpy's logaddexp on a Var dispatches to the binary form
    sl.assert_grad(lambda a: sl.sum(np.logaddexp(a, 0.5)), x)
    with pytest.raises(TypeError, match="elementwise"):
        sl.log_sum_exp(x, x, axis=0)


def test_log_sum_exp_stable_and_infinite():
    x = np.array([1000.0, 1000.0, -1000.0])
    assert sl.log_sum_exp(x) == pytest.approx(1000.0 + math.log(2.0), rel=1e-15)
    np.testing.assert_allclose(sl.grad(sl.log_sum_exp)(x), [0.5, 0.5, 0.0])
    assert sl.log_sum_exp(1000.0, 1000.0) == pytest.approx(1000.0 + math.log(2.0))
    assert sl.log_sum_exp(-1000.0, -1001.0) == np.logaddexp(-1000.0, -1001.0)
    # a -inf term has weight 0
    x = np.array([-np.inf, 0.0, 0.0])
    assert sl.log_sum_exp(x) == pytest.approx(math.log(2.0))
    np.testing.assert_allclose(sl.grad(sl.log_sum_exp)(x), [0.0, 0.5, 0.5])
    # all -inf: -inf with a zero (finite) gradient, also at second order
    x = np.full(3, -np.inf)
    assert sl.log_sum_exp(x) == -np.inf
    np.testing.assert_array_equal(sl.grad(sl.log_sum_exp)(x), np.zeros(3))
    h = sl.grad(lambda y: sl.sum(sl.grad(sl.log_sum_exp)(y)))(x)
    np.testing.assert_array_equal(h, np.zeros(3))
    for a, b in [(-np.inf, -np.inf), (np.array([-np.inf, 0.0]), -np.inf)]:
        ga, gb = sl.grad(lambda s, t: sl.sum(sl.log_sum_exp(s, t)), argnum=(0, 1))(a, b)
        assert np.all(np.isfinite(ga)) and np.all(np.isfinite(gb))
    assert sl.grad(lambda s: sl.log_sum_exp(s, -np.inf))(-np.inf) == 0.0
    assert sl.grad(lambda s: sl.log_sum_exp(s, -np.inf))(3.0) == 1.0
    assert sl.grad(lambda s: sl.log_sum_exp(s, 0.0))(-np.inf) == 0.0
    # a row of -inf among finite rows
    x = np.array([[-np.inf, -np.inf], [0.0, 1.0]])
    g = sl.grad(lambda t: sl.sum(sl.log_sum_exp(t, axis=1)))(x)
    np.testing.assert_allclose(g, [[0.0, 0.0], list(sps.softmax([0.0, 1.0]))])
    # +inf: value +inf
    assert sl.log_sum_exp(np.array([np.inf, 0.0])) == np.inf
    assert sl.log_sum_exp(np.inf, 0.0) == np.inf


def test_log_sum_exp_empty():
    assert sl.log_sum_exp(np.zeros(0)) == -np.inf
    assert sl.log_sum_exp([]) == -np.inf
    g = sl.grad(sl.log_sum_exp)(np.zeros(0))
    assert g.shape == (0,)
    r = sl.log_sum_exp(np.zeros((0, 3)), axis=0)
    np.testing.assert_array_equal(r, np.full(3, -np.inf))
    g = sl.grad(lambda t: sl.sum(sl.log_sum_exp(t, axis=1)))(np.zeros((0, 3)))
    assert g.shape == (0, 3)


def test_log_mix_edges():
    # theta = 0 / 1 select one component exactly; stable for extreme log densities
    assert sl.log_mix(0.0, 3.0, -2.0) == -2.0
    assert sl.log_mix(1.0, 3.0, -2.0) == 3.0
    assert sl.log_mix(0.3, -1000.0, -1001.0) == pytest.approx(
        -1000.0 + math.log(0.3 + 0.7 * math.exp(-1.0)), rel=1e-15)
    assert sl.log_mix(0.3, 800.0, 800.0) == pytest.approx(800.0, rel=1e-15)
    # one-sided derivatives at theta = 0: d/dtheta = e^{lp1 - lp2} - 1
    g = sl.grad(lambda t, a, b: sl.log_mix(t, a, b), argnum=(0, 1, 2))(0.0, 1.0, 0.0)
    np.testing.assert_allclose(g, [math.e - 1.0, 0.0, 1.0], rtol=1e-15)
    # both components -inf: -inf, zero gradient (no NaN)
    assert sl.log_mix(0.4, -np.inf, -np.inf) == -np.inf
    g = sl.grad(lambda t, a, b: sl.log_mix(t, a, b), argnum=(0, 1, 2))(0.4, -np.inf, -np.inf)
    assert g == (0.0, 0.0, 0.0)
    g = sl.grad(lambda a: sl.log_mix(0.4, a, 0.0))(-np.inf)
    assert g == 0.0
    # outside [0, 1]: NaN, as Stan
    assert math.isnan(sl.log_mix(1.5, 0.0, 0.0))
    assert np.isnan(sl.log_mix(np.array([-0.5, 0.5]), 0.0, 0.0)[0])
    # vectorised against the naive formula, also with a vector theta and scalar lps
    t = np.array([0.1, 0.5, 0.9])
    np.testing.assert_allclose(sl.log_mix(t, 1.0, -1.0),
                               np.log(t * math.e + (1 - t) / math.e), rtol=1e-14)


# --------------------------------------------------------------------------------------
# edge values of the other functions
# --------------------------------------------------------------------------------------
def test_gamma_family_edges():
    big = np.array([1e10, 1e100, 1e300])
    np.testing.assert_allclose(sl.lgamma(big), sps.gammaln(big), rtol=1e-14)
    np.testing.assert_allclose(sl.grad(lambda t: sl.sum(sl.lgamma(t)))(big), sps.psi(big),
                               rtol=1e-14)
    assert sl.lgamma(1e-300) == pytest.approx(-math.log(1e-300), rel=1e-14)
    assert sl.lgamma(0.0) == np.inf and sl.lgamma(-2.0) == np.inf       # poles
    np.testing.assert_array_equal(sl.lgamma(np.array([0.0, -1.0])), [np.inf, np.inf])
    assert sl.tgamma(200.0) == np.inf and sl.tgamma(0.0) == np.inf
    assert math.isnan(sl.tgamma(-1.0))
    np.testing.assert_allclose(sl.tgamma(np.array([5.0, 0.5])), [24.0, math.sqrt(math.pi)],
                               rtol=1e-15)
    assert sl.digamma(1.0) == pytest.approx(-np.euler_gamma, rel=1e-15)
    assert sl.trigamma(1.0) == pytest.approx(math.pi ** 2 / 6, rel=1e-15)
    assert sl.trigamma(1e8) == pytest.approx(1e-8, rel=1e-7)
    np.testing.assert_allclose(sl.grad(sl.tgamma)(1.0), -np.euler_gamma, rtol=1e-14)
    # large arguments of lbeta: no overflow, derivative digamma(a) - digamma(a + b)
    a, b = 1e5, 3e5
    assert sl.lbeta(a, b) == pytest.approx(float(sps.betaln(a, b)), rel=1e-14)
    np.testing.assert_allclose(sl.grad(lambda s: sl.lbeta(s, b))(a),
                               sps.psi(a) - sps.psi(a + b), rtol=1e-8)
    # empty arrays
    assert sl.lgamma(np.zeros(0)).shape == (0,)
    assert sl.grad(lambda t: sl.sum(sl.digamma(t)))(np.zeros(0)).shape == (0,)


def test_lchoose_edges():
    assert sl.binomial_coefficient_log is sl.lchoose
    n = np.array([10.0, 50.0, 1000.0, 1e6, 7.0])
    k = np.array([3.0, 25.0, 1.0, 3e5, 7.0])
    np.testing.assert_allclose(sl.lchoose(n, k), _lchoose_ref(n, k), rtol=1e-12)
    np.testing.assert_allclose(sl.lchoose(n[:3], k[:3]), np.log(sps.binom(n[:3], k[:3])),
                               rtol=1e-12)
    assert sl.lchoose(5.0, 0.0) == 0.0 and sl.lchoose(5.0, 5.0) == 0.0
    assert sl.lchoose(-1.0, 0.0) == 0.0 and sl.lchoose(-1.0, -1.0) == 0.0
    assert sl.lchoose(0.5, -0.5) == pytest.approx(float(_lchoose_ref(0.5, -0.5)), rel=1e-14)
    # large n, small k: log(n) to full precision (no lgamma cancellation)
    assert sl.lchoose(1e15, 1.0) == pytest.approx(math.log(1e15), rel=1e-15)
    # outside Stan's domain (n >= -1, k >= -1, n - k >= -1): NaN
    r = sl.lchoose(np.array([-2.0, 3.0, 3.0]), np.array([0.0, -2.0, 5.0]))
    assert np.all(np.isnan(r))


def test_error_function_edges():
    x = np.array([-30.0, -6.0, 6.0, 30.0])
    np.testing.assert_allclose(sl.erfc(x), sps.erfc(x), rtol=1e-14)
    assert sl.erfc(26.0) == pytest.approx(float(sps.erfc(26.0)), rel=1e-14)  # no 1 - erf
    np.testing.assert_allclose(sl.grad(lambda t: sl.sum(sl.erf(t)))(x),
                               2 / np.sqrt(np.pi) * np.exp(-x * x), rtol=1e-14)
    assert sl.grad(sl.erfc)(30.0) == 0.0 and sl.grad(sl.erf)(-40.0) == 0.0
    # Phi: the left tail is accurate (relative), the right tail saturates at 1
    for v in (-37.0, -20.0, -8.0):
        assert sl.Phi(v) == pytest.approx(float(sps.ndtr(v)), rel=1e-12)
    np.testing.assert_allclose(sl.Phi(np.array([-37.0, -20.0])), sps.ndtr([-37.0, -20.0]),
                               rtol=1e-13)
    assert sl.Phi(10.0) == 1.0 and sl.Phi(-40.0) == pytest.approx(float(sps.ndtr(-40.0)))
    assert sl.grad(sl.Phi)(-40.0) == pytest.approx(float(_npdf(-40.0)), rel=1e-12)
    assert sl.grad(sl.Phi)(40.0) == 0.0
    # d/dx log Phi(x) = phi/Phi, finite deep in the left tail
    g = sl.grad(lambda t: sl.log(sl.Phi(t)))(-30.0)
    assert g == pytest.approx(float(_npdf(-30.0) / sps.ndtr(-30.0)), rel=1e-10)
    # Phi_approx: 1 - p is never formed by subtraction
    assert sl.grad(sl.Phi_approx)(-12.0) > 0.0
    g = sl.grad(lambda t: sl.log(sl.Phi_approx(t)))(-10.0)
    u = 0.07056 * (-10.0) ** 3 + 1.5976 * -10.0
    assert g == pytest.approx((1 - sps.expit(u)) * (0.21168 * 100 + 1.5976), rel=1e-12)
    g = sl.grad(lambda t: sl.log(1.0 - sl.Phi_approx(t)))(3.0)
    assert np.isfinite(g) and g < 0.0
    gs = sl.grad(lambda t: sl.sum(sl.Phi_approx(t)))(np.array([-12.0, 0.0, 12.0]))
    np.testing.assert_allclose(gs[[0, 2]], [sl.grad(sl.Phi_approx)(-12.0)] * 2, rtol=1e-12)
    assert sl.Phi_approx(-1000.0) == 0.0 and sl.Phi_approx(1000.0) == 1.0
    # inv_Phi: endpoints and outside (0, 1)
    np.testing.assert_array_equal(sl.inv_Phi(np.array([0.0, 1.0])), [-np.inf, np.inf])
    assert sl.grad(sl.inv_Phi)(0.0) == np.inf
    assert math.isnan(sl.inv_Phi(1.5))
    p = np.array([1e-300, 1e-20, 0.5])
    np.testing.assert_allclose(sl.inv_Phi(p), sps.ndtri(p), rtol=1e-14)
    assert sl.grad(sl.inv_Phi)(1e-300) == pytest.approx(
        float(1 / _npdf(sps.ndtri(1e-300))), rel=1e-12)
    # inverse pair
    q = np.array([0.01, 0.3, 0.77])
    np.testing.assert_allclose(sl.Phi(sl.inv_Phi(q)), q, rtol=1e-14)
    g = sl.grad(lambda t: sl.sum(sl.Phi(sl.inv_Phi(t))))(q)
    np.testing.assert_allclose(g, np.ones(3), rtol=1e-12)


def test_incomplete_beta_gamma_edges():
    # a = 1 at x = 0 (and b = 1 at x = 1): finite derivative, 0 * log 0 = 0
    assert sl.grad(lambda x: sl.inc_beta(1.0, 3.0, x))(0.0) == pytest.approx(3.0)
    assert sl.grad(lambda x: sl.inc_beta(2.0, 1.0, x))(1.0) == pytest.approx(2.0)
    assert sl.grad(lambda x: sl.gamma_p(1.0, x))(0.0) == pytest.approx(1.0)
    assert sl.grad(lambda x: sl.gamma_q(1.0, x))(0.0) == pytest.approx(-1.0)
    g = sl.grad(lambda x: sl.sum(sl.inc_beta(np.array([1.0, 2.0]), 3.0, x)))(
        np.array([0.0, 0.0]))
    np.testing.assert_allclose(g, [3.0, 0.0])
    # a < 1 at x = 0: infinite density; a > 1: zero
    assert sl.grad(lambda x: sl.gamma_p(0.5, x))(0.0) == np.inf
    assert sl.grad(lambda x: sl.gamma_p(3.0, x))(0.0) == 0.0
    # large shapes: the density in logs does not overflow
    a, b, x = 600.0, 500.0, 0.55
    d = sl.grad(lambda t: sl.inc_beta(a, b, t))(x)
    expect = math.exp((a - 1) * math.log(x) + (b - 1) * math.log1p(-x) - sps.betaln(a, b))
    assert d == pytest.approx(expect, rel=1e-10)
    a, x = 1e4, 1.01e4
    assert sl.grad(lambda t: sl.gamma_q(a, t))(x) == pytest.approx(
        -math.exp((a - 1) * math.log(x) - x - math.lgamma(a)), rel=1e-9)
    # far tails: P and Q are each accurate where the other is 1
    assert sl.gamma_q(2.0, 200.0) == pytest.approx(float(sps.gammaincc(2.0, 200.0)), rel=1e-14)
    assert sl.gamma_q(2.0, 200.0) > 0.0
    # outside the domain: scipy's NaN
    assert math.isnan(sl.inc_beta(2.0, 3.0, 1.5)) and math.isnan(sl.gamma_p(-1.0, 2.0))
    # the gradient w.r.t. x with a, b given as arrays (broadcast, not differentiated)
    sl.assert_grad(lambda x: sl.inc_beta(np.array([0.7, 2.0]), np.array([[1.5], [3.0]]), x),
                   np.array([0.2, 0.6]))


def test_bessel_edges():
    f = sl.log_modified_bessel_first_kind
    # large z: log(ive) + z does not overflow
    z = np.array([1e3, 1e5, 1e8])
    np.testing.assert_allclose(f(0.0, z), np.log(sps.ive(0.0, z)) + z, rtol=1e-14)
    g = sl.grad(lambda t: sl.sum(f(1.0, t)))(z)
    np.testing.assert_allclose(g, _ive_ratio(1.0, z), rtol=1e-14)
    # beyond z ~ 1e9 scipy's ive gives NaN: the large-argument expansion takes over,
    # log I_v(z) = z - log(2 pi z) / 2 - (4v^2 - 1) / (8z) + O(z^-2)
    z = np.array([1e10, 1e20, 1e300])
    for v in (0.0, 1.0, 7.5):
        expect = z - 0.5 * np.log(2 * np.pi * z) - (4 * v * v - 1) / (8 * z)
        np.testing.assert_allclose(f(v, z), expect, rtol=1e-15)
        g = sl.grad(lambda t: sl.sum(f(v, t)))(z)
        np.testing.assert_allclose(g, 1 - 0.5 / z + (4 * v * v - 1) / (8 * z) / z, rtol=1e-14)
    assert np.isnan(sps.ive(0.0, 1e10))  # (the reason for the expansion)
    # z = 0: I_0(0) = 1, d/dz = 0; I_v(0) = 0 for v > 0; z < 0: NaN (Stan's domain)
    assert f(0.0, 0.0) == 0.0 and sl.grad(lambda t: f(0.0, t))(0.0) == 0.0
    assert f(2.0, 0.0) == -np.inf
    assert math.isnan(f(1.0, -1.0)) and np.isnan(f(0.0, np.array([-1.0]))[0])
    assert f(1.0, np.inf) == np.inf
    # half-integer order: closed form I_{1/2}(z) = sqrt(2 / (pi z)) sinh z
    z = np.array([0.3, 2.0, 40.0])
    np.testing.assert_allclose(f(0.5, z), 0.5 * np.log(2 / (np.pi * z)) + np.log(np.sinh(z)),
                               rtol=1e-13)
    g = sl.grad(lambda t: sl.sum(f(0.5, t)))(z)
    np.testing.assert_allclose(g, -0.5 / z + 1 / np.tanh(z), rtol=1e-12)


def test_bessel_where_ive_underflows():
    mp = pytest.importorskip("mpmath")
    f = sl.log_modified_bessel_first_kind
    # orders/arguments where ive(v, z) underflows to 0 (series and large-order branches)
    v = np.array([1e4, 50.0, 10.0, 2000.0, 600.0, 1500.0])
    z = np.array([1e3, 1e-3, 1e-30, 1e3, 300.0, 1e-2])
    with mp.workdps(30):
        ref = np.array([float(mp.log(mp.besseli(a, b, maxterms=10 ** 5)))
                        for a, b in zip(v, z)])
    np.testing.assert_allclose(f(v, z), ref, rtol=1e-13)
    assert np.all(np.isfinite(f(v, z)))
    # the derivative there is finite and matches finite differences
    sl.assert_grad(lambda t: f(v[:4], t), z[:4] * 1.3 + 0.5)
    sl.assert_grad(lambda t: f(2000.0, t), 1e3)


def test_bessel_expansions_against_ive():
    """The three fallbacks agree with scipy's ive where that does not underflow."""
    from stanlite.math.special import _log_ive_debye, _log_ive_hankel, _log_ive_series
    rng = np.random.default_rng(6)
    for fn, v, z in [
            (_log_ive_series, rng.uniform(0, 50, 50), rng.uniform(0.01, 5, 50)),
            (_log_ive_debye, rng.uniform(400, 3000, 50), rng.uniform(1, 5000, 50)),
            (_log_ive_hankel, rng.uniform(0, 1.5, 50), rng.uniform(1e4, 1e9, 50))]:
        e = sps.ive(v, z)
        ok = e > 1e-280
        assert np.sum(ok) >= 20
        np.testing.assert_allclose(fn(v[ok], z[ok]), np.log(e[ok]), rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("name", ["lgamma", "trigamma", "Phi", "inv_Phi"])
def test_unary_empty(name):
    f = UNARY[name][0]
    assert f(np.zeros(0)).shape == (0,)
    assert sl.grad(lambda t: sl.sum(f(t)))(np.zeros(0)).shape == (0,)


@pytest.mark.parametrize("name", list(MULTI))
def test_multi_empty(name):
    f, _, _, diff, _ = MULTI[name]
    args = [0.5] * (len(MULTI[name][2]) - 1) + [np.zeros(0) + 0.5]
    assert np.shape(f(*args)) == (0,)
    i = diff[-1]
    g = sl.grad(lambda t: sl.sum(f(*_merge(args, (i,), (t,)))))(np.zeros(0) + 0.5)
    assert g.shape == (0,)


# --------------------------------------------------------------------------------------
# forward mode: JVPs, forward-over-reverse Hessians, third derivatives
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", list(UNARY_SHAPES))
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_jvp(name, shape):
    f, _, dref, dom = UNARY[name]
    x = _sample([dom], [UNARY_SHAPES[shape]], seed=7)[0]
    sl.assert_jvp(f, x)  # against finite differences, and vector mode against single
    y, t = sl.jvp(f)(x, np.ones(np.shape(x)) if np.ndim(x) else 1.0)
    if shape == "scalar":
        assert type(y) is float and type(t) is float
    np.testing.assert_allclose(t, dref(np.asarray(x)), rtol=1e-12)


@pytest.mark.parametrize("shape", list(MULTI_SHAPES))
@pytest.mark.parametrize("name", list(MULTI))
def test_multi_jvp(name, shape):
    f, _, doms, diff, _ = MULTI[name]
    args = _sample(doms, MULTI_SHAPES[shape], seed=8)
    sl.assert_jvp(lambda *d: f(*_merge(args, diff, d)),
                  tuple(np.asarray(args[i]) for i in diff))


@pytest.mark.parametrize("name", list(UNARY))
def test_unary_hessian(name):
    f, _, _, dom = UNARY[name]
    x = _sample([dom], [(4,)], seed=9)[0]
    w = np.array([1.0, -2.0, 0.5, 3.0])
    sl.assert_hessian(lambda z: sl.sum(f(z) * w), x)


@pytest.mark.parametrize("name", list(MULTI))
def test_multi_hessian(name):
    # every differentiable argument sliced from one vector: mixed second derivatives
    # between the arguments are part of the Hessian
    f, _, doms, diff, _ = MULTI[name]
    args = _sample(doms, [(3,)] * len(doms), seed=10)
    w = np.array([1.0, -2.0, 0.5])

    def fz(z):
        parts = [z[3 * j:3 * j + 3] for j in range(len(diff))]
        return sl.sum(f(*_merge(args, diff, parts)) * w)
    sl.assert_hessian(fz, np.concatenate([args[i] for i in diff]))


@pytest.mark.parametrize("f, x", [
    (lambda z: sl.lgamma(z), np.array([0.7, 2.3, 5.0])),
    (lambda z: sl.Phi(z), np.array([-1.4, 0.2, 1.1])),
    (lambda z: sl.log_sum_exp(z), np.array([0.3, -0.5, 1.2])),
    (lambda z: sl.log_sum_exp(sl.reshape(z, (2, 2)), axis=0),
     np.array([0.3, -0.5, 1.2, 2.0])),
    (lambda z: sl.log_sum_exp(z[:2], z[1:]), np.array([0.3, -0.5, 1.2])),
], ids=["lgamma", "Phi", "log_sum_exp", "log_sum_exp_axis", "log_sum_exp_binary"])
def test_third_order(f, x):
    w = np.arange(1.0, np.size(f(x)) + 1.0)

    def fun(z):
        return sl.sum(f(z) * w)
    T = sl.grad_hessian(fun)(x)
    hess = sl.hessian(fun)
    h = 1e-4
    fd = np.stack([(hess(x + h * e) - hess(x - h * e)) / (2 * h) for e in np.eye(x.size)],
                  axis=-1)
    np.testing.assert_allclose(T, fd, rtol=1e-6, atol=1e-7)
    # symmetric in all three indices
    np.testing.assert_allclose(T, np.transpose(T, (1, 0, 2)), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(T, np.transpose(T, (2, 1, 0)), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("f, x, expect", [
    (sl.log_sum_exp, np.full(3, -np.inf), 0.0),              # all -inf: zero weights
    (lambda t: sl.log_sum_exp(t, -np.inf), -np.inf, 0.0),
    (lambda t: sl.log_mix(t, -np.inf, -np.inf), 0.4, 0.0),
    (lambda t: sl.log_mix(0.4, t, -np.inf), -np.inf, 0.0),
    (lambda t: sl.inc_beta(1.0, 3.0, t), 0.0, 3.0),           # 0 log 0 = 0
    (lambda t: sl.gamma_p(1.0, t), 0.0, 1.0),
    (lambda t: sl.gamma_q(1.0, t), 0.0, -1.0),
    (lambda t: sl.log_modified_bessel_first_kind(0.0, t), 0.0, 0.0),
    (sl.inv_Phi, 0.0, np.inf),
    (sl.erfc, 30.0, 0.0),
])
def test_jvp_edges(f, x, expect):
    """Where finite differences cannot look, forward mode agrees with reverse mode."""
    _, t = sl.jvp(f)(x, np.ones(np.shape(x)) if np.ndim(x) else 1.0)
    assert t == pytest.approx(expect, rel=1e-12)
    g = sl.grad(lambda z: sl.sum(f(z)))(x)
    assert float(np.sum(g)) == pytest.approx(t, rel=1e-12)
