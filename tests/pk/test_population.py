"""The population ODE solver ``sl.pk.ode_group``: against the closed forms and
``sl.pk.ode``, gradients in per-subject and population parameters against finite
differences and the closed form's, threads bit for bit against one thread, the plain
route bit for bit against the compiled one, Torsten's ``len`` vector, the general
route for what the fast one does not cover, errors."""

import warnings

import numpy as np
import pytest

import stanlite as sl
from stanlite.errors import DataError, SolverError
from stanlite.pk import population as pop

from .test_analytic import CL, KA, SCENARIOS, V, one_cpt_scenario

TOL = dict(rel_tol=1e-10, abs_tol=1e-10)
# the scenarios of the closed-form tests the fast route covers (no steady states)
PLAIN = ["addl", "lag and F", "infusions into each compartment", "resets",
         "doses and observations at equal times"]


def one(t, x, th):
    return sl.stack([-th[0] * x[0], th[0] * x[0] - th[1] * x[1]])


def two(t, x, th):
    cl, q, v2, v3, ka = th[0], th[1], th[2], th[3], th[4]
    k10, k12, k21 = cl / v2, q / v2, q / v3
    return sl.stack([-ka * x[0], ka * x[0] - (k10 + k12) * x[1] + k21 * x[2],
                     k12 * x[1] - k21 * x[2]])


def population(d, n_subjects):
    """``n_subjects`` copies of one subject's records (dict of lists), IDs 1.."""
    n = len(d["time"])
    out = {k: list(v) * n_subjects for k, v in d.items()}
    out["id"] = list(np.repeat(np.arange(1, n_subjects + 1), n))
    return out


def oral_population(n_subjects=4, seed=3):
    """Oral doses every 12 h x 3, observations inside and after the doses."""
    rng = np.random.default_rng(seed)
    ids, time, amt, evid, cmt, ii, addl = [], [], [], [], [], [], []
    for s in range(n_subjects):
        t_obs = np.sort(rng.uniform(0.2, 40.0, 6))
        for k, t in enumerate(np.r_[0.0, t_obs]):
            ids.append(s + 1)
            time.append(float(t))
            dose = k == 0
            amt.append(100.0 if dose else 0.0)
            evid.append(1 if dose else 0)
            cmt.append(1 if dose else 2)
            ii.append(12.0 if dose else 0.0)
            addl.append(2 if dose else 0)
    return sl.pk.events(id=ids, time=time, amt=amt, evid=evid, cmt=cmt, ii=ii,
                        addl=addl)


def per_subject(n_subjects, seed=4):
    rng = np.random.default_rng(seed)
    cl = CL * np.exp(rng.normal(0, 0.3, n_subjects))
    v = V * np.exp(rng.normal(0, 0.2, n_subjects))
    ka = KA * np.exp(rng.normal(0, 0.3, n_subjects))
    return cl, v, ka


@pytest.mark.parametrize("name", PLAIN)
def test_against_the_closed_form_and_pk_ode(name):
    d, F, tlag = one_cpt_scenario(name)
    ev = sl.pk.events(**population(d, 3))
    cl, v, ka = per_subject(3)
    theta = np.stack([ka, cl / v], axis=1)
    A = sl.pk.ode_group(one, 2, ev, theta, F=F, tlag=tlag, **TOL)
    B = sl.pk.onecpt(ev, cl, v, ka, F=F, tlag=tlag)
    np.testing.assert_allclose(A, B, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(A, sl.pk.ode(one, 2, ev, theta, F=F, tlag=tlag, **TOL),
                               rtol=1e-8, atol=1e-8)


def test_bdf_two_compartments_against_the_closed_form():
    ev = oral_population(3)
    cl, v, ka = per_subject(3)
    theta = np.stack([cl, 1.5 * cl, v, 3 * v, ka], axis=1)
    A = sl.pk.ode_group(two, 3, ev, theta, method="bdf", **TOL)
    B = sl.pk.twocpt(ev, cl, 1.5 * cl, v, 3 * v, ka)
    np.testing.assert_allclose(A, B, rtol=1e-6, atol=1e-6)


def _model(ev, kind, threads=None, w=None):
    """A log-density-like function of x = (log CL_pop, log ka_pop, eta (S x 2)):
    per-subject CL_s = CL_pop e^eta_s1, ka_s = ka_pop e^eta_s2, V fixed."""
    S = ev.n_subjects
    w = np.linspace(0.5, 1.5, ev.n_records) if w is None else w

    def f(x):
        eta = sl.reshape(x[2:], (S, 2))
        cl = sl.exp(x[0] + eta[:, 0])
        ka = sl.exp(x[1] + eta[:, 1])
        if kind == "closed form":
            A = sl.pk.onecpt(ev, cl, V * np.ones(S), ka)
        else:
            theta = sl.stack([ka, cl / V], axis=1)
            solve = sl.pk.ode_group if kind == "group" else sl.pk.ode
            extra = {"threads": threads} if kind == "group" else {}
            A = solve(one, 2, ev, theta, **TOL, **extra)
        return sl.sum(w * sl.log(A[:, 1] + 1.0))
    return f


def test_gradient_in_population_and_per_subject_parameters():
    ev = oral_population(4)
    x = np.r_[np.log(CL), np.log(KA), np.random.default_rng(5).normal(0, 0.3, 8)]
    f = _model(ev, "group")
    g = sl.grad(f)(x)
    # exact: the closed form's gradient, and pk.ode's (to the solver's tolerance)
    np.testing.assert_allclose(g, sl.grad(_model(ev, "closed form"))(x), rtol=1e-6,
                               atol=1e-7)
    np.testing.assert_allclose(g, sl.grad(_model(ev, "ode"))(x), rtol=1e-6, atol=1e-7)
    # central finite differences in each coordinate
    h = 1e-5
    fd = np.array([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(len(x))])
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-6)


def test_threads_give_the_same_bits(monkeypatch):
    import threading

    from stanlite.pk import group_kernel as gk
    ran = set()
    run = gk.run

    def spy(*args):
        ran.add(threading.get_ident())
        return run(*args)
    monkeypatch.setattr(gk, "run", spy)
    ev = oral_population(5)
    x = np.r_[np.log(CL), np.log(KA), np.random.default_rng(6).normal(0, 0.3, 10)]
    ref_v, ref_g = sl.value_and_grad(_model(ev, "group", threads=1))(x)
    for threads in (2, 3, 8):
        v, g = sl.value_and_grad(_model(ev, "group", threads=threads))(x)
        assert v == ref_v
        np.testing.assert_array_equal(g, ref_g)
    cl, v_, ka = per_subject(5)
    theta = np.stack([cl, 1.5 * cl, v_, 3 * v_, ka], axis=1)
    np.testing.assert_array_equal(sl.pk.ode_group(two, 3, ev, theta, threads=2),
                                  sl.pk.ode_group(two, 3, ev, theta))
    assert len(ran) >= 2            # the compiled loop ran, in several threads


def test_the_plain_route_gives_the_compiled_routes_bits(monkeypatch):
    ev = oral_population(3)
    x = np.r_[np.log(CL), np.log(KA), np.random.default_rng(7).normal(0, 0.3, 6)]
    f = _model(ev, "group")
    v, g = sl.value_and_grad(f)(x)
    calls = []

    def nothing_compiled(self, rows, shape, k, Z):
        calls.append(k)
        return np.arange(self.plan.n_subjects)
    monkeypatch.setattr(pop._Context, "_compiled", nothing_compiled)
    v2, g2 = sl.value_and_grad(f)(x)
    assert calls
    assert v2 == v
    np.testing.assert_array_equal(g2, g)


def test_retaped_gradient_replays_the_node():
    ev = oral_population(3)
    x = np.r_[np.log(CL), np.log(KA), np.random.default_rng(8).normal(0, 0.3, 6)]
    f = _model(ev, "group")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        vg = sl.compile(f, x)
        for y in (x, x + 0.01, x - 0.02):
            v, g = vg(y)
            v2, g2 = sl.value_and_grad(f)(y)
            assert v == pytest.approx(v2, rel=1e-12)
            np.testing.assert_allclose(g, g2, rtol=1e-10, atol=1e-12)


def test_torstens_len_vector():
    ev = oral_population(3)
    cl, v, ka = per_subject(3)
    theta = np.stack([ka, cl / v], axis=1)
    lengths = np.diff(np.r_[ev.start, ev.n_records])
    flat = sl.pk.events(time=ev.time, amt=ev.amt, evid=ev.evid, cmt=ev.cmt, ii=ev.ii,
                        addl=ev.addl, id=np.ones(ev.n_records, dtype=int) * 0 +
                        np.repeat(np.arange(3), lengths))
    np.testing.assert_array_equal(sl.pk.ode_group(one, 2, flat, theta, lengths=lengths),
                                  sl.pk.ode_group(one, 2, ev, theta))
    with pytest.raises(DataError, match="add up to"):
        sl.pk.ode_group(one, 2, ev, theta, lengths=[1, 2])
    with pytest.raises(DataError, match="positive integers"):
        sl.pk.ode_group(one, 2, ev, theta, lengths=[7.0, 7.0, 7.0])


def test_a_replaced_schedule_gets_its_own_plan():
    # EventSchedule.replace shares the cached analysis between schedules of one
    # structure: the plan must follow the new amounts and times
    ev = oral_population(2)
    theta = np.array([[KA, CL / V], [1.2 * KA, 0.8 * CL / V]])
    sl.pk.ode_group(one, 2, ev, theta)
    for new in (ev.replace(amt=ev.amt * 2.0), ev.replace(time=ev.time * 1.1)):
        np.testing.assert_allclose(sl.pk.ode_group(one, 2, new, theta, **TOL),
                                   sl.pk.ode(one, 2, new, theta, **TOL), rtol=1e-8,
                                   atol=1e-8)


def test_steady_states_and_traced_dosing_take_pk_ode():
    d, _, _ = SCENARIOS["ss short infusion"]
    ev = sl.pk.events(**population(d, 2))
    theta = np.array([[KA, CL / V], [1.2 * KA, 0.8 * CL / V]])
    np.testing.assert_array_equal(sl.pk.ode_group(one, 2, ev, theta, **TOL),
                                  sl.pk.ode(one, 2, ev, theta, **TOL))
    ev = oral_population(2)

    def with_f(Fgut, kind):
        solve = sl.pk.ode_group if kind == "group" else sl.pk.ode
        A = solve(one, 2, ev, theta, F=sl.stack([Fgut, 1.0]), **TOL)
        return sl.sum(A[:, 1])
    np.testing.assert_array_equal(sl.grad(lambda F: with_f(F, "group"))(0.8),
                                  sl.grad(lambda F: with_f(F, "ode"))(0.8))


def test_hessian_takes_pk_ode():
    ev = sl.pk.events(id=[1, 1, 2, 2], time=[0.0, 2.0, 0.0, 3.0], amt=[100.0, 0] * 2)

    def f(x, kind):
        theta = sl.reshape(sl.exp(x), (2, 2))
        solve = sl.pk.ode_group if kind == "group" else sl.pk.ode
        return sl.sum(solve(one, 2, ev, theta, rel_tol=1e-6, abs_tol=1e-6)[:, 1])
    x = np.log([KA, CL / V, 1.1 * KA, 0.9 * CL / V])
    np.testing.assert_array_equal(sl.hessian(lambda x: f(x, "group"))(x),
                                  sl.hessian(lambda x: f(x, "ode"))(x))


def test_solver_failure_and_bad_arguments():
    ev = oral_population(2)
    theta = np.array([[KA, CL / V], [KA, CL / V]])
    with pytest.raises(SolverError, match="max_num_steps"):
        sl.pk.ode_group(one, 2, ev, theta, max_num_steps=3)
    with pytest.raises(ValueError, match="threads"):
        sl.pk.ode_group(one, 2, ev, theta, threads=0)
    with pytest.raises(ValueError, match="leading axis of 2"):
        sl.pk.ode_group(one, 2, ev, np.ones((3, 2)))


def test_a_failed_solve_names_its_output_time():
    # only the second subject's solve fails (a stiff absorption for rk45): the message
    # names an output time of that subject's failed solve
    ev = oral_population(2)
    theta = np.array([[KA, CL / V], [1e4, CL / V]])
    with pytest.raises(SolverError) as e:
        sl.pk.ode_group(one, 2, ev, theta, max_num_steps=200)
    nxt = float(str(e.value).split("output time ")[1].split(" ")[0].rstrip(";"))
    second = np.asarray(ev.time)[ev.subject == 1]
    assert np.isclose(second, nxt, rtol=1e-5).any(), str(e.value)
