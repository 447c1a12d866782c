"""Special functions with Stan's names: the gamma family, error functions and the
normal CDF, log-sum-exp and mixtures, incomplete beta/gamma, modified Bessel.

These are the non-elementary functions Stan models use in log densities (lgamma in
every normalising constant, log_sum_exp in every mixture, Phi in probit links). They
live apart from :mod:`.elementwise` because their values come from
:mod:`scipy.special` and their derivatives are themselves special functions
(d lgamma = digamma, d digamma = trigamma, ...), so they form one closed family.

Each function is one primitive: the raw numpy/scipy implementation (with a ``math``
scalar fast path where one exists), its VJP and its JVP (forward mode) side by side;
every entry's comment states the value and the derivative and where the formula comes
from (DLMF = NIST Digital Library of Mathematical Functions, section numbers given).
For the elementwise functions the VJP ``g * f'(x)`` and the JVP ``t * f'(x)`` are one
rule ``_d_<name>`` (per argument), as in :mod:`.elementwise`: forward mode hands it
tangents already expanded to the output's rank (with leading batch axes in vector
mode; the ``@primitive`` ones that broadcast are marked ``broadcasting`` for that).
The log-sum-exp reduction is the one rule that is not elementwise: its tangent is
the softmax-weighted sum of the input tangent over the reduced axes.

All rules are written with stanlite operations, so every derivative is itself
differentiable: reverse-over-reverse, forward-over-reverse (Hessians evaluate the
VJPs on duals) and forward over that (third derivatives). Domain errors give what
scipy/numpy give (NaN or inf; scipy is silent, a numpy function such as the log in a
VJP warns as in :mod:`.elementwise`), as Stan returns NaN; at domain edges a
derivative may be inf or NaN, never a finite wrong number.

Missing derivatives (no simple closed form; Stan uses convergent series): passing a
traced value there raises :class:`~stanlite.DifferentiationError` when the call is
recorded (reverse mode) or evaluated (forward mode, hence also Hessians):

* ``inc_beta(a, b, x)``  w.r.t. ``a`` and ``b`` (only ``x`` is differentiable);
* ``gamma_p(a, x)``, ``gamma_q(a, x)``  w.r.t. ``a`` (only ``x``);
* ``log_modified_bessel_first_kind(v, z)``  w.r.t. the order ``v`` (only ``z``).
"""

import math

import numpy as np
import scipy.special as sps

from ..autodiff.extend import (batch_shape, binary_primitive, defjvp, defjvp_all, defvjp,
                               defvjp_all, elementwise_unary,
                               primitive, unary_primitive)
from ..autodiff.var import UFUNCS, guarded, shape_of, value_of
from ..autodiff.vm import opcodes as _op    # the interpreter's lowerings (autodiff/vm)
from ..autodiff.vm import program as _program
from ..autodiff.vm.scalar import (_digamma_diff as _digamma_diff_float, _jit,
                                  _lbeta as _lbeta_float, _lchoose as _lchoose_float,
                                  _owens_t as _owens_t_float)
from ..autodiff.vm.program import deflower as _deflower, reduction as _lr
from .elementwise import exp, inv_logit, log, log1p, square
from .reductions import sum as _sum
from .structure import reshape, stack, where

__all__ = ["lgamma", "digamma", "trigamma", "tgamma", "lbeta", "lchoose",
           "binomial_coefficient_log", "erf", "erfc", "Phi", "Phi_approx", "inv_Phi", "log_Phi",
           "log_sum_exp", "log_mix", "inc_beta", "gamma_p", "gamma_q",
           "log_modified_bessel_first_kind"]

_INF = math.inf
_LN2 = math.log(2.0)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
_INV_SQRT_2PI = 1.0 / _SQRT_2PI
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_PI = math.pi


def _f(r):
    """scipy/numpy result -> stanlite value (float for 0-d, float64 array otherwise)."""
    if type(r) is np.ndarray and r.ndim:
        return r
    return float(r)


def _exp_or_inf(v):
    try:
        return math.exp(v)
    except OverflowError:
        return _INF


def _elementwise(prim):
    """Mark a ``@primitive`` that broadcasts its arguments elementwise (numpy rules):
    forward mode then expands its input tangents to the output's rank, so its JVPs
    are ``t * f'(x)`` like those of ``elementwise_unary``/``elementwise_binary``."""
    prim._spec.broadcasting = True
    return prim


# --------------------------------------------------------------------------------------
# private helpers (differentiable, used by the rules below)
# --------------------------------------------------------------------------------------
@_elementwise
@primitive
def _polygamma(n, x):
    """psi^(n)(x); d/dx psi^(n)(x) = psi^(n+1)(x) (DLMF 5.15). ``n`` is an order."""
    return _f(sps.polygamma(n, x))


def _d_polygamma(g, ans, n, x):
    return g * _polygamma(n + 1, x)


defvjp(_polygamma, None, _d_polygamma)
defjvp(_polygamma, None, _d_polygamma)


def _safe_lse(ans):
    """``ans`` with -inf replaced by 0: ``exp(x - safe)`` is then 0, not NaN, where a
    log-sum-exp is -inf (all its terms are -inf), so those weights are zero."""
    # decisions on values through ``guarded``: a retaped recording re-checks them
    if not guarded(_has_neg_inf, ans):
        return ans
    if shape_of(ans) == ():
        return 0.0
    return where(guarded(_is_neg_inf, ans), 0.0, ans)


def _has_neg_inf(a):
    return bool(np.any(np.asarray(a) == -_INF))


def _is_neg_inf(a):
    return np.asarray(a) == -_INF


def _times_log(c, x, pole, logf):
    """``c * logf(x)`` with the convention ``0 * logf(pole) = 0`` (``logf(pole)`` is
    -inf), written with a double ``where`` so that no NaN enters the reverse sweep."""
    cv = np.asarray(value_of(c))
    xv = np.asarray(value_of(x))
    at_pole = xv == pole
    if not np.any(at_pole):
        return c * logf(x)
    bad = (cv == 0) & at_pole
    with np.errstate(divide="ignore"):  # elsewhere logf(pole) = -inf is the right value
        if not np.any(bad):
            return c * logf(x)
        xs = where(bad, 0.5, x)
        return where(bad, 0.0, c * logf(xs))


def _log1m(x):
    return log1p(-x)


# --------------------------------------------------------------------------------------
# the gamma family
# --------------------------------------------------------------------------------------
# lgamma(x) = log|Gamma(x)|;  d = digamma(x) dx  (DLMF 5.2.2). Poles give +inf.
# (one derivative declaration: extend.unary_primitive)
lgamma = unary_primitive("lgamma", sps.gammaln, "g * digamma(x)", math.lgamma,
                         names=globals(), safe=True, op=_op.LGAMMA, kernel="math.lgamma(x)")


# digamma(x) = Gamma'(x) / Gamma(x);  d = trigamma(x) dx  (DLMF 5.15.1)
def _d_digamma(g, ans, x):
    return g * trigamma(x)


digamma = elementwise_unary(
    "digamma", sps.psi, _d_digamma, scalar=lambda v: float(sps.psi(v)),
    scalar_vjp=lambda g, ans, x: g * float(sps.polygamma(1, x)))
defjvp(digamma, _d_digamma)


def _trigamma_raw(x):
    return _f(sps.polygamma(1, x))


# trigamma(x) = psi'(x) = sum_k 1/(x+k)^2;  d = psi''(x) dx = polygamma(2, x) dx
# (DLMF 5.15.1, 5.15.2)
def _d_trigamma(g, ans, x):
    return g * _polygamma(2, x)


trigamma = elementwise_unary(
    "trigamma", _trigamma_raw, _d_trigamma,
    scalar=_trigamma_raw, scalar_vjp=lambda g, ans, x: g * float(sps.polygamma(2, x)))
defjvp(trigamma, _d_trigamma)


# tgamma(x) = Gamma(x);  d = Gamma(x) digamma(x) dx  (DLMF 5.2.2). Poles: +-inf/NaN.
def _d_tgamma(g, ans, x):
    return g * ans * digamma(x)


tgamma = elementwise_unary(
    "tgamma", sps.gamma, _d_tgamma, scalar=math.gamma,
    scalar_vjp=lambda g, ans, x: g * ans * float(sps.psi(x)))
defjvp(tgamma, _d_tgamma)


@_jit
def _lbeta_loop(a, b, out):
    for i in range(out.size):
        out[i] = _lbeta_float(a[i], b[i])


@_jit
def _lchoose_loop(a, b, out):
    for i in range(out.size):
        out[i] = _lchoose_float(a[i], b[i])


@_jit
def _digamma_diff_loop(a, b, out):
    for i in range(out.size):
        out[i] = _digamma_diff_float(a[i], b[i])


def _pairwise(f, loop):
    """The raw value of a binary primitive whose value on floats is the compiled ``f``
    (``loop``: ``f`` over flat arrays): elementwise over broadcast arrays, so the tape's
    value is the interpreter's own, bit for bit."""
    def raw(a, b):
        if type(a) is float and type(b) is float:
            return float(f(a, b))
        a, b = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
        out = np.empty(a.shape)
        loop(np.ascontiguousarray(a).ravel(), np.ascontiguousarray(b).ravel(), out.ravel())
        return _f(out)

    return raw


# digamma_diff(x, y) = psi(x) - psi(x + y) (x, x + y > 0), without the cancellation of
# the two digammas for |y| << x (vm/scalar.py _digamma_diff: recurrence and asymptotic
# series with the factor y taken out; ~5e-16 relative): lbeta's and lchoose's
# derivatives, whose plain digamma difference loses ~1e-15 / (y/x) relative, so that a
# tape and an interpreter with two digamma implementations disagree there;
# d = (trigamma(x) - trigamma(x + y)) dx - trigamma(x + y) dy  (DLMF 5.15.1). Private:
# no interpreter op of its own (the generated VJPs call the helper directly).
digamma_diff = binary_primitive("digamma_diff", _pairwise(_digamma_diff_float,
                                                          _digamma_diff_loop),
                                "g * (trigamma(x) - trigamma(x + y))",
                                "-g * trigamma(x + y)", names=globals())


# lbeta(a, b) = log B(a, b) = lgamma(a) + lgamma(b) - lgamma(a + b)  (DLMF 5.12.1),
# computed by vm/scalar.py's _lbeta (Stirling differences where the lgamma sum would
# cancel: ~1e-15 of max(1, |value|), see there); the tape and the interpreter share it;
# d = (digamma(a) - digamma(a + b)) da + (digamma(b) - digamma(a + b)) db
lbeta = binary_primitive("lbeta", _pairwise(_lbeta_float, _lbeta_loop),
                         "g * digamma_diff(x, y)", "g * digamma_diff(y, x)", names=globals(),
                         vm=_op.LBETA, kernel="_lbeta(x, y)")


# lchoose(n, k) = log of the generalised binomial coefficient
#               = lgamma(n+1) - lgamma(k+1) - lgamma(n-k+1)   (DLMF 1.2.6, 5.2.1),
# computed by vm/scalar.py's _lchoose (-log(n+1) - lbeta(n-k+1, k+1) for n >= 8; Stan's
# domain n, k, n - k >= -1, NaN outside);
# d = (digamma(n+1) - digamma(n-k+1)) dn + (digamma(n-k+1) - digamma(k+1)) dk, the first
# as -digamma_diff(n-k+1, k) (no cancellation for k << n)
lchoose = binary_primitive("lchoose", _pairwise(_lchoose_float, _lchoose_loop),
                           "-g * digamma_diff(x - y + 1.0, y)",
                           "g * (digamma(x - y + 1.0) - digamma(y + 1.0))", names=globals(),
                           vm=_op.LCHOOSE, kernel="_lchoose(x, y)")
lbeta.__doc__ = """``log B(a, b) = lgamma(a) + lgamma(b) - lgamma(a + b)`` elementwise (Stan's
    ``lbeta``), a, b > 0; to ~1e-15 of max(1, |value|) over 1e-8..1e10 (Stirling
    differences where the lgamma sum cancels: vm/scalar.py ``_lbeta``, the interpreter's
    value too). d/da = digamma(a) - digamma(a + b), d/db likewise.

    >>> import math, stanlite as sl
    >>> sl.lbeta(2.0, 3.0) == math.log(1.0 / 12.0)
    True
    """
lchoose.__doc__ = """``log C(n, k) = lgamma(n+1) - lgamma(k+1) - lgamma(n-k+1)`` elementwise,
    real n, k with n, k, n - k >= -1 (NaN outside; Stan's ``lchoose``), from
    :func:`lbeta` for n >= 8; differentiable in both.

    >>> import math, stanlite as sl
    >>> abs(sl.lchoose(10.0, 3.0) - math.log(120.0)) < 1e-14
    True
    """
digamma_diff.__doc__ = """``digamma(x) - digamma(x + y)`` elementwise (x > 0, x + y > 0), without
    cancellation for |y| << x (private: lbeta's and lchoose's derivatives).

    >>> import math
    >>> from stanlite.math.special import digamma_diff
    >>> abs(digamma_diff(1.0, 1.0) + 1.0) < 1e-15      # psi(1) - psi(2) = -1
    True
    """
# Stan Math's (C++) name of the same function, and the Stan language's name before
# ``lchoose`` took over: the very same primitive, not a copy.
binomial_coefficient_log = lchoose

# --------------------------------------------------------------------------------------
# error functions and the normal distribution
# --------------------------------------------------------------------------------------
# erf(x) = 2/sqrt(pi) int_0^x e^{-t^2} dt;  d = 2/sqrt(pi) e^{-x^2} dx  (DLMF 7.2.1)
erf = unary_primitive("erf", sps.erf, "g * _TWO_OVER_SQRT_PI * exp(-square(x))", math.erf,
                      names=globals(), safe=True, op=_op.ERF, kernel="math.erf(x)")


# erfc(x) = 1 - erf(x) (accurate in the right tail);  d = -2/sqrt(pi) e^{-x^2} dx
erfc = unary_primitive("erfc", sps.erfc, "-g * _TWO_OVER_SQRT_PI * exp(-square(x))",
                       math.erfc, names=globals(), safe=True, op=_op.ERFC,
                       kernel="math.erfc(x)")


# Phi(x) = standard normal CDF = erfc(-x / sqrt 2) / 2  (DLMF 7.2.2, 7.18);
# d = phi(x) dx = e^{-x^2/2} / sqrt(2 pi) dx, the normal density
Phi = unary_primitive("Phi", sps.ndtr, "g * _INV_SQRT_2PI * exp(-0.5 * square(x))",
                      lambda v: 0.5 * math.erfc(-v * _INV_SQRT2), names=globals(),
                      safe=True, op=_op.PHI, kernel="0.5 * math.erfc(-x * _INV_SQRT2)")


# log_Phi(x) = log Phi(x), accurate in both tails (scipy's log_ndtr; no underflow of
# Phi at x < -37);  d = phi(x)/Phi(x) = exp(log phi(x) - log_Phi(x)), the inverse Mills
# ratio, computed in logs so that it stays finite where phi and Phi both underflow
def _d_log_Phi(g, ans, x):
    return g * exp(-0.5 * x * x - _HALF_LOG_2PI - ans)


log_Phi = elementwise_unary("log_Phi", sps.log_ndtr, _d_log_Phi,
                            scalar=lambda v: float(sps.log_ndtr(v)))
defjvp(log_Phi, _d_log_Phi)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


# Phi_approx(x) = inv_logit(0.07056 x^3 + 1.5976 x), Stan's logistic approximation of
# Phi (Bowling et al. 2009, as in Stan's functions reference);
# with u(x) = 0.07056 x^3 + 1.5976 x:  d = p (1 - p) u'(x) dx, u'(x) = 0.21168 x^2 + 1.5976,
# with 1 - p written inv_logit(-u) (exact in the right tail)
def _phi_approx_u(x):
    return x * (0.07056 * x * x + 1.5976)


def _phi_approx_raw(x):
    return sps.expit(_phi_approx_u(x))


def _phi_approx_scalar(v):
    try:
        return 1.0 / (1.0 + math.exp(-_phi_approx_u(v)))
    except OverflowError:
        return 0.0


def _d_Phi_approx(g, ans, x):
    u = x * (0.07056 * square(x) + 1.5976)
    return g * ans * inv_logit(-u) * (0.21168 * square(x) + 1.5976)


def _phi_approx_svjp(g, ans, x):
    q = 1.0 / (1.0 + _exp_or_inf(_phi_approx_u(x)))  # inv_logit(-u)
    return g * ans * q * (0.21168 * x * x + 1.5976)


Phi_approx = elementwise_unary("Phi_approx", _phi_approx_raw, _d_Phi_approx,
                               scalar=_phi_approx_scalar, scalar_vjp=_phi_approx_svjp)
defjvp(Phi_approx, _d_Phi_approx)


# inv_Phi(p) = Phi^{-1}(p), the standard normal quantile;  d = dp / phi(inv_Phi(p))
# = sqrt(2 pi) e^{ans^2 / 2} dp  (inverse function rule). 0 -> -inf, 1 -> inf.
def _d_inv_Phi(g, ans, p):
    return g * _SQRT_2PI * exp(0.5 * square(ans))


inv_Phi = elementwise_unary(
    "inv_Phi", sps.ndtri, _d_inv_Phi, scalar=lambda v: float(sps.ndtri(v)),
    scalar_vjp=lambda g, ans, p: g * _SQRT_2PI * _exp_or_inf(0.5 * ans * ans))
defjvp(inv_Phi, _d_inv_Phi)


# --------------------------------------------------------------------------------------
# log-sum-exp and mixtures
# --------------------------------------------------------------------------------------
def _lse2_raw(a, b):
    if type(a) is float and type(b) is float:
        # log(e^a + e^b) = max + log1p(e^{-|a - b|}); equal (also both +-inf): a + log 2
        if a > b:
            return a + math.log1p(math.exp(b - a))
        if b > a:
            return b + math.log1p(math.exp(a - b))
        return a + _LN2 if a == b else a + b  # a + b: NaN in, NaN out
    return np.logaddexp(a, b)


# log_sum_exp(a, b) = log(e^a + e^b) (numpy's logaddexp, stable);
# d = softmax weights: e^{a - ans} da + e^{b - ans} db; both -inf: value -inf, weights 0
_log_sum_exp2 = binary_primitive(
    "log_sum_exp", _lse2_raw, "g * exp(x - where(ans == -_INF, 0.0, ans))",
    "g * exp(y - where(ans == -_INF, 0.0, ans))", names=globals(), vm=_op.LSE2,
    kernel="-math.inf if (x if x > y else y) == -math.inf else "
           "(x if x > y else y) + math.log1p(math.exp(-abs(x - y)))")


def _kept_shape(shape, axis):
    """``shape`` with the reduced ``axis`` (None: all) kept as length 1."""
    if axis is None:
        return tuple(1 for _ in shape)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    axes = tuple(int(a) % len(shape) for a in axes)
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


@primitive
def _log_sum_exp_reduce(x, axis=None, keepdims=False):
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # max + log(sum(exp(x - max))): the largest term is exp(0) = 1, no overflow;
        # an infinite max (all -inf, empty, or some +inf) is not subtracted
        m = np.max(x, axis=axis, keepdims=True, initial=-np.inf)
        m = np.where(np.isfinite(m), m, 0.0)
        s = np.sum(np.exp(x - m), axis=axis, keepdims=keepdims)
        if not keepdims:
            m = m.reshape(()) if axis is None else np.squeeze(m, axis=axis)
        r = np.log(s) + m
    return _f(r)


# d log_sum_exp(x) = softmax(x) . dx over the reduced axes: the weights e^{x - ans}
# (0 where ans = -inf). The VJP spreads g over the reduced axes with those weights;
# the JVP sums t times them over the same axes (of the tangent: after its batch axes).
def _lse_weights(ans, x, axis, keepdims):
    if not keepdims:
        ans = reshape(ans, _kept_shape(shape_of(x), axis))
    return exp(x - _safe_lse(ans))


def _log_sum_exp_reduce_vjp(g, ans, x, axis=None, keepdims=False):
    if not keepdims:
        g = reshape(g, _kept_shape(shape_of(x), axis))
    return g * _lse_weights(ans, x, axis, keepdims)


def _log_sum_exp_reduce_jvp(t, ans, x, axis=None, keepdims=False):
    tw = t * _lse_weights(ans, x, axis, keepdims)
    nd = len(shape_of(x))
    nb = len(batch_shape(t, x))
    if axis is None:
        axes = tuple(range(nb, nb + nd))
    else:
        axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
        axes = tuple(nb + int(a) % nd for a in axes)
    return _sum(tw, axes, keepdims) if axes else tw


defvjp(_log_sum_exp_reduce, _log_sum_exp_reduce_vjp, None, None)
defjvp(_log_sum_exp_reduce, _log_sum_exp_reduce_jvp, None, None)
_deflower(_log_sum_exp_reduce, _lr(_op.LSE))
from . import lse_sweeps as _lse_sweeps  # noqa: E402,F401  (LSE, LOG_MIX sweeps)


_NO_ARG = object()


def log_sum_exp(x, y=_NO_ARG, *, axis=None, keepdims=False):
    """``log(exp(x) + exp(y))`` elementwise (broadcasting), or, with one argument,
    ``log(sum(exp(x)))`` over ``axis`` (all elements by default).

    Both forms are stable (the maximum is factored out) and their gradients are the
    softmax weights ``exp(x_i - result)``. All-``-inf`` input (and an empty array)
    gives ``-inf`` with a zero gradient; a ``+inf`` input gives ``+inf`` (its own
    weight is then NaN: the derivative is undefined there). ``axis`` is keyword-only,
    so the second positional argument is always the second operand; a list of
    scalars is stacked into a vector first (Stan's ``log_sum_exp(array)``).

    >>> import numpy as np, stanlite as sl
    >>> float(sl.log_sum_exp(np.log([1.0, 2.0, 3.0])))  # log 6
    1.791759469228055
    """
    if y is not _NO_ARG:
        if axis is not None or keepdims:
            raise TypeError("log_sum_exp(x, y) is elementwise: axis/keepdims apply only "
                            "to the one-argument (reduction) form")
        return _log_sum_exp2(x, y)
    if isinstance(x, (list, tuple)):
        x = stack(list(x)) if x else np.zeros(0)
    return _log_sum_exp_reduce(x, axis, keepdims)


@_elementwise
@primitive
def log_mix(theta, lp1, lp2):
    """``log(theta exp(lp1) + (1 - theta) exp(lp2))``, computed stably as
    ``log_sum_exp(log(theta) + lp1, log1m(theta) + lp2)`` (Stan's ``log_mix``).

    theta outside [0, 1] gives NaN; theta = 0 or 1 selects one component exactly.
    """
    if type(theta) is float and type(lp1) is float and type(lp2) is float \
            and 0.0 < theta < 1.0:
        return _lse2_raw(math.log(theta) + lp1, math.log1p(-theta) + lp2)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.logaddexp(np.log(theta) + np.asarray(lp1, dtype=float),
                         np.log1p(np.negative(theta)) + np.asarray(lp2, dtype=float))
    return _f(r)


def _log_mix_partials(ans, theta, lp1, lp2):
    # with w_i = e^{lp_i - ans}:  d ans = (w1 - w2) dtheta + theta w1 dlp1
    #                                     + (1 - theta) w2 dlp2   (0 where ans = -inf)
    s = _safe_lse(ans)
    w1 = exp(lp1 - s)
    w2 = exp(lp2 - s)
    return w1 - w2, theta * w1, (1.0 - theta) * w2


def _log_mix_vjp(g, ans, theta, lp1, lp2):
    return tuple(g * d for d in _log_mix_partials(ans, theta, lp1, lp2))


def _log_mix_jvp(ts, ans, theta, lp1, lp2):
    tan = None
    for t, d in zip(ts, _log_mix_partials(ans, theta, lp1, lp2)):
        if t is not None:
            tan = t * d if tan is None else tan + t * d
    return tan


defvjp_all(log_mix, _log_mix_vjp)
defjvp_all(log_mix, _log_mix_jvp)
_deflower(log_mix, _program.log_mix_rule)



# --------------------------------------------------------------------------------------
# incomplete beta and gamma functions (derivatives w.r.t. x only: see the docstring)
# --------------------------------------------------------------------------------------
@_elementwise
@primitive
def inc_beta(a, b, x):
    """Regularized incomplete beta ``I_x(a, b)`` (scipy's ``betainc``; DLMF 8.17.2).

    Differentiable in ``x`` only: d/dx = x^(a-1) (1-x)^(b-1) / B(a, b). The
    derivatives in ``a`` and ``b`` are missing (a traced ``a`` or ``b`` raises
    ``DifferentiationError``).
    """
    return _f(sps.betainc(a, b, x))


def _d_inc_beta_x(g, ans, a, b, x):
    # x^(a-1) (1-x)^(b-1) / B(a, b), in logs (no overflow of 1/B for large a, b);
    # 0 log 0 = 0 so that a = 1 at x = 0 (b = 1 at x = 1) is finite
    return g * exp(_times_log(a - 1.0, x, 0.0, log) + _times_log(b - 1.0, x, 1.0, _log1m)
                   - lbeta(a, b))


defvjp(inc_beta, None, None, _d_inc_beta_x)
defjvp(inc_beta, None, None, _d_inc_beta_x)


def _gamma_density(a, x):
    # d/dx P(a, x) = x^(a-1) e^{-x} / Gamma(a)  (DLMF 8.2.4, 8.8.13), in logs
    return exp(_times_log(a - 1.0, x, 0.0, log) - x - lgamma(a))


@_elementwise
@primitive
def gamma_p(a, x):
    """Regularized lower incomplete gamma ``P(a, x)`` (scipy's ``gammainc``; DLMF 8.2.4).

    Differentiable in ``x`` only: d/dx = x^(a-1) e^(-x) / Gamma(a). The derivative in
    ``a`` is missing (a traced ``a`` raises ``DifferentiationError``).
    """
    return _f(sps.gammainc(a, x))


@_elementwise
@primitive
def gamma_q(a, x):
    """Regularized upper incomplete gamma ``Q(a, x) = 1 - P(a, x)`` (scipy's
    ``gammaincc``, accurate in the right tail).

    Differentiable in ``x`` only: d/dx = -x^(a-1) e^(-x) / Gamma(a). The derivative
    in ``a`` is missing (a traced ``a`` raises ``DifferentiationError``).
    """
    return _f(sps.gammaincc(a, x))


def _d_gamma_p_x(g, ans, a, x):
    return g * _gamma_density(a, x)


def _d_gamma_q_x(g, ans, a, x):
    return -g * _gamma_density(a, x)


defvjp(gamma_p, None, _d_gamma_p_x)
defjvp(gamma_p, None, _d_gamma_p_x)
defvjp(gamma_q, None, _d_gamma_q_x)
defjvp(gamma_q, None, _d_gamma_q_x)


# --------------------------------------------------------------------------------------
# modified Bessel function of the first kind, in logs
# --------------------------------------------------------------------------------------
# Everything is computed on the exponentially scaled ive(v, z) = I_v(z) e^{-|z|}, in
# logs: log I_v(z) = log ive(v, z) + |z| (no overflow for large z), and the derivative
# is a ratio of scaled values (no loss of the low digits of log I_v(z) ~ z).
def _log_ive_series(v, z):
    """log I_v(z) - z from the power series (DLMF 10.25.2), for z^2/4 <= 25 (v + 1):
    log I_v(z) = v log(z/2) - lgamma(v+1) + log sum_k t_k,
    t_0 = 1, t_k = t_{k-1} (z^2/4) / (k (v + k)); the terms peak at k < 5 sqrt(v+1)."""
    q = 0.25 * z * z
    s = np.ones_like(z)
    t = np.ones_like(z)
    for k in range(1, 1000):
        t = t * q / (k * (v + k))
        s = s + t
        if np.all(t <= 1e-17 * s):
            break
    return v * np.log(0.5 * z) - sps.gammaln(v + 1.0) + np.log(s) - z


def _log_ive_debye(v, z):
    """log I_v(z) - z from Debye's uniform expansion for large order (DLMF 10.41.3):
    I_v(v x) ~ e^{v eta} / (sqrt(2 pi v) (1 + x^2)^(1/4)) sum_k U_k(p) / v^k, with
    p = 1/sqrt(1 + x^2), eta = sqrt(1 + x^2) + log(x / (1 + sqrt(1 + x^2)));
    U_1..U_4 from DLMF 10.41.10 (relative error ~ v^-5; used for v > ~400)."""
    x = z / v
    r = np.sqrt(1.0 + x * x)
    p = 1.0 / r
    p2 = p * p
    u1 = p * (3.0 - 5.0 * p2) / 24.0
    u2 = p2 * (81.0 - 462.0 * p2 + 385.0 * p2 * p2) / 1152.0
    u3 = p * p2 * (30375.0 + p2 * (-369603.0 + p2 * (765765.0 - 425425.0 * p2))) / 414720.0
    u4 = p2 * p2 * (4465125.0 + p2 * (-94121676.0 + p2 * (349922430.0 + p2 * (
        -446185740.0 + 185910725.0 * p2)))) / 39813120.0
    corr = 1.0 + (u1 + (u2 + (u3 + u4 / v) / v) / v) / v
    # v eta - z = v (eta - x), with r - x = 1 / (r + x) (no cancellation)
    return (v * (1.0 / (r + x) + np.log(x / (1.0 + r))) - 0.5 * np.log(2.0 * np.pi * v)
            + 0.5 * np.log(p) + np.log(corr))


def _log_ive_hankel(v, z):
    """log ive(v, z) from Hankel's large-argument expansion (DLMF 10.40.1):
    ive(v, z) ~ (2 pi z)^(-1/2) sum_k (-1)^k a_k(v) / z^k,
    a_k(v) = prod_{j=1..k} (4 v^2 - (2j - 1)^2) / (k! 8^k); used for z >= 1e4 and
    4 v^2 <= z / 1000, where each term is below 1/(8k) of the previous one."""
    mu = 4.0 * v * v
    s = np.ones_like(z)
    t = np.ones_like(z)
    for k in range(1, 8):
        t = -t * (mu - (2 * k - 1) ** 2) / (k * 8.0 * z)
        s = s + t
    return -0.5 * np.log(2.0 * np.pi * z) + np.log(s)


def _log_ive_raw(v, z):
    """log(ive(v, z)) = log I_v(z) - |z|, NaN for z < 0."""
    v, z = np.broadcast_arrays(np.asarray(v, dtype=float), np.asarray(z, dtype=float))
    # I_{-n} = I_n for integer n (DLMF 10.27.1): the VJP asks for order v - 1 = -1
    v = np.where((v < 0) & (v == np.round(v)), -v, v)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        e = sps.ive(v, z)
        r = np.log(e)
        # where ive underflows (large order, small argument) or gives up (NaN for
        # z > ~1e9), use the series, the large-order or the large-argument expansion
        # (the last one for any real order: I_{-v} - I_v is O(e^{-z}), DLMF 10.27.2)
        fix = ~(e >= 1e-280) & (z > 0) & np.isfinite(z) & np.isfinite(v)
        if np.any(fix):
            vf = v[fix]
            zf = z[fix]
            out = np.full_like(zf, np.nan)
            hankel = (zf >= 1e4) & (4.0 * vf * vf <= 1e-3 * zf)
            series = ~hankel & (vf >= 0) & (0.25 * zf * zf <= 25.0 * (vf + 1.0))
            debye = ~hankel & ~series & (vf >= 0)
            for mask, fn in ((series, _log_ive_series), (hankel, _log_ive_hankel),
                             (debye, _log_ive_debye)):
                if np.any(mask):
                    out[mask] = fn(vf[mask], zf[mask])
            r = np.array(r, dtype=float)
            r[fix] = np.where(np.isnan(out), r[fix], out)
        r = np.where(z < 0, np.nan, r)  # I_v(z) is not real for z < 0 (Stan: domain error)
    return r


@_elementwise
@primitive
def _log_ive(v, z):
    return _f(_log_ive_raw(v, z))


def _bessel_dlog(v, z):
    """d/dz log I_v(z) = I_v'(z) / I_v(z) = (I_{v-1}(z) + I_{v+1}(z)) / (2 I_v(z))
    (DLMF 10.29.1), as ratios of scaled values; the symmetric form has no
    cancellation and is finite at z = 0 for v = 0 (order -1 is fine: I_{-1} = I_1)."""
    l0 = _log_ive(v, z)
    return 0.5 * (exp(_log_ive(v - 1.0, z) - l0) + exp(_log_ive(v + 1.0, z) - l0))


# d/dz log ive(v, z) = d/dz log I_v(z) - 1 (z > 0)
def _d_log_ive_z(g, ans, v, z):
    return g * (_bessel_dlog(v, z) - 1.0)


defvjp(_log_ive, None, _d_log_ive_z)
defjvp(_log_ive, None, _d_log_ive_z)


@_elementwise
@primitive
def log_modified_bessel_first_kind(v, z):
    """``log I_v(z)``, the log of the modified Bessel function of the first kind.

    Computed as ``log(ive(v, z)) + z`` (scipy's exponentially scaled ``ive``: no
    overflow for large z), with a power series / large-order (Debye) / large-argument
    (Hankel) expansion where ``ive`` underflows or returns NaN. Domain (Stan's):
    v >= 0, z >= 0; z < 0 gives NaN.

    Differentiable in ``z`` only:
    d/dz log I_v(z) = (I_{v-1}(z) + I_{v+1}(z)) / (2 I_v(z))  (DLMF 10.29.1).
    The derivative in the order ``v`` is missing (a traced ``v`` raises
    ``DifferentiationError``). At z = 0 with v > 0 the derivative is NaN (it is
    +inf in the limit).
    """
    z = np.asarray(z, dtype=float)
    with np.errstate(invalid="ignore"):
        r = _log_ive_raw(v, z) + z
        r = np.where(z == np.inf, np.inf, r)
    return _f(r)


def _d_log_bessel_z(g, ans, v, z):
    return g * _bessel_dlog(v, z)


defvjp(log_modified_bessel_first_kind, None, _d_log_bessel_z)
defjvp(log_modified_bessel_first_kind, None, _d_log_bessel_z)

UFUNCS.update({np.logaddexp: _log_sum_exp2})



# --------------------------------------------------------------------------------------
# issue 21: lmultiply, log_inv_logit_diff, factorials, choose, Owen's T, Lambert W
# --------------------------------------------------------------------------------------
def _lmultiply_raw(a, b):
    if type(a) is float and type(b) is float and b > 0.0:
        return a * math.log(b)
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    zero = (a == 0.0) & (b == 0.0)
    with np.errstate(divide="ignore"):     # log(0) = -inf is the value there
        r = a * np.log(np.where(zero, 1.0, b))
    return _f(r)


# lmultiply(a, b) = a log(b), with 0 log 0 = 0 (Stan's lmultiply, formerly
# multiply_log);  d = log(b) da + (a / b) db
lmultiply = binary_primitive(
    "lmultiply", _lmultiply_raw, "g * log(y)", "g * x / y", names=globals(),
    vm=_op.LMULTIPLY,
    kernel="0.0 if x == 0.0 and y == 0.0 else x * (math.log(y) if y > 0.0 else "
           "(-math.inf if y == 0.0 else math.nan))")
lmultiply.__doc__ = """``a * log(b)`` elementwise, with ``lmultiply(0, 0) = 0`` (Stan's
    ``lmultiply``; ``multiply_log`` is the same function). d/da = log(b), d/db = a/b.

    >>> import stanlite as sl
    >>> sl.lmultiply(0.0, 0.0), round(sl.lmultiply(2.0, 3.0), 6)
    (0.0, 2.197225)
    """
multiply_log = lmultiply


def _log1m_exp_raw(u):
    """log(1 - e^u) for u <= 0, accurate on both sides of -log 2 (Maechler 2012)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(u > -_LN2, np.log(-np.expm1(u)), np.log1p(-np.exp(u)))


def _log_inv_logit_diff_raw(x, y):
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    with np.errstate(invalid="ignore"):
        # log(inv_logit(x) - inv_logit(y)) = x - log1p_exp(x) + log1m_exp(y - x)
        #                                    - log1p_exp(y)
        # (log_inv_logit(x) as -log1p_exp(-x): x - log1p_exp(x) rounds to 0 for x > 37,
        # dropping the whole value when both tails are far, e.g. (40, -40))
        r = -np.logaddexp(0.0, -x) + _log1m_exp_raw(y - x) - np.logaddexp(0.0, y)
    return _f(r)


# log_inv_logit_diff(x, y) = log(inv_logit(x) - inv_logit(y)), x > y (NaN for x < y,
# -inf at x = y);  d/dx = -1/expm1(y - x) - inv_logit(x),
#                  d/dy = -1/expm1(x - y) - inv_logit(y)  (from the form above)
log_inv_logit_diff = binary_primitive(
    "log_inv_logit_diff", _log_inv_logit_diff_raw,
    "g * (-1.0 / expm1(y - x) - inv_logit(x))", "g * (-1.0 / expm1(x - y) - inv_logit(y))",
    names=globals(), vm=_op.LOG_INV_LOGIT_DIFF,
    kernel="-_log1p_exp(-x) + _log1m_exp(y - x) - _log1p_exp(y) if y < x else "
           "(-math.inf if x == y else math.nan)")
log_inv_logit_diff.__doc__ = """``log(inv_logit(x) - inv_logit(y))`` elementwise, stable
    in both tails (Stan's ``log_inv_logit_diff``; an ordered-logistic cut-point
    probability). Requires x > y (NaN below, -inf at x = y).

    >>> import numpy as np, stanlite as sl
    >>> round(sl.log_inv_logit_diff(1.0, -1.0), 6)
    -0.771937
    >>> round(float(sl.log_inv_logit_diff(-40.0, -41.0)), 4)  # no underflow
    -40.4587
    """


def _log_falling_factorial_raw(x, n):
    x = np.asarray(x, dtype=float)
    with np.errstate(invalid="ignore"):
        r = sps.gammaln(x + 1.0) - sps.gammaln(x - n + 1.0)
    return _f(np.where(x < 0.0, np.nan, r))     # Stan's domain: x >= 0


# log_falling_factorial(x, n) = log(x! / (x - n)!) = lgamma(x+1) - lgamma(x-n+1)
# (DLMF 5.2.5);  d = (digamma(x+1) - digamma(x-n+1)) dx + digamma(x-n+1) dn
log_falling_factorial = binary_primitive(
    "log_falling_factorial", _log_falling_factorial_raw,
    "g * (digamma(x + 1.0) - digamma(x - y + 1.0))", "g * digamma(x - y + 1.0)",
    names=globals(), vm=_op.LOG_FALLING_FACTORIAL,
    kernel="math.lgamma(x + 1.0) - math.lgamma(x - y + 1.0) if x >= 0.0 else math.nan")
log_falling_factorial.__doc__ = """``log(Gamma(x + 1) / Gamma(x - n + 1))`` elementwise (Stan's
    ``log_falling_factorial``), for real x >= 0 (NaN below) and real n;
    differentiable in both.

    >>> import math, stanlite as sl
    >>> round(sl.log_falling_factorial(5.0, 2.0), 10) == round(math.log(20.0), 10)
    True
    """


def _log_rising_factorial_raw(x, n):
    x = np.asarray(x, dtype=float)
    with np.errstate(invalid="ignore"):
        r = sps.gammaln(x + n) - sps.gammaln(x)
    return _f(np.where(x < 0.0, np.nan, r))


# log_rising_factorial(x, n) = log(Gamma(x + n) / Gamma(x))  (DLMF 5.2.5);
# d = (digamma(x+n) - digamma(x)) dx + digamma(x+n) dn
log_rising_factorial = binary_primitive(
    "log_rising_factorial", _log_rising_factorial_raw,
    "g * (digamma(x + y) - digamma(x))", "g * digamma(x + y)",
    names=globals(), vm=_op.LOG_RISING_FACTORIAL,
    kernel="math.lgamma(x + y) - math.lgamma(x) if x >= 0.0 else math.nan")
log_rising_factorial.__doc__ = """``log(Gamma(x + n) / Gamma(x))`` elementwise (Stan's
    ``log_rising_factorial``), for real x >= 0 (NaN below) and real n.

    >>> import math, stanlite as sl
    >>> round(sl.log_rising_factorial(5.0, 2.0), 10) == round(math.log(30.0), 10)
    True
    """


_INT64_MAX = np.iinfo(np.int64).max


def _as_ints(fn, name, v):
    from ..errors import DifferentiationError
    from ..autodiff.var import Box
    if isinstance(v, Box):
        raise DifferentiationError(
            f"{fn}: {name} is an integer argument and cannot be a traced value; "
            f"lchoose(n, k) is the differentiable log of the binomial coefficient")
    a = np.asarray(v)
    if a.dtype.kind not in "iub":
        af = a.astype(float)
        if not np.all(af == np.round(af)):
            raise ValueError(f"{fn}: {name} must be an integer, got {v!r}")
        a = af.astype(np.int64)
    return a


def choose(n, k):
    """The binomial coefficient ``n choose k`` for integers (Stan's ``choose``): an int
    (an int64 array for array arguments, broadcasting). ``0`` when ``k > n``; n and k
    must be non-negative (``DomainError`` otherwise, as Stan). Not differentiable
    (integers): use :func:`lchoose` for a real, differentiable log version.

    >>> import stanlite as sl
    >>> sl.choose(5, 2), sl.choose(2, 5)
    (10, 0)
    """
    from ..errors import DomainError
    N = _as_ints("choose", "n", n)
    K = _as_ints("choose", "k", k)
    for name, a in (("n", N), ("k", K)):
        if np.any(a < 0):
            bad = int(np.min(a))
            raise DomainError(f"choose: {name} must be non-negative, but is {bad}")
    Nb, Kb = np.broadcast_arrays(N, K)
    out = [math.comb(int(a), int(b)) for a, b in zip(Nb.ravel(), Kb.ravel())]
    if any(v > _INT64_MAX for v in out):
        raise DomainError(f"choose: the result overflows a 64-bit integer "
                          f"(n = {int(np.max(Nb))})")
    if Nb.ndim == 0:
        return out[0]
    return np.array(out, dtype=np.int64).reshape(Nb.shape)


@_jit
def _owens_t_loop(h, a, out):
    for i in range(out.size):
        out[i] = _owens_t_float(h[i], a[i])


# owens_t(h, a) = 1/(2 pi) int_0^a exp(-h^2 (1 + x^2) / 2) / (1 + x^2) dx  (Owen 1956),
# computed by vm/scalar.py's _owens_t (Gauss-Legendre on the integral, Owen's identity
# for a > 1: ~5e-16 relative against mpmath, where scipy's owens_t is off by up to
# 2.5e-9 at small a); the tape and the interpreter share it;
#                    d/dh = -phi(h) erf(a h / sqrt 2) / 2,
#                    d/da = exp(-h^2 (1 + a^2) / 2) / (2 pi (1 + a^2))
owens_t = binary_primitive(
    "owens_t", _pairwise(_owens_t_float, _owens_t_loop),
    "g * (-0.5 * _INV_SQRT_2PI) * exp(-0.5 * square(x)) * erf(y * x * _INV_SQRT2)",
    "g * exp(-0.5 * square(x) * (1.0 + square(y))) / (2.0 * _PI * (1.0 + square(y)))",
    names=globals(), vm=_op.OWENS_T, kernel="_owens_t(x, y)")
owens_t.__doc__ = """Owen's T function ``T(h, a) = 1/(2 pi) int_0^a exp(-h^2 (1+x^2)/2) /
    (1+x^2) dx`` elementwise (Stan's ``owens_t``), differentiable in h and a (the
    skew-normal CDF is built from it). Even in h, odd in a; to ~5e-16 relative over
    h in [0, 40] and a in [1e-8, 1e10] (vm/scalar.py _owens_t), and compiled in the
    interpreter.

    >>> import stanlite as sl
    >>> round(sl.owens_t(0.0, 1.0), 6)   # arctan(a) / (2 pi)
    0.125
    """


_INV_E = math.exp(-1.0)


# -1/e = _INV_E + _INV_E_LO (double-double): x + 1/e exactly near the branch point
_INV_E_LO = -1.2428753672788363e-17
# W = -1 + p - p^2/3 + 11/72 p^3 - ... with p = +-sqrt(2 (e x + 1)) (Corless et al.
# 1996, eq. 4.22; + for W_0, - for W_{-1}), highest power first
_W_BRANCH_SERIES = (-221.0 / 8505.0, 769.0 / 17280.0, -43.0 / 540.0, 11.0 / 72.0,
                    -1.0 / 3.0, 1.0, -1.0)


def _lambert_w_near_branch_point(x, branch):
    """W near x = -1/e, where scipy's lambertw(x, -1) loses up to 5 digits (a relative
    error of 2e-5 at x = -1/e + 1e-10): the branch-point series, exact to rounding for
    e x + 1 < 1e-6 (the first term left out, ~p^7, is below 1e-20 there)."""
    q = ((x + _INV_E) + _INV_E_LO) * math.e        # e x + 1, no cancellation
    p = np.sqrt(2.0 * np.maximum(q, 0.0)) * (1.0 if branch == 0 else -1.0)
    return q, np.polyval(_W_BRANCH_SERIES, p)


def _lambert_w_raw(x, branch):
    x = np.asarray(x, dtype=float)
    lo_ok = x >= -_INV_E
    ok = lo_ok if branch == 0 else lo_ok & (x < 0.0)
    with np.errstate(invalid="ignore"):
        w = sps.lambertw(np.where(ok, x, 0.5 * -_INV_E), branch).real
        q, near = _lambert_w_near_branch_point(x, branch)
    # (the series also covers the branch point itself, where scipy gives NaN)
    w = np.where(ok, np.where(q < 1e-6, near, w), np.nan)
    if branch == -1:
        w = np.where(x == 0.0, -_INF, w)        # the limit W_{-1}(0-) = -inf
    return _f(w)


# W(x) solves W e^W = x (DLMF 4.13); d = dx / (e^W (1 + W))  (implicit differentiation,
# finite at x = 0 where W_0 = 0; infinite at the branch point x = -1/e, W = -1). The
# interpreter's value: vm/scalar.py _lambert_w (Halley's iteration, the same series).
lambert_w0 = unary_primitive("lambert_w0", lambda x: _lambert_w_raw(x, 0),
                             "g * exp(-ans) / (1.0 + ans)", names=globals(),
                             op=_op.LAMBERT_W0, kernel="_lambert_w(x, 0)")
lambert_w0.__doc__ = """The principal branch ``W_0(x)`` of the Lambert W function (the
    solution w >= -1 of ``w e^w = x``), elementwise, for x >= -1/e (NaN below;
    Stan's ``lambert_w0``). d/dx = 1 / (e^W (1 + W)).

    >>> import math, stanlite as sl
    >>> sl.lambert_w0(math.e), sl.lambert_w0(0.0)
    (1.0, 0.0)
    """

lambert_wm1 = unary_primitive("lambert_wm1", lambda x: _lambert_w_raw(x, -1),
                              "g * exp(-ans) / (1.0 + ans)", names=globals(),
                              op=_op.LAMBERT_WM1, kernel="_lambert_w(x, -1)")
lambert_wm1.__doc__ = """The lower branch ``W_{-1}(x)`` of the Lambert W function (the
    solution w <= -1 of ``w e^w = x``), elementwise, for -1/e <= x < 0 (NaN outside;
    -inf at 0; Stan's ``lambert_wm1``). d/dx = 1 / (e^W (1 + W)).

    >>> import math, stanlite as sl
    >>> round(sl.lambert_wm1(-2.0 * math.exp(-2.0)), 12)
    -2.0
    """

__all__ += ["lmultiply", "multiply_log", "log_inv_logit_diff", "log_falling_factorial",
            "log_rising_factorial", "choose", "owens_t", "lambert_w0", "lambert_wm1"]

# scipy.special's ufuncs on traced values (``sps.gammaln(v)``) dispatch to these
# primitives through the numpy protocol, like ``np.exp(v)``
UFUNCS.update({
    sps.gammaln: lgamma, sps.psi: digamma, sps.gamma: tgamma, sps.betaln: lbeta,
    sps.erf: erf, sps.erfc: erfc, sps.ndtr: Phi, sps.log_ndtr: log_Phi,
    sps.ndtri: inv_Phi, sps.owens_t: owens_t, sps.expit: inv_logit,
})
