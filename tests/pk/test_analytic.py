"""One- and two-compartment closed forms: textbook formulas, an independent event
simulator over every kind of record, superposition = addl expansion, steady state =
the limit of repeated doses, gradients in every parameter (reverse, forward,
Hessians), populations, retaping, errors."""

import math
import warnings

import numpy as np
import pytest

import stanlite as sl
from stanlite.errors import DataError, DomainError

from .reference import simulate

CL, V, KA = 5.0, 50.0, 1.2
P2 = dict(CL=10.0, Q=15.0, V2=35.0, V3=105.0, ka=2.0)


def K1(CL=CL, V=V, ka=KA):
    return np.array([[-ka, 0.0], [ka, -CL / V]])


def K2(CL, Q, V2, V3, ka):
    k10, k12, k21 = CL / V2, Q / V2, Q / V3
    return np.array([[-ka, 0, 0], [ka, -(k10 + k12), k21], [0, k12, -k21]])


def sched(n, **kw):
    d = dict(evid=[0] * n, amt=[0.0] * n, cmt=[1] * n, rate=[0.0] * n, ii=[0.0] * n,
             addl=[0] * n, ss=[0] * n)
    d.update(kw)
    return d


def ref(K, d, F=None, tlag=None):
    return simulate(K, d["time"], d["evid"], d["amt"], d["cmt"], d["rate"], d["ii"],
                    d["addl"], d["ss"], F=F, tlag=tlag)


# --------------------------------------------------------------------------------------
# closed forms
# --------------------------------------------------------------------------------------
def test_single_bolus_closed_form():
    t = np.array([0.0, 0.1, 0.5, 1.0, 3.0, 10.0, 48.0])
    D, k = 320.0, CL / V
    ev = sl.pk.events(time=t, evid=[1] + [0] * 6, amt=[D] + [0] * 6)
    A = sl.pk.onecpt(ev, CL, V, KA)
    np.testing.assert_allclose(A[:, 0], D * np.exp(-KA * t), rtol=1e-14)
    np.testing.assert_allclose(A[:, 1], D * KA / (KA - k) * (np.exp(-k * t) - np.exp(-KA * t)),
                               rtol=1e-13, atol=1e-13)


def test_equal_rates_are_exact():
    # ka = k: the central amount is D ka t e^{-ka t}; the textbook formula divides by 0
    t = np.array([0.0, 0.5, 2.0, 20.0])
    ev = sl.pk.events(time=t, evid=[1, 0, 0, 0], amt=[100.0, 0, 0, 0])
    A = sl.pk.onecpt(ev, CL=5.0, V=50.0, ka=0.1)
    np.testing.assert_allclose(A[:, 1], 100 * 0.1 * t * np.exp(-0.1 * t), rtol=1e-14)
    # and the gradient at equal rates equals the limit from both sides
    g = sl.grad(lambda ka: sl.pk.onecpt(ev, 5.0, 50.0, ka)[2, 1])
    near = [g(0.1 + h) for h in (-1e-7, 1e-7)]
    assert g(0.1) == pytest.approx(np.mean(near), rel=1e-6)


def test_infusion_closed_form():
    R, T, k = 20.0, 5.0, CL / V
    t = np.array([0.0, 1.0, 5.0, 7.0, 24.0])
    ev = sl.pk.events(time=t, evid=[1, 0, 0, 0, 0], amt=[R * T, 0, 0, 0, 0],
                      cmt=[2] * 5, rate=[R, 0, 0, 0, 0])
    cent = sl.pk.onecpt(ev, CL, V, KA)[:, 1]
    during = R / k * (1 - np.exp(-k * np.minimum(t, T)))
    expect = np.where(t <= T, during, R / k * (1 - np.exp(-k * T)) * np.exp(-k * (t - T)))
    np.testing.assert_allclose(cent, expect, rtol=1e-13)


def test_two_compartment_biexponential():
    p = P2
    k10, k12, k21 = p["CL"] / p["V2"], p["Q"] / p["V2"], p["Q"] / p["V3"]
    s, pr = k10 + k12 + k21, k10 * k21
    al = (s + math.sqrt(s * s - 4 * pr)) / 2
    be = (s - math.sqrt(s * s - 4 * pr)) / 2
    t = np.array([0.0, 0.5, 3.0, 30.0])
    ev = sl.pk.events(time=t, evid=[1, 0, 0, 0], amt=[1000.0, 0, 0, 0], cmt=[2] * 4)
    A = sl.pk.twocpt(ev, **p)
    np.testing.assert_allclose(
        A[:, 1], 1000 * ((al - k21) * np.exp(-al * t) + (k21 - be) * np.exp(-be * t))
        / (al - be), rtol=1e-12)
    np.testing.assert_allclose(A[:, 2], 1000 * k12 * (np.exp(-be * t) - np.exp(-al * t))
                               / (al - be), rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------
# every kind of record against the independent simulator
# --------------------------------------------------------------------------------------
SCENARIOS = {
    "addl": (sched(6, time=[0, 1, 5, 12, 13, 30], evid=[1, 0, 0, 0, 0, 0],
                   amt=[100.0, 0, 0, 0, 0, 0], ii=[12.0, 0, 0, 0, 0, 0],
                   addl=[2, 0, 0, 0, 0, 0]), None, None),
    "lag and F": (sched(6, time=[0, 0.3, 5, 12, 12.5, 30], evid=[1, 0, 0, 0, 0, 0],
                        amt=[100.0, 0, 0, 0, 0, 0], ii=[12.0, 0, 0, 0, 0, 0],
                        addl=[2, 0, 0, 0, 0, 0]), [0.7, 0.9, 1.0], [0.5, 0.0, 0.0]),
    "infusions into each compartment": (
        sched(7, time=[0, 1, 5, 6, 12, 13, 30], evid=[1, 0, 1, 0, 1, 0, 0],
              amt=[100.0, 0, 50, 0, 30, 0, 0], cmt=[2, 2, 1, 2, -1, 2, 2],
              rate=[20.0, 0, 10, 0, 5, 0, 0]), [1.0, 1.0, 0.8], None),
    "resets": (sched(7, time=[0, 1, 5, 6, 12, 13, 30], evid=[1, 0, 3, 0, 4, 0, 0],
                     amt=[100.0, 0, 0, 0, 80, 0, 0], ii=[6.0, 0, 0, 0, 0, 0, 0],
                     addl=[5, 0, 0, 0, 0, 0, 0], rate=[0, 0, 0, 0, 40.0, 0, 0]), None, None),
    "ss bolus with lag and addl": (
        sched(6, time=[0, 1, 5, 12, 13, 30], evid=[1, 0, 0, 0, 0, 0],
              amt=[100.0, 0, 0, 0, 0, 0], ii=[12.0, 0, 0, 0, 0, 0], ss=[1, 0, 0, 0, 0, 0],
              addl=[1, 0, 0, 0, 0, 0]), None, [2.0, 0.0, 0.0]),
    "ss short infusion": (
        sched(6, time=[0, 1, 5, 12, 13, 30], evid=[1, 0, 0, 0, 0, 0], cmt=[2] * 6,
              amt=[100.0, 0, 0, 0, 0, 0], ii=[12.0, 0, 0, 0, 0, 0], ss=[1, 0, 0, 0, 0, 0],
              rate=[25.0, 0, 0, 0, 0, 0]), None, None),
    "ss overlapping infusions with lag": (
        sched(6, time=[0, 1, 5, 12, 13, 30], evid=[1, 0, 0, 0, 0, 0],
              amt=[100.0, 0, 0, 0, 0, 0], ii=[12.0, 0, 0, 0, 0, 0], ss=[1, 0, 0, 0, 0, 0],
              rate=[3.0, 0, 0, 0, 0, 0]), [0.9, 1.0, 1.0], [3.0, 1.0, 0.0]),
    "ss constant infusion then reset": (
        sched(6, time=[0, 1, 5, 12, 13, 30], evid=[1, 0, 0, 0, 3, 0], cmt=[1, 2, 2, 2, 2, 2],
              ss=[1, 0, 0, 0, 0, 0], rate=[3.0, 0, 0, 0, 0, 0]), None, None),
    "ss=2 on top of a dose": (
        sched(6, time=[0, 1, 5, 12, 13, 30], evid=[1, 0, 1, 0, 0, 0], cmt=[1, 2, 2, 2, 2, 2],
              amt=[100.0, 0, 50, 0, 0, 0], ii=[0, 0, 8.0, 0, 0, 0], ss=[0, 0, 2, 0, 0, 0]),
        None, None),
    "doses and observations at equal times": (
        sched(6, time=[0, 0, 0, 4, 4, 4], evid=[0, 1, 0, 0, 1, 0], cmt=[1, 1, 1, 2, 2, 2],
              amt=[0, 100.0, 0, 0, 20, 0], ii=[0, 4.0, 0, 0, 0, 0],
              addl=[0, 1, 0, 0, 0, 0]), None, None),
}



def one_cpt_scenario(name):
    """SCENARIOS[name] for a model of two states (gut, central: onecpt's): the records
    of the peripheral compartment and of none (cmt <= 0) go to the central one, F and
    tlag keep their first two entries."""
    d, F, tlag = SCENARIOS[name]
    d = dict(d)
    d["cmt"] = [min(c, 2) if c > 0 else 2 for c in d["cmt"]]
    F = F[:2] if F is not None else None
    tlag = tlag[:2] if tlag is not None else None
    return d, F, tlag


@pytest.mark.parametrize("name", list(SCENARIOS))
@pytest.mark.parametrize("model", ["onecpt", "twocpt", "linode"])
def test_against_the_event_simulator(name, model):
    d, F, tlag = SCENARIOS[name]
    d = dict(d)
    if model == "onecpt":
        F = F[:2] if F is not None else None
        tlag = tlag[:2] if tlag is not None else None
        K = K1()
    else:
        K = K2(**P2)
    # -1: the peripheral compartment (the central one in the one-compartment model)
    d["cmt"] = [(2 if model == "onecpt" else 3) if c == -1 else c for c in d["cmt"]]
    ev = sl.pk.events(**d)
    if model == "onecpt":
        A = sl.pk.onecpt(ev, CL, V, KA, F=F, tlag=tlag)
    elif model == "twocpt":
        A = sl.pk.twocpt(ev, F=F, tlag=tlag, **P2)
    else:
        A = sl.pk.linode(ev, K, F=F, tlag=tlag)
    R = ref(K, d, F, tlag)
    np.testing.assert_allclose(A, R, rtol=1e-11, atol=1e-11 * np.abs(R).max())


def test_equal_times_semantics():
    # an observation listed before a dose at the same time does not see it; one after
    # does; an additional dose landing on a record's time is applied before it
    d = SCENARIOS["doses and observations at equal times"][0]
    A = sl.pk.onecpt(sl.pk.events(**d), CL, V, KA)
    assert A[0, 0] == 0.0 and A[1, 0] == 100.0 and A[2, 0] == 100.0
    assert A[3, 0] > 100 * math.exp(-KA * 4) + 99.9       # the addl dose at t = 4
    assert A[4, 1] - A[3, 1] == pytest.approx(20.0)


# --------------------------------------------------------------------------------------
# superposition and steady state
# --------------------------------------------------------------------------------------
def test_addl_equals_explicit_doses():
    obs = [0.5, 3.0, 7.9, 8.0, 13.0, 25.0, 40.0]
    one = sl.pk.events(**sched(1 + len(obs), time=[0.0] + obs, evid=[1] + [0] * len(obs),
                                amt=[150.0] + [0.0] * len(obs),
                                ii=[8.0] + [0.0] * len(obs), addl=[3] + [0] * len(obs)))
    times = sorted([(8.0 * k, 1) for k in range(4)] + [(t, 0) for t in obs],
                   key=lambda e: (e[0], -e[1]))
    many = sl.pk.events(time=[t for t, _ in times], evid=[e for _, e in times],
                        amt=[150.0 * e for _, e in times])
    a = sl.pk.twocpt(one, **P2)
    b = sl.pk.twocpt(many, **P2)
    is_obs = np.array([e == 0 for _, e in times])
    np.testing.assert_allclose(a[1:], b[is_obs], rtol=1e-13)


@pytest.mark.parametrize("rate, tlag", [(0.0, None), (0.0, [4.0, 0, 0]), (20.0, None),
                                        (3.0, [2.0, 0.0, 0.0])])
def test_steady_state_is_the_limit_of_repeated_doses(rate, tlag):
    # 60 doses every 12 h reach the steady state (e^{-beta 12 * 60} negligible); the
    # amounts over the next interval equal those after a single ss = 1 record
    ii, n = 12.0, 60
    obs = [0.0, 1.0, 3.0, 6.0, 11.0]
    ss = sl.pk.events(**sched(6, time=[0.0] + obs, evid=[1, 0, 0, 0, 0, 0],
                              amt=[100.0, 0, 0, 0, 0, 0], rate=[rate, 0, 0, 0, 0, 0],
                              ii=[ii, 0, 0, 0, 0, 0], ss=[1, 0, 0, 0, 0, 0]))
    t0 = n * ii
    rep = sl.pk.events(**sched(6, time=[0.0] + [t0 + t for t in obs],
                               evid=[1, 0, 0, 0, 0, 0], amt=[100.0, 0, 0, 0, 0, 0],
                               rate=[rate, 0, 0, 0, 0, 0], ii=[ii, 0, 0, 0, 0, 0],
                               addl=[n, 0, 0, 0, 0, 0]))
    a = sl.pk.twocpt(ss, tlag=tlag, **P2)
    b = sl.pk.twocpt(rep, tlag=tlag, **P2)
    np.testing.assert_allclose(a[1:], b[1:], rtol=1e-10)


def test_steady_state_trough_closed_form():
    # the review's check: gut trough D e^{-k1 tau} / (1 - e^{-k1 tau}) and the central
    # trough from the geometric series of the two exponentials
    D, tau, k1, k2 = 1000.0, 1.0, 0.5, 0.2
    ev = sl.pk.events(time=[0.0], evid=[1], amt=[D], ii=[tau], ss=[1])
    # the record's amounts include its own dose: trough = peak - D e_gut
    A = sl.pk.onecpt(ev, CL=k2 * 10.0, V=10.0, ka=k1)[0] - [D, 0.0]
    q1, q2 = math.exp(-k1 * tau), math.exp(-k2 * tau)
    assert A[0] == pytest.approx(D * q1 / (1 - q1), rel=1e-14)
    cent = D * k1 / (k1 - k2) * (q2 / (1 - q2) - q1 / (1 - q1))
    assert A[1] == pytest.approx(cent, rel=1e-13)


# --------------------------------------------------------------------------------------
# derivatives
# --------------------------------------------------------------------------------------
REGIMEN = sched(7, time=[0.0, 1.0, 5.0, 12.0, 13.0, 20.0, 30.0],
                evid=[1, 0, 0, 1, 0, 1, 0], amt=[100.0, 0, 0, 80.0, 0, 60.0, 0],
                ii=[12.0, 0, 0, 6.0, 0, 0, 0], addl=[0, 0, 0, 1, 0, 0, 0],
                ss=[1, 0, 0, 0, 0, 0, 0], rate=[0.0, 0, 0, 30.0, 0, -2.0, 0],
                cmt=[1, 2, 2, 2, 2, 1, 2])
EV = sl.pk.events(**REGIMEN)


def _solve(x, model):
    """Amounts as a function of every kind of parameter: model parameters, F, tlag,
    an amount, an infusion rate, ii of the steady state, an observation time, a dose
    time and a modelled infusion duration."""
    n_th = 3 if model == "onecpt" else 5
    th = [x[i] for i in range(n_th)]
    F0, L0, a0, r3, ii0, t1, t5, dur = [x[n_th + i] for i in range(8)]
    e = EV.replace(amt=sl.stack([a0, 0.0, 0.0, 80.0, 0.0, 60.0, 0.0]),
                   rate=sl.stack([0.0, 0.0, 0.0, r3, 0.0, -2.0, 0.0]),
                   ii=sl.stack([ii0, 0.0, 0.0, 6.0, 0.0, 0.0, 0.0]),
                   time=sl.stack([0.0, t1, 5.0, 12.0, 13.0, t5, 30.0]))
    n = 2 if model == "onecpt" else 3
    F = sl.concatenate([sl.stack([F0]), np.ones(n - 1)])
    tlag = sl.concatenate([sl.stack([L0]), np.zeros(n - 1)])
    dur_v = sl.concatenate([sl.stack([dur]), np.ones(n - 1)])
    fn = sl.pk.onecpt if model == "onecpt" else sl.pk.twocpt
    return fn(e, *th, F=F, tlag=tlag, infusion_duration=dur_v)


X1 = np.array([CL, V, KA, 0.8, 0.5, 100.0, 30.0, 12.0, 1.0, 20.0, 4.0])
X2 = np.array([10.0, 15.0, 35.0, 105.0, 2.0, 0.8, 0.5, 100.0, 30.0, 12.0, 1.0, 20.0, 4.0])


@pytest.mark.parametrize("model, x", [("onecpt", X1), ("twocpt", X2)])
def test_gradients_in_every_parameter(model, x):
    # one random direction per check covers all parameters at once; check each too
    f = (lambda x: _solve(x, model))
    sl.assert_grad(f, x, directions=3)
    sl.assert_jvp(f, x, directions=2)
    g = sl.jacobian(lambda x: sl.reshape(f(x), (-1,)))(x)
    h = 1e-5
    for i in range(len(x)):
        e = np.zeros(len(x))
        e[i] = h * max(1.0, abs(x[i]))
        fd = (f(x + e) - f(x - e)).ravel() / (2 * e[i])
        np.testing.assert_allclose(g[:, i], fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max()
                                   + 1e-9, err_msg=f"parameter {i}")


def test_hessian_forward_over_reverse():
    f = (lambda x: sl.sum(_solve(x, "onecpt")[:, 1] ** 2) / 1e4)
    sl.assert_hessian(f, X1, rtol=1e-5)


def test_two_compartment_hessian_and_third_derivatives():
    # a steady-state infusion: Hessian (forward over reverse) against differences of
    # gradients, and the gradient of tr(H) (Riemannian HMC's third derivatives)
    ev = sl.pk.events(time=[0.0, 1.0, 4.0, 12.0], evid=[1, 0, 0, 0],
                      amt=[100.0, 0, 0, 0], ii=[12.0, 0, 0, 0], ss=[1, 0, 0, 0],
                      rate=[50.0, 0, 0, 0])

    def f(x):
        return sl.sum(sl.pk.twocpt(ev, x[0], x[1], x[2], x[3], x[4])[:, 1]) / 100
    x = np.array([10.0, 15.0, 35.0, 105.0, 2.0])
    sl.assert_hessian(f, x, rtol=1e-5)
    g = sl.grad_trace_mat_hessian(f)(x, np.eye(5))

    def trH(x):
        return np.trace(sl.hessian(f)(x))
    fd = [(trH(x + h * e) - trH(x - h * e)) / (2 * h) for e, h in zip(np.eye(5), 1e-4 * x)]
    np.testing.assert_allclose(g, fd, rtol=1e-5)


def test_gradient_in_ii_at_steady_state_torsten_issue_15():
    # Torsten's fixture: ss = 1 at t = 0 with addl, a second dose at t = 5
    d = sched(4, time=[0.0, 2.0, 5.0, 8.0], evid=[1, 0, 1, 0], amt=[1200.0, 0, 800, 0],
              addl=[2, 0, 0, 0], ii=[1.4, 0, 0.7, 0], ss=[1, 0, 0, 0])
    d["ii"] = [1.4, 0, 0, 0]
    ev = sl.pk.events(**d)

    def f(ii):
        A = sl.pk.onecpt(ev.replace(ii=sl.stack([ii, 0.0, 0.0, 0.0])), 10.0, 80.0, 1.2)
        return sl.sum(A[:, 1])
    g = sl.grad(f)(1.4)
    fd = (f(1.4 + 1e-6) - f(1.4 - 1e-6)) / 2e-6
    assert g == pytest.approx(fd, rel=1e-7)
    assert g < 0          # a longer interval: less drug


def test_modelled_rate():
    d = sched(3, time=[0.0, 1.0, 8.0], evid=[1, 0, 0], amt=[100.0, 0, 0], rate=[-1.0, 0, 0],
              cmt=[2, 2, 2])
    ev = sl.pk.events(**d)
    a = sl.pk.onecpt(ev, CL, V, KA, infusion_rate=[1.0, 25.0])
    d["rate"] = [25.0, 0, 0]
    b = sl.pk.onecpt(sl.pk.events(**d), CL, V, KA)
    np.testing.assert_allclose(a, b, rtol=1e-14)
    sl.assert_grad(lambda r: sl.pk.onecpt(ev, CL, V, KA,
                                          infusion_rate=sl.stack([1.0, r])), 25.0)
    with pytest.raises(DataError, match=r"record 1 \(subject 1\): rate = -1: the rate of "
                                        "this infusion is a model parameter; give "
                                        "infusion_rate="):
        sl.pk.onecpt(ev, CL, V, KA)


# --------------------------------------------------------------------------------------
# populations, retaping, errors
# --------------------------------------------------------------------------------------
def _population(rng, S=4):
    ids, time, evid, amt = [], [], [], []
    for s in range(S):
        ts = np.sort(rng.uniform(0.1, 24, 6))
        for k, t in enumerate(np.r_[0.0, ts]):
            ids.append(s + 1)
            time.append(t)
            evid.append(1 if k == 0 else 0)
            amt.append(float(rng.uniform(50, 150)) if k == 0 else 0.0)
    return sl.pk.events(id=ids, time=time, evid=evid, amt=amt, addl=[0] * len(ids))


def test_population_equals_subject_by_subject(rng):
    ev = _population(rng)
    cl, v, ka = rng.uniform(2, 6, 4), rng.uniform(20, 60, 4), rng.uniform(0.5, 2, 4)
    A = sl.pk.onecpt(ev, cl, v, ka, F=np.tile([0.8, 1.0], (4, 1)))
    for s in range(4):
        r = slice(ev.start[s], ev.stop[s])
        one = sl.pk.events(time=ev.time[r], evid=ev.evid[r], amt=ev.amt[r])
        np.testing.assert_allclose(A[r], sl.pk.onecpt(one, cl[s], v[s], ka[s], F=[0.8, 1.0]),
                                   rtol=1e-14)
    # and the gradient of a population log density
    sl.assert_grad(lambda p: sl.pk.onecpt(ev, p[:4], p[4:8], p[8:]), np.r_[cl, v, ka])


def test_retaped_gradient_with_traced_lag(rng):
    ev = _population(rng)
    obs = ev.observed
    y = rng.uniform(0.5, 2.0, len(obs))

    def lp(x):
        A = sl.pk.onecpt(ev, sl.exp(x[:4]), 30.0, 1.0, tlag=sl.stack([x[4], 0.0]))
        return sl.normal_lpdf(y, A[obs, 1] / 30.0, 0.3)
    x = np.r_[np.log(rng.uniform(2, 5, 4)), 0.05]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vg = sl.compile(lp, x)
        for x1 in (x, x + 0.01, np.r_[x[:4], 3.0]):   # the last moves doses past records
            v, g = vg(x1)
            v0, g0 = sl.value_and_grad(lp)(x1)
            assert v == pytest.approx(v0, rel=1e-14)
            np.testing.assert_allclose(g, g0, rtol=1e-12)


def test_parameter_errors():
    ev = sl.pk.events(time=[0.0, 1.0], evid=[1, 0], amt=[10.0, 0])
    with pytest.raises(DomainError, match="onecpt: CL must be positive and finite, got -1"):
        sl.pk.onecpt(ev, -1.0, 10.0, 1.0)
    with pytest.raises(DomainError, match="twocpt: ka must be >= 0"):
        sl.pk.twocpt(ev, 1.0, 1.0, 10.0, 10.0, -1.0)
    with pytest.raises(ValueError, match=r"onecpt: V must be a scalar or have one value per "
                                         r"subject \(1\), got shape \(3,\)"):
        sl.pk.onecpt(ev, 1.0, [1.0, 2.0, 3.0], 1.0)
    with pytest.raises(ValueError, match=r"onecpt: F must be a scalar, a vector of 2"):
        sl.pk.onecpt(ev, 1.0, 10.0, 1.0, F=[1.0, 1.0, 1.0])
    with pytest.raises(DomainError, match="onecpt: tlag must be >= 0"):
        sl.pk.onecpt(ev, 1.0, 10.0, 1.0, tlag=[-1.0, 0.0])
    with pytest.raises(DomainError, match="onecpt: F must be >= 0"):
        sl.pk.onecpt(ev, 1.0, 10.0, 1.0, F=-0.5)
    ss = sl.pk.events(time=[0.0, 1.0], evid=[1, 0], amt=[10.0, 0], ii=[2.0, 0], ss=[1, 0])
    with pytest.raises(DomainError, match=r"record 1 \(subject 1\): the lag time 3 of "
                                          r"compartment 1 must be smaller than ii = 2"):
        sl.pk.onecpt(ss, 1.0, 10.0, 1.0, tlag=[3.0, 0.0])
