"""divdiff_exp: values against 50-digit arithmetic and closed forms (equal, close and
far nodes), its derivatives (reverse, forward, Hessians) against finite differences,
NaN and shape handling."""

import math

import numpy as np
import pytest

import stanlite as sl
from stanlite.pk.divdiff import divdiff_exp


def _reference(nodes, mp):
    """g[y_0..y_n] of e^{-y} by Opitz's formula in 50-digit arithmetic."""
    n = len(nodes)
    J = mp.matrix(n, n)
    for i in range(n):
        J[i, i] = -mp.mpf(float(nodes[i]))
        if i + 1 < n:
            J[i, i + 1] = -1
    return mp.expm(J)[0, n - 1]


@pytest.mark.parametrize("m", [1, 2, 3, 4, 5])
def test_against_high_precision_for_every_spacing(m, rng):
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 50
    worst = 0.0
    for trial in range(30):
        spread = 10.0 ** rng.uniform(-9, 2.5)         # clustered ... far apart
        Y = np.abs(rng.uniform(0, 60) + spread * rng.standard_normal(m))
        if trial % 3 == 0 and m > 1:
            Y[1] = Y[0]                                # a repeated (confluent) node
        ref = _reference(Y, mp)
        if abs(ref) < 1e-290:
            continue
        worst = max(worst, float(abs(divdiff_exp(Y) - ref) / abs(ref)))
    assert worst < 5e-14, worst


def test_closed_forms():
    # one node: e^{-y}; two: (e^{-b} - e^{-a}) / (b - a); confluent: g^{(n)}(y) / n!
    assert divdiff_exp(np.array([0.7])) == pytest.approx(math.exp(-0.7), rel=1e-15)
    a, b = 0.3, 2.9
    assert divdiff_exp(np.array([a, b])) == pytest.approx(
        (math.exp(-b) - math.exp(-a)) / (b - a), rel=1e-15)
    for n in range(1, 6):
        y = 1.7
        assert divdiff_exp(np.full(n + 1, y)) == pytest.approx(
            (-1) ** n * math.exp(-y) / math.factorial(n), rel=1e-14)
    # (1 - e^{-d}) / d at a tiny spread: no cancellation
    d = 1e-12
    assert -divdiff_exp(np.array([0.0, d])) == pytest.approx(1 - d / 2, rel=1e-15)
    # the three-node recursion and the series agree across the spread of 1
    for D in (0.999999, 1.0, 1.000001):
        v = divdiff_exp(np.array([0.0, 0.4, D]))
        ref = ((1 - math.exp(-0.4)) / 0.4 - math.exp(-0.4) * (1 - math.exp(-(D - 0.4)))
               / (D - 0.4)) / D
        assert v == pytest.approx(ref, rel=1e-13)


def test_symmetric_in_the_nodes_and_shift_rule(rng):
    Y = rng.uniform(0, 5, (20, 4))
    base = divdiff_exp(Y)
    for perm in ([3, 1, 0, 2], [1, 0, 2, 3]):
        np.testing.assert_allclose(divdiff_exp(Y[:, perm]), base, rtol=1e-14)
    # shifting every node by c multiplies by e^{-c}
    np.testing.assert_allclose(divdiff_exp(Y + 2.0), base * math.exp(-2.0), rtol=1e-13)


def test_stacks_nan_and_large_values():
    Y = np.array([[0.0, 1.0, 2.0], [np.nan, 1.0, 2.0], [800.0, 801.0, 900.0]])
    v = divdiff_exp(Y)
    assert v.shape == (3,)
    assert np.isfinite(v[0]) and np.isnan(v[1]) and v[2] == 0.0    # e^{-800} underflows
    assert divdiff_exp(np.zeros((2, 3, 2))).shape == (2, 3)
    with pytest.raises(ValueError, match="at least one node"):
        divdiff_exp(np.zeros((3, 0)))


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_derivatives(m, rng):
    Y = rng.uniform(0, 3, (4, m))
    sl.assert_grad(divdiff_exp, Y)
    sl.assert_jvp(divdiff_exp, Y)
    sl.assert_hessian(lambda y: sl.sum(divdiff_exp(sl.reshape(y, (4, m))) ** 2),
                      Y.ravel(), rtol=1e-5)


def test_derivative_is_the_divided_difference_with_a_repeated_node():
    Y = np.array([0.5, 1.5, 4.0])
    g = sl.grad(divdiff_exp)(Y)
    for i in range(3):
        assert g[i] == pytest.approx(divdiff_exp(np.r_[Y, Y[i]]), rel=1e-13)
    # at equal nodes too (the confluent case)
    g = sl.grad(divdiff_exp)(np.array([2.0, 2.0]))
    np.testing.assert_allclose(g, [math.exp(-2) / 2] * 2, rtol=1e-14)
