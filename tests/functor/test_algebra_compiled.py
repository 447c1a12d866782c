"""The algebraic solver's plain iterations on f's compiled program (the route of
functor/ode_compiled.py): residuals and Jacobians equal the tape's to rounding, roots
and their implicit-function-theorem gradients match closed forms, and a residual that
cannot be lowered falls back quietly, tried once per function."""

import importlib

import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff.vm import kernel
from stanlite.functor import ode_compiled, ode_rhs

from testkit import one_compartment, one_compartment_exact

A = importlib.import_module("stanlite.functor.algebra_solver")

pytestmark = pytest.mark.skipif(not kernel.available(), reason="numba not available")


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(ode_rhs, "_cache", type(ode_rhs._cache)())
    monkeypatch.setattr(ode_compiled, "_UNLOWERABLE", {})
    return ode_rhs


def _evaluators(cache):
    return [e[1] for k, e in cache._cache.items() if k[0] == "compiled" and e[1] is not None]


def test_plain_iterations_use_the_compiled_residual_and_jacobian(fresh, monkeypatch):
    theta = np.array([1.2, 0.3, 100.0, 12.0])
    prob = A._Problem("algebra_solver", one_compartment, np.ones(2), (theta,), "powell",
                      1e-10, 1e-8, 200, None)
    be = A._PlainBackend(prob, [theta])
    rng = np.random.default_rng(0)
    for _ in range(10):
        x = rng.uniform(0.0, 200.0, 2)
        F, J = be.fun_jac(x)
        F1 = be.fun(x)
        with monkeypatch.context() as m:
            m.setattr(ode_compiled, "COMPILE_AFTER", None)
            ref = A._PlainBackend(prob, [theta])
            F0, J0 = ref.fun_jac(x)
        np.testing.assert_allclose(F, F0, rtol=1e-13, atol=1e-12)
        np.testing.assert_allclose(F1, F0, rtol=1e-13, atol=1e-12)
        np.testing.assert_allclose(J, J0, rtol=1e-13, atol=1e-14)
    (c,) = _evaluators(fresh)
    assert c.ok and c._replays > 0 and be.compiled[0] is c


@pytest.mark.parametrize("method", ["powell", "newton"])
def test_root_and_gradient_on_the_compiled_route(fresh, method):
    theta = np.array([1.2, 0.3, 100.0, 12.0])
    w = np.array([0.7, -1.3])

    def loss(th):
        x = sl.algebra_solver(one_compartment, np.ones(2), th, method=method,
                              rel_tol=1e-12, f_tol=1e-9)
        return sl.sum(x * w)
    v, g = sl.value_and_grad(loss)(theta)
    v0, g0 = sl.value_and_grad(lambda th: sl.sum(one_compartment_exact(th) * w))(theta)
    assert v == pytest.approx(v0, rel=1e-11)
    np.testing.assert_allclose(g, g0, rtol=1e-9)
    # a second solve with other parameters replays the same program
    sl.value_and_grad(loss)(theta * 1.1)
    (c,) = _evaluators(fresh)
    assert c.ok and c.recordings == 1 and c._replays > 5


def test_a_residual_that_does_not_lower_is_tried_once(fresh):
    @sl.primitive
    def cube(x):
        return x ** 3
    sl.defvjp(cube, lambda g, ans, x: 3.0 * g * x ** 2)
    sl.defjvp(cube, lambda g, ans, x: 3.0 * g * x ** 2)

    def f(x, a):
        return cube(x) - a                 # roots a^(1/3)
    before = ode_compiled.STATS["fallback"]
    for a in (np.array([8.0, 27.0]), np.array([1.0, 64.0])):   # new data arrays
        x = sl.algebra_solver(f, np.ones(2), a)
        np.testing.assert_allclose(x, np.cbrt(a), rtol=1e-8)
    assert ode_compiled.STATS["fallback"] == before + 1
    (c,) = _evaluators(fresh)
    assert not c.ok and "cube" in c.vm_skipped
