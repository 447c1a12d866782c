"""Elementwise functions of one or two arguments, with Stan's names.

Each function is one primitive: the numpy implementation (plus a ``math``-module
scalar fast path where one exists) and its VJP, side by side. Derivatives are
stated in each entry's comment; domain errors give what numpy gives (NaN/inf, with
numpy's RuntimeWarning), never a silently wrong derivative.
"""

import math

import numpy as np

from ..autodiff.extend import elementwise_binary, elementwise_unary
from ..autodiff.var import UFUNCS

__all__ = ["exp", "log", "sqrt", "square", "sin", "cos", "sign"]

# d exp(x) = exp(x) dx
exp = elementwise_unary("exp", np.exp, lambda g, ans, x: g * ans, scalar=math.exp,
                        scalar_vjp=lambda g, ans, x: g * ans)
# d log(x) = dx / x
log = elementwise_unary("log", np.log, lambda g, ans, x: g / x, scalar=math.log)
# d sqrt(x) = dx / (2 sqrt(x))
sqrt = elementwise_unary("sqrt", np.sqrt, lambda g, ans, x: g * 0.5 / ans, scalar=math.sqrt)
# d x^2 = 2x dx
square = elementwise_unary("square", np.square, lambda g, ans, x: g * 2.0 * x,
                           scalar=lambda v: v * v)
# d sin(x) = cos(x) dx
sin = elementwise_unary("sin", np.sin, lambda g, ans, x: g * cos(x), scalar=math.sin,
                        scalar_vjp=lambda g, ans, x: g * math.cos(x))
# d cos(x) = -sin(x) dx
cos = elementwise_unary("cos", np.cos, lambda g, ans, x: -g * sin(x), scalar=math.cos)
# sign is piecewise constant: derivative 0 (Stan's convention, also at 0)
sign = elementwise_unary("sign", np.sign, lambda g, ans, x: 0.0 * g)

UFUNCS.update({np.exp: exp, np.log: log, np.sqrt: sqrt, np.square: square, np.sin: sin,
               np.cos: cos, np.sign: sign})
