"""numpy scalar operands (``self.y[t]`` in a loop is an ``np.float64``) take the
path of Python floats in Var arithmetic and in densities (issue 19, point 14): the
same node (a float constant), hence the same value and gradient, bit for bit. The
speed is measured in the issue's report, not asserted here."""

import operator

import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff.extend import node_record

OPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.pow]
Y = np.array([1.5, -0.25, 2.0])


def _value_and_grad(f, x):
    v, g = sl.value_and_grad(f)(x)
    return float(v), np.asarray(g, dtype=float)


@pytest.mark.parametrize("op", OPS, ids=lambda o: o.__name__)
@pytest.mark.parametrize("var_first", [True, False])
def test_binary_operators_treat_a_numpy_scalar_as_a_float(op, var_first):
    c64 = Y[0]
    assert type(c64) is np.float64
    c = float(c64)

    def with_(k):
        return lambda x: op(x, k) if var_first else op(k, x)
    for x in (0.7, 1.3):
        assert _value_and_grad(with_(c64), x) == _value_and_grad(with_(c), x)
    # the node records a float constant, as for a Python float (the fast path)
    with sl.nested():
        v = sl.Var(0.7)
        n = op(v, c64) if var_first else op(c64, v)
        assert type(n.value) is float and type(n.y) is float


def test_a_loop_over_data_gives_identical_results_and_gradients():
    def loop(y):
        def f(theta):
            mu, s = theta[0], sl.exp(theta[1])
            lp = 0.0
            for t in range(len(y)):
                lp = lp + sl.normal_lpdf(y[t], mu, s) + (y[t] - mu) * 0.1 \
                    + mu * y[t] + y[t] * s
            return lp
        return f
    theta = np.array([0.3, -0.2])
    a = _value_and_grad(loop(Y), theta)                 # np.float64 elements
    b = _value_and_grad(loop(Y.tolist()), theta)        # Python floats
    assert a[0] == b[0] and np.array_equal(a[1], b[1])
    # retaped as well
    ra = sl.compile(loop(Y), theta)(np.array([0.5, 0.1]))
    rb = sl.compile(loop(Y.tolist()), theta)(np.array([0.5, 0.1]))
    assert ra[0] == rb[0] and np.array_equal(ra[1], rb[1])


@pytest.mark.parametrize("dist", ["normal_lpdf", "cauchy_lpdf", "student_t_lpdf"])
def test_a_density_of_a_numpy_scalar_is_the_density_of_the_float(dist):
    f = getattr(sl, dist)
    extra = (3.0,) if dist == "student_t_lpdf" else ()

    def lp(y):
        return lambda th: f(y, *extra, th[0], sl.exp(th[1]))
    th = np.array([0.4, 0.2])
    va, ga = _value_and_grad(lp(Y[2]), th)
    vb, gb = _value_and_grad(lp(2.0), th)
    assert va == vb and np.array_equal(ga, gb)
    # the fused node keeps the float (what retaping hoists as a constant); read
    # through the node's primitive record (a two-phase node: autodiff/callback.py)
    with sl.nested():
        mu = sl.Var(0.4)
        node = f(Y[2], *extra, mu, 1.2)
        assert type(node_record(node)[1][0]) is float


def test_a_numpy_scalar_density_argument_is_still_checked():
    with pytest.raises(sl.DomainError, match="sigma"):
        sl.grad(lambda m: sl.normal_lpdf(1.0, m, np.float64(-1.0)))(0.0)


@pytest.mark.parametrize("op", [operator.add, operator.sub, operator.mul,
                                operator.truediv], ids=lambda o: o.__name__)
def test_a_numpy_scalar_on_the_left_reaches_the_primitive_as_a_float(op, monkeypatch):
    # ``np.float64(2.0) * v`` goes through numpy's ufunc override (Var defines
    # __array_ufunc__ so that np.exp(v) works): the override hands the primitive the
    # Python float, so its float fast path is taken at once (issue 19, point 14)
    from stanlite.autodiff.var import UFUNCS
    ufunc = {operator.add: np.add, operator.sub: np.subtract,
             operator.mul: np.multiply, operator.truediv: np.true_divide}[op]
    seen = []
    prim = UFUNCS[ufunc]

    def spy(*args):
        seen.append(tuple(type(a) for a in args))
        return prim(*args)
    monkeypatch.setitem(UFUNCS, ufunc, spy)
    with sl.nested():
        v = sl.Var(0.7)
        n = op(Y[0], v)
        assert n.value == op(float(Y[0]), 0.7) and type(n.value) is float
    assert seen == [(float, sl.Var)]
    # np.exp(v) and a binary ufunc of two traced values still go through the table
    with sl.nested():
        v = sl.Var(0.7)
        assert np.exp(v).value == np.exp(0.7)
        assert ufunc(v, v).value == op(0.7, 0.7)
