"""The tape's hand-written backward rules of two forms of binary derivative.

A binary primitive may declare, beside its derivatives (``extend.binary_primitive``),
that they have one of two trivial forms (``form=``):

``"linear"``
    ``d(sx x + sy y) = sx dx + sy dy`` with signs ``sx, sy`` of +-1: the derivatives
    are ``g`` or ``-g`` (``+``: ``("g", "g")``, ``-``: ``("g", "-g")``);
``"bilinear"``
    ``d(x y) = y dx + x dy``: the derivatives are ``("g * y", "g * x")``.

The declaration checks that the derivatives it was given are that form
(:func:`form_of`), so that these rules and the declared ones cannot differ. From the
form come the eager tape's backward rules below - the most frequent nodes of scalar
code, so ``accumulate``'s float branch is inlined, and a scalar times an array takes
its adjoint ``sum(g * v)`` as one dot product - and the Python replay's rules for the
same nodes (:mod:`.codegen` reads ``spec.derivative.form``). The compiled interpreter
runs the declared derivatives themselves (``vm/binary_generated.py``).
"""

import ast

import numpy as np

from .extend import accumulate

__all__ = ["form_of", "backward_rules", "FORMS"]

FORMS = ("linear", "bilinear")


def _is_g(node):
    return isinstance(node, ast.Name) and node.id == "g"


def _sign(tree):
    """+1 for ``g``, -1 for ``-g``, None for anything else."""
    body = tree.body
    if _is_g(body):
        return 1
    if isinstance(body, ast.UnaryOp) and isinstance(body.op, ast.USub) and _is_g(body.operand):
        return -1
    return None


def _product_with(tree, var):
    """Is ``tree`` exactly ``g * var``?"""
    b = tree.body
    return isinstance(b, ast.BinOp) and isinstance(b.op, ast.Mult) and _is_g(b.left) \
        and isinstance(b.right, ast.Name) and b.right.id == var


def form_of(rule, form):
    """``(form, signs)`` for :class:`.derivative.BinaryRule` ``rule`` declared with
    ``form`` (``signs``: ``(sx, sy)`` of a linear form, None for the bilinear one);
    ValueError if its declared derivatives are not that form."""
    if form not in FORMS:
        raise ValueError(f"'{rule.name}': form must be one of {FORMS}, got {form!r}")
    tx, ty = rule.trees
    if rule.special or tx is None or ty is None:
        raise ValueError(f"'{rule.name}': a {form} form has two plain derivatives")
    if form == "linear":
        signs = (_sign(tx), _sign(ty))
        if None in signs:
            raise ValueError(f"'{rule.name}' is declared linear but its derivatives "
                             f"{rule.ds} are not g or -g")
        return form, signs
    if not (_product_with(tx, "y") and _product_with(ty, "x")):
        raise ValueError(f"'{rule.name}' is declared bilinear but its derivatives "
                         f"{rule.ds} are not ('g * y', 'g * x')")
    return form, None


def backward_rules(form, signs):
    """``bps(spec) -> (bp_xy, bp_x, bp_y)`` for ``extend.elementwise_binary``: the
    tape's backward rules of a primitive of that form (:func:`form_of`)."""
    if form == "linear":
        return _linear_bps(*signs)
    return _bilinear_bps


def _linear_bps(sx, sy):
    """Backward rules of ``sx * x + sy * y``: the float branch is ``accumulate``
    inlined, anything else goes through it."""
    def bps(spec):
        def bp_xy(node, g):
            x = node.x
            y = node.y
            cx = g if sx == 1 else -g
            cy = g if sy == 1 else -g
            if type(g) is float and type(x.value) is float and type(y.value) is float:
                a = x.adj
                x.adj = cx if a is None else a + cx
                a = y.adj
                y.adj = cy if a is None else a + cy
                return
            accumulate(x, cx)
            accumulate(y, cy)

        def one(s):
            # only one argument traced (node.x), the other a constant
            def bp(node, g):
                v = node.x
                c = g if s == 1 else -g
                if type(g) is float and type(v.value) is float:
                    a = v.adj
                    v.adj = c if a is None else a + c
                    return
                accumulate(v, c)
            return bp
        return bp_xy, one(sx), one(sy)
    return bps


def _dot_all(g, v):
    """sum(g * v) for equally shaped arrays in one pass (no temporary)."""
    return float(np.dot(g.ravel(), v.ravel()))


def _bilinear_bps(spec):
    # d(x y) = y dx + x dy. Beyond the float fast path: the adjoint of a scalar times
    # an array, sum(g * v), is one dot product instead of a product and a sum.
    def bp_xy(node, g):
        x = node.x
        y = node.y
        xv = x.value
        yv = y.value
        tg = type(g)
        if tg is float and type(xv) is float and type(yv) is float:
            c = g * yv
            a = x.adj
            x.adj = c if a is None else a + c
            c = g * xv
            a = y.adj
            y.adj = c if a is None else a + c
            return
        if x is y:
            # x * x: one product (2g x), exactly g x + g x since doubling is exact
            accumulate(x, (g + g) * xv, True)
            return
        if tg is np.ndarray:
            if type(xv) is float and type(yv) is np.ndarray and yv.shape == g.shape:
                accumulate(x, _dot_all(g, yv))
                accumulate(y, g * xv, True)
                return
            if type(yv) is float and type(xv) is np.ndarray and xv.shape == g.shape:
                accumulate(x, g * yv, True)
                accumulate(y, _dot_all(g, xv))
                return
        accumulate(x, g * yv, True)
        accumulate(y, g * xv, True)

    def bp_one(node, g):
        # one argument traced (node.x), times the constant node.y: g * k either way
        v = node.x
        k = node.y
        if type(v.value) is float and type(g) is np.ndarray and type(k) is np.ndarray \
                and k.shape == g.shape:
            accumulate(v, _dot_all(g, k))
            return
        c = g * k
        if type(c) is float and type(v.value) is float:
            a = v.adj
            v.adj = c if a is None else a + c
            return
        accumulate(v, c)
    return bp_xy, bp_one, bp_one
