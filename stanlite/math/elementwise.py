"""Elementwise functions of one or two arguments, with Stan's names.

What lives here: the pointwise special functions a model's log density is built
from - exponentials and logarithms (``exp``, ``log1p``, ``expm1``, ...), powers and
roots, trigonometric and hyperbolic functions and their inverses, ``fmin``/``fmax``/
``fdim``/``hypot``, and Stan's numerically stable logit family (``inv_logit``,
``log1p_exp``, ``log1m_exp``, ``log_diff_exp``, ...). All are vectorized and
broadcasting, and accept floats, arrays and traced values (``Var``) alike.

Why one module: each function is *one* primitive, defined in one place - the numpy
implementation (plus a ``math``-module float fast path for 0-d values, 20-50x
cheaper than a numpy call on a scalar) and its derivative, stated once beside it as
an expression ``g * f'(x)`` in ``g``, ``x`` and ``ans`` (``extend.unary_primitive``;
autodiff/derivative.py). Every backend is made from that one expression: the VJP and
the JVP (for an elementwise function ``g * f'(x)`` and ``t * f'(x)`` are the same
rule; forward mode hands it tangents already expanded to the output's rank, with
leading batch axes in vector mode), the plain-float VJP of first-order sweeps of
scalar code, the Python replay's inline templates, and the compiled interpreter's op
(``kernel=``, its value there; vm/generate.py). The expression calls stanlite
functions (``g * cos(x)``, never ``np.cos(x)``): under nested differentiation the
rule's arguments are traced values and the rule itself is recorded and
differentiated (reverse-over-reverse, forward-over-reverse for Hessians, and forward
over that for third derivatives), so every function here has derivatives of every
order. Rules reuse ``ans`` (the forward result) where that is cheaper than
recomputing. The binary functions (``atan2``, ``hypot``, ...) keep hand-written
rules per argument.

Conventions
-----------
* Domain errors give what numpy gives - NaN (or +-inf at a pole), with numpy's
  ``RuntimeWarning`` - as Stan returns NaN; the derivative there is NaN/inf too,
  never a silently finite wrong number. Exceptions, as in Stan: ``log1m_exp(0)`` and
  ``log_diff_exp(a, a)`` are ``-inf`` (log of an exact zero) without a warning.
* Non-smooth points use a documented subgradient: ``fabs`` has derivative 0 at 0;
  ``fmin``/``fmax``/``fdim`` (and ``np.minimum``/``np.maximum`` on Vars) split the
  derivative equally, 1/2 to each argument, at ties - the symmetric choice, equal
  to the central difference there, and it keeps ``fmin(x, x)`` of slope 1;
  ``hypot`` has gradient 0 at the origin.
* ``fmin``/``fmax`` ignore a NaN argument (C99), so the whole derivative goes to
  the other argument; ``np.minimum``/``np.maximum`` propagate NaN (value and
  derivative).
* ``pow`` and ``abs`` are :func:`~stanlite.math.arithmetic.power` and
  :func:`~stanlite.math.arithmetic.fabs`, re-exported under Stan's names.

>>> import numpy as np, stanlite as sl
>>> float(sl.log1p_exp(800.0)), float(sl.grad(sl.log1p_exp)(0.0))
(800.0, 0.5)
"""

import math

import numpy as np
from scipy.special import expit as _expit, log_expit as _log_expit

from ..autodiff.extend import binary_primitive, unary_primitive
from ..autodiff.var import UFUNCS
from ..autodiff.vm import opcodes as _op    # the interpreter's op codes (autodiff/vm)
from .arithmetic import fabs, power
from .structure import where

__all__ = ["exp", "log", "log2", "log10", "log1p", "expm1", "sqrt", "cbrt", "square",
           "pow", "inv", "inv_sqrt", "inv_square", "sin", "cos", "tan", "asin", "acos",
           "atan", "atan2", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "abs",
           "fmin", "fmax", "fdim", "hypot", "logit", "inv_logit", "log_inv_logit",
           "log1m_inv_logit", "log1m", "log1m_exp", "log1p_exp", "log_diff_exp", "sign"]

# NB: ``abs`` and ``pow`` are rebound at the end of the module (Stan's names), so the
# code below uses ``math.fabs``/``np.abs`` and never the builtins of those names.

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_INF = math.inf
_NAN = math.nan


def _out(r):
    """A numpy result in stanlite's value representation (0-d -> float)."""
    return float(r) if np.ndim(r) == 0 else r


def _fp(x):
    return np.asarray(x, dtype=np.float64)


def _unary(name, raw, d, scalar=None, **kw):
    """An elementwise unary primitive from its one derivative declaration ``d``
    (``extend.unary_primitive``: its rules, the replay's templates and the
    interpreter's op are all made from it; names resolve in this module)."""
    return unary_primitive(name, raw, d, scalar, names=globals(), **kw)


def _binary2(name, raw, dx, dy, **kw):
    """An elementwise binary primitive from its derivatives declared once, ``dx`` and
    ``dy`` in g, ans, x (the first argument) and y (the second)
    (``extend.binary_primitive``; names resolve in this module)."""
    return binary_primitive(name, raw, dx, dy, names=globals(), **kw)


# ======================================================================================
# exponentials and logarithms
# ======================================================================================
# Each unary function below: its value on arrays and on floats, and its derivative
# once, as ``g * f'(x)`` in g, x and ans (see extend.unary_primitive). ``safe``: the
# float derivative cannot raise. ``op``/``kernel``: the interpreter's op and value.

# d exp(x) = exp(x) dx
exp = _unary("exp", np.exp, "g * ans", math.exp, safe=True,
             op=_op.EXP, kernel="math.exp(x)")

# d log(x) = dx / x
log = _unary("log", np.log, "g / x", math.log, op=_op.LOG,
             kernel="math.log(x) if x > 0.0 else (-math.inf if x == 0.0 else math.nan)")

# d log2(x) = dx / (x log 2)
log2 = _unary("log2", np.log2, "g / (x * _LN2)", math.log2)

# d log10(x) = dx / (x log 10)
log10 = _unary("log10", np.log10, "g / (x * _LN10)", math.log10)

# d log1p(x) = dx / (1 + x)
log1p = _unary("log1p", np.log1p, "g / (1.0 + x)", math.log1p, op=_op.LOG1P,
               kernel="math.log1p(x) if x > -1.0 else "
                      "(-math.inf if x == -1.0 else math.nan)")

# d expm1(x) = exp(x) dx = (expm1(x) + 1) dx
expm1 = _unary("expm1", np.expm1, "g * (ans + 1.0)", math.expm1, safe=True,
               op=_op.EXPM1, kernel="math.expm1(x)")


# d log1m(x) = d log(1 - x) = -dx / (1 - x)          (x <= 1; Stan's log1m)
def _log1m_raw(x):
    return np.log1p(np.negative(x))


def _log1m_s(v):
    return math.log1p(-v)


log1m = _unary("log1m", _log1m_raw, "-g / (1.0 - x)", _log1m_s, op=_op.LOG1M,
               kernel="math.log1p(-x) if x < 1.0 else "
                      "(-math.inf if x == 1.0 else math.nan)")


# ======================================================================================
# powers and roots
# ======================================================================================
# d sqrt(x) = dx / (2 sqrt(x))
sqrt = _unary("sqrt", np.sqrt, "0.5 * g / ans", math.sqrt, op=_op.SQRT,
              kernel="math.sqrt(x) if x >= 0.0 else math.nan")


# d x^2 = 2x dx
def _square_raw(x):
    return np.square(x, dtype=np.float64)


square = _unary("square", _square_raw, "g * 2.0 * x", lambda v: v * v, safe=True,
                op=_op.SQUARE, kernel="x * x", fwd="x * x")

# d cbrt(x) = dx / (3 cbrt(x)^2)
cbrt = _unary("cbrt", np.cbrt, "g / (3.0 * square(ans))",
              getattr(math, "cbrt", None),          # math.cbrt: Python >= 3.11
              op=_op.CBRT, kernel="math.copysign(abs(x) ** (1.0 / 3.0), x)")


# d (1/x) = -dx / x^2 = -(1/x)^2 dx
def _inv_raw(x):
    return np.divide(1.0, x)


inv = _unary("inv", _inv_raw, "-g * square(ans)", lambda v: 1.0 / v, safe=True,
             op=_op.INV, kernel="1.0 / x")


# d x^(-1/2) = -(1/2) x^(-3/2) dx = -(1/2) inv_sqrt(x)^3 dx
def _inv_sqrt_raw(x):
    return np.divide(1.0, np.sqrt(x))


inv_sqrt = _unary("inv_sqrt", _inv_sqrt_raw, "-0.5 * g * ans * square(ans)",
                  lambda v: 1.0 / math.sqrt(v), safe=True, op=_op.INV_SQRT,
                  kernel="1.0 / math.sqrt(x) if x >= 0.0 else math.nan")


# d x^(-2) = -2 x^(-3) dx = -2 inv_square(x) / x dx
def _inv_square_raw(x):
    return np.divide(1.0, np.square(x, dtype=np.float64))


inv_square = _unary("inv_square", _inv_square_raw, "-2.0 * g * ans / x",
                    lambda v: 1.0 / (v * v), op=_op.INV_SQUARE, kernel="1.0 / (x * x)")


# ======================================================================================
# trigonometric functions
# ======================================================================================
# d sin(x) = cos(x) dx
sin = _unary("sin", np.sin, "g * cos(x)", math.sin, op=_op.SIN, kernel="math.sin(x)")

# d cos(x) = -sin(x) dx
cos = _unary("cos", np.cos, "-g * sin(x)", math.cos, op=_op.COS, kernel="math.cos(x)")

# d tan(x) = (1 + tan(x)^2) dx
tan = _unary("tan", np.tan, "g * (1.0 + square(ans))", math.tan, safe=True)

# d asin(x) = dx / sqrt(1 - x^2)      ((1 - x)(1 + x): exact near |x| = 1)
asin = _unary("asin", np.arcsin, "g / sqrt((1.0 - x) * (1.0 + x))", math.asin)

# d acos(x) = -dx / sqrt(1 - x^2)
acos = _unary("acos", np.arccos, "-g / sqrt((1.0 - x) * (1.0 + x))", math.acos)

# d atan(x) = dx / (1 + x^2)    (x^2 overflows only where the derivative is below
# 1e-308: the result is 0 there, as it rounds to)
atan = _unary("atan", np.arctan, "g / (1.0 + square(x))", math.atan, op=_op.ATAN,
              kernel="math.atan(x)")


# atan2(y, x) = arg(x + iy);  d atan2(y, x) = (x dy - y dx) / (x^2 + y^2),
# written (x / h) / h with h = hypot(x, y) so that x^2 + y^2 cannot overflow or
# underflow. NaN at the origin (where atan2 is discontinuous).
def _atan2_raw(y, x):
    if type(y) is float and type(x) is float:
        return math.atan2(y, x)
    return np.arctan2(y, x)


# (declared in the first argument x and the second y: here atan2(x, y) = arg(y + ix))
atan2 = _binary2("atan2", _atan2_raw, "g * (y / hypot(x, y)) / hypot(x, y)",
                 "-g * (x / hypot(x, y)) / hypot(x, y)", vm=_op.ATAN2,
                 kernel="math.atan2(x, y)")


# ======================================================================================
# hyperbolic functions
# ======================================================================================
# d sinh(x) = cosh(x) dx
sinh = _unary("sinh", np.sinh, "g * cosh(x)", math.sinh, op=_op.SINH,
              kernel="math.sinh(x)")

# d cosh(x) = sinh(x) dx
cosh = _unary("cosh", np.cosh, "g * sinh(x)", math.cosh, op=_op.COSH,
              kernel="math.cosh(x)")

# d tanh(x) = (1 - tanh(x)^2) dx = (1 - tanh)(1 + tanh) dx
tanh = _unary("tanh", np.tanh, "g * (1.0 - ans) * (1.0 + ans)", math.tanh, safe=True,
              op=_op.TANH, kernel="math.tanh(x)")

# d asinh(x) = dx / sqrt(1 + x^2) = dx / hypot(1, x)
asinh = _unary("asinh", np.arcsinh, "g / hypot(1.0, x)", math.asinh)

# d acosh(x) = dx / sqrt(x^2 - 1) = dx / (sqrt(x - 1) sqrt(x + 1))     (x >= 1)
acosh = _unary("acosh", np.arccosh, "g / (sqrt(x - 1.0) * sqrt(x + 1.0))", math.acosh)

# d atanh(x) = dx / (1 - x^2) = dx / ((1 - x)(1 + x))        (|x| <= 1)
atanh = _unary("atanh", np.arctanh, "g / ((1.0 - x) * (1.0 + x))", math.atanh)


# ======================================================================================
# fmin, fmax, fdim, hypot
# ======================================================================================
# The derivative of a min/max goes to the argument that is selected; at a tie it is
# split, 1/2 to each (see the module docstring). The weights are selections of
# constants by comparisons of the values (piecewise constant: the derivative of the
# derivative is 0), declared once per argument (extend.binary_primitive: the rules,
# the replay's templates and the interpreter's loops are made from them). Written so
# that the two weights of an ordered pair are w and 1 - w exactly; an unordered pair
# (a NaN) selects by the NaN rule of the function.
def _minmax(name, raw, greater, ignore_nan, scalar_select, op, kernel):
    """fmin (greater=False) / fmax (greater=True); ``ignore_nan``: C's fmin/fmax (the
    number is selected over a NaN, whose weight is 0), else numpy's minimum/maximum
    (a NaN argument: NaN weights)."""
    win, lose = (">", "<") if greater else ("<", ">")

    if ignore_nan:
        # x's weight where unordered: 0 if x is NaN (and y is not), 1 if y is
        ux = "where(y == y, 0.0, where(x == x, 1.0, _NAN))"
        uy = "where(x == x, 0.0, where(y == y, 1.0, _NAN))"
    else:
        ux = uy = "_NAN"
    dx = f"g * where(x {win} y, 1.0, where(x == y, 0.5, where(x {lose} y, 0.0, {ux})))"
    dy = f"g * where(x {lose} y, 1.0, where(x == y, 0.5, where(x {win} y, 0.0, {uy})))"

    def raw2(x, y):
        if type(x) is float and type(y) is float:
            return scalar_select(x, y)
        return raw(x, y, dtype=np.float64)

    return _binary2(name, raw2, dx, dy, safe=True, vm=op, kernel=kernel)


# d fmin(x, y) = dx where x < y (or y is NaN), dy where y < x (or x is NaN),
# (dx + dy) / 2 at ties. NaN-ignoring like C's fmin; numpy returns x at ties.
fmin = _minmax("fmin", np.fmin, False, True,
               lambda x, y: x if (x <= y or y != y) else y,
               _op.FMIN, "x if (x <= y or y != y) else y")
# d fmax(x, y) = dx where x > y (or y is NaN), dy where y > x, (dx + dy) / 2 at ties.
fmax = _minmax("fmax", np.fmax, True, True,
               lambda x, y: x if (x >= y or y != y) else y,
               _op.FMAX, "x if (x >= y or y != y) else y")
# NaN-propagating twins, only reachable as np.minimum / np.maximum on Vars
# (numpy returns y at ties and NaN if either argument is NaN).
_minimum = _minmax("minimum", np.minimum, False, False,
                   lambda x, y: x if (x < y or x != x) else y,
                   _op.MINIMUM, "x if (x < y or x != x) else y")
_maximum = _minmax("maximum", np.maximum, True, False,
                   lambda x, y: x if (x > y or x != x) else y,
                   _op.MAXIMUM, "x if (x > y or x != x) else y")


# fdim(x, y) = x - y if x > y else +0 (C99; NaN if either is NaN, fdim(inf, inf) = 0)
# d fdim(x, y) = dx - dy where x > y, 0 where x < y, (dx - dy) / 2 at ties.
def _fdim_raw(x, y):
    if type(x) is float and type(y) is float:
        if x > y:
            return x - y
        if x != x or y != y:
            return _NAN
        return 0.0
    x = _fp(x)
    y = _fp(y)
    gt = x > y
    with np.errstate(invalid="ignore"):     # inf - inf: not selected (result 0)
        d = np.subtract(x, y)
    r = np.where(gt, d, 0.0)
    return _out(np.where(np.isnan(x) | np.isnan(y), _NAN, r))


# (x <= y is False for a NaN: then x - y, a NaN)
fdim = _binary2("fdim", _fdim_raw,
                "g * where(x > y, 1.0, where(x == y, 0.5, where(x < y, 0.0, _NAN)))",
                "-g * where(x > y, 1.0, where(x == y, 0.5, where(x < y, 0.0, _NAN)))",
                safe=True, vm=_op.FDIM, kernel="0.0 if x <= y else x - y")


# hypot(x, y) = sqrt(x^2 + y^2) without overflow; d hypot = (x dx + y dy) / hypot,
# 0 at the origin (a subgradient: 0 is in the subdifferential of the norm there).
def _hypot_raw(x, y):
    if type(x) is float and type(y) is float:
        try:
            return math.hypot(x, y)
        except OverflowError:
            pass
    return np.hypot(x, y)


hypot = _binary2("hypot", _hypot_raw, "g * x / where(ans == 0.0, 1.0, ans)",
                 "g * y / where(ans == 0.0, 1.0, ans)", vm=_op.HYPOT,
                 kernel="math.hypot(x, y)")


# ======================================================================================
# the logit family (numerically stable forms; Stan's names)
# ======================================================================================
# logit(u) = log(u / (1 - u));  d logit(u) = du / (u (1 - u))        (0 <= u <= 1)
def _logit_raw(u):
    u = _fp(u)
    return np.log(u / (1.0 - u))


logit = _unary("logit", _logit_raw, "g / (x * (1.0 - x))",
               lambda v: math.log(v / (1.0 - v)), op=_op.LOGIT,
               kernel="math.log(x / (1.0 - x))")


# inv_logit(x) = 1 / (1 + exp(-x)), evaluated with e = exp(-|x|) <= 1 (no overflow):
# 1 / (1 + e) for x >= 0, e / (1 + e) for x < 0 (no cancellation for x << 0).
# d inv_logit(x) = inv_logit(x) inv_logit(-x) dx - not ans (1 - ans), which
# cancels to 0 for x >~ 37 while the derivative is still ~exp(-x). The factors
# without g first: under forward-over-reverse g is a batch of tangents (k times
# larger), so this is one pass over it instead of two.
def _inv_logit_raw(x):
    # scipy's expit keeps full relative precision for x << 0 (exp(x) / (1 + exp(x)))
    # in one C loop: 5x faster than the same formula as numpy calls on small arrays
    return _out(_expit(_fp(x)))


def _inv_logit_s(v):
    if v >= 0.0:
        return 1.0 / (1.0 + math.exp(-v))
    e = math.exp(v)             # v < 0 or NaN: no overflow
    return e / (1.0 + e)


inv_logit = _unary("inv_logit", _inv_logit_raw, "g * (ans * inv_logit(-x))",
                   _inv_logit_s, safe=True, op=_op.INV_LOGIT, kernel="_inv_logit(x)")


# log_inv_logit(x) = log(inv_logit(x)) = min(x, 0) - log1p(exp(-|x|))
# d log_inv_logit(x) = (1 - inv_logit(x)) dx = inv_logit(-x) dx
def _log_inv_logit_raw(x):
    x = _fp(x)
    return np.minimum(x, 0.0) - np.log1p(np.exp(-np.abs(x)))


def _log_inv_logit_s(v):
    return (v if v < 0.0 else 0.0) - math.log1p(math.exp(-math.fabs(v)))


log_inv_logit = _unary("log_inv_logit", _log_inv_logit_raw, "g * inv_logit(-x)",
                       _log_inv_logit_s, safe=True, op=_op.LOG_INV_LOGIT,
                       kernel="-_log1p_exp(-x)")


# log1m_inv_logit(x) = log(1 - inv_logit(x)) = min(-x, 0) - log1p(exp(-|x|))
# d log1m_inv_logit(x) = -inv_logit(x) dx
def _log1m_inv_logit_raw(x):
    x = _fp(x)
    return np.minimum(np.negative(x), 0.0) - np.log1p(np.exp(-np.abs(x)))


def _log1m_inv_logit_s(v):
    return (-v if v > 0.0 else 0.0) - math.log1p(math.exp(-math.fabs(v)))


log1m_inv_logit = _unary("log1m_inv_logit", _log1m_inv_logit_raw, "-g * inv_logit(x)",
                         _log1m_inv_logit_s, safe=True, op=_op.LOG1M_INV_LOGIT,
                         kernel="-_log1p_exp(x)")


# log1p_exp(x) = log(1 + exp(x)) = max(x, 0) + log1p(exp(-|x|))   (softplus)
# d log1p_exp(x) = inv_logit(x) dx
def _log1p_exp_raw(x):
    x = _fp(x)
    if x.size < 4096:
        # one C loop (log_expit is stable both ways): the per-call cost dominates here
        return _out(-_log_expit(-x))
    # on large arrays the four vectorized passes are 5x faster than log_expit
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def _log1p_exp_s(v):
    return (v if v > 0.0 else 0.0) + math.log1p(math.exp(-math.fabs(v)))


log1p_exp = _unary("log1p_exp", _log1p_exp_raw, "g * inv_logit(x)", _log1p_exp_s,
                   safe=True, op=_op.LOG1P_EXP, kernel="_log1p_exp(x)")


# log1m_exp(x) = log(1 - exp(x)), x <= 0: log(-expm1(x)) for x > -log 2 (no
# cancellation near 0), log1p(-exp(x)) below. log1m_exp(0) = -inf (silently, as
# Stan); NaN with numpy's warning for x > 0.
# d log1m_exp(x) = -exp(x) / (1 - exp(x)) dx = -exp(x - log1m_exp(x)) dx
# (no overflow for x << 0, -inf at x = 0).
def _log1m_exp_np(x):
    x = _fp(x)
    with np.errstate(divide="ignore"):      # x == 0: log(0) = -inf is the value
        near = np.log(-np.expm1(x))
    far = np.log1p(-np.exp(np.minimum(x, -_LN2)))
    return np.where(x > -_LN2, near, far)


def _log1m_exp_raw(x):
    return _out(_log1m_exp_np(x))


def _log1m_exp_s(v):
    if v > -_LN2:
        if v == 0.0:
            return -_INF
        return math.log(-math.expm1(v))     # v > 0: ValueError -> numpy's NaN
    return math.log1p(-math.exp(v))


# (the replay calls its rule: tests/autodiff/test_codegen_inline.py replays every
# inline template at points in (0.2, 0.9), outside this function's domain)
log1m_exp = _unary("log1m_exp", _log1m_exp_raw, "-g * exp(x - ans)", _log1m_exp_s,
                   op=_op.LOG1M_EXP, inline=False,
                   kernel="_log1m_exp(x) if x < 0.0 else "
                          "(-math.inf if x == 0.0 else math.nan)")


# log_diff_exp(x, y) = log(exp(x) - exp(y)) = x + log1m_exp(y - x)       (x >= y)
# log_diff_exp(a, a) = -inf (also for a = -inf); NaN with numpy's warning for x < y
# and for x = y = +inf.
# d log_diff_exp = (exp(x) dx - exp(y) dy) / (exp(x) - exp(y))
#                = exp(x - ans) dx - exp(y - ans) dy
def _log_diff_exp_raw(x, y):
    if type(x) is float and type(y) is float and y < x < _INF:
        d = y - x       # in [-inf, 0), nonzero
        if d > -_LN2:
            return x + math.log(-math.expm1(d))
        return x + math.log1p(-math.exp(d))
    x = _fp(x)
    y = _fp(y)
    both = (x == -_INF) & (y == -_INF)
    if both.any():      # log(0 - 0) = -inf, not -inf - (-inf) = NaN
        x = np.where(both, 0.0, x)
        y = np.where(both, 0.0, y)
    return _out(x + _log1m_exp_np(y - x))


log_diff_exp = _binary2("log_diff_exp", _log_diff_exp_raw, "g * exp(x - ans)",
                        "-g * exp(y - ans)", vm=_op.LOG_DIFF_EXP,
                        kernel="x + _log1m_exp(y - x) if y < x else "
                               "(-math.inf if x == y else math.nan)")


# ======================================================================================
# sign, abs, pow
# ======================================================================================
# sign is piecewise constant: derivative 0 (Stan's convention, also at 0)
def _sign_s(v):
    return 1.0 if v > 0.0 else (-1.0 if v < 0.0 else v)     # 0, -0 and NaN: v


sign = _unary("sign", np.sign, "0.0 * g", _sign_s, safe=True)

# Stan's names for arithmetic's |x| (derivative sign(x), 0 at 0) and x^y
abs = fabs      # noqa: A001
pow = power     # noqa: A001


UFUNCS.update({
    np.exp: exp, np.log: log, np.log2: log2, np.log10: log10, np.log1p: log1p,
    np.expm1: expm1, np.sqrt: sqrt, np.cbrt: cbrt, np.square: square,
    np.reciprocal: inv, np.sin: sin, np.cos: cos, np.tan: tan, np.arcsin: asin,
    np.arccos: acos, np.arctan: atan, np.arctan2: atan2, np.sinh: sinh, np.cosh: cosh,
    np.tanh: tanh, np.arcsinh: asinh, np.arccosh: acosh, np.arctanh: atanh,
    np.fmin: fmin, np.fmax: fmax, np.minimum: _minimum, np.maximum: _maximum,
    np.hypot: hypot, np.sign: sign,
})
