"""A float adjoint reaching an array node stands for full(shape, g) ("lazily broadcast",
autodiff/extend.py: lazy_adjoint_ok): an input broadcast INTO that node must still get
the sum over its copies. ``sum(x - x[0])`` once gave d/dx0 = 0 instead of -3 on the eager
tape and in the Python replay alike (found by comparing with the compiled interpreter)."""

import numpy as np
import pytest

import stanlite as sl

Q = np.random.default_rng(3).uniform(0.2, 1.8, (6, 4))
P = np.array([0.7, 1.3, 0.4, 2.1])

CASES = {
    "vec_minus_elem": lambda x: sl.sum(x - x[0]),
    "elem_plus_const_vec": lambda x: sl.sum(x[0] + Q[0]),
    "const_minus_elem": lambda x: sl.sum(-(Q - x[0])),
    "vec_plus_matrix": lambda x: sl.sum(x + Q),
    "slice_broadcast": lambda x: sl.sum(x + 2.0 * x[2:3]),
    "mixed": lambda x: sl.sum(x * Q - Q / (1.0 + x * x) + x[1] * x - x[0] + 2.0 * x[2:3]),
    "vec_times_scalar_then_sub": lambda x: sl.sum(sl.exp(x) - x[1] * 2.0),
}


def _fd(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


@pytest.mark.parametrize("name", sorted(CASES))
def test_broadcast_inputs_get_the_sum_of_their_copies(name):
    f = CASES[name]
    v, g = sl.value_and_grad(f)(P)
    fd = _fd(lambda z: float(sl.value_and_grad(f)(z)[0]), P)
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)
    for backend in ("python", "auto"):
        r = sl.compile(f, P * 1.1, backend=backend)(P)
        np.testing.assert_allclose(r[1], g, rtol=1e-12, atol=1e-12)
