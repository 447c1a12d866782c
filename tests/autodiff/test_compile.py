"""Retaping (sl.compile): replays equal the eager tape, guards catch every way a graph
can depend on values, fallbacks say so once, models use it by default."""

import math
import pickle
import sys
import warnings

import numpy as np
import pytest

import stanlite as sl
import stanlite.models as zoo
import stanlite.autodiff.compile  # noqa: F401  (the module; sl.compile is the function)
from stanlite.autodiff import tape as tape_mod
from stanlite.autodiff import var as var_mod
from stanlite.autodiff.var import guarded
from stanlite.autodiff.vm import kernel as vm_kernel

C = sys.modules["stanlite.autodiff.compile"]
import stanlite.model_retape as MR  # noqa: E402  (ModelGradient, ModelDensity)


def same(r, e):
    """Bit-for-bit equal (value, gradient)."""
    return C._identical(r, e)


def check(f, x0, points, exact=True, programs=None, backend=None):
    """Compile f at x0; at every point the replay equals the eager tape (bitwise with
    exact=True, within 1e-12 relative otherwise). Bit for bit is the generated Python's
    promise: exact=True replays it (backend="python"); otherwise the default backend
    (the compiled interpreter where the recording lowers: equal to rounding)."""
    if backend is None:
        backend = "python" if exact else "auto"
    vg = sl.compile(f, x0, exact=exact, backend=backend)
    for x in points:
        r = vg(x)
        e = sl.value_and_grad(f)(x)
        assert (same(r, e) if exact else C._close(r, e)), (x, r, e)
    assert vg.fallback is None, vg.fallback
    if programs is not None:
        assert vg.programs == programs
    return vg


# --------------------------------------------------------------------------------------
# replays equal the eager tape, primitive family by family
# --------------------------------------------------------------------------------------
P = np.array([0.7, 1.3, 0.4, 2.1])
Q = np.random.default_rng(3).uniform(0.2, 1.8, (6, 4))
M = np.random.default_rng(4).standard_normal((4, 4))
SPD = M @ M.T + 4 * np.eye(4)
Y = np.array([0.3, -1.2, 2.2, 0.9])
IDX = np.array([3, 0, 3, 1])

FUNCS = {
    # arithmetic on floats (the scalar fast paths), constants of every kind
    "scalar_arith": lambda x: x[0] * x[1] - x[2] / x[3] + 3 * x[0] - x[1] / 2 + 1 / x[2]
    - 2.5 - x[3] + (-x[0]) * x[0],
    "scalar_pow": lambda x: x[0] ** 2 + x[1] ** 3 + x[2] ** x[3] + 2.0 ** x[0]
    + x[1] ** 0.5 + x[0] ** 1 + abs(x[2] - 1.0),
    "scalar_unary": lambda x: sl.exp(x[0]) + sl.log(x[1]) + sl.sin(x[2]) * sl.cos(x[3])
    + sl.tanh(x[0]) + sl.sqrt(x[1]) + sl.log1p(x[2]) + sl.expm1(x[3]) + sl.sinh(x[0])
    * sl.cosh(x[1]) + sl.inv_logit(x[2]) + sl.log1p_exp(x[3]) + sl.lgamma(x[0])
    + sl.digamma(x[1]) + sl.Phi(x[2]) + sl.log_inv_logit(x[3]) + sl.log1m_inv_logit(x[0])
    + sl.square(x[1]) + sl.atan(x[2]) + sl.inv(x[3]) + sl.inv_sqrt(x[0]) + sl.cbrt(x[1]),
    "scalar_binary": lambda x: sl.atan2(x[0], x[1]) + sl.fmin(x[2], x[3])
    + sl.fmax(x[0], 1.0) + sl.hypot(x[1], x[2]) + sl.log_diff_exp(x[3], x[0] - 3.0)
    + sl.fdim(x[3], x[2]),
    # arrays: broadcasting of every kind, lazily broadcast adjoints, reductions
    "array_arith": lambda x: sl.sum(x * Q - Q / (1.0 + x * x) + x[1] * x - x[0]
                                    + 2.0 * x[2:3]),
    "array_unary": lambda x: sl.sum(sl.exp(x) + sl.log(x) * sl.sin(x) + sl.tanh(x)
                                    + sl.sqrt(x) + sl.log1p_exp(x) + sl.inv_logit(x)
                                    + sl.lgamma(x) + sl.log1m_inv_logit(x) - x),
    "array_pow": lambda x: sl.sum(x ** 2 + x ** 1 + x ** 3.5 + x ** x[0] + 1.5 ** x),
    "reductions": lambda x: sl.mean(x) * sl.prod(x) + sl.log_sum_exp(x)
    + sl.sum(sl.softmax(x) * Y) + sl.sum(sl.cumulative_sum(x)) + sl.variance(x)
    + sl.sd(x) + sl.dot_self(x) + sl.squared_distance(x, Y) + sl.max(x) - sl.min(x)
    + sl.sum(sl.sum(Q * x, axis=0) ** 2),
    "indexing": lambda x: sl.sum(x[IDX] * x[::-1]) + x[1:3][0] * x[-1]
    + sl.sum(sl.reshape(x, (2, 2))[1] * 3.0) + sl.sum(sl.transpose(sl.reshape(x, (2, 2)))[0])
    + sl.sum(x[np.array([True, False, True, True])] * x[:3]) + x[[0, 0, 1]][1] * x[0],
    "structure": lambda x: sl.sum(sl.stack([x, 2 * x]) ** 2) + sl.sum(
        sl.concatenate([x[:2], x, sl.stack([x[0], x[3]])]) * np.arange(8.0))
    + sl.sum(sl.where(np.array([True, False, True, False]), x, x * x)),
    "linalg": lambda x: sl.sum(Q @ x) + x @ M @ x + sl.sum(sl.reshape(x, (2, 2))
                                                           @ sl.reshape(x, (2, 2)))
    + sl.log_determinant(SPD + sl.reshape(sl.concatenate([x, x, x, x]), (4, 4)) * 0.1)
    + sl.sum(sl.cholesky_decompose(SPD * x[0])) + sl.sum(sl.mdivide_left(SPD, x)),
    "fused": lambda x: sl.normal_lpdf(Y, x[0], x[1]) + sl.normal_lpdf(x, 0.0, 2.0)
    + sl.cauchy_lpdf(x[2], 0, 5) + sl.student_t_lpdf(Y, 3.0, x, x[3])
    + sl.gamma_lpdf(x, 2.0, x[1]) + sl.poisson_log_lpmf(np.array([0, 2, 1, 4]), x)
    + sl.lognormal_lpdf(x, x[0], 1.5) + sl.exponential_lpdf(x[3], x[2])
    + sl.beta_lpdf(x[2] / 3.0, x[0], x[1]),
    "glm": lambda x: sl.bernoulli_logit_glm_lpmf(np.array([0, 1, 1, 0, 1, 0]), Q, x[0],
                                                 x) + sl.normal_id_glm_lpdf(
        np.linspace(-1, 1, 6), Q, x[1], x, x[2]),
    "multivariate": lambda x: sl.multi_normal_cholesky_lpdf(
        Y, x, sl.cholesky_decompose(SPD)) + sl.multi_normal_lpdf(Y, x * 0.5, SPD * x[1]),
    "constant_leaf": lambda x: sl.sum(x * sl.Var(np.array([1.0, 2.0, 3.0, 4.0]))) * x[0],
}


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_replay_equals_the_eager_tape_bit_for_bit(name, rng):
    f = FUNCS[name]
    points = [P * rng.uniform(0.8, 1.25, 4) for _ in range(3)] + [P]
    check(f, P, points)
    check(f, P, points, exact=False, backend="python")     # the Python fusions
    check(f, P, points, exact=False)                       # the interpreter


def test_random_compositions_replay_exactly(rng):
    # random programs over a stack of vectors (as tests/autodiff/test_compositions.py)
    unary = [sl.sin, sl.cos, lambda v: sl.exp(0.3 * v), lambda v: v * v / (1.0 + v * v),
             lambda v: sl.log(1.0 + v * v), lambda v: -v, lambda v: v[::-1],
             lambda v: sl.concatenate([v[1:], v[:1]]), lambda v: v[np.array([0, 0, 2, 3])],
             lambda v: M @ v, lambda v: v @ M, lambda v: v - sl.mean(v),
             lambda v: sl.where(v > 0, sl.sin(v), v - v * v * v / 6.0),
             lambda v: sl.sum(sl.stack([v, 2.0 * v]), axis=0)]
    binary = [lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b,
              lambda a, b: a / (1.5 + b * b), lambda a, b: (1.0 + a * a) ** (0.5 * sl.sin(b)),
              lambda a, b: a * sl.sum(b) / 4]
    for _ in range(40):
        prog = [(rng.random() < 0.6, int(rng.integers(14))) for _ in range(rng.integers(1, 8))]

        def f(x, prog=prog):
            st = [x, sl.sin(x) * 0.5]
            for u, k in prog:
                st.append(unary[k](st[-1]) if u else binary[k % 6](st[-1], st[-2]))
            return sl.sum(st[-1] * st[-1]) + sl.sum(st[-2])
        pts = [rng.uniform(-1.5, 1.5, 4) for _ in range(3)]
        check(f, rng.uniform(-1.5, 1.5, 4), pts)
        check(f, rng.uniform(-1.5, 1.5, 4), pts, exact=False, backend="python")
        check(f, rng.uniform(-1.5, 1.5, 4), pts, exact=False)


def test_scalar_loop_and_scalar_input(rng):
    def loop(x):
        a, b, s = x[0], x[1], 0.0
        for _ in range(200):
            s = s + a * b
            a = sl.sin(a) * 0.5 + b
        return s
    check(loop, np.array([0.3, 0.7]), [rng.uniform(-1, 1, 2) for _ in range(3)])
    # a float in, a float gradient out
    vg = check(lambda t: sl.exp(t) * t + t ** 3, 0.5, [1.5, -0.25])
    assert type(vg(2.0)[1]) is float


def test_unused_input_and_constant_output_give_zero_gradients():
    vg = check(lambda x: x[0] * 2.0, np.ones(3), [np.arange(3.0)])
    assert np.array_equal(vg(np.arange(3.0))[1], [2.0, 0.0, 0.0])
    vg = sl.compile(lambda x: 4.0, np.ones(2))
    assert same(vg(np.zeros(2)), (4.0, np.zeros(2)))


def test_generated_code_is_straight_line_with_single_calls_for_fused_and_super_nodes():
    A = np.array([[0.1, 0.4], [-0.3, 0.2]])
    f = lambda x: sl.normal_lpdf(Y, x[0], sl.exp(x[1])) + sl.sum(
        sl.matrix_exp(A * x[0]) * sl.matrix_exp(A * x[1]))
    vg = check(f, np.array([0.2, -0.1]), [np.array([0.5, 0.3]), np.array([-1.0, 0.8])])
    src = vg.source
    assert "for " not in src and "while " not in src
    calls = lambda name: sum(f" {name}(" in line or f"({name}(" in line
                             for line in src.splitlines()[1:])
    kern = [k for k in vg.source.split("(")[1].split(", ") if k.startswith("kern")]
    assert len(kern) == 1 and calls(kern[0].split("=")[0]) == 1     # one kernel call
    # each matrix exponential: one call of its forward function and one of its VJP
    assert sum("_norm(" in line for line in src.splitlines()) == 2
    vjp = [k.split("=")[0] for k in src.split("(")[1].split(", ") if k.startswith("vjp")]
    assert len(vjp) == 1 and calls(vjp[0]) == 2


def test_sum_of_squares_is_fused_into_a_dot_product_unless_exact(rng):
    f = lambda x: -0.5 * sl.sum(x * x) + sl.sum(x)
    x = rng.standard_normal(1000)
    fast = sl.compile(f, x, backend="python")
    assert "_dot(" in fast.source and "x0 * x0" not in fast.source
    slow = sl.compile(f, x, exact=True, backend="python")
    assert "_dot(" not in slow.source
    e = sl.value_and_grad(f)(x)
    assert same(slow(x), e) and C._close(fast(x), e)
    assert np.array_equal(fast(x)[1], e[1])    # the gradient never used the product


def test_short_sums_are_python_floats_in_numpys_order(rng):
    # sum() of a vector of up to 16 elements is written out in numpy's pairwise order
    # (no reduction call): the same bits, also for a float adjoint summed from an
    # array expression (x[0] * v: the adjoint of x[0] is sum(g * v))
    for n in (1, 2, 7, 8, 9, 15, 16, 17):
        f = lambda x: sl.sum(sl.exp(x) * x) + x[0] * sl.sum(sl.sin(x) * x) / 3.0
        scale = 10.0 ** rng.uniform(-6, 1, n)
        vg = check(f, rng.normal(size=n) * scale,
                   [rng.normal(size=n) * scale for _ in range(4)])
        assert (".sum()" in vg.source) == (n > 16), vg.source


def test_signs_are_carried_not_computed(rng):
    # the non-centred hierarchical density: -0.5 * sum(r * r) with r = (y - theta) / s
    # gives theta's adjoint as -(-r / s); constant coefficients fold at generation time
    # and negations ride along as a flag, so the sweep has no array negation and no
    # array times -1.0 - and still equals the tape bit for bit
    y, s = rng.normal(size=8), rng.uniform(1, 2, 8)

    def f(x):
        theta = x[0] + sl.exp(x[1]) * x[2:]
        r = (y - theta) / s
        return -0.5 * sl.sum(x[2:] * x[2:]) - 0.5 * sl.sum(r * r) - sl.sum(-sl.sin(x[2:]))
    vg = check(f, rng.normal(size=10), [rng.normal(size=10) for _ in range(3)])
    sweep = vg.source.split("av", 1)[1]
    assert "-1.0" not in sweep and "= -a" not in sweep and "(-a" not in sweep, vg.source
    for exact in (True, False):     # the same with the products left unfused
        check(f, rng.normal(size=10), [rng.normal(size=10)], exact=exact)
    # a negated adjoint that meets an indexing rule or the gradient itself is computed
    g = lambda x: sl.sum(sl.sin(x)[::-1] - x) - sl.sum((1.0 - x)[1:])
    check(g, rng.normal(size=5), [rng.normal(size=5) for _ in range(3)])


# --------------------------------------------------------------------------------------
# guards
# --------------------------------------------------------------------------------------
def test_branch_on_a_comparison_records_each_path():
    def f(x):
        if x[0] > 0:
            return sl.sum(sl.log(x * x + 1.0))
        return sl.sum(sl.exp(x))
    pts = [np.array([1.0, 2.0]), np.array([-1.0, 0.5]), np.array([2.0, -3.0]),
           np.array([-0.1, 0.0])]
    vg = check(f, np.array([0.5, 0.5]), pts, programs=2)
    assert vg.recordings == 2
    assert "if not (x0.item(0) > 0)" in vg.source or ">" in vg.source


def test_bool_of_a_traced_value_is_a_guard():
    def f(x):
        d = x[0] - x[1]
        return d * d if d else x[0] * 3.0       # bool(Var)
    check(f, np.array([1.0, 2.0]), [np.array([3.0, 1.0]), np.array([2.0, 2.0]),
                                    np.array([0.5, 0.25])], programs=2)


def test_where_condition_from_values_is_a_guard(rng):
    f = lambda x: sl.sum(sl.where(x > 0, sl.sin(x), x * x))
    x0 = np.array([0.5, -0.5, 1.0])
    vg = check(f, x0, [np.array([0.1, -2.0, 3.0]), np.array([-0.1, -2.0, 3.0]),
                       np.array([1.0, 1.0, 1.0])], programs=3)
    assert vg.recordings == 3


def test_while_loop_on_values_and_an_unrolled_solver():
    def grow(x):                                # iteration count depends on x
        s = x[0]
        while s < 10.0:
            s = s * 1.5 + x[1]
        return s
    check(grow, np.array([1.0, 0.5]), [np.array([1.1, 0.5]), np.array([2.0, 1.0]),
                                       np.array([9.0, 0.1]), np.array([1.0, 0.5])])

    def newton_sqrt(x):                         # a solver whose step count varies
        a = x[0]
        z = a * 0.5 + 0.5
        while abs(z * z - a) > 1e-12:
            z = z - (z * z - a) / (2.0 * z)
        return z
    vg = sl.compile(newton_sqrt, np.array([2.0]))
    for a in (2.0, 3.0, 50.0, 2.0, 1e4):
        v, g = vg(np.array([a]))
        e = sl.value_and_grad(newton_sqrt)(np.array([a]))
        assert same((v, g), e)
        # differentiating the unrolled iterations: d sqrt(a)/da to convergence
        assert abs(g[0] - 0.5 / math.sqrt(a)) < 1e-9
    assert vg.programs >= 3 and vg.fallback is None


def test_value_dependent_indexing_is_guarded():
    f = lambda x: 2.0 * x[np.argmax(x)] + x[x.argmin()] + sl.sum(
        sl.sort_asc(x) * np.arange(3.0))
    pts = [np.array([1.0, 2.5, 3.0]), np.array([3.0, 2.0, 1.0]), np.array([0.0, 5.0, 1.0]),
           np.array([1.0, 2.0, 3.5])]
    vg = check(f, np.array([1.0, 2.0, 3.0]), pts)
    assert vg.programs == 3


def test_too_many_paths_fall_back_to_the_eager_tape_with_one_warning():
    def f(x):
        k = int(sl.sum(x > 0.5))                # a count: a new path for every count
        return x[0] * (k + 1.0) + sl.sum(x[:k] * x[:k])
    vg = sl.compile(f, np.full(6, 0.1), max_recordings=3)
    with pytest.warns(sl.CompileWarning, match="changed at each of 3 recordings") as w:
        for k in range(6):
            x = np.where(np.arange(6) < k, 0.9, 0.1)
            assert same(vg(x), sl.value_and_grad(f)(x))
    assert len(w) == 1 and "guard" in str(w[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # said once: no second warning
        assert same(vg(np.full(6, 0.9)), sl.value_and_grad(f)(np.full(6, 0.9)))
    assert vg.fallback is not None


def test_float_of_a_traced_value_is_an_error_naming_the_line():
    # float() of a traced value drops its derivative: an error at once (issue 19),
    # never a recording that falls back with a warning
    def f(x):
        c = float(x[0])
        return x[1] * c
    with pytest.raises(sl.DifferentiationError,
                       match=r"float\(\) of a traced value at .*test_compile\.py:\d+ "
                             r"\(in f\): `c = float\(x\[0\]\)`.*sl\.value_of"):
        sl.compile(f, np.array([2.0, 3.0]))


def test_a_deliberate_plain_number_is_an_escape():
    # float(sl.value_of(v)): the user says the number is a constant; the recording
    # cannot follow it, so the eager tape is used (one CompileWarning)
    def f(x):
        c = float(sl.value_of(x[0]))
        return x[1] * c
    with pytest.warns(sl.CompileWarning, match=r"value_of\(\) at test_compile.py"):
        vg = sl.compile(f, np.array([2.0, 3.0]))
    x = np.array([5.0, 7.0])
    assert same(vg(x), sl.value_and_grad(f)(x)) and vg(x)[0] == 35.0


def test_int_of_a_traced_value_is_an_error_a_value_of_length_an_escape():
    with pytest.raises(sl.DifferentiationError, match=r"int\(\) of a traced value"):
        sl.compile(lambda x: sl.sum(x[:int(x[0])] ** 2), np.array([2.0, 3.0, 4.0]))
    f = lambda x: sl.sum(x[:int(sl.value_of(x[0]))] ** 2)     # a length read from a value
    with pytest.warns(sl.CompileWarning, match=r"value_of\(\) at test_compile.py"):
        vg = sl.compile(f, np.array([2.0, 3.0, 4.0]))
    for x in (np.array([3.0, 1.0, 2.0]), np.array([1.5, 2.0, 0.5])):
        assert same(vg(x), sl.value_and_grad(f)(x))


def test_value_of_a_traced_value_is_an_escape():
    f = lambda x: sl.sum(x * np.exp(sl.value_of(x)))      # numpy on the values
    with pytest.warns(sl.CompileWarning, match="value_of"):
        vg = sl.compile(f, np.array([0.1, 0.2]))
    x = np.array([1.0, 2.0])
    assert same(vg(x), sl.value_and_grad(f)(x))


def test_an_unguarded_value_read_is_caught_by_the_first_replay():
    f = lambda x: sl.sum(x * x.value)            # .value: invisible to the hooks
    vg = sl.compile(f, np.array([1.0, 2.0]))
    x = np.array([3.0, 1.0])
    with pytest.warns(sl.CompileWarning, match="differs from the eager tape"):
        r = vg(x)
    assert same(r, sl.value_and_grad(f)(x))     # the eager answer, not a stale one
    assert vg.fallback is not None
    # random numbers inside f: the same safety net
    rng = np.random.default_rng(0)
    g = lambda x: sl.sum(x * rng.standard_normal(2))
    vg = sl.compile(g, np.zeros(2))
    with pytest.warns(sl.CompileWarning, match="differs"):
        vg(np.ones(2))


@pytest.mark.parametrize("backend", ["python", "auto"])
def test_a_value_read_that_agrees_at_the_first_replay_is_caught_by_a_spot_check(backend):
    # a .value mask: the same at the recording point and the first replay, different
    # later; replays 2, 4, 8, ... are checked against the eager tape too (the generated
    # Python equals it bit for bit, the compiled interpreter to rounding)
    same = C._identical if backend == "python" else C._close
    f = lambda x: sl.sum(x * (x.value > 0))
    vg = sl.compile(f, np.array([1.0, 2.0]), backend=backend)
    assert same(vg(np.array([3.0, 1.0])), sl.value_and_grad(f)(np.array([3.0, 1.0])))
    mixed = [np.array([-1.0, 2.0 + k]) for k in range(8)]
    with pytest.warns(sl.CompileWarning, match="differs from the eager tape"):
        for x in mixed:
            vg(x)
    assert vg.fallback is not None
    for x in mixed:                              # from then on: the eager answer
        assert same(vg(x), sl.value_and_grad(f)(x))
    # a pure function is never flagged, however often it replays
    h = lambda x: sl.sum(sl.exp(x) * x)
    vh = sl.compile(h, np.array([0.5, -0.5]), backend=backend)
    assert vh.compiled == (backend == "auto" and vm_kernel.available())
    rng = np.random.default_rng(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sl.CompileWarning)
        for _ in range(40):
            x = rng.standard_normal(2)
            assert same(vh(x), sl.value_and_grad(h)(x))
    # (checks at replays 2, 4, 8, then on a schedule stretched by the costs:
    # _schedule_after; none is pending)
    assert vh.fallback is None and vh._next_check > vh._replays


def test_guarded_is_the_hook_for_library_decisions():
    assert guarded(lambda v, c: v > c, 2.0, 1.0) is True

    def f(x):
        # a library-style decision on values, through guarded
        k = guarded(lambda v: int(np.argmax(np.abs(v))), x)
        return x[k] * 3.0 + sl.sum(x)
    check(f, np.array([1.0, -2.0]), [np.array([3.0, 1.0]), np.array([0.1, -0.3])],
          programs=2)


def test_a_new_input_shape_records_again():
    f = lambda x: sl.sum(sl.exp(x) * x)
    vg = check(f, np.ones(3), [np.ones(5), np.arange(3.0), np.zeros(1)], programs=3)
    assert vg.recordings == 3


def test_hooks_are_closed_after_recording_even_when_f_raises():
    def bad(x):
        if x[0] > 0:
            raise RuntimeError("boom")
        return x[0]
    with pytest.raises(RuntimeError, match="boom"):
        sl.compile(bad, np.ones(2))
    assert tape_mod._state.watchers == [] and var_mod._WATCHING == 0
    sl.compile(lambda x: sl.sum(x), np.ones(2))
    assert tape_mod._state.watchers == [] and var_mod._WATCHING == 0


# --------------------------------------------------------------------------------------
# errors, IEEE values, nesting, hvp
# --------------------------------------------------------------------------------------
def test_domain_errors_raise_at_replay_as_on_the_tape():
    f = lambda x: sl.normal_lpdf(Y, x[0], x[1])
    vg = sl.compile(f, np.array([0.0, 1.0]))
    with pytest.raises(sl.DomainError, match="sigma"):
        vg(np.array([0.0, -1.0]))
    with pytest.raises(sl.DomainError, match="sigma"):
        sl.value_and_grad(f)(np.array([0.0, -1.0]))
    assert vg.fallback is None


def test_float_exceptions_give_the_tapes_inf_and_nan():
    f = lambda x: 1.0 / x[0] + sl.log(x[1]) + x[0] * x[1]
    vg = sl.compile(f, np.array([1.0, 1.0]))
    with np.errstate(divide="ignore", invalid="ignore"):
        for x in (np.array([0.0, 1.0]), np.array([1.0, -1.0]), np.array([2.0, 0.0])):
            r, e = vg(x), sl.value_and_grad(f)(x)
            assert same(r, e), (r, e)
    assert vg.fallback is None
    assert same(vg(np.array([2.0, 3.0])), sl.value_and_grad(f)(np.array([2.0, 3.0])))


def test_nested_differentiation_of_a_compiled_gradient_uses_the_tape(rng):
    f = lambda x: sl.sum(sl.sin(x) * x * x)
    vg = sl.compile(f, np.ones(3))
    x = rng.standard_normal(3)
    h = sl.jacobian(lambda z: vg(z)[1])(x)
    assert np.allclose(h, sl.hessian(f)(x), rtol=1e-12, atol=1e-12)
    v = rng.standard_normal(3)
    assert np.array_equal(vg.hvp(x, v), sl.hvp(f)(x, v))


def test_retaped_hessian_replays_the_forward_over_reverse_hessian(rng):
    X = rng.standard_normal((30, 4))
    yb = (rng.random(30) < 0.5).astype(float)
    P = np.cov(rng.standard_normal((4, 9))) + np.eye(4)
    cases = [
        lambda b: sl.sum(yb * (X @ b) - sl.log1p_exp(X @ b)) - 0.5 * sl.sum(b * b),
        lambda x: -4.5 * sl.log1p(x @ P @ x / 5.0),                 # dense Student-t
        lambda x: -4.5 * sl.log1p(sl.quad_form_sym(P, x) / 5.0),    # ... as Stan writes it
        lambda x: sl.sum(sl.reshape(x, (2, 2)) ** 3),               # a reshape inlined
        lambda x: sl.sum(sl.exp(x) * x) - x[0] * x[1] * x[2] + sl.log_sum_exp(x),
        lambda x: sl.multi_normal_lpdf(x, np.zeros(4), P),          # constant Hessian
        lambda x: sl.sum(sl.where(x > 0, x ** 3, -x * x)),          # a guard per sign
    ]
    for f in cases:
        vg = sl.compile(f, rng.standard_normal(4))
        for x in [rng.standard_normal(4) for _ in range(4)]:
            H, E = vg.hessian(x), sl.hessian(f)(x)
            assert type(H) is np.ndarray and H.shape == (4, 4)
            assert C._close((0.0, H), (0.0, E)), (H, E)
            assert np.allclose(H, H.T, rtol=1e-12, atol=1e-12)
        assert vg._hessian.fallback is None, vg._hessian.fallback
        assert "Dual" not in vg._hessian.source and "for " not in vg._hessian.source
    # two sign patterns of the last case: two programs, each replayed
    assert vg._hessian.programs >= 2
    # a replayed Hessian is a fresh array each time (the caller may modify it)
    H1 = vg.hessian(np.ones(4))
    H1[:] = 0.0
    assert np.array_equal(vg.hessian(np.ones(4)), sl.hessian(cases[-1])(np.ones(4)))
    # inside another differentiation the tape nests (third order through it)
    f = cases[2]
    vg = sl.compile(f, np.ones(4))
    x = rng.standard_normal(4)
    T = sl.jacobian(lambda z: vg.hessian(z))(x)
    assert np.allclose(T, sl.grad_hessian(f)(x), rtol=1e-10, atol=1e-10)


def test_retaped_hessian_of_a_function_that_escapes_uses_the_tape():
    # a plain number read from a traced value (value_of): the Hessian's recording
    # cannot be replayed; it says so once and every call is sl.hessian's
    with pytest.warns(C.CompileWarning, match="eager tape"):
        hc = C.CompiledHessian(lambda x: sl.sum(x ** 3) + float(sl.value_of(x[0])) * 0.0,
                               np.ones(2))
    assert hc.fallback is not None
    assert np.array_equal(hc(np.array([1.0, 2.0])), np.diag([6.0, 12.0]))
    vg = sl.compile(lambda x: sl.sum(x ** 3), np.ones(2))
    assert np.array_equal(vg.hessian(np.array([1.0, 2.0])), np.diag([6.0, 12.0]))


def test_bad_arguments():
    with pytest.raises(TypeError, match="callable"):
        sl.compile(3.0, np.ones(2))
    with pytest.raises(ValueError, match="max_recordings"):
        sl.compile(lambda x: sl.sum(x), np.ones(2), max_recordings=0)
    with pytest.raises(sl.DifferentiationError, match="scalar"):
        sl.compile(lambda x: x * 2.0, np.ones(2))
    vg = sl.compile(lambda x: sl.sum(x ** 3), np.ones(2))
    for call in (vg, vg.hessian):
        with pytest.raises(TypeError, match="must be a float or an array of floats, got str"):
            call("abc")
    with sl.nested():
        with pytest.raises(TypeError, match="plain"):
            sl.compile(lambda x: sl.sum(x), sl.Var(np.ones(2)))


# --------------------------------------------------------------------------------------
# models: retaped by default
# --------------------------------------------------------------------------------------
def _zoo_points(m, k=3, seed=5, scale=1.0):
    r = np.random.default_rng(seed)
    return [r.uniform(-scale, scale, m.dim) for _ in range(k)]


_RETAPED = [n for n in zoo.names() if zoo.get(n).compile]


def test_models_that_opt_out_keep_the_eager_tape():
    # a zoo model with compile = False (mm_multidose_ss: its solver start is computed
    # from parameter values) never builds a program and gives the tape's gradient
    out = [n for n in zoo.names() if n not in _RETAPED]
    assert out == ["mm_multidose_ss"]
    m = zoo.get(out[0])
    x = m.unconstrain(m.constrain(np.zeros(m.dim)))       # inside the support
    v, g = m.log_density_gradient(x)
    assert "_retaped" not in m.__dict__
    assert same((v, g), m._gradient(m._point(x), True))


@pytest.mark.parametrize("name", _RETAPED)
def test_zoo_models_gradients_replay_the_tape(name):
    m = zoo.get(name)
    pts = _zoo_points(m)
    # random points may leave a model's support (an ODE amount a hair below zero under
    # a log: a rejection in sampling); the replay is checked where the model is defined
    with np.errstate(all="ignore"):
        pts = [x for x in pts + _zoo_points(m, k=20, seed=6, scale=0.3)
               if _in_support(m, x)][:3]
        assert pts, f"{name}: no point of its support found"
        _check_zoo_replay(name, m, pts)


def _in_support(m, x):
    try:
        return bool(np.isfinite(m._gradient(m._point(x), True)[0]))
    except (ValueError, ArithmeticError):      # a domain error: outside the support
        return False


def _check_zoo_replay(name, m, pts):
    for x in pts:
        for jac in (True, False):
            r = m.log_density_gradient(x, jacobian=jac)
            e = m._gradient(m._point(x), jac)
            assert C._close(r, e), (name, x)
        m.log_density(x)
    rg = m._retaped[True]
    assert rg.fallback is None and rg.programs >= 1
    rd = m._retaped[("density", True)]
    for x in pts:
        # the log density alone: the forward pass of the same recording, so the value
        # on the tape; or (super nodes that prepare their reverse pass in the forward:
        # an ODE's sensitivities) the plain evaluation, as without retaping
        if rd.fallback is None:
            v = m._gradient(m._point(x), True)[0]
            if rd.compiled:             # the interpreter: a forward pass, no adjoints
                assert rd.source.startswith("# interpreter program")
                assert not any(p.A.any() for ps in rd._programs.values() for p in ps)
            else:
                assert "_zeros" not in rd.source and "None" in rd.source
        else:
            v = float(sl.value_of(m._log_density(m._point(x), True)))
            assert "computes more than its value" in rd.fallback
        assert abs(m.log_density(x) - v) <= 1e-12 * abs(v)


class Bounded(sl.Model):
    y = sl.data.vector(3)
    p = sl.param.real(lower=0, upper=1)
    s = sl.param.real(lower=0)
    t = sl.param.real(lower=lambda p: -p, upper=lambda p: 1 + p)   # traced bounds
    w = sl.param.vector(3, lower=-1, upper=2)

    def log_prob(self, p, s, t, w):
        lp = sl.beta_lpdf(p, 2, 2) + sl.lognormal_lpdf(s, 0, 1) + sl.normal_lpdf(t, 0, 1)
        return lp + sl.normal_lpdf(self.y, w * s + p, 1.0)


def test_a_model_with_bounds_records_one_path_for_every_sign_pattern():
    m = Bounded(y=[0.1, 0.5, -0.3])
    pts = [np.full(m.dim, 0.3), -np.full(m.dim, 0.3), np.array([0.2, -0.1, 0.4, 1.0,
                                                                 -1.0, 0.5]),
           np.full(m.dim, 0.7)]
    for x in pts:
        # the model's default backend: the interpreter, equal to rounding (its graph
        # passes reorder sums)
        assert C._close(m.log_density_gradient(x), m._gradient(x, True))
    rg = m._retaped[True]
    # the bounded transform decides nothing on the free values' signs: one recording
    assert rg.fallback is None and rg.programs == 1


class Branchy(sl.Model):
    mu = sl.param.real()

    def log_prob(self, mu):
        if mu > 0:                               # a branch in the model block
            return -mu
        return sl.normal_lpdf(mu, 0, 1)


def test_model_opt_out_branches_and_pickling():
    m = Branchy()
    for x in (np.array([0.5]), np.array([-0.5]), np.array([2.0])):
        assert same(m.log_density_gradient(x), m._gradient(x, True))
    assert m._retaped[True].programs == 2
    # interpreter programs travel with the pickle (as arrays), generated Python does not
    m2 = pickle.loads(pickle.dumps(m))
    n = m._retaped[True].programs if m._retaped[True].compiled else 0
    assert len(m2.__dict__.get("_retaped", {}).get(True, MR.ModelGradient(m2, True))
               ._programs.get(None, ())) == n
    assert same(m2.log_density_gradient(np.array([0.5])), (-0.5, np.array([-1.0])))
    recorded = m2._retaped[True].recordings
    m2.compile = False                           # opt out: the eager tape
    m2.log_density_gradient(np.array([0.3]))
    assert m2._retaped[True].recordings == recorded     # unchanged: not used

    class Eager(Branchy):
        compile = False
    m3 = Eager()
    m3.log_density_gradient(np.array([0.3]))
    assert "_retaped" not in m3.__dict__


class Reads(sl.Model):
    mu = sl.param.real()

    def log_prob(self, mu):
        return -0.5 * mu * mu * float(sl.value_of(mu))   # a value leaves the tape


def test_a_model_that_cannot_be_retaped_falls_back_once():
    m = Reads()
    with pytest.warns(sl.CompileWarning, match="Reads.log_density_gradient"):
        r = m.log_density_gradient(np.array([0.5]))
    assert same(r, m._gradient(np.array([0.5]), True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert same(m.log_density_gradient(np.array([2.0])),
                    m._gradient(np.array([2.0]), True))


def test_threads_share_a_compiled_function(rng):
    import threading
    f = lambda x: sl.sum(sl.where(x > 0, x * x, sl.exp(x)))
    vg = sl.compile(f, np.ones(3), max_recordings=16)
    pts = [rng.standard_normal(3) for _ in range(200)]
    bad = []

    def work(k):
        for x in pts[k::4]:
            if not same(vg(x), sl.value_and_grad(f)(x)):
                bad.append(x)
    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not bad and vg.fallback is None and vg.programs == 8


def test_element_reads_of_a_long_vector_stay_element_reads():
    # two scalars read from a long vector: no tolist() of all of it (that would be O(n))
    f = lambda x: x[0] * x[1] + sl.sum(x[2:] * 0.5)
    vg = check(f, np.ones(10000), [np.linspace(0, 1, 10000)])
    assert "tolist" not in vg.source and "_array([" not in vg.source
    g = lambda x: x[0] * x[1] * x[2]             # a short one: read at once
    vg = check(g, np.ones(3), [np.array([2.0, 3.0, 5.0])])
    assert "tolist" in vg.source and "_array([" in vg.source


def test_spot_checks_cost_a_bounded_share_of_the_replays():
    # where an eager evaluation costs many replays, the spot checks are spaced so that
    # they cost about check_budget of the replays' time, not more
    f = lambda x: sl.sum(sl.exp(x) * x)
    vg = sl.compile(f, np.array([0.5, -0.5]))
    vg._replay_seconds, vg._eager_seconds = 1e-6, 1e-2      # eager = 10^4 replays
    vg._check_seconds = vg.check_allowance                  # the allowance spent
    vg._schedule_after(1)
    assert vg._next_check >= 1e-2 / (1e-6 * vg.check_budget)
    # where it is cheap, the doubling schedule
    vh = sl.compile(f, np.array([0.5, -0.5]))
    vh._replay_seconds, vh._eager_seconds = 1e-6, 1e-6
    vh._next_check = 2
    vh._schedule_after(2)
    assert vh._next_check == 4
    # and the first replay at a new point is always checked
    calls = []
    vk = sl.compile(f, np.array([0.5, -0.5]))
    vk._replay_seconds, vk._eager_seconds = 1e-6, 1e-2
    vk._reference = lambda x: calls.append(x) or C.Compiled._reference(vk, x)
    vk(np.array([0.1, 0.2]))
    assert len(calls) == 1


@pytest.mark.parametrize("backend, at_once", [("python", 1), ("vm", 2)])
def test_a_slow_replays_second_timing(monkeypatch, backend, at_once):
    """The spot checks' budget takes the replay's time as the smaller of two timings
    (a process's first replay may load numba's kernels). An interpreter program is
    replayed again at once for it; a Python replay, which costs as much as the
    function (an ODE model's: its solves, issue 20 point 6), is not: its next replay,
    the first at a new point, gives the second timing. Every timed call takes
    1/64 s here (a fake clock)."""
    ticks = iter(range(10 ** 6))
    monkeypatch.setattr(C, "_clock", lambda: next(ticks) / 64.0)
    replays = []
    build, lower = C.build, C.Compiled._lower

    def counted(prog):
        fn = prog.fn
        prog.fn = lambda x: replays.append(1) or fn(x)
        return prog
    monkeypatch.setattr(C, "build", lambda *a, **k: counted(build(*a, **k)))
    monkeypatch.setattr(C.Compiled, "_lower",
                        lambda self, rec: (lambda p: p if p is None else counted(p))(
                            lower(self, rec)))
    f = sl.compile(lambda x: sl.sum(sl.exp(x) * x), np.array([0.5, -0.5]),
                   backend=backend)                 # (records, replays, times)
    assert len(replays) == at_once and f._replay_seconds == 1 / 64
    assert f._retime == (backend == "python")
    x = np.array([0.1, 0.2])
    v, g = f(x)
    assert len(replays) == at_once + 1 and not f._retime
    assert f._replay_seconds == 1 / 64
    assert v == pytest.approx(float(np.sum(np.exp(x) * x)), rel=1e-14)
    assert g == pytest.approx(np.exp(x) * (1 + x), rel=1e-14)


def test_a_bad_backend_is_an_argument_error_naming_it(monkeypatch):
    f = lambda x: sl.sum(x * x)
    with pytest.raises(sl.ArgumentError, match="backend must be one of 'auto'.*got 'gpu'"):
        sl.compile(f, np.ones(2), backend="gpu")
    monkeypatch.setenv("STANLITE_BACKEND", "fast")
    with pytest.raises(sl.ArgumentError, match="STANLITE_BACKEND must be one of.*'fast'"):
        sl.compile(f, np.ones(2))


def test_inputs_pieces_give_the_gradient_of_x_and_refuse_a_bad_layout():
    # f takes the pieces of x (a scalar and a 2x2 matrix); the gradient is x's, the
    # closed form d/da [a * sum(M^2)] = sum(M^2), d/dM = 2 a M
    f = sl.compile(lambda p: p[0] * sl.sum(p[1] ** 2), inputs=[(0, 1, ()), (1, 5, (2, 2))])
    x = np.array([1.5, 0.3, -0.7, 2.0, 0.1])
    for point in (x, x[::-1].copy()):
        lp, g = f(point)
        M = point[1:].reshape(2, 2)
        assert lp == pytest.approx(point[0] * np.sum(M ** 2), rel=1e-15)
        np.testing.assert_allclose(g, np.r_[np.sum(M ** 2), 2 * point[0] * M.ravel()],
                                   rtol=1e-14)
    for bad, match in [([(0, 1, ()), (1, 4, (2, 2))], "does not hold its shape's 4"),
                       ([(2, 1, ())], "0 <= start <= stop"),
                       ([(0, 1)], "triples of integers, got \\(0, 1\\)"),
                       (["ab"], "triples of integers")]:
        with pytest.raises(sl.ArgumentError, match=match):
            sl.compile(lambda p: p[0], inputs=bad)
