"""Two more distributions on the positive reals: ``rayleigh`` and ``loglogistic``.

Stan's parameterisations (functions reference)::

    Rayleigh(y | sigma)            = y / sigma^2 exp(-y^2 / (2 sigma^2))
    LogLogistic(y | alpha, beta)   = (beta / alpha) (y / alpha)^(beta - 1)
                                     / (1 + (y / alpha)^beta)^2

(``alpha`` the scale, the median; ``beta`` the shape). Each has ``_lpdf``, ``_lcdf``,
``_lccdf`` (one fused node each, see :mod:`.fused`, summed over the broadcast
elements, or elementwise with ``reduce=False``) and ``_rng``. Stan itself has
``loglogistic_cdf`` but not its logs; the log forms are given here because stanlite's
censoring interface is ``_lcdf``/``_lccdf``.

Supports follow :mod:`.bounded`: ``y < 0`` (or NaN) raises
:class:`~stanlite.errors.DomainError`; ``y = 0`` and ``y = inf`` are points of zero
density, ``-inf`` with zero partials (for ``loglogistic`` with ``beta <= 1`` the
density has no finite limit at 0; the point has measure zero either way). The CDFs
take their limits at both ends.

>>> import stanlite as sl
>>> round(sl.rayleigh_lpdf(1.5, 2.0), 6)
-1.262079
>>> round(sl.loglogistic_lcdf(2.0, 2.0, 3.0), 6)          # the median: log(1/2)
-0.693147
"""

import numpy as np

from .. import math as sm
from ..autodiff.var import guarded
from ..autodiff.vm import opcodes as _op    # the interpreter's lowerings (autodiff/vm)
from ..autodiff.vm.program import (check_lowering as _check_lowering, deflower as _deflower,
                                   density as _ld)
from .bounded import (_bc, _dead, _edges, _finish, _log1m_exp_neg, _positive_edges,
                      _pw_cdf_pair, _pw_dead, _pw_zero_or_inf, _size, _tot, _zero_or_inf)
from .family import NONNEGATIVE, POSITIVE, cdf_doc, family, rng_doc
from .fused import pointwise

__all__ = ["rayleigh_lpdf", "rayleigh_lcdf", "rayleigh_lccdf", "rayleigh_rng",
           "loglogistic_lpdf", "loglogistic_lcdf", "loglogistic_lccdf", "loglogistic_rng"]


# --------------------------------------------------------------------------------------
# rayleigh(y | sigma)
# --------------------------------------------------------------------------------------


def _rayleigh(need, y, sigma):
    """log y - 2 log sigma - y^2 / (2 sigma^2);
    d/dy = 1/y - y/sigma^2,  d/dsigma = (y^2/sigma^2 - 2)/sigma."""
    if guarded(_zero_or_inf, y):
        return _dead(need)
    n, shape = _size(y, sigma)
    w = y * y / (sigma * sigma)
    lp = _tot(n, sm.log(y)) - 2.0 * _tot(n, sm.log(sigma)) - 0.5 * _tot(n, w)
    parts = [1.0 / y - y / (sigma * sigma) if need[0] else None,
             (w - 2.0) / sigma if need[1] else None]
    return lp, [_bc(p, shape) for p in parts]


def _rayleigh_cdf(lower):
    def kernel(need, y, sigma):
        # with u = y^2 / (2 sigma^2): lcdf = log(1 - e^-u), lccdf = -u;
        # du/dy = y/sigma^2 = 2u/y, du/dsigma = -2u/sigma
        y, zero = _edges(y, *_positive_edges(y), 1.0, lower)
        if y is None:
            return _dead(need)
        n, shape = _size(y, sigma)
        u = 0.5 * y * y / (sigma * sigma)
        if lower:
            c, du = _log1m_exp_neg(u)
        else:
            c, du = -u, -1.0
        parts = [du * y / (sigma * sigma) if need[0] else None,
                 -2.0 * du * u / sigma if need[1] else None]
        return _finish(n, shape, c, parts, zero)
    return kernel


rayleigh_lpdf, rayleigh_lcdf, rayleigh_lccdf, rayleigh_rng = family(
    "rayleigh",
    (("y", NONNEGATIVE), ("sigma", POSITIVE)),
    lpdf=_rayleigh,
    lcdf=_rayleigh_cdf(True),
    lccdf=_rayleigh_cdf(False),
    quiet=True,
    rng=lambda g, s, size: g.rayleigh(s, size),
    doc="""
    Rayleigh log density, summed: sum_i log Rayleigh(y_i | sigma_i).

    log Rayleigh(y | sigma) = log(y) - 2 log(sigma) - y^2 / (2 sigma^2)

    y >= 0 (y = 0 has density 0: -inf), sigma > 0.

    >>> import stanlite as sl
    >>> round(sl.rayleigh_lpdf(1.0, 1.0), 6)
    -0.5
    """,
    lcdf_doc=cdf_doc("Rayleigh", "log(1 - exp(-y^2 / (2 sigma^2)))", "lcdf"),
    lccdf_doc=cdf_doc("Rayleigh", "-y^2 / (2 sigma^2)", "lccdf"),
    rng_doc=rng_doc("Rayleigh(sigma)", "sigma sqrt(-2 log U)"))
# the interpreter (autodiff/vm): one summed-density instruction, its argument check
_deflower(rayleigh_lpdf, _ld(_op.RAYLEIGH, 2))
_check_lowering(rayleigh_lpdf, "nonnegative_finite", "positive_finite")


@pointwise(rayleigh_lpdf)
def _rayleigh_terms(y, sigma):
    return _pw_dead(_pw_zero_or_inf(y), lambda y: (sm.log(y) - 2.0 * sm.log(sigma)
                                                     - 0.5 * y * y / (sigma * sigma)), y)


def _rayleigh_tail(lower, y, sigma):
    u = 0.5 * y * y / (sigma * sigma)
    return _log1m_exp_neg(u)[0] if lower else -u


_pw_cdf_pair(rayleigh_lcdf, rayleigh_lccdf, _rayleigh_tail)


# --------------------------------------------------------------------------------------
# loglogistic(y | alpha, beta)
# --------------------------------------------------------------------------------------


def _loglogistic(need, y, alpha, beta):
    """log beta - log alpha + (beta - 1) d - 2 log1p_exp(t),  d = log(y/alpha),
    t = beta d; with s = inv_logit(t): d/dy = (beta - 1 - 2 beta s)/y,
    d/dalpha = beta (2s - 1)/alpha, d/dbeta = 1/beta + d (1 - 2s)."""
    if guarded(_zero_or_inf, y):
        return _dead(need)
    n, shape = _size(y, alpha, beta)
    la = sm.log(alpha)
    d = sm.log(y) - la
    t = beta * d
    L = sm.log1p_exp(t)
    lp = (_tot(n, sm.log(beta)) - _tot(n, la) + _tot(n, (beta - 1.0) * d)
          - 2.0 * _tot(n, L))
    parts = [None, None, None]
    if any(need):
        s = sm.exp(t - L)
        if need[0]:
            parts[0] = (beta - 1.0 - 2.0 * beta * s) / y
        if need[1]:
            parts[1] = beta * (2.0 * s - 1.0) / alpha
        if need[2]:
            parts[2] = 1.0 / beta + d * (1.0 - 2.0 * s)
    return lp, [_bc(p, shape) for p in parts]


def _loglogistic_cdf(lower):
    def kernel(need, y, alpha, beta):
        # F = inv_logit(t), t = beta log(y/alpha): lcdf = -log1p_exp(-t) with
        # d/dt = inv_logit(-t); lccdf = -log1p_exp(t) with d/dt = -inv_logit(t);
        # dt/dy = beta/y, dt/dalpha = -beta/alpha, dt/dbeta = log(y/alpha)
        y, zero = _edges(y, *_positive_edges(y), 1.0, lower)
        if y is None:
            return _dead(need)
        n, shape = _size(y, alpha, beta)
        d = sm.log(y) - sm.log(alpha)
        st = beta * d if lower else -beta * d       # the sign of the tail
        L = sm.log1p_exp(-st)
        c = -L
        dt = sm.exp(-st - L)                        # inv_logit(-st)
        if not lower:
            dt = -dt
        parts = [dt * beta / y if need[0] else None,
                 -dt * beta / alpha if need[1] else None,
                 dt * d if need[2] else None]
        return _finish(n, shape, c, parts, zero)
    return kernel


loglogistic_lpdf, loglogistic_lcdf, loglogistic_lccdf, loglogistic_rng = family(
    "loglogistic",
    (("y", NONNEGATIVE), ("alpha", POSITIVE), ("beta", POSITIVE)),
    lpdf=_loglogistic,
    lcdf=_loglogistic_cdf(True),
    lccdf=_loglogistic_cdf(False),
    quiet=True,
    rng=lambda g, a, b, size: a * np.exp(g.logistic(size=size) / b),
    doc="""
    Log-logistic log density (scale alpha, shape beta), summed over elements:

    log LogLogistic(y | alpha, beta) = log(beta) - log(alpha)
        + (beta - 1) log(y / alpha) - 2 log(1 + (y / alpha)^beta)

    y >= 0 (y = 0 and y = inf: -inf), alpha > 0, beta > 0; ``log(y) ~ logistic(log
    alpha, 1 / beta)``. scipy calls it ``fisk(c=beta, scale=alpha)``.

    >>> import stanlite as sl
    >>> round(sl.loglogistic_lpdf(1.0, 1.0, 2.0), 6)
    -0.693147
    """,
    lcdf_doc=cdf_doc("log-logistic", "-log(1 + (y / alpha)^-beta)", "lcdf"),
    lccdf_doc=cdf_doc("log-logistic", "-log(1 + (y / alpha)^beta)", "lccdf"),
    rng_doc=rng_doc("LogLogistic(alpha, beta)",
                                   "alpha exp(L / beta), L standard logistic"))
_deflower(loglogistic_lpdf, _ld(_op.LOGLOGISTIC, 3))
_check_lowering(loglogistic_lpdf, "nonnegative_finite", "positive_finite",
                "positive_finite")


@pointwise(loglogistic_lpdf)
def _loglogistic_terms(y, alpha, beta):
    def f(y):
        d = sm.log(y) - sm.log(alpha)
        return (sm.log(beta) - sm.log(alpha) + (beta - 1.0) * d
                - 2.0 * sm.log1p_exp(beta * d))
    return _pw_dead(_pw_zero_or_inf(y), f, y)


def _loglogistic_tail(lower, y, alpha, beta):
    t = beta * (sm.log(y) - sm.log(alpha))
    return -sm.log1p_exp(-t if lower else t)


_pw_cdf_pair(loglogistic_lcdf, loglogistic_lccdf, _loglogistic_tail)


