"""Parameters per record (Torsten's 2-D theta, F, tlag): the closed forms event by
event against matrix exponentials, the ODE path against the closed forms, constant
rows against the per-subject solvers, gradients against central differences, and
errors naming the argument."""

import numpy as np
import pytest
from scipy.linalg import expm

import stanlite as sl

from testkit import check_directions, events_from_rows

TIGHT = dict(rel_tol=1e-10, abs_tol=1e-10)


def schedule():
    # id, time, evid, amt, cmt, rate, ii, addl
    rows = [(1, 0.0, 1, 100.0, 1, 0, 6.0, 1), (1, 1.0, 0, 0, 2, 0, 0, 0),
            (1, 4.0, 0, 0, 2, 0, 0, 0), (1, 5.0, 1, 60.0, 2, 30.0, 0, 0),
            (1, 9.0, 0, 0, 2, 0, 0, 0), (1, 15.0, 0, 0, 2, 0, 0, 0),
            (2, 0.0, 1, 80.0, 1, 0, 0, 0), (2, 2.0, 0, 0, 2, 0, 0, 0),
            (2, 8.0, 0, 0, 2, 0, 0, 0)]
    return events_from_rows(rows)


CL = np.array([5.0, 5.0, 6.0, 7.0, 4.0, 5.5, 3.0, 3.0, 3.5])
V = np.array([50.0, 50.0, 48.0, 52.0, 50.0, 45.0, 40.0, 40.0, 42.0])
KA = 1.2


def test_bolus_schedule_against_matrix_exponentials():
    """One subject, boluses only: x(t_i) = expm(K_i (t_i - t_{i-1})) x(t_{i-1}) + dose,
    K_i from record i's row."""
    t = np.array([0.0, 1.0, 3.0, 3.0, 7.0, 12.0])
    amt = np.array([100.0, 0, 50.0, 0, 0, 0])
    evid = (amt > 0).astype(int)
    cl = np.array([4.0, 4.0, 6.0, 5.0, 8.0, 3.0])
    v = np.array([50.0, 40.0, 45.0, 45.0, 60.0, 55.0])
    ka = np.array([1.0, 1.5, 0.8, 0.8, 2.0, 1.1])
    ev = sl.pk.events(time=t, evid=evid, amt=amt)
    A = sl.pk.onecpt(ev, CL=cl, V=v, ka=ka)
    x = np.zeros(2)
    ref = []
    for i in range(len(t)):
        if i:
            K = np.array([[-ka[i], 0.0], [ka[i], -cl[i] / v[i]]])
            x = expm(K * (t[i] - t[i - 1])) @ x
        x = x + np.array([amt[i], 0.0])
        ref.append(x.copy())
    np.testing.assert_allclose(A, ref, rtol=1e-12, atol=1e-12)


def test_two_compartments_against_matrix_exponentials_with_an_infusion():
    t = np.array([0.0, 2.0, 5.0, 10.0])
    ev = sl.pk.events(time=t, evid=[1, 0, 0, 0], amt=[300.0, 0, 0, 0],
                      rate=[50.0, 0, 0, 0], cmt=[2, 2, 2, 2])
    cl = np.array([8.0, 8.0, 10.0, 6.0])
    q, v2, v3, ka = 12.0, 30.0, 80.0, 1.0
    A = sl.pk.twocpt(ev, CL=cl, Q=q, V2=v2, V3=v3, ka=ka)
    x = np.zeros(3)
    ref = [x.copy()]
    for i in range(1, 4):
        k10, k12, k21 = cl[i] / v2, q / v2, q / v3
        K = np.array([[-ka, 0, 0], [ka, -(k10 + k12), k21], [0, k12, -k21]])
        # the infusion runs 0..6: split the interval at its end
        a, b = t[i - 1], t[i]
        pieces = [(a, min(b, 6.0), 50.0), (max(a, 6.0), b, 0.0)]
        for lo, hi, r in pieces:
            if hi <= lo:
                continue
            M = np.zeros((4, 4))                 # Van Loan: the rate as a 4th state
            M[:3, :3] = K
            M[1, 3] = r
            x = (expm(M * (hi - lo)) @ np.r_[x, 1.0])[:3]
        ref.append(x.copy())
    np.testing.assert_allclose(A, ref, rtol=1e-11, atol=1e-10)


def test_constant_rows_equal_the_per_subject_closed_forms():
    ev = schedule()
    per_subject = sl.pk.twocpt(ev, CL=[5.0, 3.0], Q=8.0, V2=[50.0, 40.0], V3=90.0,
                               ka=KA, F=[0.8, 1.0, 1.0], tlag=[0.4, 0.0, 0.0])
    rows = sl.pk.twocpt(ev, CL=np.repeat([5.0, 3.0], [6, 3]), Q=8.0,
                        V2=np.repeat([50.0, 40.0], [6, 3]), V3=90.0, ka=KA,
                        F=[0.8, 1.0, 1.0], tlag=[0.4, 0.0, 0.0])
    np.testing.assert_allclose(rows, per_subject, rtol=1e-11, atol=1e-10)


def onecpt_rhs(t, x, th):
    return sl.stack([-th[2] * x[0], th[2] * x[0] - th[0] / th[1] * x[1]])


def test_the_ode_path_equals_the_closed_forms_with_rows():
    ev = schedule()
    F = np.tile([0.9, 1.0], (9, 1))
    F[6, 0] = 0.7                                 # subject 2's dose: its own F
    A = sl.pk.onecpt(ev, CL=CL, V=V, ka=KA, F=F)
    theta = np.stack([CL, V, np.full(9, KA)], axis=1)
    B = sl.pk.ode(onecpt_rhs, 2, ev, theta, F=F, **TIGHT)
    np.testing.assert_allclose(A, B, rtol=1e-8, atol=1e-8)
    # one subject: theta with two axes and a leading n_records
    ev1 = sl.pk.events(time=[0.0, 1.0, 3.0], evid=[1, 0, 0], amt=[100.0, 0, 0])
    th = np.array([[4.0, 50.0, 1.0], [4.0, 50.0, 1.0], [9.0, 30.0, 2.0]])
    np.testing.assert_allclose(sl.pk.ode(onecpt_rhs, 2, ev1, th, **TIGHT),
                               sl.pk.onecpt(ev1, th[:, 0], th[:, 1], th[:, 2]),
                               rtol=1e-8, atol=1e-8)


def test_per_record_f_and_tlag_in_the_superposition():
    """F and tlag per record with per-subject model parameters: each dose its own."""
    ev = sl.pk.events(time=[0.0, 5.0, 6.0, 10.0], evid=[1, 1, 0, 0],
                      amt=[100.0, 100.0, 0, 0])
    F = np.array([[0.5, 1.0], [0.9, 1.0], [1.0, 1.0], [1.0, 1.0]])
    lag = np.array([[0.2, 0.0], [0.7, 0.0], [0.0, 0.0], [0.0, 0.0]])
    A = sl.pk.onecpt(ev, CL=5.0, V=50.0, ka=1.2, F=F, tlag=lag)
    one = lambda t0, f, l: sl.pk.onecpt(
        sl.pk.events(time=[0.0, 6.0 - t0, 10.0 - t0], evid=[1, 0, 0],
                     amt=[100.0, 0, 0]), CL=5.0, V=50.0, ka=1.2, F=f, tlag=l)
    ref = one(0.0, 0.5, 0.2)[1:] + one(5.0, 0.9, 0.7)[1:]
    np.testing.assert_allclose(A[2:], ref, rtol=1e-12, atol=1e-12)


def test_steady_state_uses_its_records_row():
    ev = sl.pk.events(time=[0.0, 2.0, 12.0], evid=[1, 0, 0], amt=[100.0, 0, 0],
                      ii=[12.0, 0, 0], ss=[1, 0, 0])
    A = sl.pk.onecpt(ev, CL=np.array([5.0, 5.0, 5.0]), V=50.0, ka=1.2)
    np.testing.assert_allclose(A, sl.pk.onecpt(ev, CL=5.0, V=50.0, ka=1.2),
                               rtol=1e-6)
    B = sl.pk.onecpt(ev, CL=np.array([5.0, 9.0, 9.0]), V=50.0, ka=1.2)
    np.testing.assert_allclose(B[0], A[0], rtol=1e-6)       # record 1's row: CL 5
    assert B[2, 1] < A[2, 1]                                # faster clearance after


def _check(fun, x, g, **kw):
    check_directions(fun, x, g, rtol=1e-6, atol=1e-7, **kw)


W = np.random.default_rng(1).uniform(0.5, 1.5, (9, 2))


def test_gradient_in_the_rows_matches_central_differences():
    ev = schedule()

    def closed(x):
        return sl.sum(sl.pk.onecpt(ev, CL=x[:, 0], V=x[:, 1], ka=x[:, 2]) * W)

    x = np.stack([CL, V, np.full(9, KA)], axis=1)
    _check(closed, x, sl.grad(closed)(x))

    def ode(x):
        return sl.sum(sl.pk.ode(onecpt_rhs, 2, ev, x, **TIGHT) * W)
    np.testing.assert_allclose(sl.grad(ode)(x), sl.grad(closed)(x), rtol=1e-6,
                               atol=1e-8)


def test_gradient_in_per_record_f_and_tlag():
    ev = schedule()
    F0 = np.tile([0.9, 1.0], (9, 1))
    L0 = np.tile([0.3, 0.2], (9, 1))              # lags away from the records' times

    def loss(F, L):
        return sl.sum(sl.pk.onecpt(ev, CL=CL, V=V, ka=KA, F=F, tlag=L) * W)
    dose_rows = np.zeros((9, 2))
    dose_rows[[0, 3, 6], :] = 1.0
    _check(lambda F: loss(F, L0), F0, sl.grad(lambda F: loss(F, L0))(F0),
           mask=dose_rows)
    _check(lambda L: loss(F0, L), L0, sl.grad(lambda L: loss(F0, L))(L0),
           mask=dose_rows)


def test_bad_shapes_name_the_argument():
    ev = schedule()
    with pytest.raises(ValueError, match=r"CL must be a scalar .* per record, 9"):
        sl.pk.onecpt(ev, CL=np.ones(4), V=50.0, ka=1.0)
    with pytest.raises(sl.DataError, match=r"F must be .* 9 x 2 matrix"):
        sl.pk.onecpt(ev, CL=5.0, V=50.0, ka=1.0, F=np.ones((4, 2)))
    with pytest.raises(ValueError, match=r"theta must have a leading axis of 2"):
        sl.pk.ode(onecpt_rhs, 2, ev, np.ones((4, 3)))
