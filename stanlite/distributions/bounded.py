"""Continuous distributions with positive or unit-interval support.

Positive support: ``lognormal``, ``chi_square``, ``inv_chi_square``,
``scaled_inv_chi_square``, ``exponential``, ``gamma``, ``inv_gamma`` (``weibull``,
``frechet`` and the paretos, with closed-form CDFs, are in :mod:`.positive`, which
shares this module's kernel helpers); unit interval: ``beta`` and
``beta_proportion``. Each has ``_lpdf``, ``_lcdf``,
``_lccdf`` (one fused node each, see :mod:`.fused`; the value is summed over the
broadcast elements) and ``_rng(*params, rng=None)``. Parameterisations are Stan's
(functions reference): ``exponential(beta)`` and ``gamma(alpha, beta)`` take a *rate*,
``inv_gamma(alpha, beta)`` a scale, ``beta_proportion(mu, kappa)`` is ``beta(mu kappa, (1 - mu) kappa)``.

Support, as Stan: a parameter outside its domain and an outcome Stan rejects raise
:class:`~stanlite.errors.DomainError` (``gamma_lpdf(-1, ...)``: y must be
non-negative); an outcome Stan accepts but that has zero density gives ``-inf`` with
zero partials (``pareto_lpdf`` with ``y < y_min``, ``inv_gamma_lpdf`` with
``y <= 0``, ``lognormal_lpdf`` at 0). A CDF at the end of the support where it is
0 gives ``-inf`` (zero partials); an element where it is 1 contributes 0.

CDFs w.r.t. shape parameters. ``gamma``, ``inv_gamma``, the chi-squares and ``beta``
have CDFs that are regularized incomplete gamma/beta functions, whose derivatives in
the shape are not closed-form; :mod:`stanlite.math.incomplete` computes them as
conditional moments (``log_gamma_p``, ``log_inc_beta``, ...: differentiable to every
order in every argument), so gradients, Hessians and forward mode all work w.r.t.
shapes.

Each family is one :func:`.family.family` declaration: its arguments with their
constraints, its kernels (value and partials in one pass), its draws and docs.

>>> import numpy as np, stanlite as sl
>>> round(sl.gamma_lpdf(2.0, 3.0, 1.5), 6)                 # shape 3, rate 1.5
-1.090457
>>> round(sl.grad(lambda a: sl.gamma_lcdf(2.0, a, 1.5))(3.0), 6)    # d/d shape
-0.410565
>>> sl.grad(lambda p: sl.beta_lcdf(0.3, p[0], p[1]))(np.array([2.0, 5.0])).round(6)
array([-0.435331,  0.171508])
"""

import math

import numpy as np

from .. import math as sm
from ..autodiff.var import guarded, shape_of
from ..autodiff.vm import opcodes as _op    # the interpreter's lowerings (autodiff/vm)
from ..autodiff.vm.scalar import _digamma, _digamma_diff, _lbeta
from ..autodiff.vm.program import (density_op as _density_op,
                                   guard_lowering as _guard_lowering)
from ..errors import DomainError
from ..math.incomplete import beta_tail, gamma_tail, times_log as _xlog
from ..math.special import digamma_diff as _digamma_diff_prim
from .family import (FINITE, NONNEGATIVE, NOT_NAN, POSITIVE, cdf_doc, family, in_range,
                     rng_doc)
from .fused import plain, pointwise, reps

_NAMES = ["lognormal", "chi_square", "inv_chi_square", "scaled_inv_chi_square",
          "exponential", "gamma", "inv_gamma", "beta", "beta_proportion"]
__all__ = [f"{d}_{k}" for d in _NAMES for k in ("lpdf", "lcdf", "lccdf", "rng")]

_HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)
_LOG_TWO = math.log(2.0)
_INF = math.inf


# --------------------------------------------------------------------------------------
# kernel helpers
# --------------------------------------------------------------------------------------
def _pv(x):
    return np.asarray(plain(x), dtype=float)


# Decisions on values, taken through ``guarded`` (a retaped recording re-checks them at
# every replay instead of giving up on the recording): an outcome outside the support
# makes the log density -inf.
def _has_inf(y):
    return bool(np.any(np.asarray(y) == _INF))


_guard_lowering(_has_inf, "nonfinite_branch")       # (lowerings: autodiff/vm)


def _zero_or_inf(y):
    y = np.asarray(y)
    return bool(np.any((y == 0) | (y == _INF)))


_guard_lowering(_zero_or_inf, "nonfinite_branch")


def _nonpos_or_inf(y):
    y = np.asarray(y)
    return bool(np.any((y <= 0) | (y == _INF)))


def _neg_or_inf(y):
    y = np.asarray(y)
    return bool(np.any((y < 0) | (y == _INF)))


def _size(*args):
    shape = np.broadcast_shapes(*[shape_of(a) for a in args])
    return int(np.prod(shape, dtype=np.int64)), shape


def _tot(n, e):
    """sum of a term over the n broadcast elements (``e`` spans some of the args)."""
    return reps(n, e) * sm.sum(e)


def _bc(p, shape):
    """A partial at the full broadcast shape (so that it is summed, not shared)."""
    if p is None or shape_of(p) == shape:
        return p
    return p + np.zeros(shape)


def _dead(need):
    """log density -inf (an outcome with zero probability): zero partials, as Stan."""
    return -_INF, [0.0 if nd else None for nd in need]


def _edges(y, lo, hi, safe, lower_tail):
    """CDF ends: ``lo``/``hi`` mark elements at (or past) the lower/upper end of the
    support. For the lower tail an element at the lower end has probability 0 (the
    whole log CDF is -inf) and one at the upper end contributes 0 (and vice versa).
    Returns ``(y, zero)``: ``y`` with the zero-contribution elements replaced by a
    safe interior value, and their mask; ``(None, None)`` for -inf."""
    dead, zero = (lo, hi) if lower_tail else (hi, lo)
    if np.any(dead):
        return None, None
    if np.any(zero):
        return sm.where(zero, safe, y), zero
    return y, None


def _finish(n, shape, c, parts, zero):
    """Sum the elementwise log CDF ``c`` and bring partials to the broadcast shape,
    zeroing the elements masked by ``zero`` (where the CDF is 1)."""
    parts = [_bc(p, shape) for p in parts]
    if zero is not None:
        c = sm.where(zero, 0.0, c)
        parts = [None if p is None else sm.where(zero, 0.0, p) for p in parts]
    return _tot(n, c), parts


def _tail_kernels(edges, safe):
    """Decorator: a family's CDF kernels ``f(lower) -> kernel(need, y, *params)`` from
    ``core(lower, need, y, *params) -> (elementwise log CDF, partials)``. The ends of
    the support, ``edges(y) -> (at the lower end, at the upper end)``, are handled as
    :func:`_edges` says (``safe``: the interior value put in their place); the sum and
    the partials' broadcast are :func:`_finish`'s."""
    def declare(core):
        def make(lower):
            def kernel(need, y, *params):
                y, zero = _edges(y, *edges(y), safe, lower)
                if y is None:
                    return _dead(need)
                n, shape = _size(y, *params)
                c, parts = core(lower, need, y, *params)
                return _finish(n, shape, c, parts, zero)
            kernel.__module__ = core.__module__
            return kernel
        return make
    return declare


def _log1m_exp_neg(u):
    """log(1 - exp(-u)) for u >= 0 and its derivative 1/expm1(u)."""
    return sm.log1m_exp(-u), 1.0 / sm.expm1(u)


# argument checks ----------------------------------------------------------------------
def _require(fn, arg, x, ok, what):
    ok = np.asarray(ok)
    if np.all(ok):
        return
    x = np.asarray(x, dtype=float)
    bad = ~np.broadcast_to(ok, np.broadcast_shapes(ok.shape, x.shape))
    if bad.ndim:
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        where = f"{arg}[{', '.join(str(i) for i in idx)}]"
        val = np.broadcast_to(x, bad.shape)[idx]
    else:
        where, val = arg, x
    raise DomainError(f"{fn}: {where} must be {what}, but is {float(val)!r}")


def _check_open_unit(fn, arg, x):
    x = np.asarray(x, dtype=float)
    with np.errstate(invalid="ignore"):
        _require(fn, arg, x, (x > 0) & (x < 1), "in the open interval (0, 1)")


def _positive_edges(y):
    yv = _pv(y)
    return yv == 0, yv == _INF


# --------------------------------------------------------------------------------------
# lognormal(y | mu, sigma)
# --------------------------------------------------------------------------------------


def _lognormal(need, y, mu, sigma):
    """-log(sigma) - log(2 pi)/2 - log y - (log y - mu)^2 / (2 sigma^2).

    z = (log y - mu)/sigma: d/dy = -(1 + z/sigma)/y, d/dmu = z/sigma,
    d/dsigma = (z^2 - 1)/sigma.
    """
    if guarded(_zero_or_inf, y):
        return _dead(need)
    n, shape = _size(y, mu, sigma)
    ly = sm.log(y)
    inv_s = 1.0 / sigma
    z = (ly - mu) * inv_s
    lp = (-0.5 * _tot(n, z * z) - n * _HALF_LOG_TWO_PI - _tot(n, sm.log(sigma))
          - _tot(n, ly))
    parts = [None, None, None]
    if need[0] or need[1]:
        zs = z * inv_s
        if need[0]:
            parts[0] = -(1.0 + zs) / y
        if need[1]:
            parts[1] = zs
    if need[2]:
        parts[2] = (z * z - 1.0) * inv_s
    return lp, [_bc(p, shape) for p in parts]


@_tail_kernels(_positive_edges, 1.0)
def _lognormal_cdf(lower, need, y, mu, sigma):
    # log Phi(+-z); d/dz log Phi(z) = phi(z)/Phi(z), computed in logs
    inv_s = 1.0 / sigma
    z = (sm.log(y) - mu) * inv_s
    sz = z if lower else -z
    lphi = sm.log_Phi(sz)
    parts = [None, None, None]
    if any(need):
        dz = sm.exp(-0.5 * z * z - _HALF_LOG_TWO_PI - lphi) * inv_s
        if not lower:
            dz = -dz
        if need[0]:
            parts[0] = dz / y
        if need[1]:
            parts[1] = -dz
        if need[2]:
            parts[2] = -dz * z
    return lphi, parts


lognormal_lpdf, lognormal_lcdf, lognormal_lccdf, lognormal_rng = family(
    "lognormal", (("y", NONNEGATIVE), ("mu", FINITE), ("sigma", POSITIVE)),
    lpdf=_lognormal, lcdf=_lognormal_cdf(True), lccdf=_lognormal_cdf(False), quiet=True,
    rng="lognormal", doc="""
    Lognormal log density, summed: sum_i log LogNormal(y_i | mu_i, sigma_i).

    log LogNormal(y | mu, sigma) = -log(sigma) - log(2 pi)/2 - log(y)
                                   - (log(y) - mu)^2 / (2 sigma^2)

    y >= 0 (y = 0 has density 0: -inf), mu finite, sigma > 0.

    >>> import stanlite as sl
    >>> round(sl.lognormal_lpdf(2.0, 0.5, 1.5), 6)
    -2.025841
    """, lcdf_doc=cdf_doc("lognormal", "log Phi((log y - mu) / sigma)", "lcdf"),
    lccdf_doc=cdf_doc("lognormal", "log Phi(-(log y - mu) / sigma)", "lccdf"),
    rng_doc=rng_doc("LogNormal(mu, sigma)", "exp of a normal draw"))


# the interpreter's LOGNORMAL op, by element (autodiff/vm/program.py density_op)
def _lognormal_inside(y, mu, s):
    return s > 0.0 and y > 0.0


def _lognormal_lp(y, mu, s):
    ly = math.log(y)
    z = (ly - mu) / s
    return -0.5 * z * z - math.log(s) - ly


def _lognormal_partials(m, g, y, mu, s):
    z = (math.log(y) - mu) / s
    return -g * (z / s + 1.0) / y, g * z / s, g * (z * z - 1.0) / s


_density_op(lognormal_lpdf, _op.LOGNORMAL, ("nonnegative_finite", "finite", "positive_finite"),
            _lognormal_lp, _lognormal_partials, _lognormal_inside,
            constant=_HALF_LOG_TWO_PI)


# --------------------------------------------------------------------------------------
# chi_square(y | nu), inv_chi_square(y | nu), scaled_inv_chi_square(y | nu, s)
# --------------------------------------------------------------------------------------


def _chi_square(need, y, nu):
    """(nu/2 - 1) log y - y/2 - (nu/2) log 2 - lgamma(nu/2).

    d/dy = (nu/2 - 1)/y - 1/2;  d/dnu = (log y - log 2 - digamma(nu/2))/2.
    """
    if guarded(_has_inf, y):
        return _dead(need)
    n, shape = _size(y, nu)
    h = 0.5 * nu
    ly = sm.log(y)
    lp = (_tot(n, _xlog(h - 1.0, y, ly)) - 0.5 * _tot(n, y)
          - _tot(n, h * _LOG_TWO + sm.lgamma(h)))
    parts = [None, None]
    if need[0]:
        parts[0] = (h - 1.0) / y - 0.5
    if need[1]:
        parts[1] = 0.5 * (ly - _LOG_TWO - sm.digamma(h))
    return lp, [_bc(p, shape) for p in parts]


@_tail_kernels(_positive_edges, 1.0)
def _chi_square_cdf(lower, need, y, nu):
    # P(nu/2, y/2) (Q for the upper tail)
    lf, da, dx = gamma_tail(not lower, need[1], need[0], 0.5 * nu, 0.5 * y)
    return lf, [None if dx is None else 0.5 * dx,
                None if da is None else 0.5 * da]


chi_square_lpdf, chi_square_lcdf, chi_square_lccdf, chi_square_rng = family(
    "chi_square", (("y", NONNEGATIVE), ("nu", POSITIVE)), lpdf=_chi_square,
    lcdf=_chi_square_cdf(True), lccdf=_chi_square_cdf(False), quiet=True,
    rng="chisquare", doc="""
    Chi-square log density, summed: sum_i log ChiSquare(y_i | nu_i).

    log ChiSquare(y | nu) = (nu/2 - 1) log(y) - y/2 - (nu/2) log(2) - lgamma(nu/2)

    y >= 0, nu > 0 (degrees of freedom, any positive real).
    """, lcdf_doc=cdf_doc("chi-square", "log P(nu/2, y/2)", "lcdf"),
    lccdf_doc=cdf_doc("chi-square", "log Q(nu/2, y/2)", "lccdf"),
    rng_doc=rng_doc("ChiSquare(nu)", "numpy's chisquare"))


def _inv_chi_square(need, y, nu):
    """-(nu/2 + 1) log y - 1/(2 y) - (nu/2) log 2 - lgamma(nu/2).

    d/dy = -(nu/2 + 1)/y + 1/(2 y^2);  d/dnu = -(log y + log 2 + digamma(nu/2))/2.
    """
    if guarded(_nonpos_or_inf, y):
        return _dead(need)
    n, shape = _size(y, nu)
    h = 0.5 * nu
    ly = sm.log(y)
    inv_y = 1.0 / y
    lp = (-_tot(n, (h + 1.0) * ly) - 0.5 * _tot(n, inv_y)
          - _tot(n, h * _LOG_TWO + sm.lgamma(h)))
    parts = [None, None]
    if need[0]:
        parts[0] = (0.5 * inv_y - (h + 1.0)) * inv_y
    if need[1]:
        parts[1] = -0.5 * (ly + _LOG_TWO + sm.digamma(h))
    return lp, [_bc(p, shape) for p in parts]


@_tail_kernels(_positive_edges, 1.0)
def _inv_chi_square_cdf(lower, need, y, nu):
    # CDF = Q(nu/2, 1/(2y)); x = 1/(2y), dx/dy = -x/y
    x = 0.5 / y
    lf, da, dx = gamma_tail(lower, need[1], need[0], 0.5 * nu, x)
    return lf, [None if dx is None else -dx * x / y,
                None if da is None else 0.5 * da]


inv_chi_square_lpdf, inv_chi_square_lcdf, inv_chi_square_lccdf, inv_chi_square_rng = family(
    "inv_chi_square", (("y", NOT_NAN), ("nu", POSITIVE)), lpdf=_inv_chi_square,
    lcdf=_inv_chi_square_cdf(True), lccdf=_inv_chi_square_cdf(False),
    cdf_args={"y": NONNEGATIVE}, quiet=True,
    rng=lambda g, nu, size: 1.0 / g.chisquare(nu, size), doc="""
    Inverse chi-square log density, summed: sum_i log InvChiSquare(y_i | nu_i).

    log InvChiSquare(y | nu) = -(nu/2 + 1) log(y) - 1/(2 y) - (nu/2) log(2)
                               - lgamma(nu/2)

    y > 0 (as Stan: y <= 0 gives -inf, NaN raises), nu > 0.
    """, lcdf_doc=cdf_doc("inverse chi-square", "log Q(nu/2, 1/(2 y))", "lcdf"),
    lccdf_doc=cdf_doc("inverse chi-square", "log P(nu/2, 1/(2 y))",
                                      "lccdf"),
    rng_doc=rng_doc("InvChiSquare(nu)", "1 / a chi-square draw"))


def _scaled_inv_chi_square(need, y, nu, s):
    """(nu/2) log(nu/2) - lgamma(nu/2) + nu log s - (nu/2 + 1) log y - nu s^2/(2 y).

    d/dy = -(nu/2 + 1)/y + nu s^2/(2 y^2);  d/ds = nu/s - nu s/y;
    d/dnu = (log(nu/2) + 1 - digamma(nu/2))/2 + log s - log(y)/2 - s^2/(2 y).
    """
    if guarded(_nonpos_or_inf, y):
        return _dead(need)
    n, shape = _size(y, nu, s)
    h = 0.5 * nu
    lh = sm.log(h)
    ly = sm.log(y)
    ls = sm.log(s)
    inv_y = 1.0 / y
    s2y = s * s * inv_y
    lp = (_tot(n, h * lh - sm.lgamma(h)) + _tot(n, nu * ls) - _tot(n, (h + 1.0) * ly)
          - _tot(n, h * s2y))
    parts = [None, None, None]
    if need[0]:
        parts[0] = (h * s2y - (h + 1.0)) * inv_y
    if need[1]:
        parts[1] = 0.5 * (lh + 1.0 - sm.digamma(h) - ly - s2y) + ls
    if need[2]:
        parts[2] = nu / s - nu * s * inv_y
    return lp, [_bc(p, shape) for p in parts]


@_tail_kernels(_positive_edges, 1.0)
def _scaled_inv_chi_square_cdf(lower, need, y, nu, s):
    # CDF = Q(nu/2, x), x = nu s^2 / (2 y): dx/dy = -x/y, dx/dnu = x/nu, dx/ds = 2x/s
    h = 0.5 * nu
    x = h * s * s / y
    lf, da, dx = gamma_tail(lower, need[1], any(need), h, x)
    parts = [None, None, None]
    if need[0]:
        parts[0] = -dx * x / y
    if need[1]:
        parts[1] = 0.5 * da + dx * x / nu
    if need[2]:
        parts[2] = 2.0 * dx * x / s
    return lf, parts


(scaled_inv_chi_square_lpdf,
 scaled_inv_chi_square_lcdf,
 scaled_inv_chi_square_lccdf,
 scaled_inv_chi_square_rng) = family(
    "scaled_inv_chi_square", (("y", NOT_NAN), ("nu", POSITIVE), ("s", POSITIVE)),
    lpdf=_scaled_inv_chi_square, lcdf=_scaled_inv_chi_square_cdf(True),
    lccdf=_scaled_inv_chi_square_cdf(False), cdf_args={"y": NONNEGATIVE}, quiet=True,
    rng=lambda g, nu, s, size: nu * s * s / g.chisquare(nu, size), doc="""
    Scaled inverse chi-square log density, summed over elements:

    log ScaledInvChiSquare(y | nu, s) = (nu/2) log(nu/2) - lgamma(nu/2) + nu log(s)
                                        - (nu/2 + 1) log(y) - nu s^2 / (2 y)

    y > 0 (as Stan: y <= 0 gives -inf, NaN raises), nu > 0, s > 0.
    """,
    lcdf_doc=cdf_doc("scaled inverse chi-square", "log Q(nu/2, nu s^2 / (2 y))", "lcdf"),
    lccdf_doc=cdf_doc("scaled inverse chi-square", "log P(nu/2, nu s^2 / (2 y))", "lccdf"),
    rng_doc=rng_doc("ScaledInvChiSquare(nu, s)",
                                             "nu s^2 / a chi-square draw"))


# --------------------------------------------------------------------------------------
# exponential(y | beta), gamma(y | alpha, beta), inv_gamma(y | alpha, beta)
# --------------------------------------------------------------------------------------


def _exponential(need, y, beta):
    """log(beta) - beta y;  d/dy = -beta, d/dbeta = 1/beta - y."""
    if guarded(_has_inf, y):
        return _dead(need)
    n, shape = _size(y, beta)
    lp = _tot(n, sm.log(beta)) - _tot(n, beta * y)
    parts = [-beta if need[0] else None, 1.0 / beta - y if need[1] else None]
    return lp, [_bc(p, shape) for p in parts]


@_tail_kernels(_positive_edges, 1.0)
def _exponential_cdf(lower, need, y, beta):
    # lcdf = log(1 - exp(-beta y)): d/d(beta y) = 1/expm1(beta y); lccdf = -beta y
    u = beta * y
    if lower:
        c, du = _log1m_exp_neg(u)
    else:
        c, du = -u, -1.0
    return c, [du * beta if need[0] else None,
               du * y if need[1] else None]


exponential_lpdf, exponential_lcdf, exponential_lccdf, exponential_rng = family(
    "exponential", (("y", NONNEGATIVE), ("beta", POSITIVE)), lpdf=_exponential,
    lcdf=_exponential_cdf(True), lccdf=_exponential_cdf(False), quiet=True,
    rng=lambda g, beta, size: g.exponential(1.0 / beta, size), doc="""
    Exponential log density (beta is a rate), summed: sum_i log(beta_i) - beta_i y_i.

    y >= 0, beta > 0.
    """, lcdf_doc=cdf_doc("exponential", "log(1 - exp(-beta y))", "lcdf"),
    lccdf_doc=cdf_doc("exponential", "-beta y", "lccdf"),
    rng_doc=rng_doc("Exponential(beta)", "rate beta, mean 1/beta"))


# the interpreter's EXPONENTIAL op, by element (autodiff/vm/program.py density_op)
def _exponential_inside(y, beta):
    return beta > 0.0 and y >= 0.0


def _exponential_lp(y, beta):
    return math.log(beta) - beta * y


def _exponential_partials(m, g, y, beta):
    return -g * beta, g * (1.0 / beta - y)


_density_op(exponential_lpdf, _op.EXPONENTIAL, ("nonnegative_finite", "positive_finite"),
            _exponential_lp, _exponential_partials, _exponential_inside)


def _gamma(need, y, alpha, beta):
    """alpha log(beta) - lgamma(alpha) + (alpha - 1) log(y) - beta y.

    d/dy = (alpha - 1)/y - beta;  d/dalpha = log(beta) + log(y) - digamma(alpha);
    d/dbeta = alpha/beta - y.
    """
    if guarded(_has_inf, y):
        return _dead(need)
    n, shape = _size(y, alpha, beta)
    ly = sm.log(y)
    lb = sm.log(beta)
    lp = (_tot(n, alpha * lb) - _tot(n, sm.lgamma(alpha)) + _tot(n, _xlog(alpha - 1.0, y, ly))
          - _tot(n, beta * y))
    parts = [None, None, None]
    if need[0]:
        parts[0] = (alpha - 1.0) / y - beta
    if need[1]:
        parts[1] = lb + ly - sm.digamma(alpha)
    if need[2]:
        parts[2] = alpha / beta - y
    return lp, [_bc(p, shape) for p in parts]


@_tail_kernels(_positive_edges, 1.0)
def _gamma_cdf(lower, need, y, alpha, beta):
    # P(alpha, beta y) (Q for the upper tail); dx/dy = beta, dx/dbeta = y
    lf, da, dx = gamma_tail(not lower, need[1], need[0] or need[2], alpha, beta * y)
    return lf, [dx * beta if need[0] else None, da,
                dx * y if need[2] else None]


gamma_lpdf, gamma_lcdf, gamma_lccdf, gamma_rng = family(
    "gamma", (("y", NONNEGATIVE), ("alpha", POSITIVE), ("beta", POSITIVE)), lpdf=_gamma,
    lcdf=_gamma_cdf(True), lccdf=_gamma_cdf(False), quiet=True,
    rng=lambda g, a, b, size: g.gamma(a, 1.0 / b, size), doc="""
    Gamma log density (shape alpha, *rate* beta), summed over elements:

    log Gamma(y | alpha, beta) = alpha log(beta) - lgamma(alpha)
                                 + (alpha - 1) log(y) - beta y

    y >= 0 (negative y raises, as Stan's check), alpha > 0, beta > 0.

    >>> import numpy as np, stanlite as sl
    >>> round(sl.gamma_lpdf(np.array([1.0, 2.0]), 2.0, 0.5), 6)
    -3.579442
    """, lcdf_doc=cdf_doc("gamma", "log P(alpha, beta y) (regularized incomplete "
                            "gamma; differentiable in alpha too)", "lcdf"),
    lccdf_doc=cdf_doc("gamma", "log Q(alpha, beta y)", "lccdf"),
    rng_doc=rng_doc("Gamma(alpha, beta)", "shape alpha, rate beta"))


# the interpreter's GAMMA op, by element (autodiff/vm/program.py density_op)
def _gamma_inside(y, al, be):
    return al > 0.0 and be > 0.0 and y >= 0.0


def _gamma_lp(y, al, be):
    return al * math.log(be) - math.lgamma(al) + (al - 1.0) * math.log(y) - be * y


def _gamma_partials(m, g, y, al, be):
    return (g * ((al - 1.0) / y - be),
            g * (math.log(be) - _digamma(al) + math.log(y)) if m & 2 else 0.0,
            g * (al / be - y))


_density_op(gamma_lpdf, _op.GAMMA,
            ("nonnegative_finite", "positive_finite", "positive_finite"),
            _gamma_lp, _gamma_partials, _gamma_inside)


def _inv_gamma(need, y, alpha, beta):
    """alpha log(beta) - lgamma(alpha) - (alpha + 1) log(y) - beta/y.

    d/dy = -(alpha + 1)/y + beta/y^2;  d/dalpha = log(beta) - digamma(alpha) - log(y);
    d/dbeta = alpha/beta - 1/y.
    """
    if guarded(_nonpos_or_inf, y):
        return _dead(need)
    n, shape = _size(y, alpha, beta)
    ly = sm.log(y)
    lb = sm.log(beta)
    inv_y = 1.0 / y
    lp = (_tot(n, alpha * lb) - _tot(n, sm.lgamma(alpha)) - _tot(n, (alpha + 1.0) * ly)
          - _tot(n, beta * inv_y))
    parts = [None, None, None]
    if need[0]:
        parts[0] = (beta * inv_y - alpha - 1.0) * inv_y
    if need[1]:
        parts[1] = lb - sm.digamma(alpha) - ly
    if need[2]:
        parts[2] = alpha / beta - inv_y
    return lp, [_bc(p, shape) for p in parts]


@_tail_kernels(_positive_edges, 1.0)
def _inv_gamma_cdf(lower, need, y, alpha, beta):
    # CDF = Q(alpha, beta/y); x = beta/y: dx/dy = -x/y, dx/dbeta = 1/y
    inv_y = 1.0 / y
    x = beta * inv_y
    lf, da, dx = gamma_tail(lower, need[1], need[0] or need[2], alpha, x)
    return lf, [-dx * x * inv_y if need[0] else None, da,
                dx * inv_y if need[2] else None]


inv_gamma_lpdf, inv_gamma_lcdf, inv_gamma_lccdf, inv_gamma_rng = family(
    "inv_gamma", (("y", NOT_NAN), ("alpha", POSITIVE), ("beta", POSITIVE)),
    lpdf=_inv_gamma, lcdf=_inv_gamma_cdf(True), lccdf=_inv_gamma_cdf(False),
    cdf_args={"y": NONNEGATIVE}, quiet=True,
    rng=lambda g, a, b, size: b / g.gamma(a, 1.0, size), doc="""
    Inverse gamma log density (shape alpha, scale beta), summed over elements:

    log InvGamma(y | alpha, beta) = alpha log(beta) - lgamma(alpha)
                                    - (alpha + 1) log(y) - beta / y

    y > 0 (as Stan: y <= 0 gives -inf, NaN raises), alpha > 0, beta > 0.
    """, lcdf_doc=cdf_doc("inverse gamma", "log Q(alpha, beta / y)", "lcdf"),
    lccdf_doc=cdf_doc("inverse gamma", "log P(alpha, beta / y)", "lccdf"),
    rng_doc=rng_doc("InvGamma(alpha, beta)", "beta / a Gamma(alpha, 1) draw"))


# --------------------------------------------------------------------------------------
# beta(theta | alpha, beta), beta_proportion(theta | mu, kappa)
# --------------------------------------------------------------------------------------


def _beta(need, theta, alpha, beta):
    """(alpha - 1) log(theta) + (beta - 1) log(1 - theta) - lbeta(alpha, beta).

    d/dtheta = (alpha - 1)/theta - (beta - 1)/(1 - theta);
    d/dalpha = log(theta) - digamma(alpha) + digamma(alpha + beta);
    d/dbeta = log(1 - theta) - digamma(beta) + digamma(alpha + beta).
    The digamma differences are digamma_diff (math/special.py), as lbeta's own
    derivatives: psi(alpha) - psi(alpha + beta) loses ~1e-15 / (beta / alpha) relative
    for beta << alpha, and the interpreter's op (below) computes the same.
    """
    n, shape = _size(theta, alpha, beta)
    lt = sm.log(theta)
    l1t = sm.log1m(theta)
    lp = (_tot(n, _xlog(alpha - 1.0, theta, lt)) - _tot(n, sm.lbeta(alpha, beta))
          + _tot(n, _xlog(beta - 1.0, theta, l1t, pole=1.0, logf=sm.log1m)))
    parts = [None, None, None]
    if need[0]:
        parts[0] = (alpha - 1.0) / theta - (beta - 1.0) / (1.0 - theta)
    if need[1]:
        parts[1] = lt - _digamma_diff_prim(alpha, beta)
    if need[2]:
        parts[2] = l1t - _digamma_diff_prim(beta, alpha)
    return lp, [_bc(p, shape) for p in parts]


def _unit_edges(theta):
    tv = _pv(theta)
    return tv == 0, tv == 1


@_tail_kernels(_unit_edges, 0.5)
def _beta_cdf(lower, need, theta, alpha, beta):
    # I_theta(alpha, beta) (1 - I for the upper tail)
    lf, (da, db, dx) = beta_tail(not lower, (need[1], need[2], need[0]),
                                  alpha, beta, theta)
    return lf, [dx, da, db]


beta_lpdf, beta_lcdf, beta_lccdf, beta_rng = family(
    "beta", (("theta", in_range(0, 1)), ("alpha", POSITIVE), ("beta", POSITIVE)),
    lpdf=_beta, lcdf=_beta_cdf(True), lccdf=_beta_cdf(False), quiet=True,
    rng="beta", doc="""
    Beta log density, summed: sum_i log Beta(theta_i | alpha_i, beta_i).

    log Beta(theta | alpha, beta) = (alpha - 1) log(theta) + (beta - 1) log(1 - theta)
                                    - lbeta(alpha, beta)

    theta in [0, 1], alpha > 0, beta > 0.

    >>> import stanlite as sl
    >>> round(sl.beta_lpdf(0.3, 2.0, 5.0), 6)
    0.770525
    """, lcdf_doc=cdf_doc("beta", "log I_theta(alpha, beta) (regularized incomplete "
                           "beta; differentiable in alpha and beta too)", "lcdf"),
    lccdf_doc=cdf_doc("beta", "log(1 - I_theta(alpha, beta))", "lccdf"),
    rng_doc=rng_doc("Beta(alpha, beta)", "numpy's beta"))


# the interpreter's BETA op, by element (autodiff/vm/program.py density_op)
def _beta_inside(y, p, q):
    return p > 0.0 and q > 0.0 and y >= 0.0 and y <= 1.0


def _beta_lp(y, p, q):
    # (the tape's lbeta, math/special.py: accurate where the lgamma sum cancels)
    return (p - 1.0) * math.log(y) + (q - 1.0) * math.log1p(-y) - _lbeta(p, q)


def _beta_partials(m, g, y, p, q):
    # (the tape's digamma differences: _digamma_diff, no cancellation)
    return (g * ((p - 1.0) / y - (q - 1.0) / (1.0 - y)),
            g * (math.log(y) - _digamma_diff(p, q)) if m & 2 else 0.0,
            g * (math.log1p(-y) - _digamma_diff(q, p)) if m & 4 else 0.0)


_density_op(beta_lpdf, _op.BETA, ("unit", "positive_finite", "positive_finite"),
            _beta_lp, _beta_partials, _beta_inside)


def _beta_proportion(need, theta, mu, kappa):
    """beta(theta | mu kappa, (1 - mu) kappa): with a = mu kappa, b = (1 - mu) kappa,
    lgamma(kappa) - lgamma(a) - lgamma(b) + (a - 1) log(theta) + (b - 1) log(1 - theta).

    d/dtheta = (a - 1)/theta - (b - 1)/(1 - theta);
    d/dmu = kappa (digamma(b) - digamma(a) + log(theta) - log(1 - theta));
    d/dkappa = digamma(kappa) + mu (log(theta) - digamma(a))
               + (1 - mu)(log(1 - theta) - digamma(b)).
    """
    n, shape = _size(theta, mu, kappa)
    a = mu * kappa
    b = (1.0 - mu) * kappa
    lt = sm.log(theta)
    l1t = sm.log1m(theta)
    lp = (_tot(n, sm.lgamma(kappa)) - _tot(n, sm.lgamma(a) + sm.lgamma(b))
          + _tot(n, _xlog(a - 1.0, theta, lt))
          + _tot(n, _xlog(b - 1.0, theta, l1t, pole=1.0, logf=sm.log1m)))
    parts = [None, None, None]
    if need[0]:
        parts[0] = (a - 1.0) / theta - (b - 1.0) / (1.0 - theta)
    if need[1] or need[2]:
        ea = lt - sm.digamma(a)
        eb = l1t - sm.digamma(b)
        if need[1]:
            parts[1] = kappa * (ea - eb)
        if need[2]:
            parts[2] = sm.digamma(kappa) + mu * ea + (1.0 - mu) * eb
    return lp, [_bc(p, shape) for p in parts]


@_tail_kernels(_unit_edges, 0.5)
def _beta_proportion_cdf(lower, need, theta, mu, kappa):
    # the beta CDF at a = mu kappa, b = (1 - mu) kappa:
    # d/dmu = kappa (d/da - d/db), d/dkappa = mu d/da + (1 - mu) d/db
    nab = need[1] or need[2]
    lf, (da, db, dx) = beta_tail(not lower, (nab, nab, need[0]),
                                  mu * kappa, (1.0 - mu) * kappa, theta)
    parts = [dx, None, None]
    if need[1]:
        parts[1] = kappa * (da - db)
    if need[2]:
        parts[2] = mu * da + (1.0 - mu) * db
    return lf, parts


(beta_proportion_lpdf,
 beta_proportion_lcdf,
 beta_proportion_lccdf,
 beta_proportion_rng) = family(
    "beta_proportion",
    (("theta", in_range(0, 1)), ("mu", _check_open_unit), ("kappa", POSITIVE)),
    lpdf=_beta_proportion, lcdf=_beta_proportion_cdf(True),
    lccdf=_beta_proportion_cdf(False), quiet=True,
    rng=lambda g, m, k, size: g.beta(m * k, (1.0 - m) * k, size), doc="""
    Beta log density with mean mu and precision kappa, summed over elements:

    log BetaProportion(theta | mu, kappa) = log Beta(theta | mu kappa, (1 - mu) kappa)

    theta in [0, 1], mu in (0, 1), kappa > 0.
    """, lcdf_doc=cdf_doc("beta_proportion",
                                      "log I_theta(mu kappa, (1 - mu) kappa)", "lcdf"),
    lccdf_doc=cdf_doc("beta_proportion",
                                       "log(1 - I_theta(mu kappa, (1 - mu) kappa))", "lccdf"),
    rng_doc=rng_doc("BetaProportion(mu, kappa)",
                                       "Beta(mu kappa, (1 - mu) kappa)"))


# --------------------------------------------------------------------------------------
# elementwise forms (``reduce=False``, see :mod:`.fused`): an element outside the
# support is -inf on its own (the summed kernels make the whole sum -inf); the ends of
# a CDF as in :func:`_edges`, element by element. Masks of traced values are guarded.
# --------------------------------------------------------------------------------------
def _eq(x, v):
    return np.asarray(x) == v


def _pw_zero_or_inf(y):
    return guarded(_eq, y, 0.0) | guarded(_eq, y, _INF)


def _pw_nonpos_or_inf(y):
    return (y <= 0.0) | guarded(_eq, y, _INF)


def _pw_dead(dead, f, y, safe=1.0):
    """``f(y)`` with -inf where ``dead`` (``f`` sees a safe value there; traced values
    are never read as plain ones, so that a compiled replay recomputes all of it)."""
    if not np.any(dead):
        return f(y)
    return sm.where(dead, -_INF, f(sm.where(dead, safe, y)))


def _pw_edges(y, lo, hi, safe, lower, f):
    """The elementwise log CDF (``lower``) or CCDF ``f(y)`` with the support's ends
    ``lo``/``hi`` as :func:`_edges` says: -inf on the impossible side, 0 on the other."""
    dead, zero = (lo, hi) if lower else (hi, lo)
    if not (np.any(dead) or np.any(zero)):
        return f(y)
    c = f(sm.where(dead | zero, safe, y))
    return sm.where(dead, -_INF, sm.where(zero, 0.0, c))


def _pw_positive_cdf(lower, f):
    """Pointwise form of a CDF on [0, inf]: ``f(lower, y, *params)`` inside."""
    def terms(y, *params):
        lo, hi = guarded(_eq, y, 0.0), guarded(_eq, y, _INF)
        return _pw_edges(y, lo, hi, 1.0, lower, lambda y: f(lower, y, *params))
    return terms


def _pw_cdf_pair(lcdf, lccdf, f):
    pointwise(lcdf)(_pw_positive_cdf(True, f))
    pointwise(lccdf)(_pw_positive_cdf(False, f))


def _gamma_lf(upper, a, x):
    return gamma_tail(upper, False, False, a, x)[0]


@pointwise(lognormal_lpdf)
def _lognormal_terms(y, mu, sigma):
    def f(y):
        ly = sm.log(y)
        z = (ly - mu) / sigma
        return -0.5 * z * z - _HALF_LOG_TWO_PI - sm.log(sigma) - ly
    return _pw_dead(_pw_zero_or_inf(y), f, y)


_pw_cdf_pair(lognormal_lcdf, lognormal_lccdf, lambda lower, y, mu, sigma: sm.log_Phi(
    (sm.log(y) - mu) / sigma if lower else (mu - sm.log(y)) / sigma))


@pointwise(chi_square_lpdf)
def _chi_square_terms(y, nu):
    def f(y):
        h = 0.5 * nu
        return _xlog(h - 1.0, y, sm.log(y)) - 0.5 * y - h * _LOG_TWO - sm.lgamma(h)
    return _pw_dead(guarded(_eq, y, _INF), f, y)


_pw_cdf_pair(chi_square_lcdf, chi_square_lccdf,
             lambda lower, y, nu: _gamma_lf(not lower, 0.5 * nu, 0.5 * y))


@pointwise(inv_chi_square_lpdf)
def _inv_chi_square_terms(y, nu):
    def f(y):
        h = 0.5 * nu
        return -(h + 1.0) * sm.log(y) - 0.5 / y - h * _LOG_TWO - sm.lgamma(h)
    return _pw_dead(_pw_nonpos_or_inf(y), f, y)


_pw_cdf_pair(inv_chi_square_lcdf, inv_chi_square_lccdf,
             lambda lower, y, nu: _gamma_lf(lower, 0.5 * nu, 0.5 / y))


@pointwise(scaled_inv_chi_square_lpdf)
def _scaled_inv_chi_square_terms(y, nu, s):
    def f(y):
        h = 0.5 * nu
        return (h * sm.log(h) - sm.lgamma(h) + nu * sm.log(s) - (h + 1.0) * sm.log(y)
                - h * s * s / y)
    return _pw_dead(_pw_nonpos_or_inf(y), f, y)


_pw_cdf_pair(scaled_inv_chi_square_lcdf, scaled_inv_chi_square_lccdf,
             lambda lower, y, nu, s: _gamma_lf(lower, 0.5 * nu, 0.5 * nu * s * s / y))


@pointwise(exponential_lpdf)
def _exponential_terms(y, beta):
    return _pw_dead(guarded(_eq, y, _INF), lambda y: sm.log(beta) - beta * y, y)


_pw_cdf_pair(exponential_lcdf, exponential_lccdf, lambda lower, y, beta: (
    _log1m_exp_neg(beta * y)[0] if lower else -(beta * y)))


@pointwise(gamma_lpdf)
def _gamma_terms(y, alpha, beta):
    def f(y):
        return (alpha * sm.log(beta) - sm.lgamma(alpha) + _xlog(alpha - 1.0, y, sm.log(y))
                - beta * y)
    return _pw_dead(guarded(_eq, y, _INF), f, y)


_pw_cdf_pair(gamma_lcdf, gamma_lccdf,
             lambda lower, y, alpha, beta: _gamma_lf(not lower, alpha, beta * y))


@pointwise(inv_gamma_lpdf)
def _inv_gamma_terms(y, alpha, beta):
    def f(y):
        return (alpha * sm.log(beta) - sm.lgamma(alpha) - (alpha + 1.0) * sm.log(y)
                - beta / y)
    return _pw_dead(_pw_nonpos_or_inf(y), f, y)


_pw_cdf_pair(inv_gamma_lcdf, inv_gamma_lccdf,
             lambda lower, y, alpha, beta: _gamma_lf(lower, alpha, beta / y))


def _beta_terms_ab(theta, a, b, norm):
    """(a - 1) log theta + (b - 1) log(1 - theta) - norm, 0 log 0 = 0."""
    return (_xlog(a - 1.0, theta, sm.log(theta)) - norm
            + _xlog(b - 1.0, theta, sm.log1m(theta), pole=1.0, logf=sm.log1m))


@pointwise(beta_lpdf)
def _beta_terms(theta, alpha, beta):
    return _beta_terms_ab(theta, alpha, beta, sm.lbeta(alpha, beta))


@pointwise(beta_proportion_lpdf)
def _beta_proportion_terms(theta, mu, kappa):
    a = mu * kappa
    b = (1.0 - mu) * kappa
    return _beta_terms_ab(theta, a, b, sm.lgamma(a) + sm.lgamma(b) - sm.lgamma(kappa))


def _unit_cdf_terms(lower, ab):
    """Pointwise log CDF / CCDF of a beta law on [0, 1], ``ab(*params) = (a, b)``."""
    def terms(theta, *params):
        a, b = ab(*params)
        lo, hi = guarded(_eq, theta, 0.0), guarded(_eq, theta, 1.0)
        return _pw_edges(theta, lo, hi, 0.5, lower, lambda t: beta_tail(
            not lower, (False, False, False), a, b, t)[0])
    return terms


for _lower, _d in ((True, beta_lcdf), (False, beta_lccdf)):
    pointwise(_d)(_unit_cdf_terms(_lower, lambda alpha, beta: (alpha, beta)))
for _lower, _d in ((True, beta_proportion_lcdf), (False, beta_proportion_lccdf)):
    pointwise(_d)(_unit_cdf_terms(_lower, lambda mu, kappa: (mu * kappa, (1.0 - mu) * kappa)))
del _lower, _d
