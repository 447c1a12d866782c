"""Tests of stanlite.math.elementwise: values, first to third derivatives, edges.

Every function is checked against numpy/scipy, against central differences
(``sl.assert_grad``) for scalar, vector and broadcast inputs, against its closed-form
derivative, and reverse-over-reverse (its VJP differentiated again). Forward mode:
every JVP against central differences and vector mode against single mode
(``sl.assert_jvp``), forward-over-reverse Hessians (``sl.assert_hessian``), third
derivatives (``sl.grad_hessian``) against differences of Hessians, and
reverse-over-forward.
"""

import math
import zlib

import numpy as np
import pytest
import scipy.special as sp

import stanlite as sl
from stanlite.autodiff.var import UFUNCS

INF = math.inf
NAN = math.nan
POS = [(0.2, 3.0)]
SYM = [(-3.0, 3.0)]
NONZERO = [(-3.0, -0.3), (0.3, 3.0)]

# name -> (reference implementation, closed-form derivative, domain intervals)
UNARY = {
    "exp": (np.exp, np.exp, SYM),
    "log": (np.log, lambda x: 1 / x, POS),
    "log2": (np.log2, lambda x: 1 / (x * np.log(2)), POS),
    "log10": (np.log10, lambda x: 1 / (x * np.log(10)), POS),
    "log1p": (np.log1p, lambda x: 1 / (1 + x), [(-0.8, 3.0)]),
    "expm1": (np.expm1, np.exp, SYM),
    "sqrt": (np.sqrt, lambda x: 0.5 / np.sqrt(x), POS),
    "cbrt": (np.cbrt, lambda x: 1 / (3 * np.cbrt(x) ** 2), NONZERO),
    "square": (np.square, lambda x: 2 * x, SYM),
    "inv": (lambda x: 1 / x, lambda x: -1 / x ** 2, NONZERO),
    "inv_sqrt": (lambda x: 1 / np.sqrt(x), lambda x: -0.5 * x ** -1.5, [(0.3, 3.0)]),
    "inv_square": (lambda x: 1 / x ** 2, lambda x: -2 / x ** 3, NONZERO),
    "sin": (np.sin, np.cos, SYM),
    "cos": (np.cos, lambda x: -np.sin(x), SYM),
    "tan": (np.tan, lambda x: 1 / np.cos(x) ** 2, [(-1.2, 1.2)]),
    "asin": (np.arcsin, lambda x: 1 / np.sqrt(1 - x ** 2), [(-0.9, 0.9)]),
    "acos": (np.arccos, lambda x: -1 / np.sqrt(1 - x ** 2), [(-0.9, 0.9)]),
    "atan": (np.arctan, lambda x: 1 / (1 + x ** 2), SYM),
    "sinh": (np.sinh, np.cosh, SYM),
    "cosh": (np.cosh, np.sinh, SYM),
    "tanh": (np.tanh, lambda x: 1 / np.cosh(x) ** 2, SYM),
    "asinh": (np.arcsinh, lambda x: 1 / np.sqrt(1 + x ** 2), SYM),
    "acosh": (np.arccosh, lambda x: 1 / np.sqrt(x ** 2 - 1), [(1.2, 4.0)]),
    "atanh": (np.arctanh, lambda x: 1 / (1 - x ** 2), [(-0.9, 0.9)]),
    "abs": (np.abs, np.sign, NONZERO),
    "fabs": (np.abs, np.sign, NONZERO),
    "sign": (np.sign, np.zeros_like, NONZERO),
    "logit": (sp.logit, lambda x: 1 / (x * (1 - x)), [(0.05, 0.95)]),
    "inv_logit": (sp.expit, lambda x: sp.expit(x) * sp.expit(-x), [(-6.0, 6.0)]),
    "log_inv_logit": (sp.log_expit, lambda x: sp.expit(-x), [(-6.0, 6.0)]),
    "log1m_inv_logit": (lambda x: sp.log_expit(-x), lambda x: -sp.expit(x),
                        [(-6.0, 6.0)]),
    "log1m": (lambda x: np.log1p(-x), lambda x: -1 / (1 - x), [(-3.0, 0.9)]),
    "log1p_exp": (lambda x: np.logaddexp(0.0, x), sp.expit, [(-6.0, 6.0)]),
    "log1m_exp": (lambda x: np.log(-np.expm1(x)), lambda x: -1 / np.expm1(-x),
                  [(-5.0, -0.05)]),
}


def _lde_ref(x, y):
    return np.log(np.exp(x) - np.exp(y))


# name -> (reference, (d/dx, d/dy) closed forms, domain of x, domain of y)
BINARY = {
    "atan2": (np.arctan2, (lambda y, x: x / (x * x + y * y),
                           lambda y, x: -y / (x * x + y * y)), SYM, NONZERO),
    "hypot": (np.hypot, (lambda x, y: x / np.hypot(x, y),
                         lambda x, y: y / np.hypot(x, y)), NONZERO, SYM),
    "fmin": (np.fmin, (lambda x, y: (x < y) * 1.0, lambda x, y: (y < x) * 1.0), SYM, SYM),
    "fmax": (np.fmax, (lambda x, y: (x > y) * 1.0, lambda x, y: (y > x) * 1.0), SYM, SYM),
    "fdim": (lambda x, y: np.maximum(x - y, 0.0),
             (lambda x, y: (x > y) * 1.0, lambda x, y: (x > y) * -1.0), SYM, SYM),
    "log_diff_exp": (_lde_ref,
                     (lambda x, y: np.exp(x) / (np.exp(x) - np.exp(y)),
                      lambda x, y: -np.exp(y) / (np.exp(x) - np.exp(y))),
                     [(1.0, 3.0)], [(-3.0, 0.5)]),
    "pow": (np.power, (lambda x, y: y * x ** (y - 1), lambda x, y: np.log(x) * x ** y),
            [(0.3, 3.0)], [(-2.0, 2.0)]),
}

UNARY_NAMES = sorted(UNARY)
BINARY_NAMES = sorted(BINARY)
BINARY_SHAPES = [((), ()), ((5,), (5,)), ((3, 1), (1, 4)), ((), (4,)), ((4,), ())]


def _seed(*parts):
    return zlib.crc32(repr(parts).encode())


def sample(domain, shape, seed):
    """Points of ``shape`` drawn uniformly from a random interval of ``domain``."""
    rng = np.random.default_rng(seed)
    k = rng.integers(len(domain), size=shape)
    lo = np.array([d[0] for d in domain])[k]
    hi = np.array([d[1] for d in domain])[k]
    x = lo + (hi - lo) * rng.random(shape)
    return float(x) if x.ndim == 0 else x


def close(a, b, rtol=1e-12, atol=0.0):
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float),
                               rtol=rtol, atol=atol, equal_nan=True)


def grad_sum(f, argnum=0):
    return sl.grad(lambda *a: sl.sum(f(*a)), argnum=argnum)


# ======================================================================================
# unary functions
# ======================================================================================
@pytest.mark.parametrize("name", UNARY_NAMES)
def test_unary_values(name):
    f = getattr(sl, name)
    ref, _, dom = UNARY[name]
    x = sample(dom, (9,), _seed(name, "v"))
    close(f(x), ref(x), rtol=1e-12)
    x0 = sample(dom, (), _seed(name, "s"))
    y0 = f(x0)
    assert type(y0) is float
    close(y0, ref(x0), rtol=1e-12)
    # the float fast path and the array path agree
    close(y0, f(np.array([x0]))[0], rtol=1e-14)
    # integers and lists are accepted (as floats)
    close(f([x0, x0]), [y0, y0], rtol=1e-14)


@pytest.mark.parametrize("name", UNARY_NAMES)
def test_unary_grad(name):
    f = getattr(sl, name)
    _, dref, dom = UNARY[name]
    x0 = sample(dom, (), _seed(name, "gs"))
    sl.assert_grad(f, x0)
    x = sample(dom, (6,), _seed(name, "gv"))
    sl.assert_grad(f, x)
    sl.assert_grad(lambda v: f(v.reshape(2, 3)), x)
    # closed form, and the plain-float VJP agrees with the array VJP
    g = grad_sum(f)(x)
    close(g, dref(x), rtol=1e-12, atol=1e-15)
    gs = sl.grad(f)(x0)
    assert type(gs) is float
    close(gs, grad_sum(f)(np.array([x0]))[0], rtol=1e-14)


@pytest.mark.parametrize("name", UNARY_NAMES)
def test_unary_second_order(name):
    f = getattr(sl, name)
    dom = UNARY[name][2]
    x = sample(dom, (5,), _seed(name, "h"))
    sl.assert_grad(grad_sum(f), x)            # reverse-over-reverse, vector
    x0 = sample(dom, (), _seed(name, "hs"))
    sl.assert_grad(sl.grad(f), x0)            # and on a float (the scalar paths)


@pytest.mark.parametrize("name", UNARY_NAMES)
def test_unary_empty(name):
    f = getattr(sl, name)
    e = np.empty(0)
    assert f(e).shape == (0,)
    assert grad_sum(f)(e).shape == (0,)


@pytest.mark.parametrize("name", UNARY_NAMES)
def test_unary_nan(name):
    f = getattr(sl, name)
    assert math.isnan(f(NAN))
    assert np.isnan(f(np.array([NAN, NAN]))).all()
    g = sl.grad(f)(NAN)
    ga = grad_sum(f)(np.array([NAN]))
    if name == "sign":
        assert g == 0.0 and ga[0] == 0.0
    else:
        assert math.isnan(g) and np.isnan(ga[0])


EDGES = np.array([0.0, -0.0, 1.0, -1.0, INF, -INF, NAN, 800.0, -800.0])


@pytest.mark.parametrize("name", UNARY_NAMES)
def test_unary_edges_match_reference(name):
    """At 0, +-1, +-inf, NaN and +-800 both paths give the reference's value."""
    f = getattr(sl, name)
    ref = UNARY[name][0]
    with np.errstate(all="ignore"):
        want = ref(EDGES)
        got_array = f(EDGES)
        got_float = [f(float(v)) for v in EDGES]
    close(got_array, want, rtol=1e-14)
    close(got_float, want, rtol=1e-14)


@pytest.mark.parametrize("name, x", [
    ("sqrt", -1.0), ("log", -1.0), ("log2", -2.0), ("log10", -2.0), ("log1p", -2.0),
    ("asin", 2.0), ("acos", -2.0), ("acosh", 0.5), ("atanh", 2.0), ("inv_sqrt", -1.0),
    ("logit", 1.5), ("logit", -0.5), ("log1m", 2.0), ("log1m_exp", 1.0),
    ("sin", INF), ("cos", -INF), ("tan", INF),
])
def test_domain_errors_are_nan_with_numpy_warning(name, x):
    f = getattr(sl, name)
    with pytest.warns(RuntimeWarning):
        assert math.isnan(f(x))
    with pytest.warns(RuntimeWarning):
        assert np.isnan(f(np.array([x]))).all()


@pytest.mark.parametrize("name, x, want", [
    ("log", 0.0, -INF), ("log1p", -1.0, -INF), ("log1m", 1.0, -INF), ("inv", 0.0, INF),
    ("inv", -0.0, -INF), ("inv_sqrt", 0.0, INF), ("inv_square", 0.0, INF),
    ("atanh", 1.0, INF), ("atanh", -1.0, -INF), ("logit", 0.0, -INF), ("logit", 1.0, INF),
    ("exp", 1000.0, INF), ("cosh", -1000.0, INF), ("expm1", 1000.0, INF),
])
def test_poles_and_overflow(name, x, want):
    f = getattr(sl, name)
    with pytest.warns(RuntimeWarning):
        assert f(x) == want
    with pytest.warns(RuntimeWarning):
        assert f(np.array([x]))[0] == want


def test_scalar_vjp_at_a_pole_is_numpys():
    # plain-float VJPs do not raise ZeroDivisionError: they give numpy's inf
    with pytest.warns(RuntimeWarning):
        assert sl.grad(sl.log)(0.0) == INF
    with pytest.warns(RuntimeWarning):
        assert sl.grad(sl.sqrt)(0.0) == INF
    with pytest.warns(RuntimeWarning):
        assert sl.grad(sl.log1m)(1.0) == -INF


def test_abs_at_zero_and_aliases():
    assert sl.abs is sl.fabs and sl.pow is sl.power
    assert sl.grad(sl.abs)(0.0) == 0.0
    close(grad_sum(sl.fabs)(np.array([-2.0, 0.0, 3.0])), [-1.0, 0.0, 1.0])
    assert sl.grad(sl.sign)(0.0) == 0.0


def test_integer_inputs_give_floats():
    assert sl.inv(2) == 0.5 and sl.inv_square(2) == 0.25
    assert sl.square(np.array([2, 3])).dtype == np.float64
    assert sl.fmin(1, 2) == 1.0 and sl.fmax(np.array([1]), 2).dtype == np.float64
    close(sl.atan2(1, 1), math.pi / 4)


def test_large_arguments_keep_finite_gradients():
    # atan, asinh: no overflow of x^2 in the derivative
    assert sl.grad(sl.atan)(1e200) == 0.0
    close(sl.grad(sl.asinh)(1e200), 1e-200)
    close(grad_sum(sl.asinh)(np.array([1e200, -1e200])), [1e-200, 1e-200])
    # tanh: 1 - tanh^2 written (1 - t)(1 + t)
    close(sl.grad(sl.tanh)(5.0), 1 / np.cosh(5.0) ** 2, rtol=1e-10)
    assert sl.grad(sl.tanh)(800.0) == 0.0


# ======================================================================================
# the logit family: stability for large |x|
# ======================================================================================
def test_logit_family_large_arguments():
    assert sl.log1p_exp(800.0) == 800.0
    assert sl.log1p_exp(-800.0) == 0.0
    assert sl.log_inv_logit(-800.0) == -800.0
    assert sl.log_inv_logit(800.0) == 0.0
    assert sl.log1m_inv_logit(800.0) == -800.0
    assert sl.inv_logit(800.0) == 1.0 and sl.inv_logit(-800.0) == 0.0
    assert sl.log1m_exp(-800.0) == 0.0
    x = np.array([-800.0, -40.0, 40.0, 800.0])
    close(sl.log1p_exp(x), [0.0, np.exp(-40.0), 40.0 + np.exp(-40.0), 800.0], rtol=1e-15)
    close(sl.log_inv_logit(x), [-800.0, -40.0 - np.exp(-40), -np.exp(-40.0), 0.0],
          rtol=1e-15)
    close(sl.inv_logit(x), [0.0, np.exp(-40.0), 1.0, 1.0], rtol=1e-15)
    for f, want in [(sl.log1p_exp, sp.expit(x)), (sl.log_inv_logit, sp.expit(-x)),
                    (sl.log1m_inv_logit, -sp.expit(x)),
                    (sl.inv_logit, sp.expit(x) * sp.expit(-x))]:
        g = grad_sum(f)(x)
        assert np.isfinite(g).all()
        close(g, want, rtol=1e-14)
        close([sl.grad(f)(v) for v in x], want, rtol=1e-14)
    # second derivatives stay finite too
    h = grad_sum(grad_sum(sl.log1p_exp))(x)
    close(h, sp.expit(x) * sp.expit(-x), rtol=1e-14)


def test_inv_logit_derivative_keeps_relative_precision():
    # ans * (1 - ans) would lose every digit at x = 40; inv_logit(x) inv_logit(-x) does not
    close(sl.grad(sl.inv_logit)(40.0), np.exp(-40.0) / (1 + np.exp(-40.0)) ** 2,
          rtol=1e-14)


def test_log1m_exp_precision_and_zero():
    close(sl.log1m_exp(-1e-20), math.log(1e-20), rtol=1e-15)
    close(sl.log1m_exp(np.array([-1e-20, -50.0])), [math.log(1e-20), -math.exp(-50)],
          rtol=1e-15)
    # both branches around -log 2 and their derivatives
    for x in (-0.6931, -0.6932):
        close(sl.log1m_exp(x), math.log(1 - math.exp(x)), rtol=1e-14)
        close(sl.grad(sl.log1m_exp)(x), -1 / math.expm1(-x), rtol=1e-13)
    # log1m_exp(0) = -inf exactly, silently (warnings are errors here)
    assert sl.log1m_exp(0.0) == -INF
    assert sl.log1m_exp(np.array([0.0, -0.0]))[0] == -INF
    assert sl.grad(sl.log1m_exp)(0.0) == -INF
    assert sl.grad(sl.log1m_exp)(-800.0) == 0.0


def test_log_diff_exp_edges():
    for a in (0.0, 5.0, -700.0, -INF):
        assert sl.log_diff_exp(a, a) == -INF
        assert sl.log_diff_exp(np.array([a]), a)[0] == -INF
    assert sl.log_diff_exp(1000.0, 999.0) == 1000.0 + math.log1p(-math.exp(-1.0))
    assert sl.log_diff_exp(800.0, 0.0) == 800.0
    assert sl.log_diff_exp(0.0, -INF) == 0.0
    assert sl.log_diff_exp(INF, 0.0) == INF
    close(sl.log_diff_exp(np.array([1000.0, 2.0]), np.array([999.0, -INF])),
          [1000.0 + math.log1p(-math.exp(-1.0)), 2.0], rtol=1e-15)
    gx, gy = sl.grad(sl.log_diff_exp, argnum=(0, 1))(1000.0, 999.0)
    close([gx, gy], [1 / -math.expm1(-1.0), -1 / math.expm1(1.0)], rtol=1e-12)
    gx, gy = sl.grad(sl.log_diff_exp, argnum=(0, 1))(2.0, 2.0)
    assert gx == INF and gy == -INF
    for x, y in [(0.0, 1.0), (INF, INF), (-INF, 0.0)]:
        with pytest.warns(RuntimeWarning):
            assert math.isnan(sl.log_diff_exp(x, y))
        with pytest.warns(RuntimeWarning):
            assert np.isnan(sl.log_diff_exp(np.array([x]), y)).all()


# ======================================================================================
# binary functions
# ======================================================================================
def _binary_args(name, sx, sy, tag):
    _, _, dx, dy = BINARY[name]
    return sample(dx, sx, _seed(name, tag, sx, "x")), sample(dy, sy, _seed(name, tag, sy, "y"))


@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("name", BINARY_NAMES)
def test_binary_values_and_grad(name, shapes):
    f = getattr(sl, name)
    ref, (drx, dry), _, _ = BINARY[name]
    x, y = _binary_args(name, *shapes, "g")
    out = f(x, y)
    close(out, ref(x, y), rtol=1e-12)
    if shapes == ((), ()):
        assert type(out) is float
    sl.assert_grad(f, (x, y))
    gx, gy = grad_sum(f, argnum=(0, 1))(x, y)
    bshape = np.broadcast_shapes(*shapes)
    want_x = sl.sum_to_shape(np.broadcast_to(drx(x, y), bshape), np.shape(x))
    want_y = sl.sum_to_shape(np.broadcast_to(dry(x, y), bshape), np.shape(y))
    close(gx, want_x, rtol=1e-12, atol=1e-15)
    close(gy, want_y, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("shapes", [((), ()), ((3, 1), (1, 4)), ((), (4,))], ids=str)
@pytest.mark.parametrize("name", BINARY_NAMES)
def test_binary_second_order(name, shapes):
    f = getattr(sl, name)
    x, y = _binary_args(name, *shapes, "h")
    for argnum in (0, 1):
        sl.assert_grad(lambda a, b: grad_sum(f, argnum)(a, b), (x, y))


def test_binary_float_paths_agree():
    for name in BINARY_NAMES:
        f = getattr(sl, name)
        x, y = _binary_args(name, (), (), "f")
        close(f(x, y), f(np.array([x]), np.array([y]))[0], rtol=1e-14)
        g = sl.grad(f, argnum=(0, 1))(x, y)
        ga = grad_sum(f, argnum=(0, 1))(np.array([x]), np.array([y]))
        close(g, [ga[0][0], ga[1][0]], rtol=1e-14)


@pytest.mark.parametrize("name", BINARY_NAMES)
def test_binary_empty(name):
    f = getattr(sl, name)
    e = np.empty(0)
    assert f(e, e).shape == (0,)
    assert f(e, 1.0).shape == (0,)
    gx, gy = grad_sum(f, argnum=(0, 1))(e, e)
    assert gx.shape == (0,) and gy.shape == (0,)


def test_fmin_fmax_ties_and_nan():
    for f in (sl.fmin, sl.fmax):
        # ties: the derivative is split equally (and sums to 1)
        assert sl.grad(f, argnum=(0, 1))(2.0, 2.0) == (0.5, 0.5)
        gx, gy = grad_sum(f, argnum=(0, 1))(np.array([2.0, 1.0]), np.array([2.0, 3.0]))
        want_x = [0.5, 1.0] if f is sl.fmin else [0.5, 0.0]
        close(gx, want_x)
        close(gy, 1 - np.array(want_x))
        # NaN is ignored: value and derivative come from the other argument
        assert f(NAN, 1.0) == 1.0 and f(1.0, NAN) == 1.0
        assert sl.grad(f, argnum=(0, 1))(NAN, 1.0) == (0.0, 1.0)
        assert sl.grad(f, argnum=(0, 1))(1.0, NAN) == (1.0, 0.0)
        gx, gy = grad_sum(f, argnum=(0, 1))(np.array([NAN, 1.0, NAN]),
                                            np.array([1.0, NAN, NAN]))
        close(gx, [0.0, 1.0, NAN])
        close(gy, [1.0, 0.0, NAN])
        assert math.isnan(f(NAN, NAN))
        # infinities are ordinary values
        assert f(INF, -INF) == (-INF if f is sl.fmin else INF)


def test_fdim_semantics():
    assert sl.fdim(3.0, 1.0) == 2.0 and sl.fdim(1.0, 3.0) == 0.0
    assert sl.fdim(INF, INF) == 0.0 and sl.fdim(INF, 0.0) == INF
    assert math.isnan(sl.fdim(NAN, 0.0)) and math.isnan(sl.fdim(0.0, NAN))
    close(sl.fdim(np.array([3.0, 1.0, INF, NAN, -INF]), np.array([1.0, 3.0, INF, 0.0, -INF])),
          [2.0, 0.0, 0.0, NAN, 0.0])
    assert sl.grad(sl.fdim, argnum=(0, 1))(1.0, 1.0) == (0.5, -0.5)
    assert sl.grad(sl.fdim, argnum=(0, 1))(1.0, 2.0) == (0.0, 0.0)
    gx, gy = grad_sum(sl.fdim, argnum=(0, 1))(np.array([3.0, 1.0, 2.0]), 2.0)
    close(gx, [1.0, 0.0, 0.5])
    close(gy, -1.5)


def test_hypot_edges():
    assert sl.grad(sl.hypot, argnum=(0, 1))(0.0, 0.0) == (0.0, 0.0)
    gx, gy = grad_sum(sl.hypot, argnum=(0, 1))(np.array([0.0, 3.0]), np.array([0.0, 4.0]))
    close(gx, [0.0, 0.6])
    close(gy, [0.0, 0.8])
    close(sl.hypot(1e200, 1e200), math.sqrt(2) * 1e200)
    close(sl.grad(sl.hypot, argnum=(0, 1))(1e200, 1e200), [0.5 ** 0.5] * 2)
    close(sl.grad(sl.atan2, argnum=(0, 1))(1e-200, 1e-200), [0.5e200, -0.5e200])
    assert sl.hypot(INF, NAN) == INF


def test_atan2_quadrants():
    y = np.array([1.0, 1.0, -1.0, -1.0, 0.0])
    x = np.array([1.0, -1.0, -1.0, 1.0, -1.0])
    close(sl.atan2(y, x), np.arctan2(y, x), rtol=1e-15)
    close([sl.atan2(float(a), float(b)) for a, b in zip(y, x)], np.arctan2(y, x))


def test_binary_nan_propagates():
    for name in ("atan2", "hypot", "fdim", "log_diff_exp", "pow"):
        f = getattr(sl, name)
        assert math.isnan(f(NAN, 0.5)) and math.isnan(f(0.5, NAN))
        assert np.isnan(f(np.array([NAN]), 0.5)).all()


# ======================================================================================
# numpy ufuncs on Vars dispatch to the primitives
# ======================================================================================
UFUNC_UNARY = [
    (np.exp, "exp"), (np.log, "log"), (np.log2, "log2"), (np.log10, "log10"),
    (np.log1p, "log1p"), (np.expm1, "expm1"), (np.sqrt, "sqrt"), (np.cbrt, "cbrt"),
    (np.square, "square"), (np.reciprocal, "inv"), (np.sin, "sin"), (np.cos, "cos"),
    (np.tan, "tan"), (np.arcsin, "asin"), (np.arccos, "acos"), (np.arctan, "atan"),
    (np.sinh, "sinh"), (np.cosh, "cosh"), (np.tanh, "tanh"), (np.arcsinh, "asinh"),
    (np.arccosh, "acosh"), (np.arctanh, "atanh"), (np.sign, "sign"),
]
UFUNC_BINARY = [
    (np.arctan2, "atan2"), (np.hypot, "hypot"), (np.fmin, "fmin"), (np.fmax, "fmax"),
    (np.minimum, "fmin"), (np.maximum, "fmax"),
]


@pytest.mark.parametrize("uf, name", UFUNC_UNARY, ids=lambda p: getattr(p, "__name__", p))
def test_ufunc_dispatch_unary(uf, name):
    f = getattr(sl, name)
    assert UFUNCS[uf] is f
    x = sample(UNARY[name][2], (4,), _seed(name, "uf"))
    sl.assert_grad(lambda v: sl.sum(uf(v)), x)
    close(grad_sum(uf)(x), grad_sum(f)(x), rtol=0)


@pytest.mark.parametrize("uf, name", UFUNC_BINARY, ids=lambda p: getattr(p, "__name__", p))
def test_ufunc_dispatch_binary(uf, name):
    if uf in (np.minimum, np.maximum):
        assert UFUNCS[uf] is not getattr(sl, name)     # NaN-propagating twins
    else:
        assert UFUNCS[uf] is getattr(sl, name)
    x, y = _binary_args(name, (3, 1), (1, 4), "uf")
    sl.assert_grad(lambda a, b: sl.sum(uf(a, b)), (x, y))
    sl.assert_grad(lambda a: sl.sum(uf(a, y)), x)           # Var with a plain array
    sl.assert_grad(lambda b: sl.sum(uf(x, b)), y)           # plain array with a Var


def test_np_minimum_maximum_propagate_nan():
    x = np.array([1.0, NAN, 2.0, 3.0])
    y = np.array([NAN, 1.0, 2.0, 0.0])
    for uf in (np.minimum, np.maximum):
        with sl.nested():
            close(sl.value_of(uf(sl.Var(x), y)), uf(x, y))
        gx, gy = sl.grad(lambda a, b: sl.sum(uf(a, b)), argnum=(0, 1))(x, y)
        sel = [0.0, 1.0] if uf is np.minimum else [1.0, 0.0]
        close(gx, [NAN, NAN, 0.5, sel[0]])
        close(gy, [NAN, NAN, 0.5, sel[1]])
    # scalars take the float path with the same semantics
    assert sl.grad(lambda a: np.minimum(a, 1.0))(1.0) == 0.5
    with sl.nested():
        assert math.isnan(sl.value_of(np.maximum(sl.Var(NAN), 1.0)))


def test_unsupported_ufunc_still_raises():
    with sl.nested(), pytest.raises(TypeError, match="logaddexp2"):
        np.logaddexp2(sl.Var(np.ones(2)), 1.0)


# ======================================================================================
# forward mode: JVPs, forward-over-reverse Hessians, third derivatives
# ======================================================================================
def _weights(n, *tag):
    return np.random.default_rng(_seed("w", n, *tag)).standard_normal(n)


def _richardson_jacobian(F, x, h=1e-4):
    """d F(x) / dx by Richardson-refined central differences (derivative axis last)."""
    cols = []
    for e in np.eye(x.size):
        def d(s):
            return (np.asarray(F(x + s * e)) - np.asarray(F(x - s * e))) / (2 * s)
        cols.append((4 * d(h / 2) - d(h)) / 3)
    return np.stack(cols, axis=-1)


def assert_third_order(F, x, rtol=1e-6, atol=1e-7):
    """``sl.grad_hessian`` (forward over forward-over-reverse) against differences of
    ``sl.hessian``; the tensor is symmetric in all three indices."""
    T = np.asarray(sl.grad_hessian(F)(x))
    n = x.size
    assert T.shape == (n, n, n)
    close(T, _richardson_jacobian(sl.hessian(F), x), rtol=rtol, atol=atol)
    scale = max(1.0, float(np.max(np.abs(T))))
    for axes in [(1, 0, 2), (0, 2, 1), (2, 1, 0)]:
        assert np.max(np.abs(T - T.transpose(axes))) <= 1e-10 * scale


def _primitives():
    from stanlite.autodiff.extend import Primitive
    from stanlite.math import elementwise
    return {k: v for k, v in vars(elementwise).items()
            if isinstance(getattr(v, "_spec", None), Primitive)}


def test_every_primitive_has_a_jvp_per_argument():
    prims = _primitives()
    assert {"exp", "atan2", "log_diff_exp", "sign", "_minimum", "_maximum"} <= set(prims)
    for name, p in prims.items():
        spec = p._spec
        assert len(spec.jvps) == len(spec.vjps) >= 1, name
        assert all(callable(r) for r in spec.jvps), name


@pytest.mark.parametrize("name", UNARY_NAMES)
def test_unary_jvp(name):
    f = getattr(sl, name)
    _, dref, dom = UNARY[name]
    x0 = sample(dom, (), _seed(name, "js"))
    x = sample(dom, (6,), _seed(name, "jv"))
    sl.assert_jvp(f, x0)
    sl.assert_jvp(f, x)
    sl.assert_jvp(f, x.reshape(2, 3))
    # the closed form, on floats and arrays; the float path stays on floats
    y, t = sl.jvp(f)(x0, 1.0)
    assert type(y) is float and type(t) is float
    close(y, f(x0), rtol=0)
    close(t, dref(x0), rtol=1e-12, atol=1e-15)
    close(sl.jvp(f)(x, np.ones(6))[1], dref(x), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", UNARY_NAMES)
def test_unary_hessian(name):
    f = getattr(sl, name)
    dom = UNARY[name][2]
    x = sample(dom, (4,), _seed(name, "fh"))
    w = _weights(4, name)
    sl.assert_hessian(lambda v: sl.sum(f(v) * w), x)
    # Hessian-vector product and the reverse-over-reverse second derivative agree
    v = _weights(4, name, "v")
    rev = sl.grad(lambda u: sl.sum(sl.grad(lambda z: sl.sum(f(z) * w))(u) * v))(x)
    close(sl.hvp(lambda u: sl.sum(f(u) * w))(x, v), rev, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", UNARY_NAMES)
def test_unary_third_order(name):
    f = getattr(sl, name)
    dom = UNARY[name][2]
    x = sample(dom, (3,), _seed(name, "t3"))
    w = _weights(3, name, "t3")
    # a coupled argument so that the tensor is not diagonal
    assert_third_order(lambda v: sl.sum(f(v) * w) + f(v[0]) * v[1], x)


@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("name", BINARY_NAMES)
def test_binary_jvp(name, shapes):
    f = getattr(sl, name)
    x, y = _binary_args(name, *shapes, "j")
    sl.assert_jvp(f, (x, y))
    sl.assert_jvp(lambda a: f(a, y), x)           # one argument perturbed, the other
    sl.assert_jvp(lambda b: f(x, b), y)           # plain (and broadcast against it)


@pytest.mark.parametrize("name", BINARY_NAMES)
def test_binary_jvp_closed_form(name):
    f = getattr(sl, name)
    _, (drx, dry), _, _ = BINARY[name]
    x, y = _binary_args(name, (5,), (5,), "jc")
    close(sl.jvp(lambda a: f(a, y))(x, np.ones(5))[1], drx(x, y), rtol=1e-12, atol=1e-15)
    close(sl.jvp(lambda b: f(x, b))(y, np.ones(5))[1], dry(x, y), rtol=1e-12, atol=1e-15)
    x0, y0 = _binary_args(name, (), (), "jc")
    t = sl.jvp(lambda a: f(a, y0))(x0, 1.0)[1]
    assert type(t) is float
    close(t, drx(x0, y0), rtol=1e-12, atol=1e-15)


def _binary_point(name, sx, sy, tag):
    x, y = _binary_args(name, sx, sy, tag)
    return np.concatenate([np.ravel(x), np.ravel(y)])


@pytest.mark.parametrize("name", BINARY_NAMES)
def test_binary_hessian(name):
    f = getattr(sl, name)
    # same shapes: both arguments sliced from one vector (cross terms off the diagonal)
    z = _binary_point(name, (3,), (3,), "fh")
    w = _weights(3, name)
    sl.assert_hessian(lambda v: sl.sum(f(v[:3], v[3:]) * w), z)
    # broadcast (3, 1) against (2,): the tangents are expanded inside the Hessian sweep
    z = _binary_point(name, (3, 1), (2,), "fhb")
    w = _weights(6, name, "b").reshape(3, 2)
    sl.assert_hessian(lambda v: sl.sum(f(sl.reshape(v[:3], (3, 1)), v[3:]) * w), z)
    # and against a plain scalar on either side
    x0, y0 = _binary_args(name, (), (), "fhs")
    x, y = _binary_args(name, (3,), (3,), "fhs")
    w = _weights(3, name, "s")
    sl.assert_hessian(lambda v: sl.sum(f(v, y0) * w), x)
    sl.assert_hessian(lambda v: sl.sum(f(x0, v) * w), y)


@pytest.mark.parametrize("name", BINARY_NAMES)
def test_binary_third_order(name):
    f = getattr(sl, name)
    z = _binary_point(name, (2,), (2,), "t3")
    w = _weights(2, name, "t3")
    assert_third_order(lambda v: sl.sum(f(v[:2], v[2:]) * w), z)


def test_third_order_closed_forms():
    x = np.array([0.4, 1.3, 2.2])
    w = np.array([0.5, -1.0, 2.0])
    for f, d3 in [(sl.exp, np.exp), (sl.log, lambda v: 2 / v ** 3),
                  (sl.sin, lambda v: -np.cos(v)), (sl.sqrt, lambda v: 3 / 8 * v ** -2.5),
                  (sl.inv_logit, lambda v: sp.expit(v) * sp.expit(-v)
                   * (1 - 6 * sp.expit(v) * sp.expit(-v)))]:
        T = sl.grad_hessian(lambda v: sl.sum(f(v) * w))(x)
        want = np.zeros((3, 3, 3))
        want[np.arange(3), np.arange(3), np.arange(3)] = w * d3(x)
        close(T, want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", ["exp", "log", "atan", "tanh", "log1p_exp", "cbrt",
                                  "log1m_exp", "sign"])
def test_reverse_over_forward(name):
    """The JVP rules are recorded by an outer reverse tape: d/dx of J(x) 1 equals the
    reverse-over-reverse second derivative."""
    f = getattr(sl, name)
    x = sample(UNARY[name][2], (4,), _seed(name, "rof"))
    fwd = sl.grad(lambda u: sl.sum(sl.jvp(f)(u, np.ones(4))[1]))(x)
    rev = sl.grad(lambda u: sl.sum(grad_sum(f)(u)))(x)
    close(fwd, rev, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("uf, name", UFUNC_UNARY, ids=lambda p: getattr(p, "__name__", p))
def test_ufunc_dispatch_forward_unary(uf, name):
    x = sample(UNARY[name][2], (4,), _seed(name, "ufj"))
    sl.assert_jvp(uf, x)
    close(sl.jvp(uf)(x, np.ones(4))[1], sl.jvp(getattr(sl, name))(x, np.ones(4))[1], rtol=0)


@pytest.mark.parametrize("uf, name", UFUNC_BINARY, ids=lambda p: getattr(p, "__name__", p))
def test_ufunc_dispatch_forward_binary(uf, name):
    x, y = _binary_args(name, (3, 1), (1, 4), "ufj")
    sl.assert_jvp(uf, (x, y))
    z = _binary_point(name, (3,), (3,), "ufh")
    w = _weights(3, name, "uf")
    sl.assert_hessian(lambda v: sl.sum(uf(v[:3], v[3:]) * w), z)


def test_forward_at_poles_is_numpys():
    """Single-mode tangents on floats do not raise ZeroDivisionError: like the VJPs
    they give numpy's inf, with its warning; arrays and vector mode agree."""
    for name, x, want in [("log", 0.0, INF), ("sqrt", 0.0, INF), ("log1m", 1.0, -INF),
                          ("atanh", 1.0, INF), ("logit", 0.0, INF),
                          ("inv_square", 0.0, -INF), ("asin", 1.0, INF),
                          ("acosh", 1.0, INF), ("cbrt", 0.0, INF)]:
        f = getattr(sl, name)
        with pytest.warns(RuntimeWarning):
            t = sl.jvp(f)(x, 1.0)[1]
        assert t == want and type(t) is float, name
        with pytest.warns(RuntimeWarning):
            assert sl.jvp(f)(np.array([x]), np.array([1.0]))[1][0] == want
        with pytest.warns(RuntimeWarning):
            tb = sl.jacobian_forward(f)(np.array([x, x]))       # vector mode
        assert tb[0, 0] == tb[1, 1] == want     # (off the diagonal 0 * inf = NaN)
    # exact zeros without a warning, as in reverse mode
    assert sl.jvp(sl.log1m_exp)(0.0, 1.0) == (-INF, -INF)
    assert sl.jvp(lambda v: sl.log_diff_exp(v, 2.0))(2.0, 1.0) == (-INF, INF)
    with pytest.warns(RuntimeWarning):      # the value 1 / 0 warns, as numpy does
        assert sl.jvp(sl.inv)(0.0, 1.0) == (INF, -INF)


def test_forward_nonsmooth_points():
    # fmin/fmax: ties split the tangent (fmin(x, x) keeps slope 1), NaN is ignored
    for f in (sl.fmin, sl.fmax):
        assert sl.jvp(lambda v: f(v, v))(2.0, 1.0) == (2.0, 1.0)
        assert sl.jvp(lambda v: f(v, 2.0))(2.0, 1.0)[1] == 0.5
        y, t = sl.jvp(lambda v: f(v[0], v[1]))(np.array([NAN, 1.0]), np.array([3.0, 5.0]))
        assert (y, t) == (1.0, 5.0)
    # np.minimum/np.maximum propagate NaN (value and tangent)
    y, t = sl.jvp(lambda v: np.minimum(v, 1.0))(np.array([0.0, 1.0, 2.0, NAN]), np.ones(4))
    close(t, [1.0, 0.5, 0.0, NAN])
    y, t = sl.jvp(lambda v: np.maximum(v, 1.0))(np.array([0.0, 1.0, 2.0, NAN]), np.ones(4))
    close(t, [0.0, 0.5, 1.0, NAN])
    # fdim: half the slope at a tie; hypot: zero tangent at the origin
    assert sl.jvp(lambda v: sl.fdim(v, 1.0))(1.0, 1.0) == (0.0, 0.5)
    assert sl.jvp(lambda v: sl.fdim(1.0, v))(1.0, 1.0) == (0.0, -0.5)
    assert sl.jvp(lambda v: sl.hypot(v, 0.0))(0.0, 1.0) == (0.0, 0.0)
    close(sl.jvp(lambda v: sl.hypot(v[0], v[1]))(np.zeros(2), np.ones(2)), [0.0, 0.0])
    # sign and abs at 0; Hessians through them vanish
    assert sl.jvp(sl.sign)(0.0, 1.0) == (0.0, 0.0)
    assert sl.jvp(sl.abs)(0.0, 1.0) == (0.0, 0.0)
    H = sl.hessian(lambda v: sl.sum(sl.sign(v) * v))(np.array([-1.0, 2.0]))
    close(H, np.zeros((2, 2)))


def test_forward_logit_family_large_arguments():
    x = np.array([-800.0, -40.0, 40.0, 800.0])
    e = np.ones(4)
    for f, want in [(sl.log1p_exp, sp.expit(x)), (sl.log_inv_logit, sp.expit(-x)),
                    (sl.log1m_inv_logit, -sp.expit(x)),
                    (sl.inv_logit, sp.expit(x) * sp.expit(-x))]:
        close(sl.jvp(f)(x, e)[1], want, rtol=1e-14)
    # inv_logit's tangent keeps relative precision at 40 (not ans * (1 - ans))
    close(sl.jvp(sl.inv_logit)(40.0, 1.0)[1], np.exp(-40.0) / (1 + np.exp(-40.0)) ** 2,
          rtol=1e-14)
    H = sl.hessian(lambda v: sl.sum(sl.log1p_exp(v)))(x)
    close(H, np.diag(sp.expit(x) * sp.expit(-x)), rtol=1e-14)
    assert np.isfinite(sl.grad_hessian(lambda v: sl.sum(sl.log1p_exp(v)))(x)).all()
