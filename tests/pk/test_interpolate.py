"""sl.pk.interpolate_linear: values (numpy's interp), derivatives (hat functions and
slopes, central differences), inside an ODE right-hand side (a closed form, the
compiled interpreter), and errors naming the argument."""

import numpy as np
import pytest

import stanlite as sl
from stanlite.functor import ode_native

X = np.array([0.0, 2.0, 5.0, 6.0, 10.0])
V = np.array([70.0, 68.0, 71.0, 75.0, 72.0])
T = np.array([-1.0, 0.0, 0.5, 2.0, 3.3, 5.5, 6.0, 9.9, 12.0])


def test_values_are_numpys_interp_with_constant_ends():
    np.testing.assert_allclose(sl.pk.interpolate_linear(T, X, V), np.interp(T, X, V),
                               rtol=0, atol=1e-13)
    for t in T:
        assert float(sl.pk.interpolate_linear(t, X, V)) == pytest.approx(
            np.interp(t, X, V), abs=1e-13)


def test_traced_values_and_times_give_the_same_numbers():
    f = sl.grad(lambda v: sl.sum(sl.pk.interpolate_linear(T, X, v) ** 2))
    f(V)                                          # traced: the branch-free form
    out = []
    sl.grad(lambda v: (out.append(sl.value_of(sl.pk.interpolate_linear(T, X, v))),
                       sl.sum(v))[1])(V)
    np.testing.assert_allclose(out[0], np.interp(T, X, V), atol=1e-12)


def test_gradient_in_the_values_is_the_hat_functions():
    for t in (0.5, 3.3, 5.5, 12.0, -1.0):
        g = sl.grad(lambda v: sl.pk.interpolate_linear(t, X, v))(V)
        hat = np.array([np.interp(t, X, np.eye(len(X))[k]) for k in range(len(X))])
        np.testing.assert_allclose(g, hat, atol=1e-14)


def test_gradient_in_time_is_the_slope_and_matches_differences():
    h = 1e-6
    for t in (0.5, 3.3, 5.5, 9.9):
        g = sl.grad(lambda s: sl.pk.interpolate_linear(s, X, V))(t)
        fd = (np.interp(t + h, X, V) - np.interp(t - h, X, V)) / (2 * h)
        assert float(g) == pytest.approx(fd, rel=1e-7)
    # outside the range: constant
    assert float(sl.grad(lambda s: sl.pk.interpolate_linear(s, X, V))(-3.0)) == 0.0
    assert float(sl.grad(lambda s: sl.pk.interpolate_linear(s, X, V))(11.0)) == 0.0
    # at a knot: the mean of the two slopes (a kink)
    g = float(sl.grad(lambda s: sl.pk.interpolate_linear(s, X, V))(5.0))
    assert g == pytest.approx(0.5 * ((71 - 68) / 3 + (75 - 71) / 1))
    # a vector of times
    g = sl.grad(lambda s: sl.sum(sl.pk.interpolate_linear(s, X, V)))(np.array([0.5, 3.3]))
    np.testing.assert_allclose(g, [-1.0, 1.0])


def test_a_single_knot_is_a_constant():
    assert float(sl.pk.interpolate_linear(3.0, [1.0], [4.0])) == 4.0
    g = sl.grad(lambda v: sl.sum(sl.pk.interpolate_linear(np.array([0.0, 5.0]),
                                                          [1.0], v)))(np.array([4.0]))
    np.testing.assert_allclose(g, [2.0])


# ---- a time-varying covariate inside an ODE ------------------
def decay(t, x, theta, times, k):
    """x' = -theta k(t) x, k piecewise linear: x(t) = x0 exp(-theta int_0^t k)."""
    return -theta[0] * sl.pk.interpolate_linear(t, times, k) * x


KX = np.array([0.0, 3.0, 7.0, 12.0])
KV = np.array([0.2, 0.5, 0.1, 0.3])


def integral(t, values=KV):
    """int_0^t of the interpolant of (KX, values), exactly (trapezoids, then a part)."""
    total = 0.0
    for a, b, va, vb in zip(KX[:-1], KX[1:], values[:-1], values[1:]):
        if t <= a:
            break
        e = min(t, b)
        ve = va + (vb - va) * (e - a) / (b - a)
        total += 0.5 * (va + ve) * (e - a)
    if t > KX[-1]:
        total += values[-1] * (t - KX[-1])
    return total


def test_covariate_inside_an_ode_matches_the_closed_form_and_differences():
    ev = sl.pk.events(time=[0.0, 1.5, 4.0, 8.0, 15.0], evid=[1, 0, 0, 0, 0],
                      amt=[100.0, 0, 0, 0, 0])
    tight = dict(rel_tol=1e-10, abs_tol=1e-10)

    def solve(theta, k=KV):
        return sl.pk.ode(decay, 1, ev, theta, data=(KX, k), **tight)[:, 0]
    A = solve(np.array([1.3]))
    exact = [100.0 * np.exp(-1.3 * integral(t)) for t in ev.time]
    np.testing.assert_allclose(A, exact, rtol=1e-7)
    # derivative in theta: -int k * x
    g = sl.grad(lambda th: solve(th)[3])(np.array([1.3]))
    assert float(g[0]) == pytest.approx(-integral(8.0) * exact[3], rel=1e-6)


def test_covariate_values_as_parameters_in_an_ode():
    """x' = -k(t) x with the knot values k as parameters: d x(t) / d k_i =
    -x(t) int_0^t hat_i (the integral is linear in the values), against the closed
    form (finite differences through an adaptive solver are noisier than this)."""
    ev = sl.pk.events(time=[0.0, 4.0, 9.0], evid=[1, 0, 0], amt=[100.0, 0, 0])

    def f(t, x, theta, times):
        return -sl.pk.interpolate_linear(t, times, theta) * x

    def loss(k):
        return sl.sum(sl.pk.ode(f, 1, ev, k, data=(KX,), rel_tol=1e-10,
                                abs_tol=1e-10))
    g = sl.grad(loss)(KV)
    eye = np.eye(len(KV))
    exact = [sum(-100.0 * np.exp(-integral(t)) * integral(t, eye[i]) for t in (4.0, 9.0))
             for i in range(len(KV))]
    np.testing.assert_allclose(g, exact, rtol=1e-7)


@pytest.mark.skipif(not ode_native.ENABLED, reason="STANLITE_ODE=scipy")
def test_the_right_hand_side_with_a_covariate_runs_compiled():
    pytest.importorskip("numba")
    from stanlite.autodiff.vm.kernel import available
    if not available():
        pytest.skip("the compiled interpreter is not available")
    ev = sl.pk.events(time=[0.0, 4.0, 9.0], evid=[1, 0, 0], amt=[100.0, 0, 0])
    loss = lambda th: sl.sum(sl.pk.ode(decay, 1, ev, th, data=(KX, KV)))
    for _ in range(3):
        sl.grad(loss)(np.array([1.0]))
    before = ode_native.STATS["compiled"]
    sl.grad(loss)(np.array([1.0]))
    assert ode_native.STATS["compiled"] > before


@pytest.mark.parametrize("t, times, values, match", [
    (1.0, [0.0, 2.0, 1.0], [1.0, 2.0, 3.0], "times must be strictly increasing"),
    (1.0, [0.0, 0.0], [1.0, 2.0], "times must be strictly increasing"),
    (1.0, [0.0, np.nan], [1.0, 2.0], r"times\[1\].*finite"),
    (1.0, [], [], "times must be a non-empty vector"),
    (1.0, [[0.0, 1.0]], [1.0, 2.0], "times must be a non-empty vector"),
    (1.0, [0.0, 1.0], [1.0, 2.0, 3.0], "values must have one value per time"),
    (1.0, [0.0, 1.0], "ab", "values must be numbers"),
    (np.zeros((2, 2)), [0.0, 1.0], [1.0, 2.0], "t must be a scalar or a vector"),
    (1.0, "xy", [1.0, 2.0], "times must be numbers")])
def test_bad_input_raises_a_data_error_naming_the_argument(t, times, values, match):
    with pytest.raises(sl.DataError, match=match):
        sl.pk.interpolate_linear(t, times, values)


def test_traced_knot_times_give_the_formulas_derivative():
    g = sl.grad(lambda x: sl.pk.interpolate_linear(1.0, x, V[:2]))(np.array([0.0, 2.0]))
    # v = v0 + (v1 - v0) (t - x0) / (x1 - x0)
    s = (V[1] - V[0]) / 2.0
    np.testing.assert_allclose(g, [s * (1.0 - 2.0) / 2.0, -s * 1.0 / 2.0])
