"""One derivative per elementwise unary primitive, every backend made from it
(autodiff/derivative.py, extend.unary_primitive, vm/generate.py).

Each declared primitive's derivative - the differentiable rule, the plain-float rule,
the Python replay's templates and the interpreter's generated numba code - equals
central finite differences at random points of its domain and equals the others; the
checked-in vm/unary_generated.py is exactly what the declarations generate; and the
interpreter's digamma is accurate to ~1e-15.
"""

import math
import pathlib
import sys

import numpy as np
import pytest
import scipy.special as sps

import stanlite as sl
from stanlite.math import special
import stanlite.autodiff.compile  # noqa: F401  (the module; sl.compile is the function)
from stanlite.autodiff import derivative
from stanlite.autodiff.extend import unary_primitive
from stanlite.autodiff.vm import generate, kernel, opcodes, scalar, unary_generated as U
from testkit import fake_cached_dispatcher

C = sys.modules["stanlite.autodiff.compile"]

# where each declared primitive is smooth: intervals to draw points from
DOMAINS = {
    "negative": [(-5, 5)], "exp": [(-5, 5)], "log": [(0.1, 10)], "log2": [(0.1, 10)],
    "log10": [(0.1, 10)], "log1p": [(-0.9, 5)], "expm1": [(-5, 5)], "log1m": [(-5, 0.9)],
    "sqrt": [(0.1, 10)], "square": [(-5, 5)], "cbrt": [(-5, -0.1), (0.1, 5)],
    "inv": [(-5, -0.2), (0.2, 5)], "inv_sqrt": [(0.1, 10)],
    "inv_square": [(-5, -0.2), (0.2, 5)], "sin": [(-5, 5)], "cos": [(-5, 5)],
    "tan": [(-1.4, 1.4)], "asin": [(-0.9, 0.9)], "acos": [(-0.9, 0.9)], "atan": [(-5, 5)],
    "sinh": [(-3, 3)], "cosh": [(-3, 3)], "tanh": [(-3, 3)], "asinh": [(-5, 5)],
    "acosh": [(1.1, 10)], "atanh": [(-0.9, 0.9)], "logit": [(0.05, 0.95)],
    "inv_logit": [(-10, 10)], "log_inv_logit": [(-10, 10)],
    "log1m_inv_logit": [(-10, 10)], "log1p_exp": [(-10, 10)],
    "log1m_exp": [(-5, -0.05)], "sign": [(-5, -0.1), (0.1, 5)],
    "fabs": [(-5, -0.1), (0.1, 5)], "lgamma": [(0.1, 10), (-2.9, -2.1)],
    "erf": [(-3, 3)], "erfc": [(-3, 3)], "Phi": [(-5, 5)],
    "lambert_w0": [(-0.35, 0.5), (0.5, 50)], "lambert_wm1": [(-0.36, -0.01)],
}

DECLARED = derivative.declared()
NAMES = sorted(DECLARED)


def _points(name, rng, n=6):
    out = []
    for lo, hi in DOMAINS[name]:
        out += list(rng.uniform(lo, hi, n))
    return out


def _rule(name):
    return DECLARED[name]._spec.derivative


def test_every_declared_primitive_has_a_domain_here():
    # a new declaration is tested as soon as it is added (give it its domain above)
    assert set(DOMAINS) == set(DECLARED)


def test_every_unary_op_of_the_interpreter_is_declared_once():
    ops = {v for k, v in vars(opcodes).items() if k.isupper() and type(v) is int
           and (10 <= v < 40 or 140 <= v < 160)}
    declared = [r.op for r in derivative._DECLARED if r.op is not None and r.prim is not None]
    assert sorted(declared) == sorted(ops)


def test_the_generated_file_is_what_the_declarations_generate():
    # regenerate with: python -m stanlite.autodiff.vm.generate
    with open(generate.TARGET, encoding="utf-8", newline="") as f:
        assert f.read() == generate.source()


@pytest.mark.parametrize("name", NAMES)
def test_the_rule_equals_central_differences(name, rng):
    prim = DECLARED[name]
    rule = _rule(name).rule
    for x in _points(name, rng):
        h = 1e-6 * max(1.0, abs(x))
        fd = (float(prim(x + h)) - float(prim(x - h))) / (2.0 * h)
        d = float(rule(1.0, float(prim(x)), x))
        assert d == pytest.approx(fd, rel=1e-6, abs=1e-8), (name, x)


@pytest.mark.parametrize("name", NAMES)
def test_every_backend_computes_the_rule(name, rng):
    prim = DECLARED[name]
    r = _rule(name)
    spec = prim._spec
    xs = np.array(_points(name, rng))
    g = rng.uniform(-2.0, 2.0, xs.size)
    ans = prim(xs)
    ref = spec.vjps[0](g, ans, xs)                 # the rule on arrays (the tape's path)
    for i, x in enumerate(xs):
        a = float(ans[i])
        expect = float(ref[i])
        # the tape's float path: the plain-float rule
        assert spec.scalar_vjp(float(g[i]), a, float(x)) == pytest.approx(expect, rel=1e-14)
        # the JVP is the same rule, applied to a tangent
        assert spec.jvps[0](float(g[i]), a, float(x)) == pytest.approx(expect, rel=1e-14)
        if r.op is not None:
            # the interpreter's generated value and VJP
            assert U.unary(r.op, float(x)) == pytest.approx(a, rel=1e-14), (name, x)
            assert U.unary_vjp(r.op, float(g[i]), float(x), a) == \
                pytest.approx(expect, rel=1e-13, abs=1e-300), (name, x)


@pytest.mark.parametrize("name", [n for n in NAMES if DECLARED[n]._spec.inline])
def test_the_replay_templates_compute_the_tapes_two_paths_bit_for_bit(name, rng):
    spec = DECLARED[name]._spec
    inl = spec.inline
    ns = dict(inl.helpers())
    xs = np.array(_points(name, rng))
    ans = spec.fun(xs)
    g = rng.uniform(-2.0, 2.0, xs.size)
    ns.update(g=g, ans=ans, x=xs)
    arr = eval(inl.vjp_array.format(g="g", ans="ans", x="x"), ns)
    assert np.array_equal(arr, spec.vjps[0](g, ans, xs))
    for i in range(xs.size):
        ns.update(g=float(g[i]), ans=float(ans[i]), x=float(xs[i]))
        fl = eval(inl.vjp_float.format(g="g", ans="ans", x="x"), ns)
        assert fl == spec.scalar_vjp(float(g[i]), float(ans[i]), float(xs[i]))
        if inl.fwd:
            assert eval(inl.fwd.format(x="x"), ns) == spec.scalar(float(xs[i]))


@pytest.mark.parametrize("name", [n for n in NAMES if DECLARED[n]._spec.inline])
def test_the_python_replay_equals_the_tape_bit_for_bit_in_the_domain(name, rng,
                                                                      monkeypatch):
    monkeypatch.setenv("STANLITE_BACKEND", "python")
    prim = DECLARED[name]

    def f(x):
        return sl.sum(prim(x) * x) + prim(x[0]) * x[1] - prim(x[2])

    pts = [np.array(_points(name, rng, 4)[:4]) for _ in range(4)]
    vg = sl.compile(f, pts[0])
    for x in pts:
        r, e = vg(x), sl.value_and_grad(f)(x)
        assert C._identical(r, e), (name, x, r, e)
    assert vg.fallback is None, vg.fallback
    # written out from the templates: neither rule is called by the replay
    called = [v for progs in vg._programs.values() for p in progs
              for v in (p.fn.__kwdefaults__ or {}).values()]
    assert prim._spec.vjps[0] not in called and prim._spec.scalar_vjp not in called


@pytest.mark.parametrize("name", NAMES)
def test_the_rule_differentiates_again(name, rng):
    # the rule is written with stanlite's own functions: second derivatives (Hessians)
    # are the derivative of the first, by central differences
    prim = DECLARED[name]
    d1 = sl.grad(prim)
    d2 = sl.grad(sl.grad(prim))
    for x in _points(name, rng, 3):
        h = 1e-5 * max(1.0, abs(x))
        fd = (float(d1(x + h)) - float(d1(x - h))) / (2.0 * h)
        assert float(d2(x)) == pytest.approx(fd, rel=1e-5, abs=1e-7), (name, x)


def test_the_interpreters_lambert_w_is_the_tapes_near_the_branch_point():
    # Halley's iteration (vm/scalar.py) against scipy's lambertw and the branch-point
    # series of math/special.py, on both sides of the series' threshold
    q = np.concatenate([10.0 ** np.linspace(-14, -0.2, 200), [0.0]])
    xs = (q - 1.0) / math.e
    for branch, op in ((0, opcodes.LAMBERT_W0), (-1, opcodes.LAMBERT_WM1)):
        want = special._lambert_w_raw(xs, branch)
        got = np.array([U.unary(op, float(x)) for x in xs])
        np.testing.assert_allclose(got, want, rtol=1e-12)
    big = 10.0 ** np.linspace(-300, 300, 61)
    small = -(10.0 ** np.linspace(-300, -0.5, 61))
    with np.errstate(over="ignore"):        # (the tape's series, computed and unused)
        want0, want1 = special._lambert_w_raw(big, 0), special._lambert_w_raw(small, -1)
    np.testing.assert_allclose([U.unary(opcodes.LAMBERT_W0, float(x)) for x in big],
                               want0, rtol=1e-14)
    np.testing.assert_allclose([U.unary(opcodes.LAMBERT_WM1, float(x)) for x in small],
                               want1, rtol=1e-14)
    # outside the domains: NaN (the interpreter hands the point to the tape), -inf at 0-
    assert math.isnan(U.unary(opcodes.LAMBERT_W0, -0.5))
    assert math.isnan(U.unary(opcodes.LAMBERT_WM1, 0.5))
    assert U.unary(opcodes.LAMBERT_WM1, 0.0) == -math.inf


def test_lambert_w_runs_in_the_interpreter(rng):
    if not kernel.available():
        pytest.skip("the compiled interpreter needs numba")

    def f(x):
        return sl.sum(sl.lambert_w0(x) * x) + sl.lambert_wm1(-0.2 - 0.1 * sl.exp(-x[0]))

    x0 = rng.uniform(0.1, 3.0, 4)
    vg = sl.compile(f, x0)
    for x in [x0] + [rng.uniform(0.1, 3.0, 4) for _ in range(3)]:
        v, gr = vg(x)
        ve, ge = sl.value_and_grad(f)(x)
        assert v == pytest.approx(ve, rel=1e-13)
        np.testing.assert_allclose(gr, ge, rtol=1e-12)
    assert vg.compiled, vg.vm_skipped


def test_the_interpreter_runs_the_generated_ops(rng):
    if not kernel.available():
        pytest.skip("the compiled interpreter needs numba")

    def f(x):
        return sl.sum(sl.inv_logit(x) + sl.log1p_exp(x) * sl.sin(x) + sl.lgamma(sl.exp(x))
                      + sl.fabs(x) * sl.Phi(x) + sl.atan(x) / sl.cosh(x))

    x0 = rng.uniform(-2.0, 2.0, 5)
    vg = sl.compile(f, x0)
    for x in [x0] + [rng.uniform(-2.0, 2.0, 5) for _ in range(3)]:
        v, gr = vg(x)
        ve, ge = sl.value_and_grad(f)(x)
        assert v == pytest.approx(ve, rel=1e-13)
        np.testing.assert_allclose(gr, ge, rtol=1e-12)


# ---- declarations ----------------------------------------------------------------------
def test_a_users_primitive_gets_every_backend_from_one_expression(rng, monkeypatch):
    monkeypatch.setenv("STANLITE_BACKEND", "python")
    softplus = unary_primitive("my_softplus2", lambda x: np.logaddexp(0.0, x),
                               "g * inv_logit(x)", lambda v: float(np.logaddexp(0.0, v)),
                               names={}, safe=True, inline=True)
    # "inv_logit" is found in stanlite.math
    assert float(sl.grad(softplus)(0.3)) == pytest.approx(float(sl.inv_logit(0.3)))
    f = lambda x: softplus(x[0]) * x[1] + sl.sum(softplus(x))    # noqa: E731
    vg = sl.compile(f, np.array([0.3, -0.4]))
    for x in [rng.standard_normal(2) for _ in range(3)]:
        assert C._identical(vg(x), sl.value_and_grad(f)(x))
    assert "_f_inv_logit(" in vg.source and "_a_inv_logit(" in vg.source


@pytest.mark.parametrize("d, match", [
    ("g * g", "linear in g"), ("cos(g)", "linear in g"), ("ans * x", "linear in g"),
    ("g * _NOPE", "'_NOPE'"), ("g if x else ans", "not IfExp"),
    ("g * math.cos(x)", "plain name"), ("g *", "not an expression"),
])
def test_a_malformed_derivative_is_refused_at_its_declaration(d, match):
    with pytest.raises(ValueError, match=match):
        unary_primitive("bad", np.exp, d, math.exp, names={})


def test_a_derivative_calling_an_unknown_function_names_it():
    p = unary_primitive("bad2", np.exp, "g * no_such_fn(x)", math.exp, names={})
    with pytest.raises(NameError, match="'no_such_fn'"):
        sl.grad(p)(0.5)


def test_drop_stale_cache_sees_a_change_of_the_generated_file(tmp_path, monkeypatch):
    if not kernel.available():
        pytest.skip("numba's cache needs numba")
    d, flushed = fake_cached_dispatcher(tmp_path)

    kernel.drop_stale_cache(d, "t")
    kernel.drop_stale_cache(d, "t")
    assert len(flushed) == 1                        # stamped, then unchanged
    changed = tmp_path / "unary_generated.py"
    changed.write_text(pathlib.Path(U.__file__).read_text() + "\n# edited\n")
    monkeypatch.setattr(U, "__file__", str(changed))
    kernel.drop_stale_cache(d, "t")
    assert len(flushed) == 2


# ---- the interpreter's digamma ------------------------------------------------------------
def _digamma_points(rng):
    return np.concatenate([
        rng.uniform(1e-8, 1.0, 400), rng.uniform(1.0, 20.0, 800),
        10.0 ** rng.uniform(-300, 300, 400), np.array([1e-300, 0.5, 1.0, 9.999, 10.0]),
    ])


def test_the_interpreters_digamma_is_accurate_for_positive_x(rng):
    xs = _digamma_points(rng)
    ref = sps.digamma(xs)
    got = np.array([scalar._digamma(float(x)) for x in xs])
    # relative, absolute (1e-15) where psi is near its zero at x = 1.4616...
    err = np.abs(got - ref) / np.maximum(np.abs(ref), 1.0)
    assert err.max() <= 2e-15, (xs[np.argmax(err)], err.max())


def test_the_interpreters_digamma_is_accurate_for_negative_non_integer_x(rng):
    mp = pytest.importorskip("mpmath")
    xs = np.concatenate([rng.uniform(-30.0, 0.0, 60), -10.0 ** rng.uniform(-3, 6, 40),
                         np.array([-0.5, -2.3, -9.999031231915126, -1e-8,
                                   -0.0025197643872085533, -0.49999999999999994,
                                   -3.5000000000000004])])
    mp.mp.dps = 30
    for x in xs:
        ref = float(mp.digamma(mp.mpf(float(x))))
        got = scalar._digamma(float(x))
        # psi(1 - x) - pi / tan(pi x): the error is the terms' rounding, ~1e-16 of
        # their size (log(1 + |x|), or |psi| near a pole)
        scale = max(abs(ref), 1.0, math.log1p(abs(x)))
        assert abs(got - ref) <= 2e-15 * scale, (x, got, ref)
        assert got == pytest.approx(float(sps.digamma(x)), rel=1e-11, abs=1e-13)


def test_the_interpreters_digamma_at_its_poles_and_limits_is_scipys():
    # (every float below -2^52 is an integer: a pole; past -2^63 numba's floor, an
    # int64, overflowed and gave finite numbers there)
    for x in (0.0, -0.0, -1.0, -7.0, math.inf, -math.inf, math.nan, -2.0 ** 53, -1e20,
              -2.0 ** 63, -1e300, -1.7e308):
        want = float(sps.digamma(x))
        got = scalar._digamma(x)
        assert (got == want) or (math.isnan(got) and math.isnan(want)), (x, got, want)
