"""General-ODE steady states (stanlite.pk.steady_state): the bolus period map and its
Jacobians from one sensitivity solve per evaluation of the algebraic solver (issue
22), against the route through AD, the closed form of a linear model and finite
differences; the evaluations and recordings it takes; callable starting points."""

import importlib

import numpy as np
import pytest

import stanlite as sl
from stanlite.functor import ode_compiled, ode_native
from stanlite.models.pk_steady_state import steady_state_exact

from testkit import central_jacobian

pss = importlib.import_module("stanlite.pk.steady_state")


def oral(t, x, th):
    """One compartment with first-order absorption (gut, central): linear, so the
    steady state has a closed form."""
    return sl.stack([-th[0] * x[0], th[0] * x[0] - th[1] * x[1]])


def trough(p, method="rk45"):
    """The steady-state trough of ``p = (ka, ke, dose, ii)``, every input traced."""
    return sl.pk.ode_steady_state(oral, 2, p[:2], p[2], p[3], method=method)


def exact(p):
    return steady_state_exact(p)


@pytest.fixture
def before(monkeypatch):
    """The route before: the residual differentiated by AD."""
    def use():
        monkeypatch.setattr(pss, "PERIOD_JACOBIANS", False)
    return use


P = np.array([0.5, 0.2, 1000.0, 1.0])


@pytest.mark.parametrize("method", ["rk45", "bdf"])
def test_bolus_steady_state_jacobian_in_every_input(method, before):
    # theta, the dose and ii: the closed form differentiated, the same as the route
    # through AD, and central differences
    J = sl.jacobian(lambda p: trough(p, method))(P)
    J_exact = sl.jacobian(exact)(P)
    np.testing.assert_allclose(J, J_exact, rtol=1e-6)
    np.testing.assert_allclose(J, central_jacobian(lambda p: trough(p, method), P, h=1e-5, relative=True),
                               rtol=1e-5, atol=1e-7 * np.abs(J).max())
    np.testing.assert_allclose(sl.value_of(trough(P, method)), exact(P), rtol=1e-8)
    before()
    np.testing.assert_allclose(J, sl.jacobian(lambda p: trough(p, method))(P), rtol=1e-6)


def test_forward_mode_and_hessian_keep_working():
    # forward mode contracts the period's Jacobians; a Hessian differentiates the
    # residual (the rules on traced values), as before
    f = lambda p: sl.sum(trough(p))                               # noqa: E731
    np.testing.assert_allclose(sl.jacobian_forward(lambda p: trough(p))(P),
                               sl.jacobian(exact)(P), rtol=1e-6)
    H = sl.hessian(f)(P)
    H_exact = sl.hessian(lambda p: sl.sum(exact(p)))(P)
    np.testing.assert_allclose(H, H_exact, rtol=1e-4, atol=1e-6 * np.abs(H_exact).max())


def _counts(fn, x):
    fn(x)                                          # first call: compilations
    rec = ode_compiled.STATS["compiled"] + ode_compiled.STATS["fallback"]
    sol = ode_native.STATS["compiled"]
    fn(x * (1 + 1e-3))
    return (ode_compiled.STATS["compiled"] + ode_compiled.STATS["fallback"] - rec,
            ode_native.STATS["compiled"] - sol)


def test_a_gradient_records_nothing_and_solves_the_period_twice(before):
    # from the closed-form trough, Powell converges in one step and a correction:
    # two sensitivity solves of the period, whose Jacobians serve the implicit
    # function theorem (no third solve for the reverse sweep); the residual is never
    # recorded. Before: a recording per steady state and 5 solves
    def start(p):
        return np.asarray(exact(sl.value_of(p))) * (1 + 1e-9)
    grad = sl.grad(lambda p: sl.sum(sl.pk.ode_steady_state(oral, 2, p[:2], p[2], p[3],
                                                           guess=start(p))))
    assert _counts(grad, P) == (0, 2)
    before()
    rec, sol = _counts(grad, P)
    assert rec >= 1 and sol > 2, (rec, sol)


def test_callable_guess_is_called_with_the_parameters():
    seen = []

    def guess(theta):
        seen.append(np.array(theta))
        return np.asarray(exact(np.r_[theta, 1000.0, 1.0]))

    ev = sl.pk.events(time=[0.0, 0.5], evid=[1, 0], amt=[1000.0, 0.0], ii=[1.0, 0.0],
                      ss=[1, 0])

    def conc(th):
        return sl.pk.ode(oral, 2, ev, th, ss_guess=guess)[1, 1]
    th = np.array([0.5, 0.2])
    g = sl.grad(conc)(th)
    assert seen and all(np.array_equal(s, th) for s in seen)
    np.testing.assert_allclose(g, central_jacobian(lambda t: np.array([conc(t)]), th, h=1e-5, relative=True)[0],
                               rtol=1e-5)
    with pytest.raises(ValueError, match="ss_guess\\(theta\\) must return a vector of 2"):
        sl.pk.ode(oral, 2, ev, th, ss_guess=lambda t: np.zeros(3))


def test_constant_infusion_steady_state_by_the_compiled_right_hand_side(before):
    # a constant infusion at steady state (ss = 1, ii = 0): f(x) + R e_c = 0 with f
    # and its Jacobians from the right-hand side's program - the gradient of the
    # closed form (pk.onecpt) and of the route through AD, and no recording per solve
    ev = sl.pk.events(time=[0.0, 1.0, 5.0], evid=[1, 0, 0], cmt=[1, 2, 2],
                      ss=[1, 0, 0], rate=[3.0, 0.0, 0.0])

    def ode(th):
        return sl.sum(sl.pk.ode(oral, 2, ev, th, rel_tol=1e-10, abs_tol=1e-10)[1:, 1])

    def closed(th):           # CL = ke V, V = 1
        return sl.sum(sl.pk.onecpt(ev, th[1], 1.0, th[0])[1:, 1])
    th = np.array([0.7, 0.3])
    g = sl.grad(ode)
    np.testing.assert_allclose(g(th), sl.grad(closed)(th), rtol=1e-7, atol=1e-9)
    assert _counts(g, th)[0] == 0
    before()
    np.testing.assert_allclose(g(th), sl.grad(closed)(th), rtol=1e-7, atol=1e-9)
