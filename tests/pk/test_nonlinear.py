"""General ODE models: the event-driven solver against the closed forms and scipy,
derivatives against finite differences, steady states by the algebraic solver
(against the closed forms, the limit of repeated doses, the derivative in ii)."""

import math
import warnings

import numpy as np
import pytest
from scipy.integrate import solve_ivp

import stanlite as sl
from stanlite.errors import SolverError

from .test_analytic import CL, KA, SCENARIOS, V, one_cpt_scenario, sched


def one(t, x, th):
    return sl.stack([-th[0] * x[0], th[0] * x[0] - th[1] * x[1]])


def mm(t, x, th):
    ka, vmax, km = th[0], th[1], th[2]
    return sl.stack([-ka * x[0], ka * x[0] - vmax * x[1] / (km + x[1])])


TH1 = np.array([KA, CL / V])
TH_MM = np.array([1.0, 10.0, 20.0])
TH_SS = np.array([1.0, 30.0, 20.0])     # vmax above the mean dosing rate: a steady state
TOL = dict(rel_tol=1e-10, abs_tol=1e-10)


@pytest.mark.parametrize("name", ["addl", "lag and F", "resets",
                                  "doses and observations at equal times"])
def test_against_the_closed_form(name):
    d, F, tlag = one_cpt_scenario(name)
    ev = sl.pk.events(**d)
    A = sl.pk.ode(one, 2, ev, TH1, F=F, tlag=tlag, **TOL)
    B = sl.pk.onecpt(ev, CL, V, KA, F=F, tlag=tlag)
    np.testing.assert_allclose(A, B, rtol=1e-8, atol=1e-8)


def test_bdf_and_infusions():
    d = sched(6, time=[0.0, 1.0, 2.0, 5.0, 6.0, 12.0], evid=[1, 0, 1, 0, 0, 0],
              amt=[100.0, 0, 60.0, 0, 0, 0], rate=[0.0, 0, 20.0, 0, 0, 0],
              cmt=[1, 2, 2, 2, 2, 2])
    ev = sl.pk.events(**d)
    A = sl.pk.ode(one, 2, ev, TH1, method="bdf", **TOL)
    np.testing.assert_allclose(A, sl.pk.onecpt(ev, CL, V, KA), rtol=1e-7, atol=1e-7)


def test_michaelis_menten_against_scipy():
    # 100 into the gut at 0, an infusion of 40 into the central compartment over 2..4
    ev = sl.pk.events(time=[0.0, 1.0, 2.0, 3.0, 8.0], evid=[1, 0, 1, 0, 0],
                      amt=[100.0, 0, 40.0, 0, 0], rate=[0.0, 0, 20.0, 0, 0],
                      cmt=[1, 2, 2, 2, 2])
    A = sl.pk.ode(mm, 2, ev, TH_MM, **TOL)
    ka, vmax, km = TH_MM

    def rhs(t, x):
        r = 20.0 if 2.0 <= t < 4.0 else 0.0
        return [-ka * x[0], ka * x[0] - vmax * x[1] / (km + x[1]) + r]
    sol = solve_ivp(rhs, (0, 8), [100.0, 0.0], method="DOP853", rtol=1e-12, atol=1e-12,
                    t_eval=[1.0, 2.0, 3.0, 8.0], max_step=0.01)
    np.testing.assert_allclose(A[1:], sol.y.T, rtol=2e-7)


def _fd_check(f, x, rel=2e-6):
    g = sl.jacobian(lambda x: sl.reshape(f(x), (-1,)))(x)
    for i in range(len(x)):
        h = 1e-4 * max(1.0, abs(x[i]))
        e = np.zeros(len(x))
        e[i] = h
        fd = (np.asarray(f(x + e)) - np.asarray(f(x - e))).ravel() / (2 * h)
        np.testing.assert_allclose(g[:, i], fd, rtol=rel,
                                   atol=rel * np.abs(fd).max() + 1e-9,
                                   err_msg=f"parameter {i}")
    return g


def test_gradients_in_every_parameter():
    d = sched(5, time=[0.0, 1.0, 3.0, 4.0, 7.0], evid=[1, 0, 1, 0, 0],
              amt=[100.0, 0, 40.0, 0, 0], rate=[0.0, 0, 20.0, 0, 0], cmt=[1, 2, 2, 2, 2])
    ev = sl.pk.events(**d)

    def f(x):
        e = ev.replace(amt=sl.stack([x[3], 0.0, 40.0, 0.0, 0.0]),
                       rate=sl.stack([0.0, 0.0, x[4], 0.0, 0.0]),
                       time=sl.stack([0.0, x[5], x[6], 4.0, 7.0]))
        return sl.pk.ode(mm, 2, e, x[:3], F=sl.stack([x[7], 1.0]),
                         tlag=sl.stack([x[8], 0.0]), **TOL)
    x = np.r_[TH_MM, 100.0, 20.0, 1.0, 3.0, 0.8, 0.3]
    g = _fd_check(f, x)
    # forward mode agrees with reverse mode
    t = sl.jvp(lambda x: sl.reshape(f(x), (-1,)))(x, np.eye(len(x))[2])[1]
    np.testing.assert_allclose(t, g[:, 2], rtol=1e-6, atol=1e-8)


def test_hessian_through_the_ode():
    ev = sl.pk.events(time=[0.0, 1.0, 3.0], evid=[1, 0, 0], amt=[100.0, 0, 0])

    def f(th):
        return sl.sum(sl.pk.ode(one, 2, ev, th, rel_tol=1e-9, abs_tol=1e-9)[:, 1]) / 100
    H = sl.hessian(f)(TH1)

    def g(th):     # the exact Hessian from the closed form
        return sl.sum(sl.pk.onecpt(ev, th[1] * 50.0, 50.0, th[0])[:, 1]) / 100
    np.testing.assert_allclose(H, sl.hessian(g)(TH1), rtol=1e-5)


# --------------------------------------------------------------------------------------
# steady states
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["ss bolus with lag and addl", "ss short infusion",
                                  "ss overlapping infusions with lag",
                                  "ss constant infusion then reset"])
def test_steady_state_against_the_closed_form(name):
    d, F, tlag = SCENARIOS[name]
    d = dict(d)
    F = F[:2] if F is not None else None
    tlag = tlag[:2] if tlag is not None else None
    ev = sl.pk.events(**d)
    A = sl.pk.ode(one, 2, ev, TH1, F=F, tlag=tlag, **TOL)
    np.testing.assert_allclose(A, sl.pk.onecpt(ev, CL, V, KA, F=F, tlag=tlag), rtol=1e-7,
                               atol=1e-7)


def test_nonlinear_steady_state_is_the_limit_of_repeated_doses():
    ii, n = 6.0, 12
    obs = [0.0, 1.0, 3.0]
    ss = sl.pk.events(time=[0.0] + obs, evid=[1, 0, 0, 0], amt=[100.0, 0, 0, 0],
                      ii=[ii, 0, 0, 0], ss=[1, 0, 0, 0])
    rep = sl.pk.events(time=[0.0] + [n * ii + t for t in obs], evid=[1, 0, 0, 0],
                       amt=[100.0, 0, 0, 0], ii=[ii, 0, 0, 0], addl=[n, 0, 0, 0])
    a = sl.pk.ode(mm, 2, ss, TH_SS, **TOL)
    b = sl.pk.ode(mm, 2, rep, TH_SS, **TOL)
    np.testing.assert_allclose(a[1:], b[1:], rtol=1e-7)


def test_steady_state_gradient_in_ii_and_every_parameter():
    # Torsten's issue 15 was a wrong derivative in ii at ss = 1: central differences of
    # a weighted sum of the amounts, in ii and a model parameter
    ev = sl.pk.events(time=[0.0, 1.0, 4.0], evid=[1, 0, 0], amt=[100.0, 0, 0],
                      ii=[6.0, 0, 0], ss=[1, 0, 0])
    w = np.array([[0.3, 1.0], [0.2, 0.7], [-0.5, 0.4]])

    def f(x):
        e = ev.replace(ii=sl.stack([x[3], 0.0, 0.0]), amt=sl.stack([x[4], 0.0, 0.0]))
        return sl.sum(w * sl.pk.ode(mm, 2, e, x[:3], rel_tol=1e-9, abs_tol=1e-9))
    x = np.r_[TH_SS, 6.0, 100.0]
    g = sl.grad(f)(x)
    for i in (1, 3):                      # vmax and ii
        h = 1e-4 * x[i]
        e = np.zeros(5)
        e[i] = h
        fd = (f(x + e) - f(x - e)) / (2 * h)
        assert g[i] == pytest.approx(fd, rel=1e-6, abs=1e-9), i
    gi = sl.grad(lambda ii: sl.pk.ode(mm, 2, ev.replace(ii=sl.stack([ii, 0.0, 0.0])),
                                      TH_SS, rel_tol=1e-8, abs_tol=1e-8)[1, 1])(6.0)
    assert gi < 0                         # a longer interval leaves less drug


def test_ode_steady_state_the_reviews_check():
    # x1' = -k1 x1, x2' = k1 x1 - k2 x2 at steady state of D every tau: the gut trough is
    # D e^{-k1 tau} / (1 - e^{-k1 tau}); the central one the geometric series
    D, tau, k1, k2 = 1000.0, 1.0, 0.5, 0.2
    x = sl.pk.ode_steady_state(one, 2, np.array([k1, k2]), D, tau)
    q1, q2 = math.exp(-k1 * tau), math.exp(-k2 * tau)
    assert x[0] == pytest.approx(D * q1 / (1 - q1), rel=1e-9)
    assert x[1] == pytest.approx(D * k1 / (k1 - k2) * (q2 / (1 - q2) - q1 / (1 - q1)),
                                 rel=1e-9)
    # an infusion (the whole dose over 0.4 tau) and the derivative in tau
    xi = sl.pk.ode_steady_state(one, 2, np.array([k1, k2]), D, tau, rate=D / 0.4)
    ev = sl.pk.events(time=[0.0], evid=[1], amt=[D], rate=[D / 0.4], ii=[tau], ss=[1])
    np.testing.assert_allclose(xi, sl.pk.onecpt(ev, k2 * 10, 10.0, k1)[0], rtol=1e-8)
    g = sl.grad(lambda t: sl.pk.ode_steady_state(one, 2, np.array([k1, k2]), D, t)[1])(tau)
    ref = sl.grad(lambda t: sl.pk.onecpt(sl.pk.events(time=[0.0], evid=[1], amt=[D],
                                                      ii=[1.0], ss=[1]).replace(
        ii=sl.stack([t])), k2 * 10, 10.0, k1)[0, 1])(tau)
    assert g == pytest.approx(ref, rel=1e-7)


def test_population_with_per_subject_parameters():
    ev = sl.pk.events(id=[1, 1, 1, 2, 2], time=[0.0, 1.0, 5.0, 0.0, 2.0],
                      evid=[1, 0, 0, 1, 0], amt=[100.0, 0, 0, 60.0, 0])
    th = np.array([[1.0, 10.0, 20.0], [0.7, 5.0, 15.0]])
    A = sl.pk.ode(mm, 2, ev, th, **TOL)
    for s in range(2):
        r = slice(ev.start[s], ev.stop[s])
        one_ev = sl.pk.events(time=ev.time[r], evid=ev.evid[r], amt=ev.amt[r])
        np.testing.assert_allclose(A[r], sl.pk.ode(mm, 2, one_ev, th[s], **TOL), rtol=1e-12)


def test_errors():
    ev = sl.pk.events(id=[1, 2], time=[0.0, 0.0], evid=[1, 1], amt=[1.0, 1.0])
    with pytest.raises(ValueError, match=r"pk.ode: with 2 subjects theta must have a "
                                         r"leading axis of 2"):
        sl.pk.ode(mm, 2, ev, TH_MM)
    with pytest.raises(ValueError, match="method must be 'rk45' or 'bdf'"):
        sl.pk.ode(one, 2, ev, np.tile(TH1, (2, 1)), method="euler")
    with pytest.raises(ValueError, match="n_cmt must be a positive integer"):
        sl.pk.ode(one, 0, ev, np.tile(TH1, (2, 1)))
    with pytest.raises(TypeError, match="f must be a function"):
        sl.pk.ode(None, 2, ev, np.tile(TH1, (2, 1)))
    # no steady state: nothing ever leaves the second compartment
    ss = sl.pk.events(time=[0.0], evid=[1], amt=[10.0], ii=[1.0], ss=[1])
    with pytest.raises(SolverError, match=r"pk.ode: no steady state found for record 1 "
                                          r"\(subject 1\): algebra_solver"):
        sl.pk.ode(lambda t, x, th: sl.stack([-x[0], x[0]]), 2, ss, None, **TOL)


@pytest.mark.slow
def test_hessian_through_an_ode_steady_state():
    # second derivatives through the algebraic solver and the ODE super node, against
    # the closed form's (one compartment as an ODE, a steady-state bolus)
    ev = sl.pk.events(time=[0.0, 2.0], evid=[1, 0], amt=[100.0, 0], ii=[6.0, 0],
                      ss=[1, 0])

    def f(th):
        return sl.sum(sl.pk.ode(one, 2, ev, th, **TOL)[:, 1]) / 100

    def g(th):
        return sl.sum(sl.pk.onecpt(ev, th[1] * 50.0, 50.0, th[0])[:, 1]) / 100
    np.testing.assert_allclose(sl.hessian(f)(TH1), sl.hessian(g)(TH1), rtol=1e-5)


def test_retaped_gradient_with_traced_lag_records_once():
    # the solver decides from times only the order of events and their ties, so a
    # retaped gradient (sl.compile) replays one recording while the lag moves doses
    # between records, and agrees with the eager tape bit for bit
    ev = sl.pk.events(time=[0.0, 1.0, 4.0, 6.0, 8.0], evid=[1, 0, 0, 1, 0],
                      amt=[100.0, 0, 0, 50.0, 0])

    def lp(x):
        A = sl.pk.ode(mm, 2, ev, TH_MM, tlag=sl.stack([x[0], 0.0]),
                      F=sl.stack([x[1], 1.0]), rel_tol=1e-8, abs_tol=1e-8)
        return sl.sum(A[ev.observed, 1])
    x = np.array([0.3, 0.8])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vg = sl.compile(lp, x)
        for d in (0.0, 0.05, 0.2):
            v, g = vg(x + d)
            v0, g0 = sl.value_and_grad(lp)(x + d)
            assert v == v0 and np.array_equal(g, g0)
    assert "1 recording(s)" in repr(vg)
