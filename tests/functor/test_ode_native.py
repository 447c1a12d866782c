"""Whole ODE solves in compiled code (functor/ode_native.py, ode_steppers.py): the
numba RK45 and BDF over the compiled right-hand side agree with closed forms, with
finite differences (sensitivities), and with scipy's route (the same method, to
rounding); failures raise SolverError; guard paths stay on the compiled route; the
switch forces scipy's route."""

import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff.vm import kernel
from stanlite.functor import ode as ode_mod
from stanlite.functor import ode_compiled, ode_native, ode_rhs, ode_steppers

from testkit import count_calls

pytestmark = pytest.mark.skipif(not kernel.available(), reason="numba not available")

TIGHT = dict(rel_tol=1e-10, abs_tol=1e-10)


@pytest.fixture
def compiled_only(monkeypatch):
    """The compiled route on, a fresh cache, and scipy's stepper forbidden: a test
    using it proves that its solves ran in compiled code."""
    monkeypatch.setattr(ode_native, "ENABLED", True)
    monkeypatch.setattr(ode_compiled, "COMPILE_AFTER", 1)
    monkeypatch.setattr(ode_rhs, "_cache", type(ode_rhs._cache)())

    def forbidden(*a, **k):
        raise AssertionError("scipy's stepper was called")
    monkeypatch.setattr(ode_mod, "integrate", forbidden)
    return monkeypatch


def _scipy_route(fn):
    """``fn()`` on scipy's route (the compiled stepper switched off)."""
    saved = ode_native.ENABLED
    ode_native.ENABLED = False
    try:
        return fn()
    finally:
        ode_native.ENABLED = saved


def linear(t, y, M):
    return M @ y


def _matrix(rng, n, stiff=False):
    Q = np.linalg.qr(rng.normal(size=(n, n)))[0]
    lam = -np.array([1.0, 1e3, 0.5, 2.0][:n]) if stiff else -rng.uniform(0.2, 1.5, n)
    return Q @ np.diag(lam) @ Q.T + 0.1 * np.triu(rng.normal(size=(n, n)), 1)


def _closed_form(M, y0, ts):
    return np.array([sl.matrix_exp(M * t) @ y0 for t in ts])


def fd_grad(f, x, h=1e-6):
    x = np.asarray(x, dtype=float)
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        g.flat[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


TS = [0.3, 1.0, 1.0, 2.5, 6.0]


# --------------------------------------------------------------------------------------
# values: closed forms and scipy's route
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("method,stiff", [("rk45", False), ("bdf", False), ("bdf", True)])
def test_linear_system_against_matrix_exp(compiled_only, method, stiff):
    rng = np.random.default_rng(3)
    M = _matrix(rng, 3, stiff)
    y0 = np.array([1.0, -0.5, 2.0])
    solve = sl.ode_rk45 if method == "rk45" else sl.ode_bdf
    before = ode_native.STATS["compiled"]
    Y = solve(linear, y0, 0.0, TS, M, **TIGHT)
    assert ode_native.STATS["compiled"] == before + 1
    np.testing.assert_allclose(Y, _closed_form(M, y0, TS), rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("method", ["rk45", "bdf"])
def test_compiled_route_equals_scipys_route_to_rounding(compiled_only, method):
    # the same method step for step over the same program: equal to rounding, not to
    # the tolerance (outputs between steps come from the same dense output)
    rng = np.random.default_rng(5)
    M = _matrix(rng, 3)
    y0 = np.array([0.2, 1.0, -1.0])
    solve = sl.ode_rk45 if method == "rk45" else sl.ode_bdf
    Y = solve(linear, y0, 0.0, TS, M, rel_tol=1e-6, abs_tol=1e-6)
    compiled_only.undo()
    Ys = _scipy_route(lambda: solve(linear, y0, 0.0, TS, M, rel_tol=1e-6, abs_tol=1e-6))
    np.testing.assert_allclose(Y, Ys, rtol=1e-12, atol=1e-13)


def test_the_tableau_is_scipys():
    from scipy.integrate._ivp.rk import RK45
    for name in "CABEP":
        np.testing.assert_array_equal(getattr(ode_steppers, name), getattr(RK45, name))


# --------------------------------------------------------------------------------------
# sensitivities
# --------------------------------------------------------------------------------------
def mm(t, y, theta, dose):
    """One compartment, first-order absorption, Michaelis-Menten elimination."""
    ka, vm, km = theta[0], theta[1], theta[2]
    return sl.stack([-ka * y[0], ka * y[0] - vm * y[1] / (km + y[1])]) + 0.0 * dose


@pytest.mark.parametrize("method", ["rk45", "bdf"])
def test_sensitivities_against_finite_differences(compiled_only, method):
    solve = sl.ode_rk45 if method == "rk45" else sl.ode_bdf
    W = np.random.default_rng(2).normal(size=(3, 2))
    ts = [0.5, 2.0, 8.0]

    def L(x):
        return sl.sum(solve(mm, x[3:], 0.0, ts, x[:3], 1.0, **TIGHT) * W)
    x = np.array([1.2, 3.0, 2.0, 10.0, 0.5])
    g = sl.grad(L)(x)
    np.testing.assert_allclose(g, fd_grad(lambda v: float(L(v)), x), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("method", ["rk45", "bdf"])
def test_gradients_equal_scipys_route(compiled_only, method):
    solve = sl.ode_rk45 if method == "rk45" else sl.ode_bdf
    ts = [0.5, 2.0, 8.0]

    def L(x):
        return sl.sum(solve(mm, x[3:], 0.0, ts, x[:3], 1.0) ** 2)
    x = np.array([1.2, 3.0, 2.0, 10.0, 0.5])
    g = sl.grad(L)(x)
    compiled_only.undo()
    gs = _scipy_route(lambda: sl.grad(L)(x))
    np.testing.assert_allclose(g, gs, rtol=1e-10)


def test_linear_sensitivities_against_the_closed_form(compiled_only):
    # d/dy0 of y(t) = expm(M t) y0 is expm(M t)
    rng = np.random.default_rng(9)
    M = _matrix(rng, 3)
    y0 = np.array([1.0, 2.0, 3.0])
    w = np.array([0.3, -1.0, 2.0])
    g = sl.grad(lambda y: sl.sum(sl.ode_rk45(linear, y, 0.0, [2.0], M, **TIGHT)[0] * w))(y0)
    np.testing.assert_allclose(g, sl.matrix_exp(2.0 * M).T @ w, rtol=1e-8)


# --------------------------------------------------------------------------------------
# failures, stiffness, guards, the switch
# --------------------------------------------------------------------------------------
def test_max_num_steps_is_a_solver_error(compiled_only):
    with pytest.raises(sl.SolverError, match=r"ode_rk45: max_num_steps = 5 exceeded between "
                                             r"t = 0 and the next output time 100; reached "
                                             r"t = \S+ after 5 steps"):
        sl.ode_rk45(lambda t, y, k: -k * y, [1.0], 0.0, [100.0], 1.0, max_num_steps=5,
                    **TIGHT)
    with pytest.raises(sl.SolverError, match=r"ode_bdf: max_num_steps = 3 exceeded"):
        sl.ode_bdf(lambda t, y, k: -k * y, [1.0], 0.0, [100.0], 1.0, max_num_steps=3)
    # the budget is per output interval
    Y = sl.ode_rk45(lambda t, y, k: -k * y, [1.0], 0.0, np.linspace(0.1, 10, 100), 1.0,
                    max_num_steps=5)
    assert Y.shape == (100, 1)


def test_a_solution_that_blows_up_is_a_solver_error():
    for solve in (sl.ode_rk45, sl.ode_bdf):
        with pytest.raises(sl.SolverError, match=r"(failed|not finite)"):
            solve(lambda t, y, k: k * y * y, [1.0], 0.0, [2.0], 1.0)


def robertson(t, y, k1, k2, k3):
    a = -k1 * y[0] + k3 * y[1] * y[2]
    c = k2 * y[1] ** 2
    return sl.stack([a, -a - c, c])


ROB = (np.array([1.0, 0.0, 0.0]), 0.0, [0.4, 40.0, 4e3], 0.04, 3e7, 1e4)


def test_a_stiff_problem_by_compiled_bdf(compiled_only):
    y0, t0, ts, *k = ROB
    Y = sl.ode_bdf(robertson, y0, t0, ts, *k, rel_tol=1e-8, abs_tol=1e-12)
    np.testing.assert_allclose(Y.sum(axis=1), 1.0, atol=1e-9)       # mass is conserved
    compiled_only.undo()
    Ys = _scipy_route(lambda: sl.ode_bdf(robertson, y0, t0, ts, *k, rel_tol=1e-8,
                                         abs_tol=1e-12))
    np.testing.assert_allclose(Y, Ys, rtol=1e-9, atol=1e-14)


def test_rk45_on_a_stiff_problem_stops_early(compiled_only):
    y0, t0, _, *k = ROB
    with pytest.raises(sl.SolverError, match=r"ode_rk45: the problem is stiff.*use ode_bdf"):
        sl.ode_rk45(robertson, y0, t0, [1e4], *k, max_num_steps=10**5)


def switching(t, y, k):
    """Two guard paths: a dose arriving at t = 1."""
    if t > 1.0:
        return -k * y + 1.0
    return -k * y


@pytest.mark.parametrize("method", ["rk45", "bdf"])
def test_guard_paths_stay_compiled(compiled_only, method):
    solve = sl.ode_rk45 if method == "rk45" else sl.ode_bdf
    redone = ode_native.STATS["redone"]
    Y = solve(switching, [1.0], 0.0, [0.5, 3.0], 0.7, **TIGHT)
    Y2 = solve(switching, [1.0], 0.0, [0.5, 3.0], 0.7, **TIGHT)
    assert ode_native.STATS["redone"] == redone
    np.testing.assert_array_equal(Y, Y2)
    # y = e^{-kt} before t = 1; after: 1/k + (e^{-k} - 1/k) e^{-k (t - 1)}
    k = 0.7
    exact = [np.exp(-0.5 * k), 1 / k + (np.exp(-k) - 1 / k) * np.exp(-2 * k)]
    # (the kink at t = 1 is stepped over: the error control, not the tolerance, decides)
    np.testing.assert_allclose(Y[:, 0], exact, rtol=1e-5)


def test_the_switch_forces_scipys_route(monkeypatch):
    calls = count_calls(monkeypatch, ode_mod, "integrate")
    monkeypatch.setattr(ode_native, "ENABLED", False)
    sl.ode_rk45(lambda t, y, k: -k * y, [1.0], 0.0, [1.0], 0.5)
    assert calls


@pytest.mark.parametrize("method", ["rk45", "bdf"])
def test_a_compiled_gradient_replays_the_solves_it_recorded(compiled_only, method):
    # sl.compile records the solve and replays it at new points: the numbers must come
    # from the same route at the recording and at the replays (the first solve of a
    # fresh f is compiled too, and a guard path met mid-solve is recorded there and
    # the solve redone compiled), or the replay disagrees at the recording point and
    # sl.compile gives up with a CompileWarning (an error under pytest)
    solve = sl.ode_rk45 if method == "rk45" else sl.ode_bdf

    def L(x):
        return sl.sum(solve(switching, x[1:], 0.0, [0.5, 2.0, 3.0], x[0], **TIGHT) ** 2)
    x0 = np.array([0.7, 1.0])
    vg = sl.compile(L, x0)
    for x in (x0, x0 * 1.1, x0 * 0.9):
        v, g = vg(x)
        np.testing.assert_allclose(g, sl.grad(L)(x), rtol=1e-12)
    assert vg.fallback is None


def test_solves_in_threads_equal_serial_solves(compiled_only):
    # the kernels release the GIL and work on private buffers
    from concurrent.futures import ThreadPoolExecutor
    ks = np.linspace(0.5, 2.0, 8)

    def one(k):
        return sl.ode_bdf(mm, np.array([10.0, 0.0]), 0.0, [1.0, 4.0], np.array([k, 3.0, 2.0]),
                          1.0, **TIGHT)
    serial = [one(k) for k in ks]
    with ThreadPoolExecutor(4) as ex:
        threaded = list(ex.map(one, ks))
    for a, b in zip(serial, threaded):
        np.testing.assert_array_equal(a, b)
