"""The coupled PK/PD solvers sl.pk.onecpt_ode / twocpt_ode (Torsten's
pmx_solve_onecpt_rk45 / twocpt): a closed-form solution, the full ODE of PK + PD
(sl.pk.ode), central finite differences in every input, the compiled steppers, and
errors naming the argument."""

import numpy as np
import pytest

import stanlite as sl
from stanlite.functor import ode_native
from stanlite.pk.coupled import _OneCpt, _TwoCpt, pk_amounts, projectors

from testkit import check_directions, events_from_rows

TIGHT = dict(rel_tol=1e-10, abs_tol=1e-10)


def effect(t, y, a, th):
    """An effect compartment: y' = ke0 (C - y), C = cent / V (th = (ke0, V))."""
    return th[0] * (a[1] / th[1] - y)


def effect_exact(t, D, CL, V, ka, ke0):
    """The effect compartment after an oral dose D at 0, in closed form."""
    k = CL / V
    c = ke0 * D * ka / (V * (ka - k))
    return c * ((np.exp(-k * t) - np.exp(-ke0 * t)) / (ke0 - k)
                - (np.exp(-ka * t) - np.exp(-ke0 * t)) / (ke0 - ka))


def test_effect_compartment_matches_its_closed_form():
    t = np.array([0.0, 0.25, 1.0, 3.0, 8.0, 24.0])
    ev = sl.pk.events(time=t, evid=[1, 0, 0, 0, 0, 0], amt=[100.0, 0, 0, 0, 0, 0])
    A = sl.pk.onecpt_ode(effect, 1, ev, CL=5.0, V=50.0, ka=1.2, theta=[0.3, 50.0],
                         **TIGHT)
    np.testing.assert_allclose(A[:, 2], effect_exact(t, 100.0, 5.0, 50.0, 1.2, 0.3),
                               rtol=1e-8, atol=1e-12)
    # the PK columns are the closed forms of onecpt
    np.testing.assert_allclose(A[:, :2], sl.pk.onecpt(ev, CL=5.0, V=50.0, ka=1.2),
                               rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("model, params", [
    (_OneCpt, np.array([5.0, 50.0, 1.2])),
    (_TwoCpt, np.array([10.0, 15.0, 35.0, 105.0, 2.0]))])
def test_projectors_reproduce_the_closed_forms(model, params):
    """sum_j P_j e^{-lambda_j u} a0 is the closed-form evolution (onecpt / twocpt)."""
    lam, P = projectors(model, params)
    u = np.array([0.0, 0.5, 3.0, 20.0])
    n = model.n
    for c in range(n):
        a0 = np.zeros(n)
        a0[c] = 100.0
        A = pk_amounts(u, lam, np.matmul(P, a0))
        ev = sl.pk.events(time=np.r_[0.0, u[1:]], evid=[1, 0, 0, 0],
                          amt=[100.0, 0, 0, 0], cmt=[c + 1] * 4)
        ref = (sl.pk.onecpt(ev, *params) if n == 2 else sl.pk.twocpt(ev, *params))
        np.testing.assert_allclose(A, ref, rtol=1e-11, atol=1e-9)
    # an infusion at rate r from 0: G(u) r
    r = np.zeros(n)
    r[0] = 10.0
    A = pk_amounts(u, lam, np.zeros((len(lam), n)), np.matmul(P, r))
    ev = sl.pk.events(time=np.r_[0.0, u[1:]], evid=[1, 0, 0, 0], amt=[1000.0, 0, 0, 0],
                      rate=[10.0, 0, 0, 0])
    ref = (sl.pk.onecpt(ev, *params) if n == 2 else sl.pk.twocpt(ev, *params))
    np.testing.assert_allclose(A, ref, rtol=1e-11, atol=1e-9)


# ---- against the full ODE of PK + PD ---------------------
def pd2(t, y, a, th):
    """Indirect response (inhibition of production) and a transit state:
    th = (kin, kout, IC50, ktr); C = cent / 35."""
    c = a[1] / 35.0
    return sl.stack([th[0] * (1.0 - c / (th[2] + c)) - th[1] * y[0],
                     th[3] * (y[0] - y[1])])


def full2(t, x, th):
    """twocpt (CL, Q, V2, V3, ka = th[:5]) + pd2 (th[5:]), one ODE of 5 states."""
    CL, Q, V2, V3, ka = th[0], th[1], th[2], th[3], th[4]
    k10, k12, k21 = CL / V2, Q / V2, Q / V3
    pk = sl.stack([-ka * x[0], ka * x[0] - (k10 + k12) * x[1] + k21 * x[2],
                   k12 * x[1] - k21 * x[2]])
    return sl.concatenate([pk, pd2(t, x[3:], x[:3], th[5:])])


def schedule():
    """Two subjects: oral doses with addl, an infusion into the central compartment,
    a bolus into a PD state, a reset-and-dose (evid 4); observations between."""
    rows = [  # id, time, evid, amt, cmt, rate, ii, addl
        (1, 0.0, 1, 100.0, 1, 0.0, 8.0, 2), (1, 1.0, 0, 0, 2, 0, 0, 0),
        (1, 3.0, 0, 0, 2, 0, 0, 0), (1, 5.0, 1, 100.0, 2, 50.0, 0, 0),
        (1, 6.0, 0, 0, 2, 0, 0, 0), (1, 10.0, 0, 0, 2, 0, 0, 0),
        (1, 12.0, 1, 0.5, 4, 0, 0, 0), (1, 20.0, 0, 0, 2, 0, 0, 0),
        (1, 30.0, 4, 80.0, 1, 0, 0, 0), (1, 31.0, 0, 0, 2, 0, 0, 0),
        (1, 40.0, 0, 0, 2, 0, 0, 0),
        (2, 0.0, 1, 120.0, 1, 0.0, 12.0, 1), (2, 2.0, 0, 0, 2, 0, 0, 0),
        (2, 7.0, 0, 0, 2, 0, 0, 0), (2, 13.0, 0, 0, 2, 0, 0, 0),
        (2, 30.0, 0, 0, 2, 0, 0, 0)]
    return events_from_rows(rows)


PK = np.array([[10.0, 15.0, 35.0, 105.0, 2.0], [8.0, 12.0, 30.0, 90.0, 1.3]])
PD = np.array([[1.0, 0.5, 2.0, 0.3], [0.8, 0.4, 1.5, 0.25]])
F = np.array([[0.8, 1.0, 1.0, 1.0, 1.0], [0.7, 1.0, 1.0, 1.0, 1.0]])
LAG = np.array([[0.3, 0.0, 0.0, 0.0, 0.0], [0.55, 0.0, 0.0, 0.0, 0.0]])


def coupled(pk, pd, F=F, tlag=LAG, ev=None, **kw):
    ev = schedule() if ev is None else ev
    return sl.pk.twocpt_ode(pd2, 2, ev, pk[:, 0], pk[:, 1], pk[:, 2], pk[:, 3],
                            pk[:, 4], pd, F=F, tlag=tlag, **kw)


def full(pk, pd, F=F, tlag=LAG, ev=None, **kw):
    ev = schedule() if ev is None else ev
    theta = sl.concatenate([pk, pd], axis=1) if isinstance(pk, sl.Var) else \
        np.concatenate([pk, pd], axis=1)
    return sl.pk.ode(full2, 5, ev, theta, F=F, tlag=tlag, **kw)


def test_coupled_equals_the_full_ode_of_pk_and_pd():
    A = coupled(PK, PD, **TIGHT)
    B = full(PK, PD, **TIGHT)
    assert A.shape == B.shape == (16, 5)
    np.testing.assert_allclose(A, B, rtol=1e-7, atol=1e-8)
    # the reset at 30 (its dose lagged to 30.3): everything 0 at the record
    assert np.all(A[8] == 0.0) and A[9, 0] > 0.0


def test_bdf_agrees_with_rk45():
    A = coupled(PK, PD, method="bdf", **TIGHT)
    np.testing.assert_allclose(A, coupled(PK, PD, **TIGHT), rtol=1e-6, atol=1e-7)


def _loss(out, w):
    return sl.sum(out * w)


def _check_directions(fun, x, g, **kw):
    """g . v against the central difference of fun along v, for random directions."""
    check_directions(fun, x, g, rtol=2e-5, atol=1e-6, **kw)


W = np.random.default_rng(3).uniform(0.5, 1.5, (16, 5))


@pytest.mark.parametrize("what", ["pk", "pd", "F", "tlag"])
def test_gradient_matches_central_differences(what):
    """In the per-subject PK parameters, the PD parameters, F and tlag (the gut's
    lags, away from the record times; the other compartments' doses have none)."""
    base = {"pk": PK, "pd": PD, "F": F, "tlag": LAG}

    def fun(x):
        args = dict(base, **{what: x})
        return _loss(coupled(args["pk"], args["pd"], F=args["F"], tlag=args["tlag"],
                             **TIGHT), W)
    x = base[what].copy()
    g = sl.grad(fun)(x)
    mask = (LAG > 0).astype(float) if what == "tlag" else None
    _check_directions(fun, x, g, mask=mask)


def test_gradient_in_dose_amounts_times_and_infusion_rate():
    ev0 = schedule()

    def fun(x):
        def at(i, v):
            e = np.zeros(16)
            e[i] = 1.0
            return v * e
        ev = ev0.replace(amt=ev0.amt + at(0, x[0]), rate=ev0.rate + at(3, x[1]),
                         time=ev0.time + at(6, x[2]))
        return _loss(coupled(PK, PD, ev=ev, **TIGHT), W)
    x = np.array([0.0, 0.0, 0.0])
    g = sl.grad(fun)(x)
    _check_directions(fun, x, g, k=1)


def test_coupled_gradient_equals_the_full_odes():
    def fc(p):
        return _loss(coupled(p[:, :5], p[:, 5:], **TIGHT), W)

    def ff(p):
        return _loss(full(p[:, :5], p[:, 5:], **TIGHT), W)
    x = np.concatenate([PK, PD], axis=1)
    np.testing.assert_allclose(sl.grad(fc)(x), sl.grad(ff)(x), rtol=1e-6, atol=1e-8)


@pytest.mark.skipif(not ode_native.ENABLED, reason="STANLITE_ODE=scipy")
def test_the_pd_integration_runs_in_the_compiled_steppers():
    pytest.importorskip("numba")
    from stanlite.autodiff.vm.kernel import available
    if not available():
        pytest.skip("the compiled interpreter is not available")
    for _ in range(3):                       # the evaluator compiles on later calls
        sl.grad(lambda p: _loss(coupled(p, PD), W))(PK)
    before = ode_native.STATS["compiled"]
    sl.grad(lambda p: _loss(coupled(p, PD), W))(PK)
    assert ode_native.STATS["compiled"] > before


def test_one_subject_and_scalar_parameters():
    ev = sl.pk.events(time=[0.0, 1.0, 4.0], evid=[1, 0, 0], amt=[100.0, 0, 0])
    A = sl.pk.twocpt_ode(pd2, 2, ev, 10.0, 15.0, 35.0, 105.0, 2.0, PD[0], **TIGHT)
    B = sl.pk.ode(full2, 5, ev, np.r_[PK[0], PD[0]], **TIGHT)
    np.testing.assert_allclose(A, B, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("kw, match", [
    (dict(n_pd=0), "n_pd"), (dict(n_pd=1.5), "n_pd"), (dict(f=3), "f must be"),
    (dict(method="euler"), "method"), (dict(CL=[1.0, 2.0, 3.0]), "CL"),
    (dict(theta=np.zeros(3)), "theta"), (dict(theta="abc"), "theta")])
def test_bad_arguments_raise_data_errors_naming_them(kw, match):
    args = dict(f=effect, n_pd=1, events=schedule(), CL=5.0, V=50.0, ka=1.2,
                theta=np.ones((2, 2)))
    args.update(kw)
    with pytest.raises(sl.DataError, match=match):
        sl.pk.onecpt_ode(args.pop("f"), args.pop("n_pd"), args.pop("events"), **args)


def test_steady_state_records_and_unknown_compartments_are_refused():
    ev = sl.pk.events(time=[0.0, 1.0], evid=[1, 0], amt=[100.0, 0], ii=[12.0, 0],
                      ss=[1, 0])
    with pytest.raises(sl.DataError, match=r"record 1 .*ss = 1"):
        sl.pk.onecpt_ode(effect, 1, ev, 5.0, 50.0, 1.2, [0.3, 50.0])
    ev = sl.pk.events(time=[0.0, 1.0], evid=[1, 0], amt=[100.0, 0], cmt=[4, 1])
    with pytest.raises(sl.DataError, match="cmt = 4"):
        sl.pk.onecpt_ode(effect, 1, ev, 5.0, 50.0, 1.2, [0.3, 50.0])


def test_nonpositive_pk_parameters_are_domain_errors():
    ev = sl.pk.events(time=[0.0, 1.0], evid=[1, 0], amt=[100.0, 0])
    with pytest.raises(sl.DomainError, match="V"):
        sl.pk.onecpt_ode(effect, 1, ev, 5.0, -50.0, 1.2, [0.3, 50.0])


def test_parameters_per_record_equal_the_full_ode_with_rows():
    """CL and the PD's kin change at the records (Torsten's 2-D theta): the coupled
    solver against pk.ode with one row per record; gradient against differences."""
    ev = schedule()
    R = ev.n_records
    rng = np.random.default_rng(4)
    cl = PK[ev.subject, 0] * rng.uniform(0.8, 1.2, R)
    pd = PD[ev.subject] * np.c_[rng.uniform(0.8, 1.2, R), np.ones((R, 3))]

    def coupled_rows(cl, pd):
        return sl.pk.twocpt_ode(pd2, 2, ev, cl, PK[:, 1], PK[:, 2], PK[:, 3], PK[:, 4],
                                pd, F=F, tlag=LAG, **TIGHT)
    A = coupled_rows(cl, pd)
    theta = np.concatenate([np.c_[cl, PK[ev.subject, 1:]], pd], axis=1)
    B = sl.pk.ode(full2, 5, ev, theta, F=F, tlag=LAG, **TIGHT)
    np.testing.assert_allclose(A, B, rtol=1e-7, atol=1e-8)
    # constant rows: the per-subject solve
    C = coupled_rows(PK[ev.subject, 0], PD[ev.subject])
    np.testing.assert_allclose(C, coupled(PK, PD, **TIGHT), rtol=1e-8, atol=1e-9)
    fun = lambda c: _loss(coupled_rows(c, pd), W)
    _check_directions(fun, cl, sl.grad(fun)(cl), k=1)


def test_an_infusion_ending_at_a_record_with_a_traced_amount():
    """The infusion's end (4 + 100 / 50) meets the record at 6: events that coincide
    in value but not as expressions (the zero-length step of the event loop, here
    with the PK part in closed form): values and gradient as the full ODE's."""
    ev0 = sl.pk.events(time=[0.0, 2.0, 4.0, 6.0, 9.0], evid=[1, 0, 1, 0, 0],
                       amt=[100.0, 0, 100, 0, 0], rate=[0, 0, 50.0, 0, 0],
                       cmt=[1, 2, 2, 2, 2])
    w = np.arange(1.0, 26.0).reshape(5, 5)

    def loss(a, solve):
        ev = ev0.replace(amt=sl.stack([a[0], 0.0, a[1], 0.0, 0.0]))
        return sl.sum(solve(ev) * w)
    fc = lambda a: loss(a, lambda ev: sl.pk.twocpt_ode(pd2, 2, ev, *PK[0], PD[0],
                                                       **TIGHT))
    ff = lambda a: loss(a, lambda ev: sl.pk.ode(full2, 5, ev, np.r_[PK[0], PD[0]],
                                                **TIGHT))
    a = np.array([100.0, 100.0])
    assert float(fc(a)) == pytest.approx(float(ff(a)), rel=1e-9)
    np.testing.assert_allclose(sl.grad(fc)(a), sl.grad(ff)(a), rtol=1e-7)
