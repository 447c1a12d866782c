"""Positive-support distributions with closed-form CDFs: ``weibull``, ``frechet``
(shape alpha, scale sigma), ``pareto`` (support ``y >= y_min``) and ``pareto_type_2``
(``y >= mu``; Lomax when mu = 0).

Stan's parameterisations (functions reference)::

    Weibull(y | alpha, sigma)          = (alpha/sigma) (y/sigma)^(alpha-1) e^(-(y/sigma)^alpha)
    Frechet(y | alpha, sigma)          = (alpha/sigma) (y/sigma)^(-1-alpha) e^(-(y/sigma)^-alpha)
    Pareto(y | y_min, alpha)           = alpha y_min^alpha / y^(alpha+1)
    ParetoType2(y | mu, lambda, alpha) = (alpha/lambda) (1 + (y - mu)/lambda)^-(alpha+1)

Each has ``_lpdf``, ``_lcdf``, ``_lccdf`` (one fused node each, see :mod:`.fused`) and
``_rng``, declared with :func:`.family.family`; supports, ends of the supports and
the kernel helpers are those of :mod:`.bounded`.

>>> import stanlite as sl
>>> round(sl.weibull_lpdf(1.5, 2.0, 1.0), 6)
-1.151388
>>> round(sl.pareto_lccdf(3.0, 1.5, 2.0), 6)            # 2 log(1.5 / 3)
-1.386294
"""

import numpy as np

from .. import math as sm
from ..autodiff.var import guarded
from .bounded import (_INF, _bc, _dead, _edges, _eq, _finish, _has_inf, _neg_or_inf,
                      _positive_edges, _pv, _pw_cdf_pair, _pw_dead, _pw_edges, _require,
                      _size, _tail_kernels, _tot, _xlog)
from .family import FINITE, NONNEGATIVE, NOT_NAN, POSITIVE, cdf_doc, family, rng_doc
from .fused import pointwise

_NAMES = ["weibull", "frechet", "pareto", "pareto_type_2"]
__all__ = [f"{d}_{k}" for d in _NAMES for k in ("lpdf", "lcdf", "lccdf", "rng")]


def _check_ge(fn, arg, x, lower, lower_name):
    with np.errstate(invalid="ignore"):
        ok = np.asarray(x) >= np.asarray(lower)
    _require(fn, arg, x, ok, f">= {lower_name}")


def _y_at_least_mu(fn, y, mu, lam, alpha):
    _check_ge(fn, "y", y, mu, "mu")


# --------------------------------------------------------------------------------------
# weibull(y | alpha, sigma), frechet(y | alpha, sigma)
# --------------------------------------------------------------------------------------


def _logs_and_power(y, alpha, sigma, inverse=False):
    """log y, log sigma and u = (y/sigma)^alpha, or (sigma/y)^alpha with ``inverse``,
    from the logs: the pieces of the Weibull and Frechet densities."""
    ly = sm.log(y)
    lsig = sm.log(sigma)
    return ly, lsig, sm.exp(alpha * (lsig - ly if inverse else ly - lsig))


def _weibull(need, y, alpha, sigma):
    """log(alpha) + (alpha - 1) log(y) - alpha log(sigma) - u,  u = (y/sigma)^alpha.

    d/dy = (alpha (1 - u) - 1)/y;  d/dalpha = 1/alpha + (1 - u) log(y/sigma);
    d/dsigma = alpha (u - 1)/sigma.
    """
    if guarded(_neg_or_inf, y):
        return _dead(need)
    n, shape = _size(y, alpha, sigma)
    ly, lsig, u = _logs_and_power(y, alpha, sigma)
    lp = (_tot(n, sm.log(alpha)) + _tot(n, _xlog(alpha - 1.0, y, ly))
          - _tot(n, alpha * lsig) - _tot(n, u))
    parts = [None, None, None]
    if need[0]:
        parts[0] = (alpha * (1.0 - u) - 1.0) / y
    if need[1]:
        parts[1] = 1.0 / alpha + (1.0 - u) * (ly - lsig)
    if need[2]:
        parts[2] = alpha * (u - 1.0) / sigma
    return lp, [_bc(p, shape) for p in parts]


@_tail_kernels(_positive_edges, 1.0)
def _weibull_cdf(lower, need, y, alpha, sigma):
    # lcdf = log(1 - e^-u), lccdf = -u, u = (y/sigma)^alpha:
    # du/dy = alpha u/y, du/dalpha = u log(y/sigma), du/dsigma = -alpha u/sigma
    lr = sm.log(y) - sm.log(sigma)
    u = sm.exp(alpha * lr)
    if lower:
        c = sm.log1m_exp(-u)
        w = u / sm.expm1(u)          # u d/du log(1 - e^-u), -> 1 as u -> 0
    else:
        c = -u
        w = -u
    parts = [w * alpha / y if need[0] else None, w * lr if need[1] else None,
             -w * alpha / sigma if need[2] else None]
    return c, parts


weibull_lpdf, weibull_lcdf, weibull_lccdf, weibull_rng = family(
    "weibull", (("y", FINITE), ("alpha", POSITIVE), ("sigma", POSITIVE)), lpdf=_weibull,
    lcdf=_weibull_cdf(True), lccdf=_weibull_cdf(False), cdf_args={"y": NONNEGATIVE},
    quiet=True, rng=lambda g, a, s, size: s * g.weibull(a, size), doc="""
    Weibull log density (shape alpha, scale sigma), summed over elements:

    log Weibull(y | alpha, sigma) = log(alpha) - log(sigma)
                                    + (alpha - 1) log(y / sigma) - (y / sigma)^alpha

    y >= 0 (as Stan: y < 0 gives -inf; y must be finite), alpha > 0, sigma > 0.
    """, lcdf_doc=cdf_doc("Weibull", "log(1 - exp(-(y/sigma)^alpha))", "lcdf"),
    lccdf_doc=cdf_doc("Weibull", "-(y/sigma)^alpha", "lccdf"),
    rng_doc=rng_doc("Weibull(alpha, sigma)", "sigma times numpy's weibull"))


def _frechet(need, y, alpha, sigma):
    """log(alpha) + alpha log(sigma) - (alpha + 1) log(y) - u,  u = (y/sigma)^-alpha.

    d/dy = (alpha u - alpha - 1)/y;  d/dalpha = 1/alpha + (1 - u) log(sigma/y);
    d/dsigma = alpha (1 - u)/sigma.
    """
    if guarded(_has_inf, y):
        return _dead(need)
    n, shape = _size(y, alpha, sigma)
    ly, lsig, u = _logs_and_power(y, alpha, sigma, inverse=True)
    lp = (_tot(n, sm.log(alpha)) + _tot(n, alpha * lsig) - _tot(n, (alpha + 1.0) * ly)
          - _tot(n, u))
    parts = [None, None, None]
    if need[0]:
        parts[0] = (alpha * u - alpha - 1.0) / y
    if need[1]:
        parts[1] = 1.0 / alpha + (1.0 - u) * (lsig - ly)
    if need[2]:
        parts[2] = alpha * (1.0 - u) / sigma
    return lp, [_bc(p, shape) for p in parts]


def _frechet_cdf(lower):
    def kernel(need, y, alpha, sigma):
        # lcdf = -u, lccdf = log(1 - e^-u), u = (y/sigma)^-alpha:
        # du/dy = -alpha u/y, du/dalpha = -u log(y/sigma), du/dsigma = alpha u/sigma
        yv = _pv(y)
        y, zero = _edges(y, yv == 0, yv == _INF, 1.0, lower)
        if y is None:
            return _dead(need)
        n, shape = _size(y, alpha, sigma)
        lr = sm.log(y) - sm.log(sigma)
        u = sm.exp(-alpha * lr)
        if lower:
            c = -u
            w = -u
        else:
            c = sm.log1m_exp(-u)
            w = u / sm.expm1(u)
        parts = [-w * alpha / y if need[0] else None, -w * lr if need[1] else None,
                 w * alpha / sigma if need[2] else None]
        return _finish(n, shape, c, parts, zero)
    return kernel


def _check_y_positive(fn, arg, y):
    y = np.asarray(y, dtype=float)
    with np.errstate(invalid="ignore"):
        _require(fn, arg, y, y > 0, "positive")


frechet_lpdf, frechet_lcdf, frechet_lccdf, frechet_rng = family(
    "frechet", (("y", _check_y_positive), ("alpha", POSITIVE), ("sigma", POSITIVE)),
    lpdf=_frechet, lcdf=_frechet_cdf(True), lccdf=_frechet_cdf(False), quiet=True,
    rng=lambda g, a, s, size: s * g.standard_exponential(size) ** (-1.0 / a), doc="""
    Frechet log density (shape alpha, scale sigma), summed over elements:

    log Frechet(y | alpha, sigma) = log(alpha) + alpha log(sigma) - (alpha + 1) log(y)
                                    - (y / sigma)^-alpha

    y > 0, alpha > 0, sigma > 0.
    """, lcdf_doc=cdf_doc("Frechet", "-(y/sigma)^-alpha", "lcdf"),
    lccdf_doc=cdf_doc("Frechet", "log(1 - exp(-(y/sigma)^-alpha))", "lccdf"),
    rng_doc=rng_doc("Frechet(alpha, sigma)", "sigma E^(-1/alpha), E ~ Exp(1)"))


# --------------------------------------------------------------------------------------
# pareto(y | y_min, alpha), pareto_type_2(y | mu, lambda, alpha)
# --------------------------------------------------------------------------------------


def _pareto(need, y, y_min, alpha):
    """log(alpha) + alpha log(y_min) - (alpha + 1) log(y)  for y >= y_min (else -inf).

    d/dy = -(alpha + 1)/y;  d/dy_min = alpha/y_min;  d/dalpha = 1/alpha + log(y_min/y).
    """
    yv = _pv(y)
    if np.any((yv < _pv(y_min)) | (yv == _INF)):
        return _dead(need)
    n, shape = _size(y, y_min, alpha)
    ly = sm.log(y)
    lm = sm.log(y_min)
    lp = _tot(n, sm.log(alpha)) + _tot(n, alpha * lm) - _tot(n, (alpha + 1.0) * ly)
    parts = [None, None, None]
    if need[0]:
        parts[0] = -(alpha + 1.0) / y
    if need[1]:
        parts[1] = alpha / y_min
    if need[2]:
        parts[2] = 1.0 / alpha + lm - ly
    return lp, [_bc(p, shape) for p in parts]


def _exp_tail(t, lower):
    """(log F, d log F / dt) of a distribution whose upper tail is e^t (t <= 0, the
    Paretos): log(1 - e^t) for the lower tail, t itself for the upper."""
    if lower:
        return sm.log1m_exp(t), -1.0 / sm.expm1(-t)
    return t, 1.0


def _pareto_cdf(lower):
    def kernel(need, y, y_min, alpha):
        # t = alpha log(y_min/y) <= 0: lccdf = t, lcdf = log(1 - e^t)
        yv, mv = _pv(y), _pv(y_min)
        lo = yv <= mv if lower else yv < mv
        y, zero = _edges(y, lo, yv == _INF, 2.0 * mv, lower)
        if y is None:
            return _dead(need)
        n, shape = _size(y, y_min, alpha)
        lr = sm.log(y_min) - sm.log(y)
        c, dt = _exp_tail(alpha * lr, lower)
        parts = [-dt * alpha / y if need[0] else None,
                 dt * alpha / y_min if need[1] else None,
                 dt * lr if need[2] else None]
        return _finish(n, shape, c, parts, zero)
    return kernel


pareto_lpdf, pareto_lcdf, pareto_lccdf, pareto_rng = family(
    "pareto", (("y", NOT_NAN), ("y_min", POSITIVE), ("alpha", POSITIVE)), lpdf=_pareto,
    lcdf=_pareto_cdf(True), lccdf=_pareto_cdf(False), cdf_args={"y": NONNEGATIVE},
    quiet=True, rng=lambda g, m, a, size: m * np.exp(g.standard_exponential(size) / a),
    doc="""
    Pareto log density, summed: sum_i log Pareto(y_i | y_min_i, alpha_i).

    log Pareto(y | y_min, alpha) = log(alpha) + alpha log(y_min) - (alpha + 1) log(y)

    for y >= y_min; y < y_min has density 0 (-inf, as Stan). y_min > 0, alpha > 0.
    """, lcdf_doc=cdf_doc("Pareto", "log(1 - (y_min/y)^alpha) (-inf for y <= y_min)",
                             "lcdf"),
    lccdf_doc=cdf_doc("Pareto", "alpha log(y_min/y) (0 for y < y_min)", "lccdf"),
    rng_doc=rng_doc("Pareto(y_min, alpha)", "y_min exp(E/alpha), E ~ Exp(1)"))


def _pareto_type_2(need, y, mu, lam, alpha):
    """log(alpha) - log(lambda) - (alpha + 1) log1p((y - mu)/lambda).

    With s = lambda + y - mu: d/dy = -(alpha + 1)/s = -d/dmu;
    d/dlambda = -1/lambda + (alpha + 1)(y - mu)/(lambda s);
    d/dalpha = 1/alpha - log1p((y - mu)/lambda).
    """
    if guarded(_has_inf, y):
        return _dead(need)
    n, shape = _size(y, mu, lam, alpha)
    d = y - mu
    l1 = sm.log1p(d / lam)
    lp = _tot(n, sm.log(alpha)) - _tot(n, sm.log(lam)) - _tot(n, (alpha + 1.0) * l1)
    parts = [None, None, None, None]
    if need[0] or need[1] or need[2]:
        q = (alpha + 1.0) / (lam + d)
        if need[0]:
            parts[0] = -q
        if need[1]:
            parts[1] = q
        if need[2]:
            parts[2] = (q * d - 1.0) / lam
    if need[3]:
        parts[3] = 1.0 / alpha - l1
    return lp, [_bc(p, shape) for p in parts]


def _pareto_type_2_cdf(lower):
    def kernel(need, y, mu, lam, alpha):
        # t = -alpha log1p((y - mu)/lambda) <= 0: lccdf = t, lcdf = log(1 - e^t);
        # s = lambda + y - mu: dt/dy = -alpha/s = -dt/dmu,
        # dt/dlambda = alpha (y - mu)/(lambda s), dt/dalpha = -log1p((y - mu)/lambda)
        yv = _pv(y)
        y, zero = _edges(y, yv == _pv(mu), yv == _INF, _pv(mu) + _pv(lam), lower)
        if y is None:
            return _dead(need)
        n, shape = _size(y, mu, lam, alpha)
        d = y - mu
        l1 = sm.log1p(d / lam)
        c, dt = _exp_tail(-alpha * l1, lower)
        parts = [None, None, None, None]
        if need[0] or need[1] or need[2]:
            q = dt * alpha / (lam + d)
            if need[0]:
                parts[0] = -q
            if need[1]:
                parts[1] = q
            if need[2]:
                parts[2] = q * d / lam
        if need[3]:
            parts[3] = -dt * l1
        return _finish(n, shape, c, parts, zero)
    return kernel


pareto_type_2_lpdf, pareto_type_2_lcdf, pareto_type_2_lccdf, pareto_type_2_rng = family(
    "pareto_type_2",
    (("y", NOT_NAN), ("mu", FINITE), ("lambda", POSITIVE), ("alpha", POSITIVE)),
    lpdf=_pareto_type_2, lcdf=_pareto_type_2_cdf(True), lccdf=_pareto_type_2_cdf(False),
    relations=(_y_at_least_mu,), params=("y", "mu", "lam", "alpha"), quiet=True,
    rng=lambda g, m, l, a, size: m + l * np.expm1(g.standard_exponential(size) / a),
    doc="""
    Pareto type 2 (Lomax when mu = 0) log density, summed over elements:

    log ParetoType2(y | mu, lambda, alpha) = log(alpha) - log(lambda)
                                             - (alpha + 1) log1p((y - mu) / lambda)

    y >= mu (y < mu raises, as Stan's check), mu finite, lambda > 0, alpha > 0.
    """, lcdf_doc=cdf_doc("Pareto type 2",
                                    "log(1 - (1 + (y - mu)/lambda)^-alpha)", "lcdf"),
    lccdf_doc=cdf_doc("Pareto type 2", "-alpha log1p((y - mu)/lambda)",
                                     "lccdf"),
    rng_doc=rng_doc("ParetoType2(mu, lambda, alpha)",
                                     "mu + lambda expm1(E/alpha), E ~ Exp(1)"))


@pointwise(weibull_lpdf)
def _weibull_terms(y, alpha, sigma):
    def f(y):
        ly = sm.log(y)
        lsig = sm.log(sigma)
        return (sm.log(alpha) + _xlog(alpha - 1.0, y, ly) - alpha * lsig
                - sm.exp(alpha * (ly - lsig)))
    return _pw_dead((y < 0.0) | guarded(_eq, y, _INF), f, y)


def _weibull_cdf_terms(lower, y, alpha, sigma):
    u = sm.exp(alpha * (sm.log(y) - sm.log(sigma)))
    return sm.log1m_exp(-u) if lower else -u


_pw_cdf_pair(weibull_lcdf, weibull_lccdf, _weibull_cdf_terms)


@pointwise(frechet_lpdf)
def _frechet_terms(y, alpha, sigma):
    def f(y):
        ly = sm.log(y)
        lsig = sm.log(sigma)
        return (sm.log(alpha) + alpha * lsig - (alpha + 1.0) * ly
                - sm.exp(alpha * (lsig - ly)))
    return _pw_dead(guarded(_eq, y, _INF), f, y)


def _frechet_cdf_terms(lower, y, alpha, sigma):
    u = sm.exp(-alpha * (sm.log(y) - sm.log(sigma)))
    return -u if lower else sm.log1m_exp(-u)


_pw_cdf_pair(frechet_lcdf, frechet_lccdf, _frechet_cdf_terms)


@pointwise(pareto_lpdf)
def _pareto_terms(y, y_min, alpha):
    def f(y):
        return sm.log(alpha) + alpha * sm.log(y_min) - (alpha + 1.0) * sm.log(y)
    dead = (y < y_min) | guarded(_eq, y, _INF)
    return _pw_dead(dead, f, y, safe=2.0 * y_min)


def _pareto_cdf_terms(lower):
    def terms(y, y_min, alpha):
        def f(y):
            t = alpha * (sm.log(y_min) - sm.log(y))
            return sm.log1m_exp(t) if lower else t
        lo = (y <= y_min) if lower else (y < y_min)
        return _pw_edges(y, lo, guarded(_eq, y, _INF), 2.0 * y_min, lower, f)
    return terms


pointwise(pareto_lcdf)(_pareto_cdf_terms(True))
pointwise(pareto_lccdf)(_pareto_cdf_terms(False))


@pointwise(pareto_type_2_lpdf)
def _pareto_type_2_terms(y, mu, lam, alpha):
    def f(y):
        return sm.log(alpha) - sm.log(lam) - (alpha + 1.0) * sm.log1p((y - mu) / lam)
    return _pw_dead(guarded(_eq, y, _INF), f, y)


def _pareto_type_2_cdf_terms(lower):
    def terms(y, mu, lam, alpha):
        def f(y):
            t = -alpha * sm.log1p((y - mu) / lam)
            return sm.log1m_exp(t) if lower else t
        lo = guarded(_eq, y, mu)
        return _pw_edges(y, lo, guarded(_eq, y, _INF), mu + lam, lower, f)
    return terms


pointwise(pareto_type_2_lcdf)(_pareto_type_2_cdf_terms(True))
pointwise(pareto_type_2_lccdf)(_pareto_type_2_cdf_terms(False))
