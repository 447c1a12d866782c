"""The Python replay (autodiff/codegen.py) writes rules inline from what each
primitive declares beside its definition (extend.definline), never from its name."""

import math
import sys
import warnings

import numpy as np
import pytest

import stanlite as sl
import stanlite.autodiff.compile  # noqa: F401  (the module; sl.compile is the function)
from stanlite.autodiff import derivative
from stanlite.autodiff.derivative import BinaryRule
from stanlite.autodiff.extend import binary_primitive, definline, elementwise_unary
from stanlite.math import arithmetic, elementwise, linalg

C = sys.modules["stanlite.autodiff.compile"]


@pytest.fixture(autouse=True)
def python_replay(monkeypatch):
    # the generated-Python backend, not the compiled interpreter
    monkeypatch.setenv("STANLITE_BACKEND", "python")


def _replay(f, x0, points):
    """Compile ``f`` for the Python replay; every point equals the tape bit for bit.
    Returns the constants the generated functions were given (the rules they call)."""
    vg = sl.compile(f, x0)
    for x in points:
        r, e = vg(x), sl.value_and_grad(f)(x)
        assert C._identical(r, e), (x, r, e)
    assert vg.fallback is None, vg.fallback
    called = []
    for progs in vg._programs.values():
        for p in progs:
            called += list((p.fn.__kwdefaults__ or {}).values())
    return vg, called


def _declared():
    """Every library primitive that declares an inline template."""
    out = {}
    for mod in (arithmetic, elementwise, linalg):
        for name, f in vars(mod).items():
            spec = getattr(f, "_spec", None)
            inl = getattr(spec, "inline", None)
            if inl is not None and (inl.fwd or inl.vjp_float or inl.vjp_array) \
                    and not isinstance(spec.derivative, BinaryRule):
                out[spec.name] = f
    return out


DECLARED = _declared()


def test_the_hottest_rules_are_declared_beside_their_primitives():
    assert {"exp", "log", "inv_logit", "log1p_exp", "negative", "square", "sin"} \
        <= set(DECLARED)
    kinds = {f._spec.name: f._spec.inline.kind for f in
             (arithmetic.add, arithmetic.subtract, arithmetic.multiply, arithmetic.divide,
              arithmetic.power, linalg.matmul, sl.reshape)}
    # (+ - * declare their form instead, and a quotient and a power are written from
    # their declared derivatives: tests/autodiff/test_vm_generated_binary.py)
    assert kinds == {"add": None, "subtract": None, "multiply": None,
                     "divide": None, "power": None, "matmul": "matmul",
                     "reshape": "reshape"}
    forms = {f._spec.name: f._spec.derivative.form for f in
             (arithmetic.add, arithmetic.subtract, arithmetic.multiply, arithmetic.divide)}
    assert forms == {"add": ("linear", (1, 1)), "subtract": ("linear", (1, -1)),
                     "multiply": ("bilinear", None), "divide": None}


def test_a_declared_form_is_checked_against_the_derivatives(registry):
    # the form is a lowering hint: it may not say something the derivatives do not
    with pytest.raises(ValueError, match="linear"):
        binary_primitive("bad_add", np.add, "g", "2.0 * g", names={}, form="linear")
    with pytest.raises(ValueError, match="bilinear"):
        binary_primitive("bad_mul", np.multiply, "g * x", "g * y", names={},
                         form="bilinear")
    with pytest.raises(ValueError, match="form must be"):
        binary_primitive("bad_form", np.add, "g", "g", names={}, form="affine")


@pytest.fixture
def registry():
    """The declarations made by a test leave the registry as it was (the generated
    interpreter code and its tests cover the library's own)."""
    before = list(derivative._DECLARED_BINARY)
    yield
    derivative._DECLARED_BINARY[:] = before


def test_a_linear_form_with_a_negative_first_sign(rng, registry):
    # y - x, declared linear with signs (-1, +1): the tape's and the replay's fast
    # rules of the form carry the first argument's sign too
    _rsub = binary_primitive("test_rsub", lambda x, y: np.subtract(y, x), "-g", "g",
                             names={}, op=lambda x, y: y - x, safe=True, form="linear")
    assert _rsub._spec.derivative.form == ("linear", (-1, 1))

    def f(x):
        a = _rsub(x[0], x[1]) * x[2]            # both traced, floats
        b = _rsub(x[:2], 3.0)                   # x traced, arrays
        c = _rsub(2.0, x[3])                    # y traced
        d = _rsub(x, x[::-1])                   # arrays, both traced
        return a + sl.sum(b * b) + c * c + sl.sum(sl.exp(d))

    x0 = rng.uniform(0.2, 0.9, 4)
    _replay(f, x0, [rng.uniform(0.2, 0.9, 4) for _ in range(3)])
    x = rng.uniform(0.2, 0.9, 4)
    _, gr = sl.value_and_grad(f)(x)
    h = 1e-6
    fd = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(4)]
    np.testing.assert_allclose(gr, fd, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_a_declared_template_replays_the_tape_bit_for_bit(name, rng):
    prim = DECLARED[name]
    spec = prim._spec

    def f(x):
        return sl.sum(prim(x) * x) + prim(x[0]) * x[1] - prim(x[2])

    x0 = rng.uniform(0.2, 0.9, 4)
    vg, called = _replay(f, x0, [rng.uniform(0.2, 0.9, 4) for _ in range(3)])
    # the templates are written out: neither VJP is called by the replay
    if spec.inline.vjp_array:
        assert spec.vjps[0] not in called, vg.source
    if spec.inline.vjp_float:
        assert spec.scalar_vjp not in called, vg.source
    if spec.inline.fwd:
        assert spec.scalar not in called, vg.source        # (arrays: spec.fun)


def _softplus(name, helper):
    """A user's elementwise softplus whose VJP calls ``helper`` (the logistic)."""
    def raw(x):
        return np.logaddexp(0.0, x)

    def scalar(v):
        return float(np.logaddexp(0.0, v))

    def vjp(g, ans, x):
        return g * elementwise.inv_logit(x)

    def svjp(g, ans, x):
        return g * helper(x)
    return elementwise_unary(name, raw, vjp, scalar=scalar, scalar_vjp=svjp)


def _logistic(v):
    return elementwise._inv_logit_s(v)


def test_a_user_primitive_declares_its_template_and_its_helpers(rng):
    sp = _softplus("my_softplus", _logistic)
    definline(sp, vjp_float="{g} * _my_logistic({x})",
              helpers={"_my_logistic": _logistic})
    f = lambda x: sp(x[0]) * x[1] + sp(x[1] - x[0])
    vg, called = _replay(f, np.array([0.3, -0.4]),
                         [rng.standard_normal(2) for _ in range(3)])
    assert "_my_logistic(" in vg.source
    assert sp._spec.scalar_vjp not in called


def test_a_helper_name_taken_by_another_function_falls_back_to_calling_the_rule(rng):
    a = _softplus("softplus_a", _logistic)
    b = _softplus("softplus_b", lambda v: _logistic(v))
    definline(a, vjp_float="{g} * _lgst({x})", helpers={"_lgst": _logistic})
    definline(b, vjp_float="{g} * _lgst({x})", helpers={"_lgst": lambda v: _logistic(v)})
    f = lambda x: a(x[0]) * b(x[1]) + b(x[0] * x[1])
    vg, called = _replay(f, np.array([0.3, -0.4]),
                         [rng.standard_normal(2) for _ in range(3)])
    # the first template written takes the name; the other rule is called, never
    # written with a helper that is not its own
    assert (a._spec.scalar_vjp in called) != (b._spec.scalar_vjp in called)


def test_definline_helper_names_cannot_collide_with_the_generated_constants():
    sp = _softplus("softplus_c", _logistic)
    with pytest.raises(ValueError, match="'lgst' must start with '_'"):
        definline(sp, vjp_float="{g} * lgst({x})", helpers={"lgst": math.exp})


def test_a_primitive_named_like_a_library_one_is_not_replayed_as_it(rng):
    # a user's "divide" is x / y + 1: the replay calls it, never writes x / y
    @sl.primitive(name="divide")
    def divide(x, y):
        return np.true_divide(x, y) + 1.0

    sl.defvjp(divide, lambda g, ans, x, y: g / y, lambda g, ans, x, y: -g * x / (y * y))
    f = lambda x: divide(x[0], x[1]) * x[0] + sl.sum(divide(x, 2.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _replay(f, np.array([0.3, 1.4]), [rng.uniform(0.5, 2.0, 2) for _ in range(3)])


def test_matmul_replays_its_declared_rank_templates_bit_for_bit(rng):
    # vector/matrix products of every rank pair, both traced and one constant: the
    # replay writes the templates matmul declares beside its rules (vjp_shaped), and
    # calls neither VJP
    M = rng.standard_normal((3, 3))
    v = rng.standard_normal(3)

    def f(x):
        a, A = x[:3], sl.reshape(x[3:], (3, 3))
        return (a @ x[6:9] + sl.sum((A @ a) * v) + sl.sum((a @ A) * v)
                + sl.sum((A @ A) * M) + sl.sum((M @ a) * a) + sl.sum((A @ M) * M)
                + sl.sum((v @ A) * a))

    x0 = rng.standard_normal(12)
    vg, called = _replay(f, x0, [rng.standard_normal(12) for _ in range(3)])
    spec = linalg.matmul._spec
    assert not any(r is c for r in spec.vjps for c in called), vg.source
    assert spec.inline.vjp_shaped(0, (2, 3, 3), (3,), (2, 3)) is None     # stacks: the rule
