"""linode: the matrix-exponential kernel against the closed forms and the event
simulator, per-subject matrices, singular K (no elimination), derivatives in K."""

import numpy as np
import pytest

import stanlite as sl
from stanlite.errors import DomainError

from .reference import simulate
from .test_analytic import K2, P2, REGIMEN, SCENARIOS, sched


def test_agrees_with_the_closed_forms_on_every_scenario():
    K = K2(**P2)
    for name, (d, F, tlag) in SCENARIOS.items():
        d = dict(d)
        d["cmt"] = [3 if c == -1 else c for c in d["cmt"]]
        ev = sl.pk.events(**d)
        np.testing.assert_allclose(sl.pk.linode(ev, K, F=F, tlag=tlag),
                                   sl.pk.twocpt(ev, F=F, tlag=tlag, **P2),
                                   rtol=1e-11, atol=1e-10, err_msg=name)


def test_singular_matrix_infusion_is_exact():
    # a compartment without elimination (a cumulative amount: the drug eliminated) makes
    # K singular: the augmented exponential still gives the infusion integral exactly
    k = 0.3
    K = np.array([[-k, 0.0], [k, 0.0]])
    R, T = 10.0, 4.0
    t = np.array([0.0, 1.0, 4.0, 9.0])
    ev = sl.pk.events(time=t, evid=[1, 0, 0, 0], amt=[R * T, 0, 0, 0], rate=[R, 0, 0, 0])
    A = sl.pk.linode(ev, K)
    tt = np.minimum(t, T)
    infused = R * tt
    cent = R / k * (1 - np.exp(-k * tt)) * np.exp(-k * np.maximum(t - T, 0))
    np.testing.assert_allclose(A[:, 0], cent, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(A.sum(axis=1), infused, rtol=1e-12)   # mass balance


def test_per_subject_matrices(rng):
    ev = sl.pk.events(id=[1, 1, 1, 2, 2], time=[0.0, 1.0, 5.0, 0.0, 3.0],
                      evid=[1, 0, 0, 1, 0], amt=[100.0, 0, 0, 50.0, 0])
    Ks = np.stack([K2(*rng.uniform([5, 10, 30, 80, 1], [15, 20, 40, 120, 3]))
                   for _ in range(2)])
    A = sl.pk.linode(ev, Ks)
    for s in range(2):
        r = slice(ev.start[s], ev.stop[s])
        one = sl.pk.events(time=ev.time[r], evid=ev.evid[r], amt=ev.amt[r])
        np.testing.assert_allclose(A[r], sl.pk.linode(one, Ks[s]), rtol=1e-13)


def test_against_simulator_with_every_record_kind():
    K = np.array([[-1.0, 0.0, 0.0], [0.6, -0.5, 0.1], [0.4, 0.2, -0.3]])   # two outputs
    d = dict(REGIMEN)
    d["rate"] = [0.0, 0, 0, 30.0, 0, 15.0, 0]
    ev = sl.pk.events(**d)
    A = sl.pk.linode(ev, K, F=[0.9, 1.0, 1.0], tlag=[0.25, 0.0, 0.0])
    R = simulate(K, d["time"], d["evid"], d["amt"], d["cmt"], d["rate"], d["ii"],
                 d["addl"], d["ss"], F=[0.9, 1.0, 1.0], tlag=[0.25, 0.0, 0.0])
    np.testing.assert_allclose(A, R, rtol=1e-10, atol=1e-11)


def test_derivatives_in_K_times_and_doses():
    d = sched(5, time=[0.0, 1.0, 3.0, 6.0, 10.0], evid=[1, 0, 1, 0, 0],
              amt=[100.0, 0, 50.0, 0, 0], rate=[0.0, 0, 20.0, 0, 0], ii=[6.0, 0, 0, 0, 0],
              ss=[1, 0, 0, 0, 0], cmt=[1, 2, 2, 2, 2])
    ev = sl.pk.events(**d)
    K0 = K2(**P2)

    def f(x):
        K = sl.reshape(x[:9], (3, 3))
        e = ev.replace(ii=sl.stack([x[9], 0.0, 0.0, 0.0, 0.0]),
                       time=sl.stack([0.0, 1.0, x[10], 6.0, 10.0]))
        return sl.pk.linode(e, K)
    x = np.r_[K0.ravel(), 6.0, 3.0]
    sl.assert_grad(f, x, directions=3)
    sl.assert_jvp(f, x, directions=2)
    sl.assert_hessian(lambda x: sl.sum(f(x)[:, 1] ** 2) / 1e4, x, rtol=1e-5)


def test_errors():
    ev = sl.pk.events(time=[0.0, 1.0], evid=[1, 0], amt=[10.0, 0])
    with pytest.raises(ValueError, match=r"linode: K must be an n x n matrix or one per "
                                         r"subject \(1 x n x n\), got shape \(2, 3\)"):
        sl.pk.linode(ev, np.zeros((2, 3)))
    with pytest.raises(DomainError, match="linode: K must be finite"):
        sl.pk.linode(ev, np.array([[np.nan, 0.0], [0.0, -1.0]]))
