"""Arithmetic primitives, the ones behind the operators of :class:`~stanlite.Var`.

``+ - * / **``, unary ``-`` and ``abs`` (the operators themselves, and the
comparisons, are in autodiff/operators.py). Derivatives (elementwise,
broadcast; the sum back to each input's shape is done by the core):

    d(x + y) = dx + dy          d(x * y) = y dx + x dy
    d(x / y) = dx / y - (x / y^2) dy
    d(x ** y) = y x^(y-1) dx + log(x) x^y dy     (the dy term is 0 where x == 0)
    d|x| = sign(x) dx                            (0 at x == 0, a subgradient)

Comparisons compare values and return plain booleans or boolean arrays: a branch
on them is a branch of the program, not of the derivative.
"""

import operator

import numpy as np

from ..autodiff.extend import binary_primitive, unary_primitive
from ..autodiff.operators import register as register_operators
from ..autodiff.var import UFUNCS
from ..autodiff.vm import opcodes as _op    # the interpreter's lowerings (autodiff/vm)

__all__ = ["add", "subtract", "multiply", "divide", "power", "negative", "fabs",
           "abs_", "pow_"]


# d(-x) = -dx (its rules, replay templates and interpreter op from this one line)
negative = unary_primitive("negative", np.negative, "-g", operator.neg, names=globals(),
                           safe=True, op=_op.NEG, kernel="-x", fwd="-x")


# Each binary operator below: its value, and its derivative in each argument once, as
# an expression in g, ans, x and y (extend.binary_primitive: the VJPs, JVPs, the
# replay's templates and the interpreter's loops are all made from it). + - * declare
# their form (linear, bilinear: checked against the derivatives), from which the
# tape and the Python replay take fast rules for the most frequent nodes of scalar
# code (autodiff/fast_rules.py).

# d(x + y) = dx + dy
add = binary_primitive("add", np.add, "g", "g", names=globals(), op=operator.add,
                       safe=True, vm=_op.ADD, kernel="x + y", form="linear")
# d(x - y) = dx - dy
subtract = binary_primitive("subtract", np.subtract, "g", "-g", names=globals(),
                            op=operator.sub, safe=True, vm=_op.SUB, kernel="x - y",
                            form="linear")
# d(x y) = y dx + x dy
multiply = binary_primitive("multiply", np.multiply, "g * y", "g * x", names=globals(),
                            op=operator.mul, safe=True, vm=_op.MUL, kernel="x * y",
                            form="bilinear")


def _true_divide(x, y):
    return np.true_divide(x, y)


# d(x / y) = dx / y - (x / y^2) dy = (dx - ans dy) / y
divide = binary_primitive("divide", _true_divide, "g / y", "-g * ans / y",
                          names=globals(), vm=_op.DIV, kernel="x / y", fwd="x / y")


def _pow_raw(x, y):
    if type(x) is float and type(y) in (float, int):
        try:
            r = x ** y
            if type(r) is float:
                return r
        except (OverflowError, ZeroDivisionError):
            pass
    return np.power(np.asarray(x, dtype=float) if type(x) is int else x, y)


# d(x ** y) = y x^(y-1) dx + log(x) x^y dy. In x: written with x^(y-1) (not ans / x) so
# that x == 0 is right; constant exponents 0, 1, 2 are spelled out so that the
# derivatives of the derivative never form 0 * x^-1 (NaN at x == 0): d^3/dx^3 x^2 must
# be 0 there, as it is anywhere. In y: log(x) x^y, defined as 0 where x == 0 (then x^y
# is 0 or 1 and the limit is used).
power = binary_primitive("power", _pow_raw, "g * y * power(x, y - 1.0)",
                         "g * ans * log(where(x == 0.0, 1.0, x))", names=globals(),
                         vm=_op.POW, kernel="x ** y",
                         special={0: "0.0 * g", 1: "g", 2: "g * 2.0 * x"})


# d|x| = sign(x) dx (sign: math/elementwise.py, found at first use)
fabs = unary_primitive("fabs", np.abs, "g * sign(x)", abs, names=globals(), safe=True,
                       op=_op.FABS, kernel="abs(x)")
abs_ = fabs
pow_ = power


# -- operator overloads -------------------------------------------------------------
# Var's and Dual's operators (autodiff/operators.py) call these primitives; ``+ - * /
# **`` and unary ``-`` are the primitives themselves (no extra Python frame per
# operator on the hot path of scalar code)
register_operators(add=add, subtract=subtract, multiply=multiply, divide=divide,
                   power=power, negative=negative, fabs=fabs)

UFUNCS.update({
    np.add: add, np.subtract: subtract, np.multiply: multiply, np.divide: divide,
    np.true_divide: divide, np.power: power, np.negative: negative,
    np.absolute: fabs, np.fabs: fabs,
    np.positive: lambda x: x,
})     # (the comparisons' ufuncs are the operators': autodiff/operators.py)

