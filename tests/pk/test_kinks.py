"""Gradients of sl.pk.ode at kinks (issue 22, point 8): a steady-state infusion whose
duration is an exact multiple of ii (with and without a lag that puts the record at
the end of an infusion), and an infusion ending exactly at an observation. The
amounts are continuous there but not differentiable; the ODE solver's gradient must
be a one-sided derivative - the same piece as the closed form's (sl.pk.onecpt), each
component equal to the left or the right finite difference - where it used to be
neither (d/dii = 0 at dur = ii)."""

import numpy as np
import pytest

import stanlite as sl

CL, V, KA = 5.0, 50.0, 1.2
TH = np.array([CL, V, KA])


def onecpt_rhs(t, x, th):
    return sl.stack([-th[2] * x[0], th[2] * x[0] - th[0] / th[1] * x[1]])


def ss_amounts(solver, x, times, tlag):
    """Central amounts at the records of: a steady-state infusion at t = 0 into the
    central compartment (amt, rate, ii traced; F of the central compartment traced),
    then observations at ``times``."""
    amt, rate, ii, F = x[0], x[1], x[2], x[3]
    n = 1 + len(times)
    zeros = [0.0] * (n - 1)
    ev = sl.pk.events(time=[0.0] + list(times), evid=[1] + [0] * (n - 1),
                      amt=sl.stack([amt] + zeros), rate=sl.stack([rate] + zeros),
                      ii=sl.stack([ii] + zeros), ss=[1] + [0] * (n - 1), cmt=[2] * n)
    Fv = sl.stack([1.0, F])
    lag = None if tlag is None else np.array([0.0, tlag])
    if solver == "ode":
        A = sl.pk.ode(onecpt_rhs, 2, ev, TH, F=Fv, tlag=lag, rel_tol=1e-10,
                      abs_tol=1e-10)
    else:
        A = sl.pk.onecpt(ev, CL=CL, V=V, ka=KA, F=Fv, tlag=lag)
    return A[:, 1]


def one_sided(f, x0, h):
    f0 = f(x0)
    E = np.eye(len(x0)) * h * np.maximum(1.0, np.abs(x0))
    left = np.array([(f0 - f(x0 - e)) / e.max() for e in E]).T
    right = np.array([(f(x0 + e) - f0) / e.max() for e in E]).T
    return left, right


def check_one_sided(g, left, right, rtol=2e-5):
    """Each component of g is the left or the right difference; and the point is a
    kink (somewhere left and right differ)."""
    scale = 1.0 + np.abs(left) + np.abs(right)
    near_l = np.abs(g - left) <= rtol * scale
    near_r = np.abs(g - right) <= rtol * scale
    assert np.all(near_l | near_r), (g, left, right)
    return not np.allclose(left, right, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("mult, tlag", [(1, None), (2, None), (1.5, 6.0)])
def test_steady_state_infusion_at_a_multiple_of_ii(mult, tlag):
    """dur = amt F / rate = mult * ii: 12 h infusions every 12 h (continuous), every
    6 h (two overlap), and 18 h every 12 h with a 6 h lag (the record at the end of
    an infusion of the series: psi = ii - tlag = dur - ii)."""
    ii = 12.0 / mult if tlag is None else 12.0
    x0 = np.array([600.0 if tlag is None else 900.0, 50.0, ii, 1.0])
    times = (3.0, 12.0, 30.0)
    kink = False
    grads = {}
    for solver in ("closed", "ode"):
        rows = []
        for k in range(1 + len(times)):
            rows.append(sl.grad(lambda x: ss_amounts(solver, x, times, tlag)[k])(x0))
        grads[solver] = np.array(rows)
    np.testing.assert_allclose(grads["ode"], grads["closed"], rtol=1e-6, atol=1e-7)
    left, right = one_sided(lambda x: np.asarray(ss_amounts("closed", x, times, tlag)),
                            x0, 1e-6)
    for k in range(1 + len(times)):
        kink |= check_one_sided(grads["ode"][k], left[k], right[k])
    assert kink
    # the ODE's own values have the closed form's one-sided differences
    ode_sides = one_sided(lambda x: np.asarray(ss_amounts("ode", x, times, tlag)), x0,
                          1e-4)
    cf_sides = one_sided(lambda x: np.asarray(ss_amounts("closed", x, times, tlag)), x0,
                         1e-4)
    for a, b in zip(ode_sides, cf_sides):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)


def test_the_regression_d_dii_was_zero():
    """The reported symptom: at dur = ii the ODE's d/dii at the steady-state record was
    0 (the period was taken as dur - m ii and lost ii), against -71.6 (right) and
    -21.6 (left)."""
    x0 = np.array([600.0, 50.0, 12.0, 1.0])
    g = sl.grad(lambda x: ss_amounts("ode", x, (3.0,), None)[0])(x0)
    assert g[2] == pytest.approx(-71.5506, rel=1e-4)


def infusion_amounts(solver, x, cmt):
    """An infusion of amt at rate (dur = 2 h), observed at a traced time t_obs = 2."""
    amt, rate, t_obs = x
    ev = sl.pk.events(time=sl.stack([0.0, 1.0, t_obs, 3.0, 5.0]), evid=[1, 0, 0, 0, 0],
                      amt=sl.stack([amt, 0.0, 0.0, 0.0, 0.0]),
                      rate=sl.stack([rate, 0.0, 0.0, 0.0, 0.0]), cmt=[cmt] * 5)
    if solver == "ode":
        A = sl.pk.ode(onecpt_rhs, 2, ev, TH, rel_tol=1e-10, abs_tol=1e-10)
    else:
        A = sl.pk.onecpt(ev, CL=CL, V=V, ka=KA)
    return A[:, 1]


@pytest.mark.parametrize("cmt", [1, 2])
def test_infusion_ending_at_an_observation(cmt):
    """The infusion's end coincides with a record: the ODE used to integrate to the
    end and stop, a derivative in the end time of neither piece; now the piece where
    the infusion runs up to the record (u <= dur), as the closed form."""
    x0 = np.array([100.0, 50.0, 2.0])
    g = {s: np.array([sl.grad(lambda x: infusion_amounts(s, x, cmt)[k])(x0)
                      for k in range(5)]) for s in ("closed", "ode")}
    np.testing.assert_allclose(g["ode"], g["closed"], rtol=1e-6, atol=1e-7)
    left, right = one_sided(lambda x: np.asarray(infusion_amounts("closed", x, cmt)), x0,
                            1e-6)
    kinks = [check_one_sided(g["ode"][k], left[k], right[k]) for k in range(5)]
    assert kinks[2] == (cmt == 2)          # into the gut: the central amount is smooth


def test_hessian_at_the_kink_is_the_closed_form_piece():
    """Second derivatives through the zero-length steps (midpoint rule, exact to
    second order): the Hessian of the steady-state amount at dur = ii in (amt, rate,
    ii) equals the closed form's."""
    x0 = np.array([600.0, 50.0, 12.0])

    def f(solver):
        return lambda x: ss_amounts(solver, sl.stack([x[0], x[1], x[2], 1.0]), (3.0,),
                                    None)[1]
    H_ode = sl.hessian(f("ode"))(x0)
    H_cf = sl.hessian(f("closed"))(x0)
    np.testing.assert_allclose(H_ode, H_cf, rtol=1e-5, atol=1e-6)
