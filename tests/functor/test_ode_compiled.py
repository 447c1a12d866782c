"""ODE right-hand sides compiled to the tape interpreter (functor/ode_compiled.py):
the compiled f, its Jacobians, VJPs and tangent-system right-hand sides equal the
eager tape's at random points (to rounding); guards re-record; a right-hand side that
cannot be lowered falls back quietly; ODE gradients through the compiled route match
closed forms and finite differences."""

import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff.vm import kernel
from stanlite.functor import ode_compiled, ode_rhs
from stanlite.functor.ode_rhs import OdeRHS
from testkit import one_comp_mm

pytestmark = pytest.mark.skipif(not kernel.available(), reason="numba not available")

TIGHT = dict(rel_tol=1e-10, abs_tol=1e-10)


@pytest.fixture
def compile_now(monkeypatch):
    """Compile f at its first evaluation, with an empty cache."""
    monkeypatch.setattr(ode_compiled, "COMPILE_AFTER", 1)
    monkeypatch.setattr(ode_rhs, "_cache", type(ode_rhs._cache)())
    return ode_rhs


def _evaluators(cache):
    return [e[1] for k, e in cache._cache.items() if k[0] == "compiled" and e[1] is not None]


# --------------------------------------------------------------------------------------
# right-hand sides of several shapes
# --------------------------------------------------------------------------------------
def branchy(t, y, theta, x_r):
    """posteriordb's one_comp_mm_elim_abs, the dose entering after t = 0.5: a branch
    on t, data in a tuple."""
    return one_comp_mm(t, y, theta, x_r, t_dose=0.5)


def chain(t, y, a, b):
    """Vectorised: a slice, a concatenation, broadcasting."""
    first = a[:1] * sl.exp(-t)
    rest = a[1:] * y[:-1] / (1.0 + y[:-1])
    return sl.concatenate([first, rest]) - b * y


def forced(t, y, k, c, w):
    """A sum of sines of t (w is data), scalar parameters mixed with a vector."""
    drive = sl.sum(c * sl.sin(w * t))
    return sl.stack([-k * y[0] + drive, k * y[0] - 0.5 * y[1] ** 2])


def linear(t, y, A, s):
    """A matrix-vector product and a scalar."""
    return A @ y - s * sl.tanh(y)


CASES = [
    ("branchy", branchy, 1, lambda r: (r.uniform(0.5, 2, 3), (30.0, 2.0)), (0,)),
    ("chain", chain, 4, lambda r: (r.uniform(0.5, 1.5, 4), r.uniform(0.5, 1.5, 4)),
     (0, 1)),
    ("forced", forced, 2, lambda r: (1.2, r.normal(size=3), np.array([0.5, 1.0, 2.0])),
     (0, 1)),
    ("linear", linear, 3, lambda r: (r.normal(size=(3, 3)), 0.7), (0, 1)),
]


def _eager(rhs_fn, n):
    """An OdeRHS that never compiles (the reference)."""
    return OdeRHS(rhs_fn, n, "reference")


@pytest.mark.parametrize("name,f,n,make,mask", CASES, ids=[c[0] for c in CASES])
def test_compiled_rhs_equals_the_tape_at_random_points(compile_now, monkeypatch, name, f,
                                                       n, make, mask):
    rng = np.random.default_rng(7)
    args = make(rng)
    rhs = OdeRHS(f, n, "ode_rk45")
    rhs.value(0.3, np.ones(n), args)                 # compiles (COMPILE_AFTER = 1)
    assert rhs._compiled(0.3, np.ones(n), args) is not None, _evaluators(compile_now)
    for _ in range(12):
        t = float(rng.uniform(0.0, 2.0))
        y = rng.uniform(0.1, 3.0, n)
        lam = rng.normal(size=n)
        f_c = rhs.value(t, y, args)
        fj_c = rhs.jacobians(t, y, args, mask)
        jac_c = rhs.jac(t, y, args)
        vjp_c = rhs.vjp(t, y, args, mask, lam)
        with monkeypatch.context() as m:
            m.setattr(ode_compiled, "COMPILE_AFTER", None)
            ref = _eager(f, n)
            f_e = ref.value(t, y, args)
            fj_e = ref.jacobians(t, y, args, mask)
            vjp_e = ref.vjp(t, y, args, mask, lam)
        np.testing.assert_allclose(f_c, f_e, rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(fj_c[0], fj_e[0], rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(fj_c[1], fj_e[1], rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(jac_c, fj_e[1], rtol=1e-13, atol=1e-14)
        for a, b in zip(fj_c[2], fj_e[2]):
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(vjp_c[1], vjp_e[1], rtol=1e-13, atol=1e-14)
        for a, b in zip(vjp_c[2], vjp_e[2]):
            np.testing.assert_allclose(np.ravel(a), np.ravel(b), rtol=1e-13, atol=1e-14)
    (c,) = _evaluators(compile_now)
    assert c.ok and c._replays > 0 and c.fallback is None


@pytest.mark.parametrize("name,f,n,make,mask", CASES, ids=[c[0] for c in CASES])
def test_compiled_tangent_system_equals_the_tape(compile_now, monkeypatch, name, f, n,
                                                 make, mask):
    # the sensitivity system's right-hand side [f, V J_y^T + D J_p^T] in one call
    rng = np.random.default_rng(3)
    args = make(rng)
    k = 3
    D = tuple(rng.normal(size=(k,) + np.shape(args[j])) for j in mask)
    allargs = tuple(args) + D
    sub = OdeRHS(f, n, "ode_rk45").tangent_system(k, mask, len(args))
    for _ in range(8):
        t = float(rng.uniform(0.0, 2.0))
        z = np.concatenate([rng.uniform(0.1, 3.0, n), rng.normal(size=k * n)])
        got = sub.value(t, z, allargs)
        Jz = sub.jac(t, z, allargs)
        with monkeypatch.context() as m:
            m.setattr(ode_compiled, "COMPILE_AFTER", None)
            ref = OdeRHS(f, n, "reference").tangent_system(k, mask, len(args))
            want = ref.value(t, z, allargs)
            Jz_want = ref.jac(t, z, allargs)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(Jz, Jz_want, rtol=1e-12, atol=1e-13)
    (c,) = _evaluators(compile_now)
    assert c.ok and c._replays > 0


def test_kernel_jacobian_entry_matches_sl_jacobian():
    # the general entry: forward once, one reverse sweep per output row
    from stanlite.autodiff.compile import _record_function
    from stanlite.autodiff.vm.program import lower

    def g(x):
        return sl.stack([x[0] * sl.exp(x[1]), sl.log1p(x[2] ** 2) - x[0] / x[1],
                         sl.sum(x * x)])
    x = np.array([0.3, -0.7, 1.4])
    rec = _record_function(g, x, scalar=False)
    prog = lower(rec, [(rec.inputs[0], 0, (3,))], rec.output)
    f, J = np.empty(3), np.empty((3, 3))
    for point in (x, np.array([-1.1, 0.2, 2.5])):
        st = kernel.jacobian(prog.code, prog.aux, prog.V, prog.A, prog.dim, prog.out,
                             prog.nvar, 3, point, f, J)
        assert st == 0
        np.testing.assert_allclose(f, np.asarray(g(point)), rtol=1e-14)
        np.testing.assert_allclose(J, sl.jacobian(g)(point), rtol=1e-14, atol=1e-15)


# --------------------------------------------------------------------------------------
# guards, domain errors and fallbacks
# --------------------------------------------------------------------------------------
def test_a_branch_on_t_rerecords_and_stays_right(compile_now):
    args = (np.array([1.0, 2.0, 3.0]), (30.0, 2.0))
    rhs = OdeRHS(branchy, 1, "ode_rk45")
    y = np.array([1.5])
    before = rhs.value(0.2, y, args)              # recorded with t <= 0.5
    after = rhs.value(1.0, y, args)               # the guard fails: recorded again
    (c,) = _evaluators(compile_now)
    assert c.recordings == 2 and c.ok
    assert before[0] == pytest.approx(-(3.0 / 2.0) * 1.5 / 3.5, rel=1e-14)
    assert after[0] == pytest.approx(np.exp(-1.0) * 15.0 - (3.0 / 2.0) * 1.5 / 3.5,
                                     rel=1e-14)


def test_a_value_outside_the_domain_is_decided_by_the_eager_tape(compile_now):
    def f(t, y, k):
        return -k * sl.log(y)
    rhs = OdeRHS(f, 2, "ode_rk45")
    args = (0.5,)
    rhs.value(0.0, np.array([1.0, 2.0]), args)
    with np.errstate(invalid="ignore"):
        got = rhs.value(0.0, np.array([1.0, -2.0]), args)
        want = _eager(f, 2).value(0.0, np.array([1.0, -2.0]), args)
    np.testing.assert_array_equal(got, want)        # what the tape gives (NaN)
    (c,) = _evaluators(compile_now)
    assert c.ok


def test_a_primitive_without_a_lowering_falls_back_quietly(compile_now):
    @sl.primitive
    def cube(x):
        return x ** 3
    sl.defvjp(cube, lambda g, ans, x: 3.0 * g * x ** 2)

    def f(t, y, k):
        return -k * cube(y)
    before = dict(ode_compiled.STATS)
    g = sl.grad(lambda k: sl.sum(sl.ode_rk45(f, np.array([1.0, 0.5]), 0.0, [1.0], k,
                                             **TIGHT)))(0.7)
    y0 = np.array([1.0, 0.5])
    assert g == pytest.approx(float(np.sum(-y0 ** 3 / (1 + 1.4 * y0 ** 2) ** 1.5)),
                              rel=1e-8)
    (c,) = _evaluators(compile_now)
    assert not c.ok and "cube" in c.vm_skipped and "cube" in c.fallback
    assert ode_compiled.STATS["fallback"] == before["fallback"] + 1


def test_turned_off_by_retape_after_none(compile_now, monkeypatch):
    monkeypatch.setattr(ode_rhs, "RETAPE_AFTER", None)
    rhs = OdeRHS(chain, 4, "ode_rk45")
    args = (np.ones(4), np.ones(4))
    rhs.value(0.1, np.ones(4), args)
    assert _evaluators(compile_now) == [] and rhs._compiled(0.1, np.ones(4), args) is None


# --------------------------------------------------------------------------------------
# gradients through solves on the compiled route
# --------------------------------------------------------------------------------------
def one_cpt(t, y, ka, ke):
    return sl.stack([-ka * y[0], ka * y[0] - ke * y[1]])


def one_cpt_exact(ka, ke, ts):
    a, e = sl.exp(-ka * ts), sl.exp(-ke * ts)
    return sl.stack([100.0 * a, 100.0 * ka / (ka - ke) * (e - a)], axis=1)


TS = np.array([0.5, 1.0, 2.0, 4.0, 8.0])
W = np.array([[0.01, -0.02], [0.0, 0.03], [0.02, 0.01], [-0.01, 0.02], [0.0, 0.05]])


@pytest.mark.parametrize("solve", [
    lambda *a: sl.ode_rk45(*a, **TIGHT), lambda *a: sl.ode_bdf(*a, **TIGHT),
    lambda *a: sl.ode_adjoint(*a, rel_tol_forward=1e-10, abs_tol_forward=1e-10,
                              rel_tol_backward=1e-10, abs_tol_backward=1e-10,
                              rel_tol_quadrature=1e-10, abs_tol_quadrature=1e-10)],
    ids=["rk45", "bdf", "adjoint"])
def test_gradient_through_the_compiled_route_matches_the_closed_form(compile_now, solve):
    def loss(p, exact=False):
        Y = one_cpt_exact(p[0], p[1], TS) if exact else \
            solve(one_cpt, np.array([100.0, 0.0]), 0.0, TS, p[0], p[1])
        return sl.sum(sl.log(Y + 1.0) * W)
    p = np.array([1.3, 0.4])
    v, g = sl.value_and_grad(loss)(p)
    v0, g0 = sl.value_and_grad(lambda q: loss(q, exact=True))(p)
    assert v == pytest.approx(v0, rel=1e-8)
    np.testing.assert_allclose(g, g0, rtol=1e-6)
    (c,) = _evaluators(compile_now)
    assert c.ok and c._replays > 10


def test_model_gradient_on_the_compiled_route_matches_finite_differences(compile_now):
    # posteriordb's one_comp_mm_elim_abs (the dose enters for t > 0), BDF
    ts = np.arange(0.5, 5.01, 0.5)
    data = np.linspace(1.0, 3.0, ts.size)

    def lp(th):
        C = sl.ode_bdf(one_comp_mm, np.array([0.0]), 0.0, ts, th, (30.0, 2.0), **TIGHT)
        return sl.lognormal_lpdf(data, sl.log(C[:, 0]), 0.5)
    th = np.array([1.0, 2.0, 3.0])
    g = sl.grad(lp)(th)
    h = 1e-5
    fd = np.array([(lp(th + h * e) - lp(th - h * e)) / (2 * h) for e in np.eye(3)])
    np.testing.assert_allclose(g, fd, rtol=1e-5)
    (c,) = _evaluators(compile_now)
    assert c.ok and c.recordings == 2 and c._replays > 10
