"""Reductions and vector functions: values against numpy, gradients against finite
differences (``sl.assert_grad``), and reverse-over-reverse (the gradient of each
function is itself checked against finite differences)."""

import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff.var import shape_of
from stanlite.math import reductions as red


def _x(shape, seed=0, positive=False):
    r = np.random.default_rng(seed).standard_normal(shape)
    return np.abs(r) + 0.5 if positive else r


def _scalar(y):
    """A scalar with nonzero second derivative built from any output."""
    if shape_of(y) == ():
        return y * y
    return sl.sum(sl.sin(y))


def check_all(f, x, value=None):
    """Value vs reference, first-order and reverse-over-reverse gradient checks."""
    if value is not None:
        np.testing.assert_allclose(f(x), value, rtol=1e-12, atol=1e-12)
    sl.assert_grad(f, x)
    sl.assert_grad(lambda y: sl.grad(lambda z: _scalar(f(z)))(y), x)


# --------------------------------------------------------------------------------------
# axis-generic reductions: sum, mean, prod, max, min, variance, sd
# --------------------------------------------------------------------------------------
AXES = [
    ((4,), None, False), ((4,), 0, True), ((4,), -1, False),
    ((3, 4), None, False), ((3, 4), None, True), ((3, 4), 0, False),
    ((3, 4), 1, True), ((3, 4), -1, False), ((3, 4), (0, 1), False),
    ((2, 3, 4), None, False), ((2, 3, 4), 1, False), ((2, 3, 4), -1, True),
    ((2, 3, 4), (0, 2), False), ((2, 3, 4), (-1, 0), True),
]
REDUCTIONS = {
    "sum": (sl.sum, np.sum),
    "mean": (sl.mean, np.mean),
    "prod": (sl.prod, np.prod),
    "max": (sl.max, np.max),
    "min": (sl.min, np.min),
    "variance": (sl.variance, lambda a, axis, keepdims: np.var(a, axis=axis, ddof=1,
                                                               keepdims=keepdims)),
    "sd": (sl.sd, lambda a, axis, keepdims: np.std(a, axis=axis, ddof=1,
                                                   keepdims=keepdims)),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("shape,axis,keepdims", AXES)
def test_reduction_axes(name, shape, axis, keepdims):
    f, npf = REDUCTIONS[name]
    x = _x(shape, seed=len(shape) + 7 * (0 if axis is None else 1))
    ref = npf(x, axis=axis, keepdims=keepdims)
    out = f(x, axis=axis, keepdims=keepdims)
    assert np.shape(out) == np.shape(ref)
    check_all(lambda v: f(v, axis=axis, keepdims=keepdims), x, ref)


def test_sum_of_list_and_mean_of_scalar():
    assert sl.grad(lambda v: sl.sum([v[0], v[1] * 2.0, v[2]]))(np.ones(3)).tolist() == \
        [1.0, 2.0, 1.0]
    assert sl.sum([]) == 0.0
    assert sl.grad(lambda v: sl.mean(v) * 3.0)(2.0) == 3.0


@pytest.mark.parametrize("ddof", [0, 1, 2])
def test_variance_ddof(ddof):
    x = _x((3, 5), seed=3)
    for axis in (None, 0, -1):
        ref = np.var(x, axis=axis, ddof=ddof)
        check_all(lambda v: sl.variance(v, axis, ddof=ddof), x, ref)
        np.testing.assert_allclose(sl.sd(x, axis, ddof=ddof), np.sqrt(ref), rtol=1e-12)


def test_variance_needs_more_than_ddof_elements():
    with pytest.raises(ValueError, match="ddof"):
        sl.variance(np.array([1.0]))
    assert sl.variance(np.array([1.0]), ddof=0) == 0.0


def test_variance_is_stans_sample_variance():
    x = np.array([1.0, 2.0, 4.0, 7.0])
    m = x.mean()
    assert sl.variance(x) == pytest.approx(np.sum((x - m) ** 2) / 3)
    assert sl.sd(x) == pytest.approx(np.sqrt(np.sum((x - m) ** 2) / 3))
    # d var / dx_i = 2 (x_i - mean) / (n - 1)
    np.testing.assert_allclose(sl.grad(sl.variance)(x), 2 * (x - m) / 3, rtol=1e-12)


# --------------------------------------------------------------------------------------
# prod: zeros
# --------------------------------------------------------------------------------------
def _others_closed_form(x):
    return np.array([np.prod(np.delete(x, i)) for i in range(len(x))])


def _hessian_closed_form(x):
    n = len(x)
    h = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j:
                h[i, j] = np.prod(np.delete(x, [i, j]))
    return h


@pytest.mark.parametrize("x", [
    np.array([2.0, 0.0, 3.0, -0.5]),          # one zero
    np.array([2.0, 0.0, 3.0, 0.0, 1.5]),      # two zeros
    np.array([0.0, 0.0, 0.0]),                # all zeros
    np.array([0.0]),
    np.array([1.5, -2.0, 0.25]),              # none
], ids=["one-zero", "two-zeros", "all-zeros", "single-zero", "no-zero"])
def test_prod_with_zeros(x):
    g = sl.grad(sl.prod)(x)
    np.testing.assert_array_equal(np.isfinite(g), True)
    np.testing.assert_allclose(g, _others_closed_form(x), rtol=1e-14, atol=0)
    np.testing.assert_allclose(sl.jacobian(sl.grad(sl.prod))(x), _hessian_closed_form(x),
                               rtol=1e-14, atol=0)
    sl.assert_grad(sl.prod, x)
    sl.assert_grad(sl.grad(sl.prod), x)


def test_prod_with_zeros_along_axis():
    x = np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0], [1.5, -1.0, 2.0]])
    for axis in (0, 1, -1):
        w = _x(3, seed=axis + 5)
        g = sl.grad(lambda v: sl.sum(sl.prod(v, axis) * w))(x)
        ref = np.zeros_like(x)
        for k in range(3):
            line = x[k] if axis != 0 else x[:, k]
            oth = _others_closed_form(line) * w[k]
            if axis == 0:
                ref[:, k] = oth
            else:
                ref[k] = oth
        np.testing.assert_allclose(g, ref, rtol=1e-14, atol=0)
        sl.assert_grad(lambda v: sl.prod(v, axis), x)
        sl.assert_grad(lambda y: sl.grad(lambda v: sl.sum(sl.prod(v, axis) * w))(y), x)


def test_prod_third_order():
    # the adjoint of prod uses cumulative products whose adjoint is a linear
    # recurrence, whose adjoint is again a linear recurrence: check three levels
    x = np.array([0.7, 0.0, -1.3, 2.0, 0.4])
    sl.assert_grad(lambda y: sl.jacobian(sl.grad(sl.prod))(y), x)


@pytest.mark.parametrize("reverse", [False, True])
def test_linear_recurrence(reverse):
    a, b = _x((3, 5), seed=1), _x((3, 5), seed=2)
    h = red._linrec(a, b, 1, reverse)
    ref = np.zeros_like(b)
    order = range(4, -1, -1) if reverse else range(5)
    prev = np.zeros(3)
    for i in order:
        prev = a[:, i] * prev + b[:, i]
        ref[:, i] = prev
    np.testing.assert_allclose(h, ref, rtol=1e-14)
    sl.assert_grad(lambda u, v: red._linrec(u, v, 1, reverse), (a, b))
    sl.assert_grad(lambda u, v: sl.grad(
        lambda p, q: sl.sum(sl.sin(red._linrec(p, q, 1, reverse))), argnum=(0, 1))(u, v)[0],
        (a, b))
    # broadcast coefficient
    sl.assert_grad(lambda u, v: red._linrec(u, v, 0, reverse), (a[:1], b))


# --------------------------------------------------------------------------------------
# cumulative sums and products
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,axis", [((5,), None), ((5,), 0), ((5,), -1),
                                        ((3, 4), None), ((3, 4), 0), ((3, 4), 1),
                                        ((3, 4), -1), ((2, 3, 4), -2)])
def test_cumulative_sum(shape, axis):
    x = _x(shape, seed=11)
    check_all(lambda v: sl.cumulative_sum(v, axis), x, np.cumsum(x, axis=axis))


@pytest.mark.parametrize("shape,axis", [((5,), None), ((5,), 0), ((3, 4), None),
                                        ((3, 4), 0), ((3, 4), -1), ((2, 3, 4), 1)])
def test_cumprod(shape, axis):
    x = _x(shape, seed=12)
    check_all(lambda v: sl.cumprod(v, axis), x, np.cumprod(x, axis=axis))


def test_cumprod_with_zeros():
    x = np.array([1.5, 0.0, 2.0, 0.0, -1.0])
    sl.assert_grad(lambda v: sl.cumprod(v), x)
    sl.assert_grad(lambda y: sl.grad(lambda v: sl.sum(sl.cumprod(v) ** 2))(y), x)
    # d cumprod_k / dx_1 with x_1 = 0: prod of x_0 .. x_k except x_1
    jac = sl.jacobian(sl.cumprod)(x)
    ref = np.array([[np.prod(np.delete(x[:k + 1], i)) if i <= k else 0.0
                     for i in range(5)] for k in range(5)])
    np.testing.assert_allclose(jac, ref, rtol=1e-14, atol=0)


# --------------------------------------------------------------------------------------
# inner products and distances
# --------------------------------------------------------------------------------------
def test_dot_product_and_friends():
    a, b = _x(6, seed=21), _x(6, seed=22)
    assert sl.dot_product(a, b) == pytest.approx(a @ b)
    assert sl.dot_self(a) == pytest.approx(a @ a)
    assert sl.squared_distance(a, b) == pytest.approx(np.sum((a - b) ** 2))
    assert sl.distance(a, b) == pytest.approx(np.linalg.norm(a - b))
    for f in (sl.dot_product, sl.squared_distance, sl.distance):
        sl.assert_grad(f, (a, b))
        sl.assert_grad(lambda u, v: f(u, b) * f(a, v), (a, b))
        sl.assert_grad(lambda u: sl.grad(lambda v: f(v, b) ** 2)(u), a)
        sl.assert_grad(lambda u: sl.grad(lambda v: f(a, v) ** 2)(u), b)
        sl.assert_grad(lambda u: f(u, u * 2.0), a)  # one variable in both slots
    check_all(sl.dot_self, a, a @ a)
    check_all(lambda v: sl.dot_product(v, v), a, a @ a)


def test_dot_product_shape_mismatch():
    with pytest.raises(ValueError, match="shapes"):
        sl.dot_product(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="shapes"):
        sl.squared_distance(np.ones(3), np.ones(4))


# --------------------------------------------------------------------------------------
# softmax, log_softmax
# --------------------------------------------------------------------------------------
def _np_softmax(x, axis):
    z = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return z / z.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("shape,axis", [((5,), -1), ((5,), 0), ((3, 4), -1),
                                        ((3, 4), 0), ((2, 3, 4), 1)])
def test_softmax_log_softmax(shape, axis):
    x = _x(shape, seed=31)
    s = _np_softmax(x, axis)
    check_all(lambda v: sl.softmax(v, axis), x, s)
    check_all(lambda v: sl.log_softmax(v, axis), x, np.log(s))


def test_softmax_large_inputs_are_stable():
    x = np.array([1000.0, 1001.0, 999.5, -1000.0, 1000.2])
    s = sl.softmax(x)
    ls = sl.log_softmax(x)
    assert np.all(np.isfinite(s)) and np.all(np.isfinite(ls))
    assert s.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(s, _np_softmax(x, -1), rtol=1e-13)
    np.testing.assert_allclose(ls, x - 1001.0 - np.log(np.sum(np.exp(x - 1001.0))),
                               rtol=1e-13)
    w = _x(5, seed=32)
    for f in (sl.softmax, sl.log_softmax):
        g = sl.grad(lambda v: sl.sum(f(v) * w))(x)
        assert np.all(np.isfinite(g))
        sl.assert_grad(f, x)
        sl.assert_grad(lambda y: sl.grad(lambda v: sl.sum(f(v) * w) ** 2)(y), x)
    # shift invariance of the gradient: log_softmax(x + c) == log_softmax(x)
    g1 = sl.grad(lambda v: sl.sum(sl.log_softmax(v) * w))(x)
    g2 = sl.grad(lambda v: sl.sum(sl.log_softmax(v) * w))(x - 1000.0)
    np.testing.assert_allclose(g1, g2, rtol=1e-10, atol=1e-12)
    # a -inf entry (probability 0) is fine; softmax of a very negative vector too
    assert sl.softmax(np.array([-np.inf, 0.0]))[1] == 1.0
    np.testing.assert_allclose(sl.softmax(np.array([-2000.0, -2001.0])),
                               _np_softmax(np.array([0.0, -1.0]), -1), rtol=1e-13)


def test_softmax_rejects_scalars():
    with pytest.raises(ValueError):
        sl.softmax(1.0)
    with pytest.raises(ValueError):
        sl.log_softmax(1.0)


# --------------------------------------------------------------------------------------
# max, min: ties
# --------------------------------------------------------------------------------------
def test_max_min_ties_go_to_the_first():
    x = np.array([1.0, 3.0, -2.0, 3.0, -2.0])
    np.testing.assert_array_equal(sl.grad(sl.max)(x), [0, 1, 0, 0, 0])
    np.testing.assert_array_equal(sl.grad(sl.min)(x), [0, 0, 1, 0, 0])
    m = np.array([[1.0, 5.0, 5.0], [2.0, 2.0, 0.0]])
    np.testing.assert_array_equal(sl.grad(lambda v: sl.sum(sl.max(v, 1)))(m),
                                  [[0, 1, 0], [1, 0, 0]])
    np.testing.assert_array_equal(sl.grad(lambda v: sl.sum(sl.max(v, 0)))(m),
                                  [[0, 1, 1], [1, 0, 0]])
    assert sl.grad(sl.max)(2.5) == 1.0
    assert sl.grad(lambda v: sl.min(v, keepdims=True)[0, 0])(m)[1, 2] == 1.0


# --------------------------------------------------------------------------------------
# sorting
# --------------------------------------------------------------------------------------
def test_sort_values_and_permuted_adjoint():
    x = np.array([0.3, -1.2, 2.5, 0.0, 1.1])
    w = np.arange(1.0, 6.0)
    perm = np.argsort(x)
    np.testing.assert_array_equal(sl.sort_asc(x), np.sort(x))
    np.testing.assert_array_equal(sl.sort_desc(x), np.sort(x)[::-1])
    g = sl.grad(lambda v: sl.sum(sl.sort_asc(v) * w))(x)
    ref = np.zeros(5)
    ref[perm] = w
    np.testing.assert_array_equal(g, ref)
    g = sl.grad(lambda v: sl.sum(sl.sort_desc(v) * w))(x)
    ref = np.zeros(5)
    ref[perm[::-1]] = w
    np.testing.assert_array_equal(g, ref)
    for f in (sl.sort_asc, sl.sort_desc):
        check_all(f, x)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_sort_along_axis(axis):
    x = _x((3, 4), seed=41)
    np.testing.assert_array_equal(sl.sort_asc(x, axis), np.sort(x, axis=axis))
    desc = -np.sort(-x, axis=axis)
    np.testing.assert_array_equal(sl.sort_desc(x, axis), desc)
    check_all(lambda v: sl.sort_asc(v, axis), x)
    check_all(lambda v: sl.sort_desc(v, axis) * np.arange(desc.size).reshape(desc.shape),
              x)


def test_sort_indices_are_zero_based_plain_ints():
    x = np.array([0.3, -1.2, 2.5, 0.3, 1.1])
    asc = sl.sort_indices_asc(x)
    desc = sl.sort_indices_desc(x)
    assert type(asc) is np.ndarray and asc.dtype.kind == "i"
    np.testing.assert_array_equal(asc, [1, 0, 3, 4, 2])      # stable: 0 before 3
    np.testing.assert_array_equal(desc, [2, 4, 0, 3, 1])     # stable in descending too
    with sl.nested():
        v = sl.Var(x)
        np.testing.assert_array_equal(sl.sort_indices_asc(v), asc)
        np.testing.assert_array_equal(np.argsort(v), asc)
        np.testing.assert_array_equal(v.argsort(), asc)
        assert np.argmax(v) == 2 and np.argmin(v) == 1
        assert v.argmax() == 2 and v.argmin() == 1
    # under nesting (the value is itself traced) the indices are still plain
    seen = []

    def inner(z):
        seen.append(sl.sort_indices_desc(z))
        return sl.sum(z * z)

    sl.grad(lambda u: sl.sum(sl.grad(inner)(u)))(x)
    assert type(seen[0]) is np.ndarray
    np.testing.assert_array_equal(seen[0], desc)


def test_sort_ties_are_stable():
    x = np.array([1.0, 0.0, 1.0, 0.0])
    w = np.array([1.0, 10.0, 100.0, 1000.0])
    # asc: positions [1, 3, 0, 2]; the adjoint of output k goes to input perm[k]
    np.testing.assert_array_equal(sl.grad(lambda v: sl.sum(sl.sort_asc(v) * w))(x),
                                  [100.0, 1.0, 1000.0, 10.0])
    np.testing.assert_array_equal(sl.grad(lambda v: sl.sum(sl.sort_desc(v) * w))(x),
                                  [1.0, 100.0, 10.0, 1000.0])


# --------------------------------------------------------------------------------------
# numpy protocol and methods
# --------------------------------------------------------------------------------------
def test_numpy_functions_on_vars():
    x = _x((3, 4), seed=51, positive=True)
    cases = [
        (lambda v: np.prod(v), np.prod(x)),
        (lambda v: np.prod(v, axis=1, keepdims=True), np.prod(x, axis=1, keepdims=True)),
        (lambda v: np.cumsum(v), np.cumsum(x)),
        (lambda v: np.cumsum(v, axis=0), np.cumsum(x, axis=0)),
        (lambda v: np.cumprod(v, axis=1), np.cumprod(x, axis=1)),
        (lambda v: np.var(v), np.var(x)),                          # numpy's ddof=0
        (lambda v: np.var(v, axis=0, ddof=1), np.var(x, axis=0, ddof=1)),
        (lambda v: np.std(v, axis=1), np.std(x, axis=1)),
        (lambda v: np.std(v, ddof=1, keepdims=True), np.std(x, ddof=1, keepdims=True)),
        (lambda v: np.max(v, axis=0), np.max(x, axis=0)),
        (lambda v: np.min(v), np.min(x)),
        (lambda v: np.amax(v, axis=-1), np.amax(x, axis=-1)),
        (lambda v: np.amin(v, axis=(0, 1)), np.amin(x, axis=(0, 1))),
        (lambda v: np.sort(v), np.sort(x)),
        (lambda v: np.sort(v, axis=0), np.sort(x, axis=0)),
        (lambda v: np.sum(v, axis=1), np.sum(x, axis=1)),
        (lambda v: np.mean(v, axis=0, keepdims=True), np.mean(x, axis=0, keepdims=True)),
        (lambda v: v.prod(axis=0), x.prod(axis=0)),
        (lambda v: v.max(), x.max()),
        (lambda v: v.min(axis=1), x.min(axis=1)),
        (lambda v: v.cumsum(), x.cumsum()),
        (lambda v: v.cumprod(axis=0), x.cumprod(axis=0)),
        (lambda v: v.var(ddof=1), x.var(ddof=1)),
        (lambda v: v.std(axis=0), x.std(axis=0)),
        (lambda v: v.sum(axis=-1), x.sum(axis=-1)),
        (lambda v: v.mean(), x.mean()),
        (lambda v: v.dot(x.T), x @ x.T),
        (lambda v: v[0].dot(v[1]), x[0] @ x[1]),
    ]
    for f, ref in cases:
        with sl.nested():
            out = f(sl.Var(x))
            assert isinstance(out, sl.Var)
            np.testing.assert_allclose(sl.value_of(out), ref, rtol=1e-12)
        sl.assert_grad(f, x)


def test_numpy_protocol_rejects_unsupported_keywords():
    with sl.nested():
        v = sl.Var(np.ones(3))
        with pytest.raises(TypeError, match="initial"):
            np.max(v, initial=2.0)
        with pytest.raises(TypeError, match="where"):
            np.sum(v, where=np.array([True, False, True]))
        with pytest.raises(TypeError, match="out"):
            np.prod(v, out=np.zeros(()))
        with pytest.raises(TypeError, match="order"):
            np.sort(v, order="x")


def test_axis_errors():
    with pytest.raises(np.exceptions.AxisError):
        sl.prod(np.ones((2, 3)), axis=2)
    with pytest.raises(ValueError, match="repeated"):
        sl.max(np.ones((2, 3)), axis=(0, -2))


# --------------------------------------------------------------------------------------
# forward mode: JVPs (single and vector mode vs finite differences) and Hessians
# (forward-over-reverse vs finite differences of the gradient) through every function
# --------------------------------------------------------------------------------------
def check_forward(f, x, linear=False):
    """``assert_jvp`` of ``f`` at ``x``; the Hessian of ``sum(f(x) * w)`` (of
    ``sum(sin(f(x)) * w)`` for linear ``f``, whose Hessian would be zero)."""
    sl.assert_jvp(f, x)
    w = _x(np.shape(f(x)), seed=99)
    shape = np.shape(x)
    if linear:
        def s(z):
            return sl.sum(sl.sin(f(sl.reshape(z, shape))) * w)
    else:
        def s(z):
            return sl.sum(f(sl.reshape(z, shape)) * w)
    sl.assert_hessian(s, np.ravel(x))


FWD_AXES = [((3, 4), None, False), ((3, 4), None, True), ((3, 4), 0, False),
            ((3, 4), -1, True), ((2, 3, 4), None, True), ((2, 3, 4), 0, True),
            ((2, 3, 4), -1, False), ((2, 3, 4), (0, 2), False), ((2, 3, 4), (-1, 1), True)]


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("shape,axis,keepdims", FWD_AXES)
def test_reduction_forward(name, shape, axis, keepdims):
    f = REDUCTIONS[name][0]
    x = _x(shape, seed=len(shape) + 3)
    check_forward(lambda v: f(v, axis=axis, keepdims=keepdims), x,
                  linear=name in ("sum", "mean"))


VECTOR_FUNCS = {
    "cumulative_sum": (sl.cumulative_sum, True), "cumprod": (sl.cumprod, False),
    "sort_asc": (sl.sort_asc, True), "sort_desc": (sl.sort_desc, True),
    "softmax": (sl.softmax, False), "log_softmax": (sl.log_softmax, False),
}


@pytest.mark.parametrize("name", sorted(VECTOR_FUNCS))
@pytest.mark.parametrize("shape,axis", [((5,), 0), ((3, 4), None), ((3, 4), 0),
                                        ((3, 4), -1), ((2, 3, 4), 1), ((2, 3, 4), -1)])
def test_vector_functions_forward(name, shape, axis):
    f, linear = VECTOR_FUNCS[name]
    if axis is None and name.endswith("softmax"):
        axis = -1      # softmax has no flattened variant
    check_forward(lambda v: f(v, axis), _x(shape, seed=13), linear)


@pytest.mark.parametrize("name", ["dot_product", "squared_distance", "distance"])
def test_binary_vector_functions_forward(name):
    f = getattr(sl, name)
    a, b = _x(5, seed=21), _x(5, seed=22)
    sl.assert_jvp(f, (a, b))
    check_forward(lambda v: f(v, b), a)
    check_forward(lambda v: f(a, v), b)
    check_forward(lambda v: f(v, v * v), a)        # one variable in both slots
    check_forward(lambda v: f(v[0], v[1] * v[2]), _x((3, 4), seed=23))


def test_dot_self_forward():
    check_forward(sl.dot_self, _x(5, seed=24))
    check_forward(lambda v: sl.dot_self(v[1:] * v[:-1]), _x(5, seed=25))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_linear_recurrence_forward(reverse, axis):
    a, b = _x((3, 5), seed=1), _x((3, 5), seed=2)
    for u in (a, a[:1], a[0] if axis != 0 else a[:, :1]):      # a broadcast coefficient
        sl.assert_jvp(lambda p, q: red._linrec(p, q, axis, reverse), (u, b))
    sl.assert_jvp(lambda p: red._linrec(p, b, axis, reverse), a)
    sl.assert_jvp(lambda q: red._linrec(a, q, axis, reverse), b)
    w = _x((3, 5), seed=3)
    sl.assert_hessian(lambda z: sl.sum(red._linrec(
        sl.reshape(z[:15], (3, 5)), sl.reshape(z[15:], (3, 5)), axis, reverse) * w),
        np.concatenate([a.ravel(), b.ravel()]))


@pytest.mark.parametrize("x", [
    np.array([2.0, 0.0, 3.0, -0.5]), np.array([2.0, 0.0, 3.0, 0.0, 1.5]),
    np.array([0.0, 0.0, 0.0]), np.array([1.5, -2.0, 0.25]),
], ids=["one-zero", "two-zeros", "all-zeros", "no-zero"])
def test_prod_forward_with_zeros(x):
    # forward mode is exact at zeros too: the tangent is <others, v>, and the
    # forward-over-reverse Hessian matches the closed form
    v = _x(len(x), seed=len(x))
    y, t = sl.jvp(sl.prod)(x, v)
    assert y == np.prod(x)
    np.testing.assert_allclose(t, _others_closed_form(x) @ v, rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(sl.hessian(sl.prod)(x), _hessian_closed_form(x),
                               rtol=1e-14, atol=0)
    cp = sl.jacobian_forward(sl.cumprod)(x)
    np.testing.assert_allclose(cp, sl.jacobian_reverse(sl.cumprod)(x), rtol=1e-14, atol=0)
    sl.assert_jvp(sl.prod, x)
    sl.assert_jvp(sl.cumprod, x)


def test_max_min_forward_ties_go_to_the_first():
    x = np.array([1.0, 3.0, -2.0, 3.0, -2.0])
    v = np.arange(1.0, 6.0)
    assert sl.jvp(sl.max)(x, v) == (3.0, 2.0)
    assert sl.jvp(sl.min)(x, v) == (-2.0, 3.0)
    m = np.array([[1.0, 5.0, 5.0], [2.0, 2.0, 0.0]])
    vm = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(sl.jvp(lambda u: sl.max(u, 1))(m, vm)[1], [1.0, 3.0])
    np.testing.assert_array_equal(sl.jvp(lambda u: sl.max(u, 0, True))(m, vm)[1],
                                  [[3.0, 1.0, 2.0]])
    # vector mode: the forward Jacobian equals the reverse one at ties
    np.testing.assert_array_equal(sl.jacobian_forward(lambda u: sl.min(u, -1))(m),
                                  sl.jacobian_reverse(lambda u: sl.min(u, -1))(m))
    assert sl.jvp(sl.max)(2.5, 1.0) == (2.5, 1.0)


def _fd_third(f, x, h=1e-4):
    """Richardson central differences of the forward-over-reverse Hessian."""
    hess = sl.hessian(f)
    out = np.empty((x.size,) * 3)
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = 1.0
        d1 = (hess(x + h * e) - hess(x - h * e)) / (2 * h)
        d2 = (hess(x + h / 2 * e) - hess(x - h / 2 * e)) / h
        out[..., k] = (4 * d2 - d1) / 3
    return out


@pytest.mark.parametrize("f", [
    sl.prod,
    lambda v: sl.sum(sl.prod(sl.reshape(v, (2, 3)), axis=-1) * np.array([1.0, -2.0])),
    lambda v: sl.dot_self(sl.cumprod(v)) * sl.max(v) + sl.log_softmax(v)[1] ** 3,
], ids=["prod", "prod-axis", "mixed"])
def test_third_order_forward_over_forward_over_reverse(f):
    x = np.array([0.7, 0.0, -1.3, 2.0, 0.4, 1.1])
    t = sl.grad_hessian(f)(x)
    np.testing.assert_allclose(t, _fd_third(f, x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(t, np.transpose(t, (1, 0, 2)), rtol=1e-12, atol=1e-12)
