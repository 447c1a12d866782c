"""Regularized incomplete gamma and beta functions in logs, differentiable in every
argument (the shapes included), to every order.

``log_gamma_p(a, x) = log P(a, x)``, ``log_gamma_q(a, x) = log Q(a, x)``,
``log_inc_beta(a, b, x) = log I_x(a, b)``, ``log1m_inc_beta(a, b, x) = log(1 - I_x(a, b))``
are the CDFs of the gamma, chi-square and beta families (:mod:`stanlite.distributions.bounded`).
Their derivatives in the shape parameters have no closed form; with
``F(a) = int_A t^(a-1) e^(-t) dt / Gamma(a)`` (A = (0, x) or (x, inf)) one has the
exact identity

    d/da log F = E[log t | t in A] - digamma(a),

and every further derivative is again a conditional moment:
``d/da E[g | A] = E[g log t | A] - E[g | A] E[log t | A]`` and
``d/dx E[g | A] = (d/dx log F) (g(x) - E[g | A])``; the beta case is the same with
``log t`` and ``log(1 - t)`` for its two shapes (Stan keeps the same quantities as
``grad_reg_inc_gamma`` and ``inc_beta_dda``/``inc_beta_ddb``). The moments
(:func:`gamma_tail_moment`, :func:`beta_tail_moment`) are integrals of a log-concave
density, computed by composite Gauss-Legendre quadrature in ``log t`` (gamma) or
``logit t`` (beta), on panels placed where the log integrand falls by set amounts
below its maximum (relative error ~1e-13 in tests against mpmath). The values come
from scipy (``gammainc``, ``betainc``; the larger tail through ``log1p`` of the
other) and from the quadrature where they underflow.

:func:`gamma_tail` and :func:`beta_tail` give a tail's log and its partials in one
call, for the fused CDF kernels.

>>> import numpy as np, stanlite as sl
>>> round(float(sl.log_gamma_p(3.0, 2.0)), 6)
-1.129102
>>> round(float(sl.grad(lambda a: sl.log_gamma_p(a, 2.0))(3.0)), 6)    # d/d shape
-0.717079
>>> round(float(sl.log1m_inc_beta(2.0, 5.0, 0.3)), 6)
-0.867084
"""

import numpy as np
import scipy.special as sps

from ..autodiff.extend import defjvp, defvjp, primitive
from ..autodiff.var import guarded
from .elementwise import exp, log, log1m
from .special import digamma, lbeta, lgamma
from .structure import where

__all__ = ["log_gamma_p", "log_gamma_q", "log_inc_beta", "log1m_inc_beta",
           "gamma_tail_moment", "beta_tail_moment"]

_INF = np.inf


# Decisions on values, taken through ``guarded`` (a retaped recording re-checks them at
# every replay instead of giving up on the recording).
def _at_pole(x, pole):
    return bool(np.any(np.asarray(x) == pole))


def _zero_times_pole(c, x, pole):
    return (np.asarray(x) == pole) & (np.asarray(c) == 0)


def times_log(c, x, lx=None, pole=0.0, logf=log):
    """``c * logf(x)`` with ``0 * logf(pole) = 0`` (``logf(pole) = -inf``), using a
    double ``where`` so that no NaN enters a reverse sweep."""
    if lx is None:
        lx = logf(x)
    if not guarded(_at_pole, x, pole):
        return c * lx
    bad = guarded(_zero_times_pole, c, x, pole)
    if not np.any(bad):
        return c * lx
    return where(bad, 0.0, c * logf(where(bad, 0.5, x)))


def _log1m(x):
    return log1m(x)


# --------------------------------------------------------------------------------------
# conditional moments of log-concave densities by Gauss-Legendre quadrature
# --------------------------------------------------------------------------------------
_GL_X, _GL_W = np.polynomial.legendre.leggauss(12)
# panel ends: where the log integrand has fallen by these amounts below its maximum on
# the interval, plus fixed offsets (unit-scale features near the maximum); beyond the
# last level the integrand is < e^-80 of its peak and is dropped
_LEVELS = np.array([0.5, 1.5, 3.0, 5.0, 8.0, 12.0, 17.0, 23.0, 30.0, 38.0, 47.0, 57.0,
                    68.0, 80.0])
_FIXED = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0])
_SIDES = np.array([-1.0, 1.0])[:, None, None]


def _concave_quad(phi, dphi, d2phi, lo, hi, mode, mults):
    """``log int_lo^hi e^phi(v) dv`` and ``E[g(v)] = int g e^phi / int e^phi`` for each
    ``g`` in ``mults``, elementwise, for ``phi`` concave with its maximum at ``mode``.

    ``phi``/``dphi``/``d2phi`` (its derivatives) and the ``g`` map arrays shaped
    ``(..., N)`` to the same shape (parameters broadcast on the last axis). On each
    side of the maximum ``c`` (``mode`` clipped to the interval) the points where
    ``phi`` falls by ``_LEVELS`` below ``phi(c)`` are found by bisection in the log of
    the distance to ``c`` (within 1e-10 .. 1e14 local length scales); the panels
    between them and the fixed offsets get 12-point Gauss-Legendre rules. An empty
    interval gives ``-inf`` and moments ``g(c)`` (the limit).
    """
    lo, hi, mode = (a.ravel() for a in np.broadcast_arrays(lo, hi, mode))
    c = np.clip(mode, lo, hi)
    pm = phi(c)
    s = 1.0 / np.hypot(dphi(c), np.sqrt(-d2phi(c)))        # local length scale
    dist = np.stack([c - lo, hi - c])                         # (2, N)
    dmin = 1e-10 * s
    dmax = np.minimum(dist, 1e14 * s)
    target = pm - _LEVELS[:, None]                            # (L, N)
    shape = (2, len(_LEVELS), len(c))
    zlo = np.broadcast_to(np.log(dmin), shape).copy()
    zhi = np.broadcast_to(np.log(np.maximum(dmax, dmin))[:, None, :], shape).copy()
    cc = c[None, None, :]
    reach = phi(cc + _SIDES * np.exp(zhi)) >= target          # level beyond dmax
    for _ in range(24):
        mid = 0.5 * (zlo + zhi)
        above = phi(cc + _SIDES * np.exp(mid)) >= target
        zlo = np.where(above, mid, zlo)
        zhi = np.where(above, zhi, mid)
    d = np.where(reach, np.broadcast_to(dmax[:, None, :], shape), np.exp(zhi))
    d = np.where(dist[:, None, :] == 0, 0.0, d)
    last = d[:, -1:, :]
    b = np.sort(np.concatenate([np.zeros_like(last), d,
                                np.minimum(_FIXED[None, :, None], last)], axis=1), axis=1)
    half = 0.5 * (b[:, 1:, :] - b[:, :-1, :])                # (2, P, N)
    mid = 0.5 * (b[:, 1:, :] + b[:, :-1, :])
    v = cc[:, :, None, :] + _SIDES[:, :, :, None] * (
        mid[:, :, None, :] + half[:, :, None, :] * _GL_X[None, None, :, None])
    w = np.exp(phi(v) - pm) * (half[:, :, None, :] * _GL_W[None, None, :, None])
    w = np.where(half[:, :, None, :] > 0, w, 0.0)
    i0 = w.sum(axis=(0, 1, 2))
    empty = i0 == 0
    logi = np.log(i0) + pm
    moms = []
    for g in mults:
        m = (g(v) * w).sum(axis=(0, 1, 2)) / np.where(empty, 1.0, i0)
        if np.any(empty):
            m = np.where(empty, g(c), m)
        moms.append(m)
    return logi, moms


def _gamma_stats(a, x, upper, ks=()):
    """log P(a, x) (or log Q) and E[(log t)^k | t < x (or > x)], t ~ Gamma(a, 1):
    integrals over v = log t of exp(a v - e^v) (the density of log t)."""
    a, x = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(x, dtype=float))
    shape = a.shape
    a1 = a.ravel()

    def phi(v):            # v: (..., N), the parameters on the last axis
        return a1 * v - np.exp(v)

    def dphi(v):
        return a1 - np.exp(v)

    def d2phi(v):
        return -np.exp(v)

    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        lx = np.log(x)
        lo, hi = (lx, np.full_like(lx, _INF)) if upper else (np.full_like(lx, -_INF), lx)
        logi, moms = _concave_quad(phi, dphi, d2phi, lo, hi, np.log(a), [
            (lambda v, k=k: v ** k) for k in ks])
        logi = logi - sps.gammaln(a1)
    return logi.reshape(shape), [m.reshape(shape) for m in moms]


def _beta_stats(a, b, x, upper, jls=()):
    """log I_x(a, b) (or log(1 - I)) and E[(log t)^j (log(1-t))^l | t < x (or > x)],
    t ~ Beta(a, b): integrals over w = logit t of t^a (1-t)^b."""
    a, b, x = np.broadcast_arrays(*(np.asarray(z, dtype=float) for z in (a, b, x)))
    shape = a.shape
    a1, b1 = a.ravel(), b.ravel()

    def ls(v):
        return -np.logaddexp(0.0, -v)          # log inv_logit(v) = log t

    def phi(v):            # v: (..., N), the parameters on the last axis
        return a1 * ls(v) + b1 * ls(-v)

    def dphi(v):
        return a1 * sps.expit(-v) - b1 * sps.expit(v)

    def d2phi(v):
        return -(a1 + b1) * sps.expit(v) * sps.expit(-v)

    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        lx = sps.logit(x.ravel())
        lo, hi = (lx, np.full_like(lx, _INF)) if upper else (np.full_like(lx, -_INF), lx)
        logi, moms = _concave_quad(phi, dphi, d2phi, lo, hi, np.log(a1) - np.log(b1), [
            (lambda v, j=j, l=l: ls(v) ** j * ls(-v) ** l) for j, l in jls])
        logi = logi - sps.betaln(a1, b1)
    return logi.reshape(shape), [m.reshape(shape) for m in moms]


def _f(r):
    r = np.asarray(r, dtype=float)
    return float(r) if r.ndim == 0 else r


def _log_cdf_raw(lower, upper, stats, args, tail):
    """log of a regularized CDF from scipy's lower/upper values (the larger one via
    log1p of the other, so log F stays accurate near 0), falling back to the
    quadrature ``stats(*args, tail)`` where the value underflows."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(lower < 0.5, np.log(lower), np.log1p(-upper))
        tiny = lower < 1e-290
        if np.any(tiny):
            args = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in args))
            r = np.array(np.broadcast_to(r, tiny.shape))
            r[tiny] = stats(*[a[tiny] for a in args], tail)[0]
    return r


# --------------------------------------------------------------------------------------
# differentiable primitives: log P, log Q, log I, log(1 - I) and conditional moments
# --------------------------------------------------------------------------------------
def _elementwise(prim):
    prim._spec.broadcasting = True
    return prim


@_elementwise
@primitive
def log_gamma_p(a, x):
    """log P(a, x), the log of the regularized lower incomplete gamma function:
    P(a, x) = int_0^x t^(a-1) e^(-t) dt / Gamma(a), for a > 0, x >= 0.

    Differentiable in ``a`` and ``x`` to every order: d/da log P = E[log t | t < x]
    - digamma(a) (t ~ Gamma(a, 1)), d/dx log P = x^(a-1) e^(-x) / (Gamma(a) P).

    >>> import stanlite as sl
    >>> round(float(sl.log_gamma_p(3.0, 2.0)), 6)
    -1.129102
    """
    p, q = sps.gammainc(a, x), sps.gammaincc(a, x)
    return _f(_log_cdf_raw(p, q, _gamma_stats, (a, x), False))


@_elementwise
@primitive
def log_gamma_q(a, x):
    """log Q(a, x) = log(1 - P(a, x)), the log of the regularized upper incomplete
    gamma function: Q(a, x) = int_x^inf t^(a-1) e^(-t) dt / Gamma(a).

    Derivatives as :func:`log_gamma_p` with the moment over t > x and the opposite
    sign in x.

    >>> import stanlite as sl
    >>> round(float(sl.log_gamma_q(3.0, 2.0)), 6)
    -0.390562
    """
    p, q = sps.gammainc(a, x), sps.gammaincc(a, x)
    return _f(_log_cdf_raw(q, p, _gamma_stats, (a, x), True))


@_elementwise
@primitive
def gamma_tail_moment(k, upper, a, x):
    """E[(log t)^k | t < x] (``upper``: t > x) for t ~ Gamma(a, 1), integer k >= 1.

    The derivatives of :func:`log_gamma_p`/:func:`log_gamma_q` in the shape:
    d/da log P(a, x) = gamma_tail_moment(1, 0, a, x) - digamma(a); its own derivatives
    are again moments (d/da E[m] = E[m log t] - E[m] E[log t]).

    >>> import stanlite as sl
    >>> round(float(sl.gamma_tail_moment(1, 0, 3.0, 2.0)), 6)
    0.205705
    """
    return _f(_gamma_stats(a, x, bool(upper), (k,))[1][0])


def _gamma_dlog(upper, lf, a, x):
    """d/dx log F(a, x) = +-x^(a-1) e^-x / (Gamma(a) F), in logs (F = P or Q = e^lf)."""
    h = exp(times_log(a - 1.0, x) - x - lgamma(a) - lf)
    return -h if upper else h


def _gamma_log_cdf_rules(upper):
    def da(g, ans, a, x):
        # d/da log F = E[log t | A] - digamma(a)
        return g * (gamma_tail_moment(1, upper, a, x) - digamma(a))

    def dx(g, ans, a, x):
        return g * _gamma_dlog(upper, ans, a, x)
    return da, dx


for _p, _u in ((log_gamma_p, 0), (log_gamma_q, 1)):
    defvjp(_p, *_gamma_log_cdf_rules(_u))
    defjvp(_p, *_gamma_log_cdf_rules(_u))


def _d_gamma_moment_a(g, ans, k, upper, a, x):
    # d/da E[m | A] = E[m log t | A] - E[m | A] E[log t | A]
    m1 = ans if k == 1 else gamma_tail_moment(1, upper, a, x)
    return g * (gamma_tail_moment(k + 1, upper, a, x) - ans * m1)


def _d_gamma_moment_x(g, ans, k, upper, a, x):
    # d/dx E[m | A] = (d/dx log F) (m(x) - E[m | A]),  m = (log t)^k
    lf = (log_gamma_q if upper else log_gamma_p)(a, x)
    lx = log(x)
    return g * _gamma_dlog(upper, lf, a, x) * ((lx if k == 1 else lx ** k) - ans)


defvjp(gamma_tail_moment, None, None, _d_gamma_moment_a, _d_gamma_moment_x)
defjvp(gamma_tail_moment, None, None, _d_gamma_moment_a, _d_gamma_moment_x)


@_elementwise
@primitive
def log_inc_beta(a, b, x):
    """log I_x(a, b), the log of the regularized incomplete beta function:
    I_x(a, b) = int_0^x t^(a-1) (1-t)^(b-1) dt / B(a, b), for a, b > 0, 0 <= x <= 1.

    Differentiable in a, b and x to every order: d/da log I = E[log t | t < x]
    - digamma(a) + digamma(a + b) (t ~ Beta(a, b)), likewise b with log(1 - t),
    d/dx log I = x^(a-1) (1-x)^(b-1) / (B(a, b) I).

    >>> import stanlite as sl
    >>> round(float(sl.log_inc_beta(2.0, 5.0, 0.3)), 6)
    -0.545029
    """
    p, q = sps.betainc(a, b, x), sps.betaincc(a, b, x)
    return _f(_log_cdf_raw(p, q, _beta_stats, (a, b, x), False))


@_elementwise
@primitive
def log1m_inc_beta(a, b, x):
    """log(1 - I_x(a, b)), the upper tail of :func:`log_inc_beta` (accurate where
    I_x is close to 1).

    >>> import stanlite as sl
    >>> round(float(sl.log1m_inc_beta(2.0, 5.0, 0.3)), 6)
    -0.867084
    """
    p, q = sps.betainc(a, b, x), sps.betaincc(a, b, x)
    return _f(_log_cdf_raw(q, p, _beta_stats, (a, b, x), True))


@_elementwise
@primitive
def beta_tail_moment(j, l, upper, a, b, x):
    """E[(log t)^j (log(1-t))^l | t < x] (``upper``: t > x) for t ~ Beta(a, b).

    The shape derivatives of :func:`log_inc_beta`/:func:`log1m_inc_beta`:
    d/da log I = beta_tail_moment(1, 0, 0, a, b, x) - digamma(a) + digamma(a + b).

    >>> import stanlite as sl
    >>> round(float(sl.beta_tail_moment(1, 0, 0, 2.0, 5.0, 0.3)), 6)
    -1.885331
    """
    return _f(_beta_stats(a, b, x, bool(upper), ((j, l),))[1][0])


def _beta_dlog(upper, lf, a, b, x):
    """d/dx log F = +-x^(a-1) (1-x)^(b-1) / (B(a, b) F), in logs."""
    h = exp(times_log(a - 1.0, x) + times_log(b - 1.0, x, pole=1.0, logf=_log1m)
               - lbeta(a, b) - lf)
    return -h if upper else h


def _beta_log_cdf_rules(upper):
    # d/da log F = E[log t | A] - (digamma(a) - digamma(a + b)); b: log(1 - t)
    def da(g, ans, a, b, x):
        return g * (beta_tail_moment(1, 0, upper, a, b, x) - digamma(a)
                    + digamma(a + b))

    def db(g, ans, a, b, x):
        return g * (beta_tail_moment(0, 1, upper, a, b, x) - digamma(b)
                    + digamma(a + b))

    def dx(g, ans, a, b, x):
        return g * _beta_dlog(upper, ans, a, b, x)
    return da, db, dx


for _p, _u in ((log_inc_beta, 0), (log1m_inc_beta, 1)):
    defvjp(_p, *_beta_log_cdf_rules(_u))
    defjvp(_p, *_beta_log_cdf_rules(_u))


def _d_beta_moment_a(g, ans, j, l, upper, a, b, x):
    m1 = ans if (j, l) == (1, 0) else beta_tail_moment(1, 0, upper, a, b, x)
    return g * (beta_tail_moment(j + 1, l, upper, a, b, x) - ans * m1)


def _d_beta_moment_b(g, ans, j, l, upper, a, b, x):
    m1 = ans if (j, l) == (0, 1) else beta_tail_moment(0, 1, upper, a, b, x)
    return g * (beta_tail_moment(j, l + 1, upper, a, b, x) - ans * m1)


def _d_beta_moment_x(g, ans, j, l, upper, a, b, x):
    lf = (log1m_inc_beta if upper else log_inc_beta)(a, b, x)
    m = 1.0
    if j:
        m = m * log(x) ** j
    if l:
        m = m * log1m(x) ** l
    return g * _beta_dlog(upper, lf, a, b, x) * (m - ans)


defvjp(beta_tail_moment, None, None, None, _d_beta_moment_a, _d_beta_moment_b,
       _d_beta_moment_x)
defjvp(beta_tail_moment, None, None, None, _d_beta_moment_a, _d_beta_moment_b,
       _d_beta_moment_x)


# --------------------------------------------------------------------------------------
# shared CDF kernels: log P / log Q in (a, x) with x = x(y, params)
# --------------------------------------------------------------------------------------
def gamma_tail(upper, need_a, need_x, a, x):
    """(log F, dlogF/da or None, dlogF/dx or None) for F = P(a, x) or Q(a, x)."""
    lf = (log_gamma_q if upper else log_gamma_p)(a, x)
    da = gamma_tail_moment(1, upper, a, x) - digamma(a) if need_a else None
    dx = _gamma_dlog(upper, lf, a, x) if need_x else None
    return lf, da, dx


def beta_tail(upper, need, a, b, x):
    """(log F, [dlogF/da, dlogF/db, dlogF/dx]) for F = I_x(a, b) or 1 - I_x(a, b)."""
    lf = (log1m_inc_beta if upper else log_inc_beta)(a, b, x)
    parts = [None, None, None]
    if need[0] or need[1]:
        dab = digamma(a + b)
        if need[0]:
            parts[0] = beta_tail_moment(1, 0, upper, a, b, x) - digamma(a) + dab
        if need[1]:
            parts[1] = beta_tail_moment(0, 1, upper, a, b, x) - digamma(b) + dab
    if need[2]:
        parts[2] = _beta_dlog(upper, lf, a, b, x)
    return lf, parts
