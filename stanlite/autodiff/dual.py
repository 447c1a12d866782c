"""Forward mode: dual numbers on a trace of their own, nesting with the reverse tape.

A :class:`Dual` carries a primal ``value`` and a ``tangent``. Either may be a float,
an array or a traced value of a lower level - in particular a reverse-mode ``Var``
(Stan's ``fvar<var>``) - and a dual may hold duals (``fvar<fvar>``). Every dual
belongs to a :class:`ForwardTrace`, whose ``level`` shares the numbering of the
reverse tapes: a primitive applied to traced arguments is handled by the trace of
the highest level, so each differentiation only sees its own perturbation (the
"tags" of Siskind & Pearlmutter; no perturbation confusion).

Vector mode: a trace may carry a batch shape ``B`` (``(k,)`` for k directions); then
every tangent has shape ``B + shape(value)``. A JVP rule receives tangents with the
batch axes leading and returns the output's tangent with the same leading axes.
Elementwise (broadcasting) primitives get their input tangents pre-expanded to the
output's rank, so their rules are just ``t * f'(x)``; every other rule indexes its
axes from the right (``axis=-1``) or offsets them by ``len(B)``.

A whole Hessian is then one forward-over-reverse sweep: seed ``x`` with the identity
as a d-wide batch of tangents, run a reverse gradient on the duals, read the
gradient's tangent.
"""

import numpy as np

from ..errors import DifferentiationError
from .extend import _call_ieee
from .tape import current_tape
from .var import Box, shape_of

__all__ = ["Dual", "ForwardTrace", "forward_scope", "is_identity_seed"]

# Seeds that are the identity matrix (the d-wide tangent of a Hessian or forward
# Jacobian), registered by id while their sweep runs. A JVP rule may use the
# structure: the tangent of ``X @ beta`` with ``beta`` seeded by the identity is
# ``X^T`` itself - a view, not an (N x d) @ (d x d) product. For a logistic
# regression that product is as many flops as the whole hand-written Hessian.
_IDENTITY_SEEDS = {}


def is_identity_seed(t):
    """True when ``t`` is the (2-D) identity seed of a running forward sweep."""
    return _IDENTITY_SEEDS.get(id(t)) is t


class identity_seed:
    """Register ``eye`` (a 2-D identity array) as an identity seed for a ``with`` block."""

    __slots__ = ("eye",)

    def __init__(self, eye):
        self.eye = eye

    def __enter__(self):
        _IDENTITY_SEEDS[id(self.eye)] = self.eye
        return self.eye

    def __exit__(self, *exc):
        _IDENTITY_SEEDS.pop(id(self.eye), None)
        return False


class ForwardTrace:
    """One forward-mode differentiation (a level and a batch shape)."""

    __slots__ = ("level", "batch", "open")

    def __init__(self, level, batch=()):
        self.level = level
        self.batch = tuple(batch)
        self.open = True

    def __repr__(self):
        return f"<ForwardTrace level={self.level} batch={self.batch}>"

    def apply(self, spec, wrapped, args, kw):
        """Apply primitive ``spec`` to ``args``, some of which are duals of this trace.

        The value is computed now; the tangent only when somebody reads it (see
        :class:`Dual`). Under forward-over-reverse most forward-pass tangents are
        never read - the reverse sweep needs the tangents of the values its VJPs
        use, and the gradient's - so a logistic regression's Hessian skips four
        of its seven passes over the (d x N) tangent arrays.
        """
        vals = list(args)
        duals = []
        for i, a in enumerate(args):
            if isinstance(a, Box) and a.tape is self:
                vals[i] = a.value
                duals.append((i, a))
        ans = wrapped(*vals, **kw)
        d = Dual(ans, None, self)
        d.pending = (spec, duals, vals, kw)
        return d

    def tangent_of(self, spec, tangents, ans, vals, kw):
        """The output tangent of ``spec`` at ``vals`` given the inputs' tangents."""
        out_shape = shape_of(ans)
        full = self.batch + out_shape
        nb = len(self.batch)
        if spec.jvp_all is not None:
            ts = [None] * len(vals)
            for i, t in tangents:
                ts[i] = _expand(t, nb, vals[i], out_shape) if spec.broadcasting else t
            return _fit(_call_ieee(spec.jvp_all, tuple(ts), ans, vals, kw), full)
        tan = None
        jvps = spec.jvps
        for i, t in tangents:
            rule = jvps[i] if i < len(jvps) else None
            if rule is None:
                vjps = spec.vjps
                if i in spec.nondiff or (i < len(vjps) and vjps[i] is None):
                    raise DifferentiationError(
                        f"argument {i} of '{spec.name}' is not differentiable "
                        "(it received a traced value)")
                raise DifferentiationError(
                    f"primitive '{spec.name}' has no JVP for argument {i}: forward "
                    "mode (and Hessians through it) needs one (sl.defjvp)")
            if spec.broadcasting:
                t = _expand(t, nb, vals[i], out_shape)
            c = _fit(_call_ieee(rule, t, ans, vals, kw), full)
            tan = c if tan is None else tan + c
        return tan


def _force(d):
    """Compute the pending tangent of ``d`` and of the pending duals it needs.

    Iterative (an explicit stack, inputs before outputs), so a chain of thousands of
    scalar operations does not hit Python's recursion limit.
    """
    stack = [d]
    while stack:
        top = stack[-1]
        p = top.pending
        if p is None:
            stack.pop()
            continue
        waiting = [a for _, a in p[1] if a.pending is not None]
        if waiting:
            stack.extend(waiting)
            continue
        spec, duals, vals, kw = p
        top._tangent = top.tape.tangent_of(spec, [(i, a._tangent) for i, a in duals],
                                           top.value, vals, kw)
        top.pending = None
        stack.pop()


def _expand(t, nb, x, out_shape):
    """Insert unit axes after the batch axes so ``t`` right-aligns with the output."""
    xs = shape_of(x)
    missing = len(out_shape) - len(xs)
    if missing <= 0:
        return t
    from .extend import reshape
    ts = shape_of(t)
    return reshape(t, ts[:nb] + (1,) * missing + ts[nb:])


def _fit(c, full):
    """Broadcast a tangent contribution up to ``batch + shape(output)``."""
    if shape_of(c) == full:
        return c
    from .extend import broadcast_to
    # rules of elementwise primitives see tangents expanded to the output's rank, so
    # their results right-align with batch + shape; other rules return it exactly
    return broadcast_to(c, full)


class Dual(Box):
    """A forward-mode value: ``value + tangent * eps`` on a :class:`ForwardTrace`.

    The attribute holding the trace is called ``tape`` as for ``Var``: dispatch only
    asks "which trace, which level".
    """

    __slots__ = ("value", "_tangent", "tape", "pending")

    def __init__(self, value, tangent, trace):
        self.value = value
        self._tangent = tangent
        self.tape = trace
        self.pending = None     # (spec, input duals, input values, kw) until read

    @property
    def tangent(self):
        if self.pending is not None:
            _force(self)
        return self._tangent

    def __repr__(self):
        return f"Dual({self.value!r}, {self.tangent!r}, level={self.tape.level})"


class forward_scope:
    """Open a forward trace one level above the innermost scope (class-based, cheap).

    The trace sits on the same per-thread stack as the reverse tapes, so a reverse
    scope opened inside it (forward-over-reverse) gets a higher level, and one opened
    outside it (reverse-over-forward) a lower one.
    """

    __slots__ = ("batch", "trace")

    def __init__(self, batch=()):
        self.batch = tuple(batch)

    def __enter__(self):
        from .tape import _state, root_tape
        stack = _state.stack
        if not stack:
            root_tape()
        self.trace = ForwardTrace(stack[-1].level + 1, self.batch)
        stack.append(self.trace)
        return self.trace

    def __exit__(self, *exc):
        from .tape import pop_scope
        pop_scope(self.trace)
        return False
