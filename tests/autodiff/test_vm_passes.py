"""Graph passes of the interpreter (autodiff/vm/passes.py): CSE, n-ary sums, Poisson
sufficient statistics, dead rows. Each program is compared with the eager tape (value
and gradient to rounding) and with the same program lowered without the passes, and
its instruction table is inspected for the rewrite."""

import math

import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff.vm import kernel, opcodes as O, passes
from stanlite.autodiff.vm.program import Lowerer

pytestmark = pytest.mark.skipif(not kernel.available(), reason="numba not available")


def _program(f, x0, monkeypatch=None, off=False):
    if off:
        monkeypatch.setenv("STANLITE_VM_PASSES", "0" if off is True else off)
    vg = sl.compile(f, np.asarray(x0, dtype=float), verify=False)
    vg(np.asarray(x0, dtype=float))
    if off:
        monkeypatch.delenv("STANLITE_VM_PASSES")
    assert vg.compiled, vg.vm_skipped
    (prog,) = [p for ps in vg._programs.values() for p in ps]
    return vg, prog


def _ops(prog):
    return list(prog.code[:, O.OP])


def check(f, x0, monkeypatch, n_points=3, seed=1):
    """Same value and gradient as the eager tape and as the program without passes;
    -> (program with passes, program without)."""
    vg, prog = _program(f, x0)
    vg0, prog0 = _program(f, x0, monkeypatch, off=True)
    ref = sl.value_and_grad(f)
    rng = np.random.default_rng(seed)
    for _ in range(n_points):
        x = np.asarray(x0, dtype=float) + 0.2 * rng.standard_normal(np.shape(x0))
        (v, g), (v0, g0), (v1, g1) = vg(x), ref(x), vg0(x)
        np.testing.assert_allclose(v, v0, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(g, g0, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(v, v1, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(g, g1, rtol=1e-10, atol=1e-12)
    return prog, prog0


def test_cse_shares_identical_rows(monkeypatch):
    def f(x):
        a = sl.exp(x[0]) * x[1]
        b = sl.exp(x[0]) * x[1]         # the same rows again (x[0], x[1] too)
        return a + b + sl.exp(x[0])
    prog, prog0 = check(f, [0.3, -0.4], monkeypatch)
    assert _ops(prog).count(O.EXP) == 1 and _ops(prog0).count(O.EXP) == 3
    assert len(prog.code) < len(prog0.code)


def test_cse_of_the_output_itself(monkeypatch):
    def f(x):
        sl.log1p_exp(x[0] * x[1])        # a dead duplicate recorded first
        return sl.log1p_exp(x[0] * x[1])
    prog, _ = check(f, [0.3, -0.4], monkeypatch)
    assert _ops(prog).count(O.LOG1P_EXP) == 1


def test_cse_keeps_rows_that_differ():
    def f(x):
        return sl.exp(x[0]) + sl.exp(x[1]) + sl.log(sl.exp(x[0]) + 1.0)
    vg, prog = _program(f, [0.3, -0.4])
    assert _ops(prog).count(O.EXP) == 2
    x = np.array([0.1, 0.7])
    np.testing.assert_allclose(vg(x)[1], sl.value_and_grad(f)(x)[1], rtol=1e-12)


def test_nary_sum_of_a_scalar_loop(monkeypatch):
    def f(x):
        acc = 0.5
        for i in range(40):
            acc = acc + sl.exp(x[i % 3] * (0.1 * i))
        return acc
    prog, prog0 = check(f, [0.3, -0.4, 0.2], monkeypatch)
    assert O.SUMN in _ops(prog) and _ops(prog).count(O.ADD) == 0
    assert _ops(prog0).count(O.ADD) == 40


def test_nary_sum_keeps_partial_sums_read_twice(monkeypatch):
    def f(x):
        s = x[0] + x[1]
        t = s + x[2]
        u = t + sl.exp(x[0])
        return u * t + s           # t and s have other readers: not absorbed
    check(f, [0.3, -0.4, 0.9], monkeypatch)


def test_sum_of_a_stacked_list_becomes_one_sumn(monkeypatch):
    def f(x):
        terms = [sl.exp(x[0] * k) + x[1] * k for k in range(6)]
        return sl.sum(sl.stack(terms)) * 2.0 + sl.exp(x[1])
    prog, _ = check(f, [0.3, -0.4], monkeypatch)
    assert O.SUMN in _ops(prog) and O.SUM not in _ops(prog)


def test_a_stacked_list_read_twice_is_kept(monkeypatch):
    def f(x):
        terms = [sl.exp(x[0] * k) + x[1] * k for k in range(6)]
        return sl.sum(sl.stack(terms)) + sl.log_sum_exp(terms)   # one shared stack
    check(f, [0.3, -0.4], monkeypatch)


def test_poisson_sufficient_statistics(monkeypatch):
    counts = [3, 0, 5, 2, 2, 7]

    def f(x):
        lam, mu = sl.exp(x[0]), sl.exp(x[1])
        acc = 0.0
        for i, n in enumerate(counts):
            acc = acc + sl.poisson_lpmf(n, lam if i < 4 else mu)
        return acc
    prog, prog0 = check(f, [0.3, 1.1], monkeypatch)
    ops = _ops(prog)
    # the four terms at lam become one POISSON_SS; mu's two as well
    assert ops.count(O.POISSON_SS) == 2 and ops.count(O.POISSON) == 0
    assert _ops(prog0).count(O.POISSON) == 6
    v = f(np.array([0.3, 1.1]))
    exact = sum(n * 0.3 - math.exp(0.3) - math.lgamma(n + 1) for n in counts[:4]) + \
        sum(n * 1.1 - math.exp(1.1) - math.lgamma(n + 1) for n in counts[4:])
    assert abs(float(v) - exact) < 1e-12


def test_change_point_written_with_loops(monkeypatch):
    # the coal-mining change point's loop form (small T) against its vectorised form
    D = np.array([4, 5, 4, 1, 0, 4, 3, 4, 0, 6, 3, 3, 4, 0, 2, 6, 3, 3, 5, 4])
    T = D.size

    def loop(x):
        e, l = sl.exp(x[0]), sl.exp(x[1])
        lp = []
        for s in range(1, T + 1):
            acc = -math.log(T)
            for t in range(1, T + 1):
                acc = acc + sl.poisson_lpmf(D[t - 1], e if t < s else l)
            lp.append(acc)
        return sl.log_sum_exp(lp)

    lg = np.array([math.lgamma(d + 1.0) for d in D])

    def vectorised(x):
        pe = D * x[0] - sl.exp(x[0]) - lg
        pl = D * x[1] - sl.exp(x[1]) - lg
        ce, cl = sl.cumulative_sum(pe), sl.cumulative_sum(pl)
        return sl.log_sum_exp((ce - pe) + (cl[-1] - cl + pl) - math.log(T))

    prog, prog0 = check(loop, [1.0, 0.2], monkeypatch)
    assert len(prog.code) < len(prog0.code) / 10
    vg, _ = _program(loop, [1.0, 0.2])
    x = np.array([0.7, 0.4])
    v, g = vg(x)
    v1, g1 = sl.value_and_grad(vectorised)(x)
    np.testing.assert_allclose(v, v1, rtol=1e-12)
    np.testing.assert_allclose(g, g1, rtol=1e-10)


def test_guards_stay_and_still_decide(monkeypatch):
    def f(x):
        y = sl.exp(x[0]) + sl.exp(x[0])
        if x[1] > 0:                      # a guard between the shared rows
            return y * x[1] + sl.exp(x[0])
        return y - x[1]
    vg, prog = _program(f, [0.3, 0.5])
    ref = sl.value_and_grad(f)
    for x in ([0.2, 0.4], [0.1, 0.9]):
        np.testing.assert_allclose(vg(np.array(x))[1], ref(np.array(x))[1], rtol=1e-12)
    # the other branch: the guard fails and the point is recorded again
    x = np.array([0.2, -0.4])
    np.testing.assert_allclose(vg(x)[1], ref(x)[1], rtol=1e-12)


def test_hessian_programs_with_passes():
    def f(x):
        acc = 0.0
        for i in range(5):
            acc = acc + sl.exp(x[0] * x[1]) * i + sl.log1p_exp(x[i % 2])
        return acc
    x = np.array([0.3, -0.2])
    H = sl.compile(f, x).hessian(x)
    h = 1e-5
    g = sl.value_and_grad(f)
    Hfd = np.array([(g(x + h * e)[1] - g(x - h * e)[1]) / (2 * h) for e in np.eye(2)])
    np.testing.assert_allclose(H, Hfd, rtol=1e-6, atol=1e-7)


def test_unknown_ops_switch_the_passes_off():
    L = Lowerer(tape=None)
    L.top = 3
    L.emit(O.EXP, 1, 1, a=0, mask=1)
    L.emit(O.EXP, 1, 2, a=0, mask=1)
    L.emit(250, 1, 0)                  # an op the passes do not know
    rows = list(L.rows)
    assert passes.optimise(L, 2, 1) == 2
    assert L.rows == rows
    L.rows = rows[:2]
    assert passes.optimise(L, 2, 1) == 1      # the duplicate EXP shared
    assert len(L.rows) == 1


def test_switched_off_by_the_environment(monkeypatch):
    monkeypatch.setenv("STANLITE_VM_PASSES", "0")
    assert not passes.enabled()


@pytest.mark.parametrize("n", [0, 3, np.int64(7), 2.0])
def test_scalar_poisson_term_matches_the_array_kernel(n):
    # the plain-float path of poisson_lpmf (Stan-style loops record it thousands of
    # times) against the same term as a one-element array
    for lam in (0.3, 4.0):
        v, g = sl.value_and_grad(lambda x: sl.poisson_lpmf(n, sl.exp(x[0])))(np.log([lam]))
        v1, g1 = sl.value_and_grad(
            lambda x: sl.poisson_lpmf(np.array([n]), sl.exp(x)))(np.log([lam]))
        np.testing.assert_allclose(v, v1, rtol=1e-15)
        np.testing.assert_allclose(g, g1, rtol=1e-15)
    assert sl.poisson_lpmf(n, 0.0) == (0.0 if n == 0 else -np.inf)
    with pytest.raises(sl.DomainError):
        sl.poisson_lpmf(-1, 2.0)
    with pytest.raises(sl.DomainError):
        sl.poisson_lpmf(n, -2.0)


YD = np.array([0.3, -1.2, 2.5, 0.8, 1.1, -0.4, 0.0])
CD = np.array([3, 0, 5, 2, 2, 7, 1])
BD = np.array([1, 0, 0, 1, 1, 0, 1])

GROUPED = {
    O.NORMAL: lambda y, x: sl.normal_lpdf(y, x[0], sl.exp(x[1])),
    O.CAUCHY: lambda y, x: sl.cauchy_lpdf(y, x[0], sl.exp(x[1])),
    O.STUDENT_T: lambda y, x: sl.student_t_lpdf(y, 3.0 + sl.exp(x[1]), x[0], sl.exp(x[1])),
    O.STD_NORMAL: lambda y, x: sl.std_normal_lpdf(y),
    O.EXPONENTIAL: lambda y, x: sl.exponential_lpdf(abs(y), sl.exp(x[0])),
    O.GAMMA: lambda y, x: sl.gamma_lpdf(abs(y) + 0.1, sl.exp(x[0]), sl.exp(x[1])),
    O.LOGNORMAL: lambda y, x: sl.lognormal_lpdf(abs(y) + 0.1, x[0], sl.exp(x[1])),
}


@pytest.mark.parametrize("op", sorted(GROUPED))
def test_a_loop_over_data_becomes_one_vector_density(op, monkeypatch):
    term = GROUPED[op]

    def f(x):
        acc = 0.0
        for y in YD:
            acc = acc + term(float(y), x)
        return acc + x[0] * x[1]
    prog, prog0 = check(f, [0.2, -0.3], monkeypatch)
    rows = [r for r in prog.code if r[O.OP] == op]
    if op != O.STD_NORMAL:                 # (no parameter: not on the tape)
        assert len(rows) == 1 and rows[0][O.N] == YD.size


def test_discrete_loops_group_too(monkeypatch):
    def f(x):
        acc = 0.0
        for n, b in zip(CD, BD):
            acc = acc + sl.poisson_log_lpmf(n, x[0]) + sl.bernoulli_logit_lpmf(b, x[1])
        return acc
    prog, _ = check(f, [0.2, -0.3], monkeypatch)
    ops = _ops(prog)
    assert ops.count(O.POISSON_LOG) == 1 and ops.count(O.BERNOULLI_LOGIT) == 1


# ---- passes 5-6: scans, vector rows, compaction --------------------------------------
def test_prefix_sums_read_elsewhere_become_one_cumsum(monkeypatch):
    # each partial sum is read again (a product of them): pass 2 cannot flatten the
    # chain; pass 5a makes it one GATHER + CUMSUM (the same additions in order)
    def f(x):
        acc, out = x[0], 0.0
        for i in range(12):
            acc = acc + sl.exp(x[1] * (0.1 * i))
            out = out + sl.log(acc)
        return out
    prog, prog0 = check(f, [2.0, 0.3], monkeypatch)
    assert O.CUMSUM in _ops(prog) and O.CUMSUM not in _ops(prog0)
    assert _ops(prog).count(O.ADD) < 4


def test_short_chains_stay_scalar(monkeypatch):
    def f(x):
        a = x[0] + x[1]
        b = a + sl.exp(x[0])             # three ADDs: below the pass's minimum
        c = b + x[1] * 2.0
        return a * b * c
    prog, _ = check(f, [0.3, 0.7], monkeypatch)
    assert O.CUMSUM not in _ops(prog)


def test_chains_that_read_each_other_are_left_alone(monkeypatch):
    # two chains, each taking a partial sum of the other as a term: their scans would
    # read each other (no order exists); the pass leaves the rows as they were
    def f(x):
        x1 = x[0] + x[1]
        y1 = x[2] + x[3]
        x2 = x1 + y1
        y2 = y1 + x2
        x3 = x2 + x[0]
        y3 = y2 + x[1]
        x4 = x3 + x[2]
        y4 = y3 + x[3]
        x5 = x4 + x[1]
        y5 = y4 + x[0]
        return x1 * x2 * x3 * x4 * x5 * y1 * y2 * y3 * y4 * y5
    check(f, [0.3, 0.7, -0.2, 0.5], monkeypatch)


def _loop_of_poisson_terms(rate_of, counts):
    def f(x):
        lp = []
        for s in range(len(counts)):
            acc = 0.0
            for t, n in enumerate(counts):
                acc = acc + sl.poisson_lpmf(n, rate_of(x, t, s))
            lp.append(acc)
        return sl.log_sum_exp(lp)
    return f


def test_poisson_statistics_at_one_rate_become_vector_rows(monkeypatch):
    counts = [3, 0, 5, 2, 2, 7, 1, 4]
    f = _loop_of_poisson_terms(
        lambda x, t, s: sl.exp(x[0]) if t < s else sl.exp(x[1]), counts)
    prog, _ = check(f, [0.3, 1.1], monkeypatch)
    _, prog4 = _program(f, [0.3, 1.1], monkeypatch, off="4")     # passes 1-4 only
    assert O.POISSON_SS not in _ops(prog) and _ops(prog4).count(O.POISSON_SS) >= 6
    # the single terms (one count at a rate, CSE-shared between iterations) join them
    assert O.POISSON in _ops(prog4) and O.POISSON not in _ops(prog)
    assert any(r[O.OP] == O.MUL and r[O.N] >= 4 for r in prog.code)
    assert len(prog.code) < len(prog4.code)


def test_poisson_statistics_of_other_rates_stay(monkeypatch):
    # a rate per iteration: no two POISSON_SS rows share it, none is rewritten
    counts = [3, 0, 5, 2, 2, 7, 1, 4]
    f = _loop_of_poisson_terms(lambda x, t, s: sl.exp(x[0] + 0.1 * s), counts)
    prog, _ = check(f, [0.3, 1.1], monkeypatch)
    assert _ops(prog).count(O.POISSON_SS) == len(counts)


def test_poisson_terms_in_separate_segments_stay_apart(monkeypatch):
    # the same rate on both sides of a guard: one group per side, never merged
    counts = [3, 0, 5, 2, 2, 7, 1, 4]

    def f(x):
        lam = sl.exp(x[0])
        lp = []
        for s in range(len(counts)):
            acc = 0.0
            for t, n in enumerate(counts):
                acc = acc + sl.poisson_lpmf(n, lam if t < s else sl.exp(x[1]))
            lp.append(acc)
            if s == 3 and x[1] > 0:       # a guard in the middle of the loop
                lp.append(x[1] * 0.5)
        return sl.log_sum_exp(lp)
    vg, prog = _program(f, [0.3, 0.5])
    ref = sl.value_and_grad(f)
    for x in ([0.2, 0.4], [0.1, 0.9], [0.2, -0.4], [0.3, 0.5]):
        v, g = vg(np.array(x))
        v0, g0 = ref(np.array(x))
        np.testing.assert_allclose(v, v0, rtol=1e-12)
        np.testing.assert_allclose(g, g0, rtol=1e-10)
    # before the guard: four POISSON_SS rows at lam, made vector rows (one LOG);
    # after it: three more at lam, left as they are (too few), not joined to those
    ops = _ops(prog)
    guard = ops.index(O.GUARD_CMP)
    assert O.LOG in ops[:guard] and O.POISSON_SS not in ops[:guard]
    assert ops[guard:].count(O.POISSON_SS) == 3


def test_vector_poisson_rows_outside_the_rate_domain_go_to_the_eager_tape():
    counts = [3, 0, 5, 2, 2, 7, 1, 4]
    f = _loop_of_poisson_terms(lambda x, t, s: x[0] if t < s else x[1], counts)
    vg = sl.compile(f, np.array([1.3, 2.1]))
    vg(np.array([1.3, 2.1]))
    for x in ([1.2, 2.0], [0.8, 1.7]):          # checked against the eager tape
        v, g = vg(np.array(x))
        v0, g0 = sl.value_and_grad(f)(np.array(x))
        np.testing.assert_allclose(v, v0, rtol=1e-12)
        np.testing.assert_allclose(g, g0, rtol=1e-10)
    for bad in ([-0.5, 2.0], [1.0, -1.0]):
        with pytest.raises(sl.DomainError):
            vg(np.array(bad))
        with pytest.raises(sl.DomainError):
            sl.value_and_grad(f)(np.array(bad))


def test_scalar_rows_of_one_op_become_a_vector_row(monkeypatch):
    w = np.linspace(0.1, 1.3, 9)

    def f(x):
        terms = [sl.log1p_exp(x[0] * float(c) + x[1]) for c in w]     # 9 x (MUL, ADD, op)
        return sl.log_sum_exp(terms)
    prog, prog0 = check(f, [0.3, -0.2], monkeypatch)
    assert any(r[O.OP] == O.LOG1P_EXP and r[O.N] == w.size for r in prog.code)
    assert len(prog.code) < len(prog0.code) / 3


def test_fewer_scalar_rows_than_the_minimum_stay(monkeypatch):
    def f(x):
        return sl.log_sum_exp([sl.log1p_exp(x[0] * c) for c in (0.5, 1.5, 2.5)])
    prog, _ = check(f, [0.3, -0.2], monkeypatch)
    assert all(r[O.N] == 1 for r in prog.code if r[O.OP] == O.LOG1P_EXP)


def test_rows_do_not_cross_a_guard(monkeypatch):
    # the scalar rows before and after the guard are of one op and level: they are
    # vectorised on each side, never together (a failed guard stops the forward pass
    # where the recording decided)
    def f(x):
        a = [sl.exp(x[0] * (0.1 * i)) for i in range(6)]
        s = sl.log_sum_exp(a)
        if x[1] > 0:
            b = [sl.exp(x[1] * (0.2 * i)) for i in range(6)]
            return s + sl.log_sum_exp(b)
        return s - x[1]
    vg, prog = _program(f, [0.3, 0.5])
    guard = [i for i, r in enumerate(prog.code) if r[O.OP] in (O.GUARD_CMP,)]
    assert guard
    exps = [i for i, r in enumerate(prog.code) if r[O.OP] == O.EXP]
    assert any(i < guard[0] for i in exps) and any(i > guard[0] for i in exps)
    ref = sl.value_and_grad(f)
    for x in ([0.2, 0.4], [0.1, 0.9], [0.2, -0.4]):
        np.testing.assert_allclose(vg(np.array(x))[1], ref(np.array(x))[1], rtol=1e-12)


def test_compaction_drops_the_slots_no_row_writes(monkeypatch):
    def f(x):
        acc = 0.0
        for i in range(50):
            acc = acc + sl.exp(x[0] * 0.0 + x[1])      # CSE: one row for 50
        return acc
    prog, prog0 = check(f, [0.3, -0.2], monkeypatch)
    assert prog.nvar < prog0.nvar / 5


def test_change_point_at_full_size_is_a_short_program():
    import pathlib
    import sys
    bench = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
    if not (bench / "loop_models.py").is_file():
        pytest.skip("benchmarks/loop_models.py is not present")
    sys.path.insert(0, str(bench))
    try:
        import loop_models
    finally:
        sys.path.remove(str(bench))
    data = loop_models.coal_data()
    m = loop_models.CoalLoop(**data)
    v = loop_models.CoalVectorised(**data)
    x = np.array([1.2, 0.1])
    g1 = m.log_density_gradient(x)
    prog = m._retaped_for(True)._programs[None][0]
    assert len(prog.code) < 40 and prog.nvar < 2000        # (349 and 25,322 before)
    rng = np.random.default_rng(3)
    for _ in range(4):
        x = np.array([1.1, 0.0]) + 0.1 * rng.standard_normal(2)
        (a, ga), (b, gb) = m.log_density_gradient(x), v.log_density_gradient(x)
        np.testing.assert_allclose(a, b, rtol=1e-12)
        np.testing.assert_allclose(ga, gb, rtol=1e-10)
        (c, gc) = m._gradient(x, True)
        np.testing.assert_allclose(a, c, rtol=1e-12)
        np.testing.assert_allclose(ga, gc, rtol=1e-10)
    assert g1 is not None
