"""A comparison of traced scalars (``if x[0] > c:``) lowers to the interpreter's
GUARD_CMP: the program replays while the comparison gives what it gave when recorded,
and another outcome records the other path (autodiff/vm/program.py, kernel.py)."""

import operator
import warnings

import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff.vm import kernel

pytestmark = pytest.mark.skipif(not kernel.available(), reason="numba not available")


@pytest.mark.parametrize("op", [operator.lt, operator.le, operator.gt, operator.ge,
                                operator.eq, operator.ne])
def test_each_comparison_is_a_guard_of_the_interpreter(op):
    def f(x):
        if op(x[0], 0.5):
            return sl.exp(x[0]) * x[1]
        return x[0] * x[1] ** 2

    def want(x):
        return sl.value_and_grad(f)(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vg = sl.compile(f, np.array([0.2, 1.5]))
        assert vg.compiled, vg.vm_skipped
        for x in ([0.2, 1.5], [0.5, 2.0], [0.9, -1.0], [0.3, 0.7], [0.5, 0.1],
                  [1.7, 0.4]):
            x = np.array(x)
            v, g = vg(x)
            v0, g0 = want(x)
            assert v == pytest.approx(v0, rel=1e-14)
            np.testing.assert_allclose(g, g0, rtol=1e-14)
    assert vg.compiled and vg.fallback is None and vg.recordings == 2


def test_a_comparison_with_a_constant_on_the_left():
    def f(x):
        return x[0] ** 2 if 1.0 < x[1] else -x[0]
    vg = sl.compile(f, np.array([3.0, 2.0]))
    assert vg.compiled
    assert vg(np.array([3.0, 0.5]))[0] == -3.0
    assert vg(np.array([3.0, 1.5]))[0] == 9.0
    assert vg.recordings == 2
