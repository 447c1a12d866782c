"""Defining primitives: a function plus its derivative rules, side by side.

This module is all a user needs to add a differentiable operation, and it is what
stanlite's own math library is built with::

    import numpy as np, stanlite as sl

    @sl.primitive
    def softplus(x):
        return np.logaddexp(0.0, x)

    # one VJP per argument: (g, ans, *args) -> contribution to that argument's adjoint
    sl.defvjp(softplus, lambda g, ans, x: g * sl.inv_logit(x))

    sl.grad(lambda x: sl.sum(softplus(x)))(np.array([0.0, 1.0]))  # = inv_logit(x)

Rules
-----
* A VJP receives the output adjoint ``g``, the primal output ``ans`` and the primal
  inputs, and returns the contribution to one input's adjoint. It may return it at
  the *broadcast* shape: the sum back to the input's shape happens once, here, in
  :func:`accumulate`.
* VJPs must be written with stanlite operations (operators, ``sl.*`` functions). On
  plain arrays those are plain numpy calls (the first-order fast path); under an
  outer differentiation the inputs are themselves traced values, so the backward
  sweep is recorded (reverse-over-reverse) - that is how higher derivatives nest.
* ``None`` in place of a VJP marks a non-differentiable argument (an index, an axis):
  passing a traced value there raises instead of silently dropping a derivative.

Dispatch: a primitive called with traced arguments finds the one of highest level,
replaces the arguments traced at that level by their values, calls itself again on
those (which records the lower levels, if any) and records one node at that level.
"""

import functools
from typing import Callable, NamedTuple, Optional

import numpy as np

from ..errors import DifferentiationError
from .var import Box, Var, make_node, shape_of
from .derivative import BinaryRule, UnaryRule
from .vm.program import (binary as _lower_binary, deflower, movement, sum_to_shape_rule,
                         unary as _lower_unary)

__all__ = ["primitive", "defvjp", "defvjp_all", "defjvp", "Primitive", "accumulate",
           "sum_to_shape", "broadcast_to", "elementwise_unary", "elementwise_binary",
           "spec_of", "node_record", "defjvp_all", "reshape", "batch_shape", "definline",
           "Inline", "unary_primitive", "binary_primitive", "ieee_jvp"]


class Primitive:
    """The derivative rules of one primitive (kept on the wrapped function as ``_spec``)."""

    __slots__ = ("name", "fun", "vjps", "vjp_all", "jvps", "jvp_all", "wrapped",
                 "broadcasting", "nondiff", "scalar", "scalar_vjp", "op", "kernel",
                 "check", "plain", "lower", "inline", "derivative")

    def __init__(self, name, fun, broadcasting=False):
        # the implementations the fast paths use, for tools that replay a tape
        # (compile.py): the float function and VJP of an elementwise primitive, its
        # operator, and a fused density's kernel and argument check (fused.py);
        # ``plain``: the value alone, for a node whose ``fun`` also prepares its reverse
        # pass (a super node's sensitivities) - what a value-only replay calls
        self.plain = None
        # how it lowers to the compiled interpreter (autodiff/vm/program.py: deflower)
        self.lower = None
        # how the Python replay writes it in place of a call (definline)
        self.inline = None
        # the one declaration its derivatives are made from (unary_primitive,
        # binary_primitive)
        self.derivative = None
        self.scalar = None
        self.scalar_vjp = None
        self.op = None
        self.kernel = None
        self.check = None
        # broadcasting: elementwise in its arguments (numpy broadcasting rules), so
        # forward mode may expand input tangents to the output's rank (dual.py)
        self.broadcasting = broadcasting
        self.nondiff = ()
        self.name = name
        self.fun = fun
        self.vjps = ()
        self.vjp_all = None
        self.jvps = ()
        self.jvp_all = None
        self.wrapped = None

    def __repr__(self):
        return f"<primitive {self.name}>"

    def check_differentiable(self, i):
        if self.vjp_all is not None:
            if i in self.nondiff:
                raise DifferentiationError(
                    f"argument {i} of '{self.name}' is not differentiable "
                    f"(it received a traced value)")
            return
        if i >= len(self.vjps) or self.vjps[i] is None:
            if not self.vjps:
                raise DifferentiationError(
                    f"primitive '{self.name}' has no VJP: define one with sl.defvjp")
            raise DifferentiationError(
                f"argument {i} of '{self.name}' is not differentiable "
                f"(it received a traced value)")


def spec_of(f):
    spec = getattr(f, "_spec", None)
    if spec is None:
        raise TypeError(f"{getattr(f, '__name__', f)!r} is not a stanlite primitive "
                        "(decorate it with @sl.primitive)")
    return spec


# --------------------------------------------------------------------------------------
# accumulation: the single place where broadcasting is undone
# --------------------------------------------------------------------------------------
def accumulate(p, c, fresh=False):
    """Add contribution ``c`` into ``p.adj``, first summing it back to ``p``'s shape.

    ``fresh=True`` promises that ``c`` is a new array referenced by nobody else (a
    product just computed by the caller): it may then become the adjoint buffer and
    take later contributions in place.

    A plain-float contribution to an array node whose backward rule is elementwise
    stays a float (a lazily broadcast adjoint): that rule broadcasts it anyway, so
    materialising ``full(shape, c)`` would only cost a pass over memory. Leaves and
    every other node get adjoints of exactly their shape.
    """
    pv = p.value
    tp = type(pv)
    ps = ()
    if tp is float:
        tc = type(c)
        if tc is not float:
            if tc is np.ndarray or tc is np.float64:
                c = float(c.sum())
            elif isinstance(c, Box):
                if c.shape != ():
                    c = sum_to_shape(c, ())
            else:
                c = float(np.sum(c))
    else:
        ps = pv.shape if tp is np.ndarray else shape_of(pv)
        if shape_of(c) != ps:
            if type(c) is float:
                if not lazy_adjoint_ok(p, ps):
                    c = np.full(ps, c)
            else:
                c = sum_to_shape(c, ps)
    a = p.adj
    if a is None:
        p.adj = c
        if fresh and type(c) is np.ndarray and c.shape == ps:
            p.tape.owned[id(p)] = c
    elif type(a) is np.ndarray and (type(c) is np.ndarray or type(c) is float):
        # add in place into buffers this sweep allocated itself (``a + c`` results are
        # referenced by nobody else); a first contribution may alias another node's
        # adjoint, so it is never written into
        owned = p.tape.owned
        if owned.get(id(p)) is a:
            a += c
        else:
            a = a + c
            owned[id(p)] = a
            p.adj = a
    else:
        p.adj = a + c


def lazy_adjoint_ok(p, shape):
    """Whether a plain-float adjoint of array node ``p`` (of ``shape``) may stay a
    float, standing for ``full(shape, c)``: only when ``p``'s rule is elementwise AND
    every traced input has ``p``'s shape. An input broadcast into ``p`` (``x[0] + Q``,
    ``x + Q`` with Q of shape (6, 4)) must receive the SUM of its broadcast copies,
    which its rule cannot form from one float (``sum(x - x[0])`` gave d/dx0 = 0)."""
    bp = p.bp
    if not getattr(bp, "_bcast", False):
        return False
    for a in bp._args(p):
        if isinstance(a, Box) and shape_of(a) != shape:
            return False
    return True


def _ieee(v):
    """Python floats raise on x/0 and overflow; numpy float64 follows IEEE (inf/NaN
    with a RuntimeWarning), which is what a VJP on plain values must do."""
    return _f64(v) if type(v) is float else v


def _call_ieee(rule, g, ans, args, kw):
    try:
        return rule(g, ans, *args, **kw)
    except (ZeroDivisionError, OverflowError):
        return rule(_ieee(g), _ieee(ans), *[_ieee(a) for a in args], **kw)


def _bp_generic(node, g):
    spec, vals, kw, pairs = node.x
    ans = node.value
    if spec.vjp_all is None and type(g) is np.ndarray:
        # the common first-order case: array adjoints never raise on division by zero
        vjps = spec.vjps
        for i, p in pairs:
            accumulate(p, vjps[i](g, ans, *vals, **kw))
        return
    if spec.vjp_all is not None:
        cs = _call_ieee(spec.vjp_all, g, ans, vals, kw)
        for i, p in pairs:
            c = cs[i]
            if c is None:
                raise DifferentiationError(
                    f"argument {i} of '{spec.name}' is not differentiable (its VJP gave "
                    "no contribution) but received a traced value")
            accumulate(p, c)
        return
    vjps = spec.vjps
    for i, p in pairs:
        accumulate(p, _call_ieee(vjps[i], g, ans, vals, kw))


def _normalize(ans):
    t = type(ans)
    if t is float or t is np.ndarray and ans.ndim and ans.dtype == np.float64:
        return ans
    if isinstance(ans, Box):
        return ans
    arr = np.asarray(ans, dtype=np.float64)
    return float(arr) if arr.ndim == 0 else arr


def _record(tape, spec, wrapped, args, kw):
    vals = list(args)
    pairs = []
    lower = False       # does any value remain traced (nested differentiation)?
    i = 0
    for a in args:
        if isinstance(a, Box):
            if a.tape is tape:
                spec.check_differentiable(i)
                v = a.value
                vals[i] = v
                pairs.append((i, a))
                if isinstance(v, Box):
                    lower = True
            else:
                lower = True
        i += 1
    ans = wrapped(*vals, **kw) if lower else spec.fun(*vals, **kw)
    t = type(ans)
    if not (t is float or t is np.ndarray and ans.dtype == _f64_dtype and ans.ndim):
        ans = _normalize(ans)
    return make_node(ans, tape, _bp_generic, (spec, vals, kw, pairs), None)


def _dispatch(spec, wrapped, args, kw):
    top = None
    level = 0
    for a in args:
        if isinstance(a, Box) and a.tape.level > level:
            top = a
            level = a.tape.level
    if kw:
        for v in kw.values():
            if isinstance(v, Box):
                raise DifferentiationError(
                    f"'{spec.name}': keyword arguments are not differentiable; pass "
                    "traced values positionally")
    if top is None:
        return spec.fun(*args, **kw)
    if type(top) is Var:
        return _record(top.tape, spec, wrapped, args, kw)
    return top.tape.apply(spec, wrapped, args, kw)


def primitive(fun=None, *, name=None):
    """Make ``fun`` (written on plain floats/arrays) a differentiable primitive.

    The returned function accepts plain values (then it is ``fun`` itself, plus one
    type check) and traced values (then it records a node). Give its derivatives with
    :func:`defvjp` (and :func:`defjvp` for forward mode).
    """
    if fun is None:
        return functools.partial(primitive, name=name)
    spec = Primitive(name or fun.__name__, fun)

    def wrapped(*args, **kw):
        for a in args:
            if isinstance(a, Box):
                return _dispatch(spec, wrapped, args, kw)
        return fun(*args, **kw)

    functools.update_wrapper(wrapped, fun)
    wrapped._spec = spec
    spec.wrapped = wrapped
    return wrapped


def defvjp(prim, *vjps):
    """Give ``prim`` one VJP per positional argument (``None``: not differentiable).

    Each VJP is ``vjp(g, ans, *args, **kwargs) -> contribution`` where ``g`` has the
    output's shape; the contribution may have any shape that broadcasts the input's.
    """
    spec_of(prim).vjps = tuple(vjps)
    return prim


def defvjp_all(prim, vjp_all, nondiff=()):
    """Give ``prim`` one VJP returning the contributions to all arguments at once.

    ``vjp_all(g, ans, *args, **kwargs) -> tuple`` (one entry per positional argument,
    ``None`` for the non-differentiable ones) - for rules that share work, such as a
    matrix factorisation reused by every argument's adjoint. ``nondiff`` lists the
    argument positions that are never differentiable, so that passing a traced value
    there fails when it is recorded; a ``None`` returned for a traced argument fails
    during the sweep. Never a silently dropped derivative.
    """
    spec = spec_of(prim)
    spec.vjp_all = vjp_all
    spec.nondiff = tuple(nondiff)
    return prim


def defjvp(prim, *jvps):
    """Give ``prim`` one JVP per positional argument (``None``: not differentiable).

    ``jvp(t, ans, *args, **kwargs) -> tangent of the output``. In vector mode ``t``
    carries leading batch axes (``t.shape == B + x.shape``) and the result must carry
    the same ones (``B + ans.shape``; see :func:`batch_shape`). For elementwise
    primitives the tangent arrives already expanded to the output's rank, so
    ``lambda t, ans, x: t * fprime(x)`` is a complete rule.
    """
    spec_of(prim).jvps = tuple(jvps)
    return prim


def defjvp_all(prim, jvp_all):
    """One JVP for all arguments: ``jvp_all(tangents, ans, *args) -> tangent`` where
    ``tangents[i]`` is ``None`` for arguments that are not perturbed."""
    spec_of(prim).jvp_all = jvp_all
    return prim


class Inline(NamedTuple):
    """How the Python replay (:mod:`.codegen`) writes a primitive in place of calls.

    ``kind`` names the numpy operation the primitive is, bit for bit (``"add"``,
    ``"subtract"``, ``"multiply"``, ``"divide"``, ``"power"``, ``"matmul"``,
    ``"reshape"``): the generator then writes the operator, the method or the
    derivative the tape's own backward rule computes. ``fwd`` (the value of a float),
    ``vjp_float`` (the VJP on floats) and ``vjp_array`` (the VJP where the adjoint or
    the argument is an array) are templates of Python expressions in ``{x}`` (the
    argument), ``{ans}`` (the value) and ``{g}`` (the output's adjoint); ``helpers``
    maps the names they call to the functions (the generated code's globals), or is a
    function returning that map (a declared derivative's helpers, bound at first use:
    :func:`unary_primitive`). A binary primitive declared with
    :func:`binary_primitive` has no VJP templates here: the replay asks its declaration
    (``spec.derivative.template``) for each argument's.
    """

    kind: Optional[str]
    fwd: Optional[str]
    vjp_float: Optional[str]
    vjp_array: Optional[str]
    helpers: dict
    # ``vjp_shaped(i, shape_x, shape_y, shape_g) -> template or None``: argument ``i``'s
    # VJP in ``{g}``, ``{x}``, ``{y}`` for those shapes (None: the rule is called), for
    # a rule whose form depends on the operands' ranks (matmul's)
    vjp_shaped: Optional[Callable] = None


def definline(prim, kind=None, fwd=None, vjp=None, vjp_float=None, vjp_array=None,
              helpers=None, vjp_shaped=None):
    """Declare how the Python replay writes ``prim`` inline (see :class:`Inline`).

    ``vjp`` is the template for floats and arrays alike (``vjp_float``/``vjp_array``
    override it). A template must compute what the primitive's own rule computes, the
    same operations in the same order: the replay is checked bit for bit against the
    tape. The VJP templates of an elementwise unary primitive must be linear in
    ``{g}`` (one that starts with ``-{g}`` gives its sign as a flag on arrays).
    Helper names start with ``_`` (the generated code's constants never do).
    ``vjp_shaped``: see :class:`Inline` (its templates may call the replay's runtime
    ``_matmul`` and ``_np``).
    """
    helpers = dict(helpers or {})
    for k in helpers:
        if not k.startswith("_"):
            raise ValueError(f"definline: helper name {k!r} must start with '_'")
    spec_of(prim).inline = Inline(kind, fwd, vjp_float or vjp, vjp_array or vjp, helpers,
                                  vjp_shaped)
    return prim


# --------------------------------------------------------------------------------------
# an elementwise unary primitive from one derivative declaration
# --------------------------------------------------------------------------------------
_SCALAR_ERRORS = (ValueError, OverflowError, ZeroDivisionError)


def ieee_jvp(rule):
    """A JVP rule with IEEE semantics on plain floats.

    Single-mode forward derivatives of scalar code call the rule on Python floats,
    where ``t / 0.0`` raises; retried on numpy scalars it gives numpy's inf/NaN and
    warning, as the array path and the VJPs do. Traced arguments never raise here.
    """
    def jvp(t, ans, *args):
        try:
            return rule(t, ans, *args)
        except _SCALAR_ERRORS:
            r = rule(_ieee(t), _ieee(ans), *[_ieee(a) for a in args])
            return float(r) if type(r) is _f64 else r
    jvp.__name__ = jvp.__qualname__ = getattr(rule, "__name__", "jvp")
    return jvp


def _guarded_float_vjp(fast, vjp):
    """``fast`` (a VJP on plain floats), falling back where Python float arithmetic
    raises (``1.0 / 0.0``, ``math.cosh(1e3)``) to ``vjp`` on numpy scalars: numpy's
    inf/NaN and warning, the array path's semantics. The replay calls it as it is."""
    def svjp(g, ans, x):
        try:
            return fast(g, ans, x)
        except _SCALAR_ERRORS:
            return float(vjp(_f64(g), _f64(ans), _f64(x)))
    svjp.__name__ = svjp.__qualname__ = fast.__name__
    return svjp


def unary_primitive(name, raw, d, scalar=None, *, names, safe=False, op=None, kernel=None,
                    fwd=None, inline=None):
    """An elementwise unary primitive whose derivative is declared once, as the
    expression ``d`` in ``g``, ``x`` and ``ans`` (:mod:`.derivative`): its VJP and JVP
    on traced values, its VJP on plain floats, the Python replay's inline templates
    and the compiled interpreter's code are all made from it.

    ``raw`` and ``scalar`` are the value on arrays and on floats (as for
    :func:`elementwise_unary`); ``names`` is the declaring module's ``globals()``
    (where ``d``'s functions and constants are found). ``safe``: the float VJP cannot
    raise (no division, no function with a domain), so it needs no IEEE fallback.
    ``op`` and ``kernel``: its op code in the interpreter (``vm/opcodes.py``) and its
    value there as an expression in ``x`` (``"math.exp(x)"``; see ``vm/generate.py``).
    ``fwd``: its value on a float written inline (``"x * x"``). ``inline``: whether the
    Python replay writes the derivative in place of a call (default: if it has an op
    code, the hot functions).
    """
    rule = UnaryRule(name, d, names, op=op, kernel=kernel, fwd=fwd)
    vjp = rule.rule
    svjp = rule.on_floats if safe else _guarded_float_vjp(rule.on_floats, vjp)
    prim = elementwise_unary(name, raw, vjp, scalar=scalar, scalar_vjp=svjp)
    defjvp(prim, vjp if safe else ieee_jvp(vjp))
    spec = prim._spec
    spec.derivative = rule
    rule.prim = prim
    if inline if inline is not None else op is not None:
        spec.inline = Inline(None, rule.template("fwd"), rule.template("float"),
                             rule.template("array"), rule.helpers)
    if op is not None:
        deflower(prim, _lower_unary(op))
    return prim


def binary_primitive(name, raw, dx, dy, *, names, op=None, safe=False, vm=None,
                     kernel=None, fwd=None, special=None, inline=None, kind=None,
                     form=None):
    """A broadcasting elementwise binary primitive whose derivatives are declared once,
    as the expressions ``dx`` and ``dy`` in ``g``, ``ans``, ``x`` (the first argument)
    and ``y`` (the second) (:class:`.derivative.BinaryRule`; None: not differentiable
    there): its VJPs and JVPs on traced values, its VJPs on plain floats, the Python
    replay's inline templates and the compiled interpreter's loops are all made from
    them.

    ``raw``: the value (numpy broadcasting; floats in, a float out). ``op``: a Python
    operator that computes it on traced values directly (:func:`elementwise_binary`).
    ``safe``: the rules cannot raise on floats (the JVPs need no IEEE fallback). ``vm`` and ``kernel``: the interpreter's op
    code and the value on floats ``x``, ``y`` in numba terms (``vm/generate.py``).
    ``fwd``: the value on floats written inline (``"x / y"``). ``special``: derivatives
    in x for plain-number values of y (:class:`.derivative.BinaryRule`). ``inline``:
    whether the replay writes the derivatives in place of calls (default: if it has an
    interpreter op). ``kind``: the numpy operation it is, bit for bit (:class:`Inline`).
    ``form``: ``"linear"`` or ``"bilinear"``, a lowering hint for the hottest operators
    (+ - *): the declared derivatives are checked to be that form, and the tape's and
    the Python replay's fast rules for it are used (:mod:`.fast_rules`).
    """
    rule = BinaryRule(name, (dx, dy), names, op=vm, kernel=kernel, fwd=fwd,
                      special=special)
    bps = None
    if form is not None:
        from .fast_rules import backward_rules, form_of
        rule.form = form_of(rule, form)
        bps = backward_rules(*rule.form)
    vx, vy = rule.rules
    # (unguarded: the tape's float paths fall back to the rules on numpy scalars where
    # it raises, and a replay that raises hands its point to the tape)
    svjp = rule.pair
    prim = elementwise_binary(name, raw, vx, vy, op=op, scalar_vjp=svjp, bps=bps,
                              scalar_vjps=rule.floats_const)
    jx, jy = (vx, vy) if safe else (vx and ieee_jvp(vx), vy and ieee_jvp(vy))
    defjvp(prim, jx, jy)
    spec = prim._spec
    spec.derivative = rule
    rule.prim = prim
    if kind is not None or (inline if inline is not None else vm is not None):
        spec.inline = Inline(kind, rule.template("fwd"), None, None, rule.helpers)
    if vm is not None:
        deflower(prim, _lower_binary(vm))
    return prim


# --------------------------------------------------------------------------------------
# broadcasting and reshaping: the structural primitives the core itself needs
# --------------------------------------------------------------------------------------
# ``nb`` counts leading batch axes (forward-mode vector tangents, see dual.py) that
# are carried through untouched: shapes are matched after them, not right-aligned
# against them.
def batch_shape(t, x):
    """The leading batch axes of tangent ``t`` of a value shaped like ``x``."""
    ts = shape_of(t)
    return ts[:len(ts) - len(shape_of(x))]


def sum_axes(xs, shape, nb=0):
    """The axes of an array of shape ``xs`` that :func:`sum_to_shape` sums over to make
    ``shape`` (after ``nb`` batch axes), or None when it broadcasts up instead."""
    xr, sr = xs[nb:], shape[nb:]
    if len(xr) < len(sr) or np.broadcast_shapes(xr, sr) == sr:
        return None
    lead = len(xr) - len(sr)
    return tuple(range(nb, nb + lead)) + tuple(
        nb + lead + i for i, s in enumerate(sr) if s == 1 and xr[lead + i] != 1)


def _sum_to_shape_raw(x, shape, nb=0):
    xs = np.shape(x)
    shape = tuple(shape)
    if xs == shape:
        return x
    axes = sum_axes(xs, shape, nb)
    if axes is None:
        # a contribution smaller than its input (e.g. a scalar) broadcasts up
        return np.array(_broadcast_to_raw(x, shape, nb), dtype=float)
    r = np.sum(x, axis=axes)
    if shape == ():
        return float(r)
    return np.reshape(r, shape)


def _broadcast_to_raw(x, shape, nb=0):
    shape = tuple(shape)
    xs = np.shape(x)
    if xs == shape:
        return x
    if shape == ():
        return float(np.asarray(x).reshape(()))
    missing = len(shape) - len(xs)
    if nb and missing > 0:
        x = np.reshape(x, xs[:nb] + (1,) * missing + xs[nb:])
    return np.broadcast_to(x, shape)


def _reshape_raw(x, shape):
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    r = np.reshape(x, shape)
    return float(r) if r.ndim == 0 else r


sum_to_shape = primitive(_sum_to_shape_raw, name="sum_to_shape")
broadcast_to = primitive(_broadcast_to_raw, name="broadcast_to")
reshape = primitive(_reshape_raw, name="reshape")
reshape.__doc__ = """``x`` with a new shape (numpy semantics, ``-1`` allowed).

    Derivative: the adjoint (and the tangent) reshaped back; the data do not move.
    """

defvjp(sum_to_shape, lambda g, ans, x, shape, nb=0: broadcast_to(g, shape_of(x), nb),
       None, None)
defvjp(broadcast_to, lambda g, ans, x, shape, nb=0: sum_to_shape(g, shape_of(x), nb),
       None, None)
defvjp(reshape, lambda g, ans, x, shape: reshape(g, shape_of(x)), None)


def _sum_to_shape_jvp(t, ans, x, shape, nb=0):
    b = batch_shape(t, x)
    return sum_to_shape(t, b + tuple(shape), nb + len(b))


def _broadcast_to_jvp(t, ans, x, shape, nb=0):
    b = batch_shape(t, x)
    return broadcast_to(t, b + tuple(shape), nb + len(b))


defjvp(sum_to_shape, _sum_to_shape_jvp, None, None)
defjvp(broadcast_to, _broadcast_to_jvp, None, None)
defjvp(reshape, lambda t, ans, x, shape: reshape(t, batch_shape(t, x) + shape_of(ans)),
       None)
definline(reshape, kind="reshape")
# the interpreter (autodiff/vm): reshaping and broadcasting move data (one gather); the
# sum back to a shape is a segment sum
deflower(reshape, movement())
deflower(broadcast_to, movement())
deflower(sum_to_shape, sum_to_shape_rule)


# --------------------------------------------------------------------------------------
# fast paths for elementwise primitives (most nodes of a scalar model are these)
# --------------------------------------------------------------------------------------
def _plain(x):
    t = type(x)
    return t is float or t is np.ndarray or t is int


def elementwise_unary(name, raw, vjp, scalar=None, scalar_vjp=None):
    """An elementwise primitive ``raw`` (a numpy ufunc-like) with a VJP.

    ``scalar`` is an optional float -> float implementation (e.g. ``math.exp``) used
    for 0-d values, 20-50x cheaper than a numpy call on a scalar; where it raises
    (domain/overflow) the numpy function decides the value (NaN/inf) as it would
    without stanlite. ``scalar_vjp(g, ans, x) -> float`` is the same VJP on plain
    floats (first-order sweeps of scalar code); it must agree with ``vjp``.
    """
    spec = Primitive(name, raw, broadcasting=True)
    spec.vjps = (vjp,)
    spec.scalar = scalar
    spec.scalar_vjp = scalar_vjp
    svjp = scalar_vjp
    fast = scalar is not None

    def bp(node, g):
        x = node.x
        xv = x.value
        if svjp is not None and type(g) is float and type(xv) is float:
            try:
                c = svjp(g, node.value, xv)
            except (ZeroDivisionError, OverflowError, ValueError):
                c = float(spec.vjps[0](_f64(g), _ieee(node.value), _f64(xv)))
            a = x.adj
            x.adj = c if a is None else a + c
            return
        accumulate(x, _call_ieee(spec.vjps[0], g, node.value, (xv,), {}))

    def wrapped(x):
        if type(x) is Var:
            v = x.value
            tv = type(v)
            if tv is float:
                if fast:
                    try:
                        ans = scalar(v)
                    except (ValueError, OverflowError, ZeroDivisionError):
                        ans = float(raw(v))
                else:
                    ans = float(raw(v))
            elif tv is np.ndarray:
                ans = raw(v)
            else:
                ans = wrapped(v)
            # make_node's stores inlined (var.py): this is the hot path of scalar code
            n = _new(Var)
            n.value = ans
            n.adj = None
            n.tape = t = x.tape
            n.bp = bp
            n.x = x
            n.y = None
            t.nodes.append(n)
            return n
        if isinstance(x, Box):
            return _dispatch(spec, wrapped, (x,), {})
        if fast and type(x) is float:
            try:
                return scalar(x)
            except (ValueError, OverflowError, ZeroDivisionError):
                return float(raw(x))
        return raw(x)

    _tag(bp, spec, _args_unary, "unary")
    wrapped.__name__ = wrapped.__qualname__ = name
    wrapped._spec = spec
    spec.wrapped = wrapped
    return wrapped


def _binary_backward_rules(spec, svjp, sx, sy):
    """The three generated backward rules of a binary primitive (both arguments traced,
    only x, only y), built once per definition by ``elementwise_binary``.

    On plain floats they use the scalar VJPs (``svjp`` the pair, ``sx``/``sy`` one
    argument alone) and fall back to ``spec.vjps`` on the IEEE path; ``spec.vjps`` is
    read at backward time, not captured, as ``defvjp`` may replace it later.
    """
    def bp_xy(node, g):
        x = node.x
        y = node.y
        xv = x.value
        yv = y.value
        ans = node.value
        if svjp is not None and type(g) is float and type(xv) is float \
                and type(yv) is float:
            try:
                cx, cy = svjp(g, ans, xv, yv)
            except (ZeroDivisionError, OverflowError, ValueError):
                cx = float(spec.vjps[0](_f64(g), _ieee(ans), _f64(xv), _f64(yv)))
                cy = float(spec.vjps[1](_f64(g), _ieee(ans), _f64(xv), _f64(yv)))
            a = x.adj
            x.adj = cx if a is None else a + cx
            a = y.adj
            y.adj = cy if a is None else a + cy
            return
        vjps = spec.vjps
        accumulate(x, _call_ieee(vjps[0], g, ans, (xv, yv), {}))
        accumulate(y, _call_ieee(vjps[1], g, ans, (xv, yv), {}))

    def bp_x(node, g):
        x = node.x
        xv = x.value
        c = node.y
        if sx is not None and type(g) is float and type(xv) is float \
                and type(c) is float:
            try:
                cx = sx(g, node.value, xv, c)
            except (ZeroDivisionError, OverflowError, ValueError):
                cx = float(spec.vjps[0](_f64(g), _ieee(node.value), _f64(xv), _f64(c)))
            a = x.adj
            x.adj = cx if a is None else a + cx
            return
        accumulate(x, _call_ieee(spec.vjps[0], g, node.value, (xv, c), {}))

    def bp_y(node, g):
        y = node.x
        yv = y.value
        c = node.y
        if sy is not None and type(g) is float and type(yv) is float \
                and type(c) is float:
            try:
                cy = sy(g, node.value, c, yv)
            except (ZeroDivisionError, OverflowError, ValueError):
                cy = float(spec.vjps[1](_f64(g), _ieee(node.value), _f64(c), _f64(yv)))
            a = y.adj
            y.adj = cy if a is None else a + cy
            return
        accumulate(y, _call_ieee(spec.vjps[1], g, node.value, (c, yv), {}))

    return bp_xy, bp_x, bp_y


def elementwise_binary(name, raw, vjp_x, vjp_y, op=None, scalar_vjp=None, bps=None,
                       scalar_vjps=(None, None)):
    """A broadcasting binary primitive with one VJP per argument.

    ``op``, if given, must work on traced values directly (a Python operator such as
    ``operator.mul``); it then skips one dispatch on the values. ``scalar_vjp(g, ans,
    x, y) -> (cx, cy)`` is the pair of VJPs on plain floats (scalar fast path).
    ``bps``, optional, replaces the three generated backward rules (both traced,
    only x, only y) by hand-written ones for the hottest operators; they must fall
    back to ``spec.vjps`` for anything but plain floats. ``scalar_vjps``, optional: the
    VJP of each argument alone on plain floats (where only one argument is traced:
    the other derivative is not computed), unguarded (an exception falls back to
    ``spec.vjps`` on numpy scalars).
    """
    spec = Primitive(name, raw, broadcasting=True)
    spec.vjps = (vjp_x, vjp_y)
    svjp = scalar_vjp
    sx = scalar_vjps[0] or (svjp and (lambda g, ans, x, y: svjp(g, ans, x, y)[0]))
    sy = scalar_vjps[1] or (svjp and (lambda g, ans, x, y: svjp(g, ans, x, y)[1]))
    new = _new

    spec.scalar_vjp = scalar_vjp
    spec.op = op          # None: the values go through ``raw``
    if op is None:
        def op(a, b):
            if isinstance(a, Box) or isinstance(b, Box):
                return wrapped(a, b)
            return raw(a, b)

    if bps is None:
        bp_xy, bp_x, bp_y = _binary_backward_rules(spec, svjp, sx, sy)
    else:
        bp_xy, bp_x, bp_y = bps(spec)
    form = "binary" if bps is None else "binary_own"
    _tag(bp_xy, spec, _args_xy, form)
    _tag(bp_x, spec, _args_xy, form)
    _tag(bp_y, spec, _args_yx, form)

    checked = vjp_x is None or vjp_y is None

    def wrapped(x, y):
        tx = type(x)
        ty = type(y)
        if checked:
            # a non-differentiable argument: go through the path that checks it
            if isinstance(x, Box) or isinstance(y, Box):
                return _dispatch(spec, wrapped, (x, y), {})
            return raw(x, y)
        if tx is Var:
            if ty is Var:
                t = x.tape
                if y.tape is t:
                    n = new(Var)
                    v = op(x.value, y.value)
                    # a numpy scalar (x / y on floats goes through np.true_divide) is
                    # stored as a float, as every scalar value is (var.py)
                    n.value = float(v) if type(v) is _f64 else v
                    n.adj = None
                    n.tape = t
                    n.bp = bp_xy
                    n.x = x
                    n.y = y
                    t.nodes.append(n)
                    return n
            elif ty is float or ty is int or ty is np.ndarray or ty is _f64:
                if ty is _f64:
                    # a numpy scalar (``self.y[t]`` in a loop) is a float constant:
                    # the float path, the float arithmetic (issue 19: 18x slower)
                    y = float(y)
                t = x.tape
                n = new(Var)
                v = op(x.value, y)
                n.value = float(v) if type(v) is _f64 else v
                n.adj = None
                n.tape = t
                n.bp = bp_x
                n.x = x
                n.y = float(y) if ty is int else y
                t.nodes.append(n)
                return n
        elif ty is Var:
            if tx is float or tx is int or tx is np.ndarray or tx is _f64:
                if tx is _f64:
                    x = float(x)                # (as y above)
                t = y.tape
                n = new(Var)
                v = op(x, y.value)
                n.value = float(v) if type(v) is _f64 else v
                n.adj = None
                n.tape = t
                n.bp = bp_y
                n.x = y
                n.y = float(x) if tx is int else x
                t.nodes.append(n)
                return n
        elif not isinstance(x, Box) and not isinstance(y, Box):
            return raw(x, y)
        if not isinstance(x, Box) and not _plain(x):
            x = np.asarray(x, dtype=np.float64)
        if not isinstance(y, Box) and not _plain(y):
            y = np.asarray(y, dtype=np.float64)
        return _dispatch(spec, wrapped, (x, y), {})

    wrapped.__name__ = wrapped.__qualname__ = name
    wrapped._spec = spec
    spec.wrapped = wrapped
    return wrapped


_new = object.__new__
_f64 = np.float64
_f64_dtype = np.dtype(np.float64)


# --------------------------------------------------------------------------------------
# the tape as a plain record: (primitive, inputs, output) for every node
# --------------------------------------------------------------------------------------
def _args_unary(node):
    return (node.x,)


def _args_xy(node):
    return (node.x, node.y)


def _args_yx(node):
    return (node.y, node.x)


def _tag(bp, spec, args_of, form=None):
    """Attach to a backward rule the primitive it belongs to and how to read the
    node's inputs back, so that every node of a tape can be replayed; mark the rules
    of elementwise primitives (they accept a lazily broadcast scalar adjoint).

    ``form`` names the layout of the rule's nodes for the Python replay (codegen.py):
    ``"unary"``, ``"binary"`` (elementwise; ``node.x``/``node.y`` are the arguments or
    the traced one and the constant; ``"binary_own"``: with hand-written rules),
    ``"getitem"``, ``"sum_all"``; None: replayed only through the primitive record (a
    fused density) or not at all."""
    bp._spec = spec
    bp._args = args_of
    bp._bcast = spec.broadcasting
    bp._form = form


def node_record(node):
    """``(primitive, args, kwargs)`` that recorded ``node``: calling
    ``primitive.fun`` on the plain values of ``args`` reproduces ``node.value``.

    This is what keeps the tape a replayable record (the basis of retaping): inputs
    are the parent ``Var``s or the constants the primitive was called with.
    """
    bp = node.bp
    if bp is _bp_generic or getattr(bp, "_two_phase", False):
        # the generic layout, also that of two-phase nodes (callback.TwoPhase)
        spec, vals, kw, pairs = node.x
        args = list(vals)
        for i, p in pairs:
            args[i] = p
        return spec, tuple(args), kw
    spec = getattr(bp, "_spec", None)
    if spec is None:
        raise DifferentiationError(f"node recorded by {bp!r} carries no primitive record")
    return spec, bp._args(node), {}

