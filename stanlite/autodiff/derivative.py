"""One derivative, every backend: the rule of an elementwise primitive, written once.

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

An elementwise binary primitive (:class:`BinaryRule`, ``extend.binary_primitive``)
states one such expression per argument, in ``g``, ``ans``, ``x`` (its first
argument) and ``y`` (its second): ``("g / y", "-g * ans / y")`` for a quotient. The
same targets come from them, per argument, and the interpreter's loops over
broadcast operands (``vm/generate.py`` writes ``vm/binary_generated.py``). Besides
arithmetic and calls an expression may select: ``where(c, a, b)`` with ``c`` a
comparison (the stanlite ``where`` on traced values and arrays, ``a if c else b`` on
floats and in numba).

Names are resolved at first use (in the declaring module, then in
:mod:`stanlite.math`): a rule may call a primitive defined after it, as ``sin``'s
calls ``cos``.
"""

import ast
import functools
import types

from . import library
from .var import value_of

__all__ = ["UnaryRule", "BinaryRule", "declared", "declared_binary"]

_VARS = ("g", "ans", "x")
_VARS2 = ("g", "ans", "x", "y")
_EXPR_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Call, ast.Name, ast.Constant,
               ast.Load, ast.operator, ast.unaryop, ast.Compare, ast.cmpop)
# the selection a derivative may make (a piecewise rule): not a primitive, a form
_WHERE = "where"

# every declaration, in order: vm/generate.py writes the interpreter's ops from these
_DECLARED = []
_DECLARED_BINARY = []


def declared():
    """The primitives whose derivative is declared with :class:`UnaryRule`, by name."""
    return {r.name: r.prim for r in _DECLARED if r.prim is not None}


def declared_binary():
    """The primitives whose derivatives are declared with :class:`BinaryRule`, by name."""
    return {r.name: r.prim for r in _DECLARED_BINARY if r.prim is not None}


class _Rule:
    """What :class:`UnaryRule` and :class:`BinaryRule` share: resolving the names a
    derivative calls, and turning a syntax tree into a function or a template."""

    variables = _VARS

    def __init__(self, name, d, names, op, kernel, fwd):
        self.name = name
        self.d = d
        self.names = names
        self.op = op
        self.kernel = kernel
        self.fwd = fwd
        self.prim = None            # set by extend.unary_primitive/binary_primitive
        self._helpers = None

    def primitive(self, fname):
        """The stanlite primitive that ``fname`` names (the declaring module first);
        ``where`` is stanlite's where (a selection, not a primitive)."""
        if fname == _WHERE:
            return library.lookup("where")
        obj = self.names.get(fname)
        if getattr(obj, "_spec", None) is None:
            obj = library.lookup(fname, None)     # the math package's, by name
        if getattr(obj, "_spec", None) is None:
            raise NameError(f"the derivative of '{self.name}' ({self.d!r}) calls "
                            f"{fname!r}, which is not a stanlite primitive")
        return obj

    def _float_fn(self, fname):
        spec = self.primitive(fname)._spec
        return spec.scalar if spec.scalar is not None else spec.fun

    def _array_fn(self, fname):
        if fname == _WHERE:
            return self.primitive(fname)
        return self.primitive(fname)._spec.fun

    def _helpers_of(self, float_trees, array_trees):
        out = {}
        for t in float_trees:
            for f in _called(t):
                out["_f_" + f] = self._float_fn(f)
        for t in array_trees:
            for f in _called(t):
                out["_a_" + f] = self._array_fn(f)
        return out

    def _function(self, what, tree, prefix, resolve, suffix=""):
        """``lambda g, ans, x[, y]: <tree>`` whose calls bind, at their first call, to
        ``resolve(name)`` (the globals of the function are its own namespace).

        Written and compiled at its first call, not here: ``import stanlite``
        declares ~60 primitives, ~190 such functions (0.1-0.15 s of syntax-tree work,
        issue 20 point 6), and a process uses a few. The function returned is a
        stand-in that, at its first call, takes the real function's code (both are
        lambdas of the same parameters over the same namespace, without closures), so
        later calls run the rule itself, with no extra call."""
        ns = {}
        params = ", ".join(self.variables)
        name = f"_d_{self.name}{suffix}" + ("_float" if prefix else "")

        def build():
            t = tree() if callable(tree) else tree      # (a tree, or what makes it)
            for f in _called(t):
                ns[prefix + f] = _resolve_on_first_call(ns, prefix + f, f, resolve)
            if not prefix:
                # a comparison in a traced rule compares values: the selection it makes
                # is constant (piecewise rule), not a decision the recording must guard
                t = _compare_values(t)
                ns[_VALUE_OF] = value_of
            src = _unparse(_rename(t, prefix))
            real = eval(compile(f"lambda {params}: {src}", f"<{what} of {self.name}>",
                                "eval"), ns)
            fn.__code__ = real.__code__
            return real

        ns[_BUILD] = build
        fn = types.FunctionType(_stand_in(self.variables), ns, name)
        fn.__qualname__ = name
        return fn


class UnaryRule(_Rule):
    """The derivative ``d`` of the elementwise unary primitive ``name`` (see the module
    docstring), plus what the compiled interpreter needs to run it: its op code ``op``
    and ``kernel``, its value on one float as an expression in ``x`` over ``math``, the
    helpers of ``vm/scalar.py`` and ``names``' float constants. ``fwd``, optional, is
    its value on a float written inline (``"x * x"``): the replay's forward template,
    and how other rules' ``on_floats`` write a call of it on a name. ``names`` is the
    declaring module's namespace (its ``globals()``)."""

    def __init__(self, name, d, names, op=None, kernel=None, fwd=None):
        super().__init__(name, d, names, op, kernel, fwd)
        self.tree = _parse(name, d, names)
        self.calls = sorted({n.func.id for n in ast.walk(self.tree)
                             if isinstance(n, ast.Call)})
        self.rule = self._function("rule", self.tree, "", self.primitive)
        # the float tree is made when a function or template first needs it (as
        # BinaryRule's: ~40 unary rules' inlining is syntax-tree work at import)
        self.on_floats = self._function("on_floats", lambda: self._floats, "_f_",
                                        self._float_fn)
        _DECLARED.append(self)

    @functools.cached_property
    def _floats(self):
        return _inline_calls(self.tree, self.names)

    def __repr__(self):
        return f"<derivative of {self.name}: {self.d}>"

    def helpers(self):
        """The functions the replay's templates call, by the names they call them."""
        if self._helpers is None:
            self._helpers = self._helpers_of([self._floats], [self.tree])
        return self._helpers

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


class BinaryRule(_Rule):
    """The derivatives ``ds = (d/dx, d/dy)`` of the elementwise binary primitive
    ``name``: expressions in ``g``, ``ans``, ``x`` (the first argument) and ``y`` (the
    second), each linear in ``g``; None for an argument that is not differentiable.
    ``special`` maps a plain number to the derivative in ``x`` where ``y`` is that
    constant (``x ** 2``: ``"g * 2.0 * x"``, never ``0 * x^-1``, so that the derivatives
    of the derivative stay finite at x = 0). ``op``, ``kernel`` (the value on floats
    ``x`` and ``y`` in numba terms) and ``fwd`` as for :class:`UnaryRule`."""

    variables = _VARS2

    def __init__(self, name, ds, names, op=None, kernel=None, fwd=None, special=None):
        self.ds = tuple(ds)
        super().__init__(name, self.ds, names, op, kernel, fwd)
        # (form, signs) of a lowering hint (extend.binary_primitive's form=, checked
        # against the derivatives: fast_rules.form_of), None without one
        self.form = None
        self.trees = tuple(None if d is None else _parse(name, d, names, _VARS2)
                           for d in self.ds)
        self.special = {float(k): _parse(name, d, names, _VARS2)
                        for k, d in (special or {}).items()}
        trees = [t for t in self.trees if t is not None] + list(self.special.values())
        self.calls = sorted({f for t in trees for f in _called(t)})
        general = [None if t is None else
                   self._function("rule", t, "", self.primitive, f"_{v}")
                   for t, v in zip(self.trees, "xy")]
        if self.special and general[0] is not None:
            general[0] = _with_special(general[0], {
                k: self._function("rule", t, "", self.primitive, "_x")
                for k, t in self.special.items()})
        self.rules = tuple(general)
        # the float trees are made when a function or template first needs them
        self.floats = tuple(None if t is None else
                            self._function("on_floats", lambda i=i: self._floats[i], "_f_",
                                           self._float_fn, f"_{v}")
                            for i, (t, v) in enumerate(zip(self.trees, "xy")))
        # both on floats in one call (the tape's node of two traced floats)
        self.pair = None
        if all(t is not None for t in self.trees):
            self.pair = self._function("on_floats", self._pair_tree, "_f_", self._float_fn,
                                       "_pair")
        # where y is a constant (a node of one traced argument): the special cases too
        self.floats_const = self.floats
        if self.special and self.floats[0] is not None:
            self.floats_const = (_with_special(self.floats[0], {
                k: self._function("on_floats", lambda k=k: self._special_floats[k], "_f_",
                                  self._float_fn, "_x")
                for k in self.special}),) + self.floats[1:]
        _DECLARED_BINARY.append(self)

    @functools.cached_property
    def _floats(self):
        return tuple(None if t is None else _inline_calls(t, self.names)
                     for t in self.trees)

    @functools.cached_property
    def _special_floats(self):
        return {k: _inline_calls(t, self.names) for k, t in self.special.items()}

    def _pair_tree(self):
        pair = ast.Expression(ast.Tuple([t.body for t in self._floats], ast.Load()))
        return ast.fix_missing_locations(pair)

    @functools.cached_property
    def _common(self):
        return _common_calls(self.trees)

    _shared = property(lambda self: self._common[0])
    _shared_trees = property(lambda self: self._common[1])
    _shared_vars = property(lambda self: _VARS2 + tuple(k for k, _ in self._common[0]))

    def __repr__(self):
        return f"<derivatives of {self.name}: {self.ds}>"

    def helpers(self):
        """The functions the replay's templates call, by the names they call them."""
        if self._helpers is None:
            fl = [t for t in self._floats if t is not None] + \
                list(self._special_floats.values())
            ar = [t for t in self.trees if t is not None] + list(self.special.values())
            self._helpers = self._helpers_of(fl, ar)
        return self._helpers

    def template(self, target, i=0, constant=None):
        """The replay's template of the derivative in argument ``i``: ``"float"`` or
        ``"array"`` (None if ``i`` is not differentiable), or ``"fwd"`` (the value on
        floats, None if not declared), in ``{g}``, ``{ans}``, ``{x}``, ``{y}``.
        ``constant``: the plain number ``y`` is (a special case's template, if any)."""
        if target == "fwd":
            if self.fwd is None:
                return None
            tree = _parse(self.name, self.fwd, self.names, variables=("x", "y"),
                          linear=False)
            return _format_template(tree, "", _VARS2)
        sp = self.special_case(i, constant)
        if target == "float":
            tree = self._floats[i] if sp is None else self._special_floats[sp]
            return None if tree is None else _format_template(tree, "_f_", _VARS2)
        tree = self._shared_trees[i] if sp is None else self.special[sp]
        return None if tree is None else _format_template(tree, "_a_", self._shared_vars)

    def shared(self):
        """``[(name, array template)]``: the calls both derivatives make on the same
        operands (``where(ans == -inf, 0.0, ans)`` of a log-sum-exp), which the array
        templates read as ``{name}``: the replay computes each once per node."""
        return [(k, _format_template(t, "_a_", _VARS2)) for k, t in self._shared]

    def _tree(self, i, constant):
        sp = self.special_case(i, constant)
        return self.trees[i] if sp is None else self.special[sp]

    def operands(self, i, constant=None):
        """The operands (of ``g``, ``ans``, ``x``, ``y``) the derivative in argument
        ``i`` reads (``constant``: as in :meth:`template`)."""
        tree = self._tree(i, constant)
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        return [v for v in _VARS2 if v in names]

    def calls_read_arrays(self, i, constant, arrays):
        """Does every call in the derivative in argument ``i`` read one of the operands
        ``arrays``? (Then the array template computes what the rule computes: a call
        on plain floats would be the float function in the rule.)"""
        tree = self._tree(i, constant)
        for c in ast.walk(tree):
            if isinstance(c, ast.Call):
                read = {n.id for a in c.args for n in ast.walk(a) if isinstance(n, ast.Name)}
                if not read & set(arrays):
                    return False
        return True

    def special_case(self, i, constant):
        """The key of the special case that applies to argument ``i`` when ``y`` is the
        plain number ``constant`` (None: the general rule)."""
        if i != 0 or not self.special or type(constant) not in (int, float):
            return None
        return float(constant) if float(constant) in self.special else None


@functools.lru_cache(maxsize=None)
def _stand_in(variables):
    """The code of ``lambda <variables>: __build_rule()(<variables>)``, compiled once
    per parameter list (each rule's stand-in is a function of it over its own
    namespace)."""
    params = ", ".join(variables)
    code = compile(f"lambda {params}: {_BUILD}()({params})", "<rule>", "eval")
    return next(c for c in code.co_consts if isinstance(c, types.CodeType))


def _common_calls(trees):
    """The outermost calls (without ``g``) that every tree of ``trees`` makes, named
    ``_s0``, ``_s1``...; and the trees with those names in their place."""
    if any(t is None for t in trees) or len(trees) < 2:
        return [], trees

    def calls(t):
        out = {}
        for n in ast.walk(t):
            if isinstance(n, ast.Call) and not any(isinstance(m, ast.Name) and m.id == "g"
                                                   for m in ast.walk(n)):
                out.setdefault(ast.unparse(n), n)
        return out

    each = [calls(t) for t in trees]
    common = [k for k in each[0] if all(k in c for c in each[1:])]
    # outermost only: a common call inside another common call is computed with it
    common = [k for k in common if not any(k != o and k in o for o in common)]
    if not common:
        return [], trees
    names = {k: f"_s{j}" for j, k in enumerate(common)}

    class Put(ast.NodeTransformer):
        def visit_Call(self, n):
            k = ast.unparse(n)
            if k in names:
                return ast.Name(names[k], ast.Load())
            self.generic_visit(n)
            return n

    out = tuple(ast.fix_missing_locations(Put().visit(_copy(t))) for t in trees)
    return [(names[k], _copy(each[0][k])) for k in common], out


def _with_special(general, cases):
    """A rule in x that takes ``cases[y]`` where y is a plain number of ``cases``."""
    def rule(g, ans, x, y):
        if type(y) is int or type(y) is float:
            f = cases.get(y)
            if f is not None:
                return f(g, ans, x, y)
        return general(g, ans, x, y)
    rule.__name__ = rule.__qualname__ = general.__name__
    return rule


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


_VALUE_OF = "__value_of"
# the name under which a rule's stand-in finds what writes the rule (_Rule._function)
_BUILD = "__build_rule"


def _compare_values(tree):
    """A copy of ``tree`` with each operand of a comparison ``value_of(operand)``."""
    class Values(ast.NodeTransformer):
        def visit_Compare(self, n):
            wrap = [ast.Call(func=ast.Name(_VALUE_OF, ast.Load()), args=[e], keywords=[])
                    for e in [n.left] + n.comparators]
            return ast.Compare(left=wrap[0], ops=n.ops, comparators=wrap[1:])

    return ast.fix_missing_locations(Values().visit(_copy(tree)))


def _called(tree):
    return sorted({n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call)})


def _copy(tree):
    if not isinstance(tree, ast.Expression):
        tree = ast.Expression(tree)
    return ast.parse(ast.unparse(tree), mode="eval")


def _rename(tree, prefix):
    """A copy of ``tree`` with every called name prefixed."""
    tree = _copy(tree)
    if prefix:
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and n.func.id != _VALUE_OF:
                n.func.id = prefix + n.func.id
    return tree


def _unparse(tree):
    return ast.unparse(tree)


def _format_template(tree, prefix, variables=_VARS):
    """``tree`` as a codegen template: operands ``{g}``/``{ans}``/``{x}`` (``{y}``)."""
    tree = _rename(tree, prefix)
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id in variables:
            n.id = f"__{n.id}__"
    src = _unparse(tree)
    for v in variables:
        src = src.replace(f"__{v}__", "{" + v + "}")
    return src


def substitute(tree, arg, y=None):
    """A copy of expression ``tree`` (in ``x``, and ``y`` if given) with ``arg`` (a
    syntax tree) for x and ``y`` for y."""
    tree = _copy(tree)
    put = {"x": arg} if y is None else {"x": arg, "y": y}

    class Sub(ast.NodeTransformer):
        def visit_Name(self, n):
            v = put.get(n.id)
            return n if v is None else _copy(ast.Expression(v)).body

    return ast.fix_missing_locations(Sub().visit(tree))


def where_to_ifexp(tree):
    """``tree`` with each ``where(c, a, b)`` written ``(a if c else b)``: the selection
    on one float (Python floats, numba)."""
    class IfExp(ast.NodeTransformer):
        def visit_Call(self, n):
            self.generic_visit(n)
            if isinstance(n.func, ast.Name) and n.func.id == _WHERE and len(n.args) == 3:
                return ast.IfExp(test=n.args[0], body=n.args[1], orelse=n.args[2])
            return n

    return ast.fix_missing_locations(IfExp().visit(_copy(tree)))


def _inline_calls(tree, names):
    """``tree`` with each call of a primitive that declares a float inline form
    (``fwd``: ``square`` is ``x * x``) on a plain name or number written out: the float
    path then makes no call, and computes what the call computes on floats."""
    tree = where_to_ifexp(tree)

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
