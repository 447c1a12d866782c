"""pk.ode's planned route (stanlite/pk/ode_plan.py) against the general event walk:
the same amounts and gradients on schedules it serves (bolus doses, addl, resets,
steady states ss = 1 and 2, doses and outputs at equal times; rk45 and bdf), against
central differences, the same failures, and the general route where it does not
apply."""

import numpy as np
import pytest

import stanlite as sl
from stanlite.errors import SolverError
from stanlite.pk import ode_plan

from .test_analytic import SCENARIOS, sched


def mm(t, x, th):
    ka, vmax, km = th[0], th[1], th[2]
    return sl.stack([-ka * x[0], ka * x[0] - vmax * x[1] / (km + x[1])])


TH = np.array([1.0, 30.0, 20.0])    # vmax above the mean dosing rates: steady states
SS = {
    "ss bolus, addl, outputs at the dose": (sched(
        6, time=[0, 0, 1, 5, 12, 30], evid=[1, 0, 0, 0, 0, 0], cmt=[2, 2, 2, 2, 2, 2],
        amt=[100.0, 0, 0, 0, 0, 0], ii=[12.0, 0, 0, 0, 0, 0], ss=[1, 0, 0, 0, 0, 0],
        addl=[1, 0, 0, 0, 0, 0])),
    "ss bolus into the gut, then a reset and a dose": (sched(
        7, time=[0, 1, 5, 6, 8, 12, 20], evid=[1, 0, 0, 3, 1, 0, 0],
        amt=[100.0, 0, 0, 0, 50, 0, 0], ii=[12.0, 0, 0, 0, 0, 0, 0],
        ss=[1, 0, 0, 0, 0, 0, 0])),
}
SERVED = {name: SCENARIOS[name][0] for name in
          ("addl", "ss=2 on top of a dose", "doses and observations at equal times")}
SERVED.update(SS)


def routes(d, method="rk45", **kw):
    """Values and gradients of a weighted sum of the amounts by both routes, and how
    many gradients the planned route took."""
    ev = sl.pk.events(**d)
    w = np.random.default_rng(3).normal(size=(ev.n_records, 2))

    def loss(th):
        return sl.sum(sl.pk.ode(mm, 2, ev, th, method=method, **kw) * w)
    out = {}
    for on in (False, True):
        ode_plan.ENABLED = on
        try:
            n0 = ode_plan.STATS["planned"]
            g = sl.grad(loss)(TH)
            out[on] = (float(loss(TH)), g, ode_plan.STATS["planned"] - n0)
        finally:
            ode_plan.ENABLED = True
    return ev, w, out


@pytest.mark.parametrize("method", ["rk45", "bdf"])
@pytest.mark.parametrize("name", list(SERVED))
def test_the_same_amounts_and_gradients_as_the_event_walk(name, method):
    ev, w, out = routes(SERVED[name], method)
    (v0, g0, n0), (v1, g1, n1) = out[False], out[True]
    assert n0 == 0 and n1 == 1
    assert v1 == pytest.approx(v0, rel=1e-13)
    np.testing.assert_allclose(g1, g0, rtol=1e-9, atol=1e-12 * np.abs(g0).max())
    # and the value inside the gradient is the plain solve's, to the tolerance
    A = sl.pk.ode(mm, 2, ev, TH, method=method)
    assert float(np.sum(A * w)) == pytest.approx(v1, rel=1e-6)


@pytest.mark.parametrize("name", list(SS))
def test_gradients_against_central_differences(name):
    ev, w, out = routes(SS[name], rel_tol=1e-10, abs_tol=1e-10)
    g = out[True][1]

    def f(th):
        return float(np.sum(sl.pk.ode(mm, 2, ev, th, rel_tol=1e-10, abs_tol=1e-10) * w))
    fd = np.zeros(3)
    for k in range(3):
        h = 1e-5 * TH[k]
        e = np.zeros(3)
        e[k] = h
        fd[k] = (f(TH + e) - f(TH - e)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6 * np.abs(fd).max())


@pytest.mark.parametrize("name", ["resets", "ss short infusion", "lag and F"])
def test_the_general_route_where_it_does_not_apply(name):
    d, F, tlag = SCENARIOS[name]
    d = dict(d)
    d["cmt"] = [min(c, 2) if c > 0 else 2 for c in d["cmt"]]
    ev = sl.pk.events(**d)
    n0 = ode_plan.STATS["planned"]
    F = None if F is None else F[:2]
    tlag = None if tlag is None else tlag[:2]
    sl.grad(lambda th: sl.sum(sl.pk.ode(mm, 2, ev, th, F=F, tlag=tlag)))(TH)
    assert ode_plan.STATS["planned"] == n0


def test_a_failed_solve_raises_solver_error():
    ev = sl.pk.events(**SS["ss bolus, addl, outputs at the dose"])
    with pytest.raises(SolverError):
        sl.grad(lambda th: sl.sum(sl.pk.ode(mm, 2, ev, th, max_num_steps=3)))(TH)
    # no steady state (vmax below the dosing rate): the general route's error
    with pytest.raises(SolverError, match="no steady state found for record 1"):
        sl.grad(lambda th: sl.sum(sl.pk.ode(mm, 2, ev, th)))(np.array([1.0, 5.0, 20.0]))


def test_a_theta_changed_in_place_is_seen():
    """The sensitivity plans are shared between calls for the same theta object:
    a theta array changed in place between two calls gives the new amounts."""
    ev = sl.pk.events(**SS["ss bolus, addl, outputs at the dose"])
    th = TH.copy()
    loss = lambda t: sl.sum(sl.pk.ode(mm, 2, ev, t))      # noqa: E731
    a = float(loss(th))
    th[1] = 40.0
    b = float(loss(th))
    assert b == float(loss(np.array([1.0, 40.0, 20.0]))) and b != a


def test_hessians_take_the_general_route():
    """Forward-over-reverse (sl.hessian) traces theta twice: the general walk, whose
    Hessian matches central differences of the planned route's gradient."""
    ev = sl.pk.events(**SS["ss bolus, addl, outputs at the dose"])
    w = np.random.default_rng(3).normal(size=(ev.n_records, 2))
    ctl = dict(rel_tol=1e-10, abs_tol=1e-10)

    def loss(th):
        return sl.sum(sl.pk.ode(mm, 2, ev, th, **ctl) * w)
    n0 = ode_plan.STATS["planned"]
    H = sl.hessian(loss)(TH)
    assert ode_plan.STATS["planned"] == n0
    fd = np.zeros((3, 3))
    for k in range(3):
        e = np.zeros(3)
        e[k] = 1e-4 * TH[k]
        fd[k] = (sl.grad(loss)(TH + e) - sl.grad(loss)(TH - e)) / (2 * e[k])
    assert ode_plan.STATS["planned"] == n0 + 6
    np.testing.assert_allclose(H, fd, rtol=1e-4, atol=1e-6 * np.abs(fd).max())
