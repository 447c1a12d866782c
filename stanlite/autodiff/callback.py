"""A primitive's node in two phases: forward with saved values, backward from them.

Most primitives need nothing between their two passes but their arguments and value
(:func:`~stanlite.autodiff.extend.defvjp`: ``vjp(g, ans, *args)``). A heavy one
computes, in its forward pass, exactly what its backward pass needs - a log density
its partial derivatives (Stan's operands-and-partials), an ODE solve its
sensitivities - and should not compute them twice. Stan writes such a node with
``reverse_pass_callback``: the forward pass runs eagerly, keeps what it needs in the
arena, and registers a callback that the reverse sweep runs. :class:`TwoPhase` is
that for stanlite, for a primitive ``f`` with arguments ``x_1..x_n``:

* forward (the caller's code): ``value = f(x)`` and ``saved`` (any object), then
  ``route.record(tape, value, vals, parents, saved)`` puts one node on the tape;
* backward (``backward(g, saved, parents, value, vals, kw)``, run by the sweep with
  the node's adjoint ``g = dL/df``): adds ``g * df/dx_i`` into each traced parent's
  adjoint (``accumulate``), from ``saved`` alone, as Stan's callback writes
  ``x.adj() += ...``.

The node is a record of the primitive ``f`` (:func:`~stanlite.autodiff.extend.node_record`
gives ``(f, args, kw)``): a retaped replay (``sl.compile``) re-runs the primitive's own
rules on new values, and so do the other modes (forward mode, derivatives of
derivatives), which need the rules of ``f`` itself (``defvjp_all``/``defjvp_all``):
the two phases are the first-order route, the one a gradient takes.

The node keeps ``(primitive, vals, kw, parents)`` and ``saved``, so a reader of a
tape finds the same record in every two-phase node.

Example: ``f(x) = sum(exp(x))``, whose gradient is the ``exp(x)`` the forward pass
has already computed (``df/dx_i = exp(x_i)``):

>>> import numpy as np, stanlite as sl
>>> from stanlite.autodiff.callback import TwoPhase
>>> @sl.primitive
... def sumexp(x):
...     return float(np.sum(np.exp(x)))
>>> _ = sl.defvjp(sumexp, lambda g, ans, x: g * np.exp(x))    # the other modes' rule
>>> def backward(g, saved, parents, value, vals, kw):
...     for i, p in parents:
...         sl.accumulate(p, g * saved)                   # saved = exp(x)
>>> route = TwoPhase(sumexp, backward)
>>> def fast_sumexp(x):
...     if type(x) is sl.Var and type(x.value) is np.ndarray:   # first order
...         e = np.exp(x.value)                                 # forward, kept
...         return route.record(x.tape, float(e.sum()), [x.value], ((0, x),), e)
...     return sumexp(x)
>>> sl.grad(fast_sumexp)(np.array([0.0, 1.0]))
array([1.        , 2.71828183])
"""

from .extend import Primitive, _dispatch, _tag, spec_of
from .var import make_node

__all__ = ["TwoPhase"]

_NO_KW = {}     # the keywords of a node recorded without any (never written)


class TwoPhase:
    """The first-order two-phase route of primitive ``prim`` (see the module doc).

    ``prim`` is a primitive (made with :func:`~stanlite.primitive`, or a
    :class:`~stanlite.autodiff.extend.Primitive`); ``backward(g, saved, parents,
    value, vals, kw)`` adds the contributions of the node's adjoint ``g`` into the
    adjoints of ``parents`` (``(position, Var)`` pairs) from what the forward pass
    ``saved``; ``value``, ``vals`` (the plain argument values) and ``kw`` are there
    for rules that need them.
    """

    __slots__ = ("spec", "backward", "rule")

    def __init__(self, prim, backward):
        spec = prim if isinstance(prim, Primitive) else spec_of(prim)
        self.spec = spec
        self.backward = backward

        def rule(node, g):
            _, vals, kw, parents = node.x
            backward(g, node.y, parents, node.value, vals, kw)

        rule.__name__ = rule.__qualname__ = f"two_phase_{spec.name}"
        _tag(rule, spec, _args_of, "generic")
        rule._bcast = False             # the adjoint comes as the rule gets it
        rule._two_phase = True          # node.x is a primitive record (node_record)
        self.rule = rule

    def record(self, tape, value, vals, parents, saved, kw=None):
        """One node of the primitive on ``tape``: its ``value`` (computed by the
        caller's forward pass), the plain values ``vals`` of all its arguments (a
        list, traced ones replaced by their values), the traced ``parents`` as
        ``(position, Var)`` pairs of ``tape``, what the backward pass needs
        (``saved``) and the primitive's keyword arguments ``kw``."""
        return make_node(value, tape, self.rule,
                         (self.spec, vals, _NO_KW if kw is None else kw, parents), saved)

    def general(self, args, kw=None):
        """The primitive on ``args`` in any other mode (traced values of several
        levels or tapes, forward-mode duals): dispatched level by level through its
        own rules (``defvjp_all``/``defjvp_all``), as any primitive is."""
        spec = self.spec
        return _dispatch(spec, spec.wrapped, args, {} if kw is None else kw)

    def __repr__(self):
        return f"TwoPhase({self.spec.name})"


def _args_of(node):
    """The arguments a two-phase node was recorded with (parents where traced)."""
    _, vals, _, parents = node.x
    args = list(vals)
    for i, p in parents:
        args[i] = p
    return tuple(args)
