"""Generated right-hand sides (functor/ode_codegen.py): the generated code of an ODE
right-hand side's programs gives the interpreter's numbers bit for bit (f, the
Jacobian rows, the tangent system; every guard path of a bundle), solves through it
agree with closed forms and finite differences, the population solver gives the same
bits with it as with the interpreter and in threads as serially, programs with an
instruction it has no rule for stay with the interpreter, and a compile in another
process (the default) lets the solves go on in the interpreter and switches over to
the same bits once it is done."""

import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff.vm import kernel, opcodes as O
from stanlite.functor import ode_codegen, ode_compiled, ode_native, ode_rhs, ode_steppers

from .test_ode_native import _scipy_route

pytestmark = pytest.mark.skipif(not kernel.available(), reason="numba not available")


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(ode_native, "ENABLED", True)
    monkeypatch.setattr(ode_compiled, "COMPILE_AFTER", 1)
    monkeypatch.setattr(ode_rhs, "_cache", type(ode_rhs._cache)())
    # (compiled here, at once: these tests hold the generated code as soon as asked;
    # test_background_compile_switches_over is the other route)
    monkeypatch.setattr(ode_codegen, "BACKGROUND", False)
    return monkeypatch


def two_cpt(t, x, th, rate):
    cl, q, v2, v3, ka = th[0], th[1], th[2], th[3], th[4]
    k10, k12, k21 = cl / v2, q / v2, q / v3
    return sl.stack([-ka * x[0] + rate[0],
                     ka * x[0] - (k10 + k12) * x[1] + k21 * x[2] + rate[1],
                     k12 * x[1] - k21 * x[2] + rate[2]])


def mm_dosed(t, y, th):
    """Michaelis-Menten elimination with a guard (two programs) and unary functions."""
    ka, vm, km = th[0], th[1], th[2]
    dose = ka * sl.exp(-ka * t) if t > 1.0 else sl.sqrt(ka) * t
    c = y[0]
    return sl.stack([dose - vm * c / (km + c), sl.log1p(c * c) - sl.tanh(y[1]) * km,
                     sl.sum(th) * y[2] ** 1.5 - sl.dot(th, th) * y[0]])


def second_range(t, y, th):
    """Ops of the second unary and binary ranges (lambert_w0, fmax, hypot,
    log_diff_exp: op codes 120-160)."""
    return sl.stack([-th[0] * sl.lambert_w0(y[0]) + sl.fmax(y[1], th[1]),
                     sl.hypot(y[0], th[2]) - y[1],
                     sl.log_diff_exp(y[0] + 1.0, th[1] * y[2]) - y[2]])


def _setup(F, n, t, y, args, others=()):
    """The evaluator, its inputs and its programs (one per point in ``others`` on a
    guard path of its own recorded too)."""
    rhs = ode_rhs.OdeRHS(F, n, "test")
    y = np.asarray(y, dtype=float)
    c, p = rhs._compiled(t, y, args)
    for t2 in others:
        c._full(t2, y, p)
    progs = ode_native._programs(c, t, y, p)
    return c, p, progs


def _call(fn, bundle, t, z, p, k, D, n, dim):
    _, ci, cf, cur, where = ode_native.private(bundle)
    ptr, idx, val = D
    J = np.full((n, dim), 7.0)
    res = np.full(z.size, 7.0)
    st = fn(t, z, p, k, ptr, idx, val, J, res, ci, cf, cur, where)
    return st, (J if k else None), res, cur[0]


def _directions(P, k, rng):
    """k unit directions of P parameters in compressed rows."""
    cols = rng.choice(P, size=k, replace=False)
    return (np.arange(k + 1, dtype=np.int64), cols.astype(np.int64), np.ones(k))


@pytest.mark.parametrize("case", ["two_cpt", "mm_dosed", "second_range"])
def test_generated_equals_interpreter_bit_for_bit(fresh, case):
    rng = np.random.default_rng(11)
    if case == "two_cpt":
        F, n = two_cpt, 3
        args = (np.array([5.0, 10.0, 35.0, 100.0, 1.0]), np.array([0.0, 2.0, 0.0]))
        others = ()
    elif case == "second_range":
        F, n = second_range, 3
        args = (np.array([0.8, 0.3, 1.5]),)
        others = ()
    else:
        F, n = mm_dosed, 3
        args = (np.array([1.2, 3.0, 0.7]),)
        others = (2.0,)
    c, p, progs = _setup(F, n, 0.5, [1.0, 0.5, 0.2], args, others)
    assert len(progs) == 1 + len(others)
    if case == "second_range":              # (the ops this case is for are recorded)
        ops = {int(r[0]) for q in progs for r in q.code}
        assert {O.LAMBERT_W0, O.FMAX, O.HYPOT, O.LOG_DIFF_EXP} <= ops
    refused = ode_codegen.STATS["refused"]
    fn = ode_codegen.generate(progs, n, c.dim)
    assert fn is not None and ode_codegen.STATS["refused"] == refused
    # the interpreter's bundle (AFTER None: not even the generated code loaded above)
    fresh.setattr(ode_codegen, "AFTER", None)
    bundle = ode_native._bundle(c, progs, n)
    interp = ode_steppers.interp
    assert np.array_equal(bundle[0], ode_steppers.address(interp))
    P = c.dim - 1 - n
    for trial in range(12):
        t = rng.uniform(0.0, 2.0)
        k = [0, -1, 2, P][trial % 4]
        y = rng.uniform(0.1, 2.0, n)
        z = np.r_[y, rng.normal(size=n * max(k, 0))]
        pp = p * rng.uniform(0.8, 1.25, p.size)
        D = _directions(P, max(k, 1), rng)
        got = _call(fn, bundle, t, z, pp, k, D, n, c.dim)
        ref = _call(interp, bundle, t, z, pp, k, D, n, c.dim)
        assert got[0] == ref[0] == 0
        assert got[3] == ref[3]             # the same program chosen
        assert np.array_equal(got[2], ref[2])
        if k:
            assert np.array_equal(got[1], ref[1])


def test_compiled_code_used_before_after(fresh, tmp_path):
    """Before AFTER evaluations a bundle takes the generated code only when it is
    compiled already (loaded here, or an earlier process's disk cache): no file
    written and no compile started otherwise."""
    fresh.setattr(ode_codegen, "_directory", lambda: str(tmp_path))
    fresh.setattr(ode_codegen, "_LOADED", {})
    fresh.setattr(ode_codegen, "AFTER", 10 ** 9)
    args = (np.array([1.2, 3.0, 0.7]),)
    c, p, progs = _setup(mm_dosed, 3, 0.5, [1.0, 0.5, 0.2], args)
    assert ode_codegen.generate(progs, 3, c.dim, compiled_only=True) is None
    assert list(tmp_path.iterdir()) == []
    bundle = ode_native._bundle(c, progs, 3)
    assert np.array_equal(bundle[0], ode_steppers.address(ode_steppers.interp))
    fn = ode_codegen.generate(progs, 3, c.dim)          # (compiled here: BACKGROUND off)
    assert ode_codegen.generate(progs, 3, c.dim, compiled_only=True) is fn
    c._ode_bundle = None                                # (a new bundle: tried again)
    bundle = ode_native._bundle(c, progs, 3)
    assert np.array_equal(bundle[0], ode_steppers.address(fn))


def test_generated_domain_and_guard_statuses(fresh):
    """A value outside a domain returns DOMAIN, as the interpreter does."""
    args = (np.array([1.2, 3.0, 0.7]),)
    c, p, progs = _setup(mm_dosed, 3, 0.5, [1.0, 0.5, 0.2], args)
    fn = ode_codegen.generate(progs, 3, c.dim)
    bundle = ode_native._bundle(c, progs, 3)
    D = (np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0))
    z = np.array([1.0, 0.5, -0.2])          # y[2] ** 1.5 of a negative number
    got = _call(fn, bundle, 0.5, z, p, 0, D, 3, c.dim)
    ref = _call(ode_steppers.interp, bundle, 0.5, z, p, 0, D, 3, c.dim)
    assert got[0] == ref[0] == -1
    # t > 1 takes the other path, which no program has yet: a guard's status and the
    # point where it failed
    _, ci, cf, cur, where = ode_native.private(bundle)
    st = fn(2.0, np.array([1.0, 0.5, 0.2]), p, 0, *D, np.zeros((3, c.dim)),
            np.zeros(3), ci, cf, cur, where)
    assert st > 0 and where[0] == 2.0 and np.array_equal(where[1:], [1.0, 0.5, 0.2])


def _lse(t, y):
    return sl.stack([-y[0], y[0] - 0.1 * sl.log_sum_exp(y)])


def test_unsupported_instruction_stays_with_interpreter(fresh):
    """log_sum_exp of a vector (no rule here): not generated, the interpreter solves."""
    c, p, progs = _setup(_lse, 2, 0.0, [1.0, 2.0], ())
    assert any(q.code[r, 0] == 44 for q in progs for r in range(len(q.code)))
    refused = ode_codegen.STATS["refused"]
    assert ode_codegen.generate(progs, 2, c.dim) is None
    assert ode_codegen.STATS["refused"] == refused + 1
    fresh.setattr(ode_codegen, "AFTER", 0)
    compiled = ode_native.STATS["compiled"]
    y = sl.ode_rk45(_lse, np.array([1.0, 2.0]), 0.0, [1.0], rel_tol=1e-10, abs_tol=1e-10)
    assert ode_native.STATS["compiled"] > compiled
    ref = _scipy_route(lambda: sl.ode_rk45(_lse, np.array([1.0, 2.0]), 0.0, [1.0],
                                     rel_tol=1e-10, abs_tol=1e-10))
    assert np.allclose(y, ref, rtol=1e-12)


def _onecpt(t, x, th):
    return sl.stack([-th[0] * x[0], th[0] * x[0] - th[1] / th[2] * x[1]])


def test_solves_through_generated_code_against_closed_form(fresh):
    """pk.ode through the generated right-hand side: amounts and gradient against the
    one-compartment closed form (rk45 and bdf), the gradient against central
    differences."""
    fresh.setattr(ode_codegen, "AFTER", 0)
    ev = sl.pk.events(time=[0.0, 1.0, 3.0, 12.0, 13.0, 20.0], amt=[100, 0, 0, 100, 0, 0],
                      evid=[1, 0, 0, 1, 0, 0], cmt=[1, 2, 2, 1, 2, 2])
    th0 = np.array([1.1, 4.0, 30.0])
    closed = sl.pk.onecpt(ev, CL=th0[1], V=th0[2], ka=th0[0])
    generated = ode_codegen.STATS["generated"]
    for method in ("rk45", "bdf"):
        A = sl.pk.ode(_onecpt, 2, ev, th0, method=method, rel_tol=1e-10, abs_tol=1e-10)
        assert np.allclose(A, closed, rtol=1e-6, atol=1e-8)

        def loss(th):
            A = sl.pk.ode(_onecpt, 2, ev, th, method=method, rel_tol=1e-10,
                          abs_tol=1e-10)
            return sl.sum(A[:, 1] ** 2) / 100.0

        def loss_closed(th):
            A = sl.pk.onecpt(ev, CL=th[1], V=th[2], ka=th[0])
            return sl.sum(A[:, 1] ** 2) / 100.0
        g = sl.grad(loss)(th0)
        assert np.allclose(g, sl.grad(loss_closed)(th0), rtol=1e-5)
        h = 1e-5
        fd = [(float(loss(th0 + h * e)) - float(loss(th0 - h * e))) / (2 * h)
              for e in np.eye(3)]
        assert np.allclose(g, fd, rtol=1e-5)
    assert ode_codegen.STATS["generated"] > generated


def _population(threads):
    rng = np.random.default_rng(5)
    S = 6
    rows = []
    for j in range(S):
        rows.append((j + 1, 0.0, 1, 200.0, 1, 12.0, 2))
        for t in np.sort(rng.uniform(0.2, 36.0, 6)):
            rows.append((j + 1, float(t), 0, 0.0, 2, 0.0, 0))
    ID, T, EVID, AMT, CMT, II, ADDL = map(np.array, zip(*rows))
    ev = sl.pk.events(id=ID, time=T, evid=EVID, amt=AMT, cmt=CMT, ii=II, addl=ADDL)
    th = np.column_stack([rng.uniform(3, 6, S), np.full(S, 10.0), rng.uniform(25, 45, S),
                          np.full(S, 100.0), rng.uniform(0.6, 1.5, S)])

    def f(t, x, th):
        return two_cpt(t, x, th, (0.0, 0.0, 0.0))

    def loss(th):
        A = sl.pk.ode_group(f, 3, ev, th, threads=threads, rel_tol=1e-8, abs_tol=1e-8)
        return sl.sum(sl.log(A[ev.observed, 1] + 1.0))
    return th, loss


def test_population_generated_equals_interpreter_and_threads(fresh):
    th, loss1 = _population(None)
    fresh.setattr(ode_codegen, "AFTER", None)
    v_i, g_i = sl.value_and_grad(loss1)(th)
    fresh.setattr(ode_rhs, "_cache", type(ode_rhs._cache)())
    fresh.setattr(ode_codegen, "AFTER", 0)
    made = []
    real = ode_codegen.generate
    fresh.setattr(ode_codegen, "generate", lambda *a: made.append(real(*a)) or made[-1])
    v_g, g_g = sl.value_and_grad(loss1)(th)
    assert made and made[0] is not None
    assert v_g == v_i and np.array_equal(g_g, g_i)
    _, loss2 = _population(2)
    v_t, g_t = sl.value_and_grad(loss2)(th)
    assert v_t == v_g and np.array_equal(g_t, g_g)


def _decay(t, y, th):
    # (a constant no other test's right-hand side has: its own generated file)
    return sl.stack([-th[0] * y[0] + 0.0123456789, th[0] * y[0] - th[1] * sl.sqrt(y[1])])


def test_background_compile_switches_over(fresh, tmp_path):
    """``BACKGROUND``: the solve that asks for the generated code runs the interpreter
    while another process compiles it into numba's cache; a solve after that process
    is done runs the generated code, loaded from the cache: the same bits. A new
    evaluator then finds it compiled (no second process)."""
    fresh.setenv("STANLITE_CACHE_DIR", str(tmp_path / "programs"))
    fresh.setattr(ode_codegen, "BACKGROUND", True)
    fresh.setattr(ode_codegen, "AFTER", 0)
    args = (np.array([0.7, 0.4]),)

    def solve():
        return sl.ode_rk45(_decay, np.array([2.0, 1.0]), 0.0, [0.5, 1.0, 3.0], *args,
                           rel_tol=1e-9, abs_tol=1e-9)

    started = ode_codegen.STATS["background"]
    y_interp = solve()
    assert ode_codegen.STATS["background"] == started + 1
    (entry,) = [e for e in ode_rhs._cache.values() if isinstance(e[1],
                                                                 ode_compiled.CompiledRHS)]
    c = entry[1]
    assert c._ode_bundle[2] is ode_steppers.interp
    assert isinstance(c._ode_bundle[6], ode_codegen.Pending)
    ode_codegen.wait(timeout=600)
    generated = ode_codegen.STATS["generated"]
    y_gen = solve()
    assert c._ode_bundle[2] is not ode_steppers.interp and c._ode_bundle[6] is True
    assert ode_codegen.STATS["generated"] == generated
    assert np.array_equal(y_gen, y_interp)
    ref = _scipy_route(solve)
    assert np.allclose(y_gen, ref, rtol=1e-12)
    # a new evaluator (another process, as far as the cache knows): no compile
    fresh.setattr(ode_rhs, "_cache", type(ode_rhs._cache)())
    fresh.setattr(ode_codegen, "_LOADED", {})
    assert np.array_equal(solve(), y_gen)
    assert ode_codegen.STATS["background"] == started + 1


def test_pending_in_a_forked_worker_waits_for_the_lock(tmp_path):
    """A worker forked while a compile runs cannot wait for its parent's process (its
    poll would say "exited" and compile again, in the worker): it goes by the lock
    file's process instead."""
    import os
    path = str(tmp_path / "stanlite_ode_rhs_x.py")
    pend = ode_codegen.Pending("x", "stanlite_ode_rhs_x", path)
    pend.owner = -1                         # (made in the parent)
    pend.proc = object()                    # (the parent's Popen: not to be touched)
    with open(path + ".lock", "w") as fh:
        fh.write(str(os.getpid()))          # (a live process compiles)
    assert pend.ready() is None
