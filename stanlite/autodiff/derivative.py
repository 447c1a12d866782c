"""One derivative, every backend: the rule of an elementwise unary primitive, written once.

An elementwise unary primitive states its derivative as one Python expression in
``g`` (the output's adjoint, or a tangent), ``x`` (the argument) and ``ans`` (the
value), linear in ``g``: ``"g * cos(x)"``, ``"0.5 * g / ans"``, ``"g * (ans *
inv_logit(-x))"``. The functions it calls are stanlite primitives, named as in
:mod:`stanlite.math`; names of float constants of the declaring module are written
in as literals. From that one expression come:

``rule``
    the VJP (and JVP) on traced values: each name bound to the primitive itself, so
    that under an outer differentiation the rule is recorded and differentiated
    again (reverse-over-reverse, Hessians) - the rule a hand-written ``_d_cos`` was;
``on_floats``
    the same on plain floats, the tape's scalar fast path: each name bound to what
    the primitive computes on a float (``spec.scalar``: ``math.cos``), and a call of a
    primitive with a float inline form on a name written out (``square(a)``: ``a * a``);
the Python replay's templates (:class:`.extend.Inline`, read by :mod:`.codegen`)
    the same two expressions as text, on floats and on arrays (``spec.fun``:
    ``np.cos``): the operations of the tape's two paths in their order, which the
    replay must match bit for bit - they are the same expression, so they do;
the interpreter's numba source (``vm/generate.py`` writes ``vm/unary_generated.py``)
    each call replaced by the called primitive's own kernel value expression
    (``math.cos(x)``) or, if it has none, by the compiled helper ``_<name>`` of
    ``vm/scalar.py``.

Names are resolved at first use (in the declaring module, then in
:mod:`stanlite.math`): a rule may call a primitive defined after it, as ``sin``'s
calls ``cos``.
"""

import ast

__all__ = ["UnaryRule", "declared"]

_VARS = ("g", "ans", "x")
_EXPR_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Call, ast.Name, ast.Constant,
               ast.Load, ast.operator, ast.unaryop)

# every declaration, in order: vm/generate.py writes the interpreter's ops from these
_DECLARED = []


def declared():
    """The primitives whose derivative is declared with :class:`UnaryRule`, by name."""
    return {r.name: r.prim for r in _DECLARED if r.prim is not None}


class UnaryRule:
    """The derivative ``d`` of the elementwise unary primitive ``name`` (see the module
    docstring), plus what the compiled interpreter needs to run it: its op code ``op``
    and ``kernel``, its value on one float as an expression in ``x`` over ``math``, the
    helpers of ``vm/scalar.py`` and ``names``' float constants. ``fwd``, optional, is
    its value on a float written inline (``"x * x"``): the replay's forward template,
    and how other rules' ``on_floats`` write a call of it on a name. ``names`` is the
    declaring module's namespace (its ``globals()``)."""

    def __init__(self, name, d, names, op=None, kernel=None, fwd=None):
        self.name = name
        self.d = d
        self.names = names
        self.op = op
        self.kernel = kernel
        self.fwd = fwd
        self.prim = None            # set by extend.unary_primitive
        self._helpers = None
        self.tree = _parse(name, d, names)
        self.calls = sorted({n.func.id for n in ast.walk(self.tree)
                             if isinstance(n, ast.Call)})
        self.rule = self._function("rule", self.tree, "", self.primitive)
        self._floats = _inline_calls(self.tree, names)
        self.on_floats = self._function("on_floats", self._floats, "_f_", self._float_fn)
        _DECLARED.append(self)

    def __repr__(self):
        return f"<derivative of {self.name}: {self.d}>"

    # -- names ---------------------------------------------------------------------------
    def primitive(self, fname):
        """The stanlite primitive that ``fname`` names (the declaring module first)."""
        obj = self.names.get(fname)
        if getattr(obj, "_spec", None) is None:
            import stanlite.math
            obj = getattr(stanlite.math, fname, None)
        if getattr(obj, "_spec", None) is None:
            raise NameError(f"the derivative of '{self.name}' ({self.d!r}) calls "
                            f"{fname!r}, which is not a stanlite primitive")
        return obj

    def _float_fn(self, fname):
        spec = self.primitive(fname)._spec
        return spec.scalar if spec.scalar is not None else spec.fun

    def _array_fn(self, fname):
        return self.primitive(fname)._spec.fun

    def helpers(self):
        """The functions the replay's templates call, by the names they call them."""
        if self._helpers is None:
            out = {}
            for f in _called(self._floats):
                out["_f_" + f] = self._float_fn(f)
            for f in self.calls:
                out["_a_" + f] = self._array_fn(f)
            self._helpers = out
        return self._helpers

    # -- the targets ---------------------------------------------------------------------
    def _function(self, what, tree, prefix, resolve):
        """``lambda g, ans, x: <tree>`` whose calls bind, at their first call, to
        ``resolve(name)`` (the globals of the function are its own namespace)."""
        src = _unparse(_rename(tree, prefix))
        ns = {}
        for f in _called(tree):
            ns[prefix + f] = _resolve_on_first_call(ns, prefix + f, f, resolve)
        fn = eval(compile(f"lambda g, ans, x: {src}", f"<{what} of {self.name}>", "eval"),
                  ns)
        fn.__name__ = fn.__qualname__ = f"_d_{self.name}" + ("_float" if prefix else "")
        return fn

    def template(self, target):
        """The replay's template: ``"float"`` (``vjp_float``), ``"array"``
        (``vjp_array``) or ``"fwd"`` (the value on a float, None if not declared), with
        ``{g}``, ``{ans}``, ``{x}`` for the operands and ``_f_<name>``/``_a_<name>`` for
        the helpers (:meth:`helpers`)."""
        if target == "fwd":
            if self.fwd is None:
                return None
            tree = _parse(self.name, self.fwd, self.names, variables=("x",), linear=False)
            return _format_template(tree, "")
        if target == "float":
            return _format_template(self._floats, "_f_")
        return _format_template(self.tree, "_a_")


# ======================================================================================
# the expression's syntax tree
# ======================================================================================
def _parse(name, text, names, variables=_VARS, linear=True):
    """The checked syntax tree of expression ``text``, constants written in."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise ValueError(f"the derivative of '{name}' is not an expression: {text!r}") \
            from e
    called = set()
    for n in ast.walk(tree):
        if not isinstance(n, _EXPR_NODES):
            raise ValueError(f"the derivative of '{name}' ({text!r}) may use arithmetic, "
                             f"numbers and calls only, not {type(n).__name__}")
        if isinstance(n, ast.Call):
            if not isinstance(n.func, ast.Name) or n.keywords:
                raise ValueError(f"the derivative of '{name}' ({text!r}) calls "
                                 "functions by their plain name, positional arguments only")
            called.add(id(n.func))
    gs = 0

    class Constants(ast.NodeTransformer):
        def visit_Name(self, n):
            nonlocal gs
            if id(n) in called or n.id in variables:
                gs += n.id == "g"
                return n
            v = names.get(n.id)
            if type(v) not in (float, int):
                raise ValueError(f"the derivative of '{name}' ({text!r}) uses {n.id!r}: "
                                 f"not one of {variables} nor a number of its module")
            return ast.Constant(float(v))

    tree = ast.fix_missing_locations(Constants().visit(tree))
    if linear and (gs != 1 or any(isinstance(a, ast.Name) and a.id == "g"
                                  for c in ast.walk(tree) if isinstance(c, ast.Call)
                                  for a in ast.walk(c))):
        raise ValueError(f"the derivative of '{name}' ({text!r}) must be linear in g: "
                         "g once, outside every call")
    return tree


def _called(tree):
    return sorted({n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)})


def _copy(tree):
    return ast.parse(ast.unparse(tree), mode="eval")


def _rename(tree, prefix):
    """A copy of ``tree`` with every called name prefixed."""
    tree = _copy(tree)
    if prefix:
        for n in ast.walk(tree):
            if isinstance(n, ast.Call):
                n.func.id = prefix + n.func.id
    return tree


def _unparse(tree):
    return ast.unparse(tree)


def _format_template(tree, prefix):
    """``tree`` as a codegen template: operands ``{g}``/``{ans}``/``{x}``."""
    tree = _rename(tree, prefix)
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id in _VARS:
            n.id = f"__{n.id}__"
    src = _unparse(tree)
    for v in _VARS:
        src = src.replace(f"__{v}__", "{" + v + "}")
    return src


def substitute(tree, arg):
    """A copy of expression ``tree`` (in ``x``) with ``arg`` (a syntax tree) for x."""
    tree = _copy(tree)

    class Sub(ast.NodeTransformer):
        def visit_Name(self, n):
            return _copy(ast.Expression(arg)).body if n.id == "x" else n

    return ast.fix_missing_locations(Sub().visit(tree))


def _inline_calls(tree, names):
    """``tree`` with each call of a primitive that declares a float inline form
    (``fwd``: ``square`` is ``x * x``) on a plain name or number written out: the float
    path then makes no call, and computes what the call computes on floats."""
    tree = _copy(tree)

    class Inline(ast.NodeTransformer):
        def visit_Call(self, n):
            self.generic_visit(n)
            prim = names.get(n.func.id)
            rule = getattr(getattr(prim, "_spec", None), "derivative", None)
            if rule is None or rule.fwd is None or len(n.args) != 1 \
                    or not isinstance(n.args[0], (ast.Name, ast.Constant)):
                return n
            fwd = _parse(rule.name, rule.fwd, rule.names, variables=("x",), linear=False)
            return substitute(fwd, n.args[0]).body

    return ast.fix_missing_locations(Inline().visit(tree))


def _resolve_on_first_call(ns, key, fname, resolve):
    """A stand-in for ``ns[key]`` that binds it to ``resolve(fname)`` on its first call
    (and calls that): later calls find the function itself."""
    def first_call(*args):
        f = ns[key] = resolve(fname)
        return f(*args)
    first_call.__name__ = fname
    return first_call
