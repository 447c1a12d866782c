"""One way to make a node, and the public two-phase node (autodiff/callback.py).

The hottest primitives inline make_node's stores: their nodes must be what
make_node makes (same slots, on the tape's list, scalars as floats). TwoPhase: the
gradient from the saved data against the closed form and central differences, the
node as a primitive record, and a retaped replay equal to the tape."""

import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff.callback import TwoPhase
from stanlite.autodiff.extend import node_record
from stanlite.autodiff.var import Var, make_node


def _like_make_node(n, tape):
    ref = make_node(n.value, tape, n.bp, n.x, n.y)
    tape.nodes.pop()                        # (the comparison node itself)
    assert type(n) is Var and n.tape is tape and n.adj is None
    assert type(n.value) is type(ref.value)
    assert n in tape.nodes


@pytest.mark.parametrize("build", [
    lambda x, y: sl.exp(x),                 # elementwise unary, float
    lambda x, y: x * y,                     # binary, both traced
    lambda x, y: x * 2.0,                   # binary, y constant
    lambda x, y: 2.0 / x,                   # binary, x constant
    lambda x, y: x / np.float64(3.0),       # a numpy scalar constant: a float value
])
def test_the_inlined_nodes_are_make_nodes(build):
    with sl.nested() as tape:
        x, y = Var(0.7), Var(1.3)
        _like_make_node(build(x, y), tape)


def test_var_indexing_node_is_a_make_node():
    with sl.nested() as tape:
        v = Var(np.array([1.0, 2.0, 3.0]))
        n = v[1]
        _like_make_node(n, tape)
        assert type(n.value) is float


# f(x) = sum(exp(x)) * a: the forward pass keeps exp(x), the backward reads it
@sl.primitive
def _sumexp(x, a):
    return float(np.sum(np.exp(x)) * a)


sl.defvjp(_sumexp, lambda g, ans, x, a: g * a * np.exp(x),
          lambda g, ans, x, a: g * np.sum(np.exp(x)))


def _backward(g, saved, parents, value, vals, kw):
    e, a = saved
    for i, p in parents:
        sl.accumulate(p, g * a * e if i == 0 else g * float(np.sum(e)))


_ROUTE = TwoPhase(_sumexp, _backward)


def sumexp(x, a):
    if type(x) is Var and type(x.value) is np.ndarray and type(a) is float:
        e = np.exp(x.value)
        return _ROUTE.record(x.tape, float(e.sum() * a), [x.value, a], ((0, x),), (e, a))
    if type(x) is Var and type(a) is Var and x.tape is a.tape:
        e = np.exp(x.value)
        return _ROUTE.record(x.tape, float(e.sum() * a.value), [x.value, a.value],
                             ((0, x), (1, a)), (e, a.value))
    return _ROUTE.general((x, a))


def test_two_phase_gradient_is_the_closed_form():
    x = np.array([0.1, -0.4, 0.8])
    g = sl.grad(lambda x: sumexp(x, 2.0))(x)
    np.testing.assert_array_equal(g, 2.0 * np.exp(x))
    sl.assert_grad(lambda z: sumexp(z[:3], z[3]), np.append(x, 1.5))


def test_two_phase_node_is_a_record_of_its_primitive():
    with sl.nested():
        x = Var(np.array([0.5, 1.0]))
        n = sumexp(x, 3.0)
        spec, args, kw = node_record(n)
        assert spec is _sumexp._spec and args[0] is x and args[1] == 3.0 and kw == {}
        assert spec.fun(x.value, 3.0) == n.value


def test_two_phase_other_modes_go_through_the_primitive():
    # a Hessian (forward over reverse) dispatches through the primitive's own rules
    H = sl.hessian(lambda x: sumexp(x, 1.0))(np.array([0.2, 0.3]))
    np.testing.assert_allclose(H, np.diag(np.exp([0.2, 0.3])), rtol=1e-12)


def test_two_phase_nodes_replay_under_compile():
    # generated Python (bit for bit with the tape): the node replays through its
    # primitive's record (forward function, then its VJP)
    def f(x):
        return sumexp(x, 2.0) + sl.sum(x * x)
    vg = sl.compile(f, np.array([0.3, 0.4]), backend="python")
    for x in (np.array([0.1, 0.2]), np.array([-1.0, 0.5])):
        v, g = vg(x)
        v0, g0 = sl.value_and_grad(f)(x)
        assert v == v0
        np.testing.assert_array_equal(g, g0)


def test_the_fused_densities_and_the_ode_node_use_no_private_ad_name():
    """They record their nodes with the public two-phase route (issue 23, point 2),
    not with the core's internals (``_bp_generic``, ``_tag``, ``_dispatch``...)."""
    import ast
    import pathlib
    root = pathlib.Path(sl.__file__).parent
    for rel in ("distributions/fused.py", "functor/ode.py"):
        tree = ast.parse((root / rel).read_text())
        private = [(node.module, a.name) for node in ast.walk(tree)
                   if isinstance(node, ast.ImportFrom) and "autodiff" in (node.module or "")
                   for a in node.names if a.name.startswith("_")]
        assert private == [], (rel, private)
