"""More continuous distributions: two on the positive reals (``rayleigh``,
``loglogistic``), two asymmetric ones on the real line (``skew_normal``,
``exp_mod_normal``) and the circular ``von_mises``.

Stan's parameterisations (functions reference)::

    Rayleigh(y | sigma)            = y / sigma^2 exp(-y^2 / (2 sigma^2))
    LogLogistic(y | alpha, beta)   = (beta / alpha) (y / alpha)^(beta - 1)
                                     / (1 + (y / alpha)^beta)^2
    SkewNormal(y | xi, omega, alpha), ExpModNormal(y | mu, sigma, lambda),
    VonMises(y | mu, kappa)

(``alpha`` the scale, the median; ``beta`` the shape). Each has ``_lpdf``, ``_lcdf``,
``_lccdf`` (one fused node each, see :mod:`.fused`, summed over the broadcast
elements, or elementwise with ``reduce=False``) and ``_rng``. Stan itself has
``loglogistic_cdf`` but not its logs; the log forms are given here because stanlite's
censoring interface is ``_lcdf``/``_lccdf``. The skew-normal and von Mises CDFs are
special functions of :mod:`stanlite.math.cdf_series`.

Supports of the positive families follow :mod:`.bounded`: ``y < 0`` (or NaN) raises
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

import math

import numpy as np

from .. import math as sm
from ..autodiff.var import guarded
from ..autodiff.vm import opcodes as _op    # the interpreter's lowerings (autodiff/vm)
from ..autodiff.vm.scalar import _log1p_exp
from ..autodiff.vm.program import density_op as _density_op
from ..math import log_Phi
from ..math.cdf_series import (bessel_ratio, log_i0, skew_normal_log_cdf, sn_dalpha_log,
                               sn_logpdf, vm_logf, von_mises_log_mass)
from .bounded import (_bc, _dead, _log1m_exp_neg, _positive_edges, _pw_cdf_pair, _pw_dead,
                      _pw_zero_or_inf, _size, _tail_kernels, _tot, _zero_or_inf)
from .continuous import (HALF_LOG_TWO_PI, LOG_TWO, LOG_TWO_PI, _ls_parts, _mills_lower,
                         _reps, _std)
from .family import (FINITE, NONNEGATIVE, NOT_NAN, POSITIVE, all_of, cdf_doc, family,
                     in_range, rng_doc)
from .fused import broadcast_size, pointwise

__all__ = ["rayleigh_lpdf", "rayleigh_lcdf", "rayleigh_lccdf", "rayleigh_rng",
           "loglogistic_lpdf", "loglogistic_lcdf", "loglogistic_lccdf", "loglogistic_rng",
           "skew_normal_lpdf", "skew_normal_lcdf", "skew_normal_lccdf", "skew_normal_rng",
           "exp_mod_normal_lpdf", "exp_mod_normal_lcdf", "exp_mod_normal_lccdf",
           "exp_mod_normal_rng",
           "von_mises_lpdf", "von_mises_lcdf", "von_mises_lccdf", "von_mises_rng"]


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


@_tail_kernels(_positive_edges, 1.0)
def _rayleigh_cdf(lower, need, y, sigma):
    # with u = y^2 / (2 sigma^2): lcdf = log(1 - e^-u), lccdf = -u;
    # du/dy = y/sigma^2 = 2u/y, du/dsigma = -2u/sigma
    u = 0.5 * y * y / (sigma * sigma)
    if lower:
        c, du = _log1m_exp_neg(u)
    else:
        c, du = -u, -1.0
    parts = [du * y / (sigma * sigma) if need[0] else None,
             -2.0 * du * u / sigma if need[1] else None]
    return c, parts


rayleigh_lpdf, rayleigh_lcdf, rayleigh_lccdf, rayleigh_rng = family(
    "rayleigh", (("y", NONNEGATIVE), ("sigma", POSITIVE)), lpdf=_rayleigh,
    lcdf=_rayleigh_cdf(True), lccdf=_rayleigh_cdf(False), quiet=True,
    rng="rayleigh", doc="""
    Rayleigh log density, summed: sum_i log Rayleigh(y_i | sigma_i).

    log Rayleigh(y | sigma) = log(y) - 2 log(sigma) - y^2 / (2 sigma^2)

    y >= 0 (y = 0 has density 0: -inf), sigma > 0.

    >>> import stanlite as sl
    >>> round(sl.rayleigh_lpdf(1.0, 1.0), 6)
    -0.5
    """, lcdf_doc=cdf_doc("Rayleigh", "log(1 - exp(-y^2 / (2 sigma^2)))", "lcdf"),
    lccdf_doc=cdf_doc("Rayleigh", "-y^2 / (2 sigma^2)", "lccdf"),
    rng_doc=rng_doc("Rayleigh(sigma)", "sigma sqrt(-2 log U)"))


# the interpreter's RAYLEIGH op, by element (autodiff/vm/program.py density_op):
# log y - 2 log sigma - y^2 / (2 sigma^2)
def _rayleigh_inside(y, s):
    return s > 0.0 and y > 0.0 and y < math.inf


def _rayleigh_lp(y, s):
    return math.log(y) - 2.0 * math.log(s) - 0.5 * (y * y / (s * s))


def _rayleigh_partials(m, g, y, s):
    return g * (1.0 / y - y / (s * s)), g * (y * y / (s * s) - 2.0) / s


_density_op(rayleigh_lpdf, _op.RAYLEIGH, ("nonnegative_finite", "positive_finite"),
            _rayleigh_lp, _rayleigh_partials, _rayleigh_inside)


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


@_tail_kernels(_positive_edges, 1.0)
def _loglogistic_cdf(lower, need, y, alpha, beta):
    # F = inv_logit(t), t = beta log(y/alpha): lcdf = -log1p_exp(-t) with
    # d/dt = inv_logit(-t); lccdf = -log1p_exp(t) with d/dt = -inv_logit(t);
    # dt/dy = beta/y, dt/dalpha = -beta/alpha, dt/dbeta = log(y/alpha)
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
    return c, parts


loglogistic_lpdf, loglogistic_lcdf, loglogistic_lccdf, loglogistic_rng = family(
    "loglogistic", (("y", NONNEGATIVE), ("alpha", POSITIVE), ("beta", POSITIVE)),
    lpdf=_loglogistic, lcdf=_loglogistic_cdf(True), lccdf=_loglogistic_cdf(False),
    quiet=True, rng=lambda g, a, b, size: a * np.exp(g.logistic(size=size) / b), doc="""
    Log-logistic log density (scale alpha, shape beta), summed over elements:

    log LogLogistic(y | alpha, beta) = log(beta) - log(alpha)
        + (beta - 1) log(y / alpha) - 2 log(1 + (y / alpha)^beta)

    y >= 0 (y = 0 and y = inf: -inf), alpha > 0, beta > 0; ``log(y) ~ logistic(log
    alpha, 1 / beta)``. scipy calls it ``fisk(c=beta, scale=alpha)``.

    >>> import stanlite as sl
    >>> round(sl.loglogistic_lpdf(1.0, 1.0, 2.0), 6)
    -0.693147
    """, lcdf_doc=cdf_doc("log-logistic", "-log(1 + (y / alpha)^-beta)", "lcdf"),
    lccdf_doc=cdf_doc("log-logistic", "-log(1 + (y / alpha)^beta)", "lccdf"),
    rng_doc=rng_doc("LogLogistic(alpha, beta)",
                                   "alpha exp(L / beta), L standard logistic"))


# the interpreter's LOGLOGISTIC op, by element (autodiff/vm/program.py density_op):
# log beta - log alpha + (beta - 1) d - 2 log1p_exp(beta d), d = log(y / alpha)
def _loglogistic_inside(y, al, be):
    return al > 0.0 and be > 0.0 and y > 0.0 and y < math.inf


def _loglogistic_lp(y, al, be):
    la = math.log(al)
    d = math.log(y) - la
    return math.log(be) - la + (be - 1.0) * d - 2.0 * _log1p_exp(be * d)


def _loglogistic_partials(m, g, y, al, be):
    d = math.log(y) - math.log(al)
    t = be * d
    w = math.exp(t - _log1p_exp(t))             # inv_logit(t)
    return (g * (be - 1.0 - 2.0 * be * w) / y, g * be * (2.0 * w - 1.0) / al,
            g * (1.0 / be + d * (1.0 - 2.0 * w)))


_density_op(loglogistic_lpdf, _op.LOGLOGISTIC,
            ("nonnegative_finite", "positive_finite", "positive_finite"),
            _loglogistic_lp, _loglogistic_partials, _loglogistic_inside)


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


# --------------------------------------------------------------------------------------
# skew_normal(y | xi, omega, alpha)
# --------------------------------------------------------------------------------------
def _skew_normal(need, y, xi, omega, alpha):
    """log SN = log 2 - log(omega) - log(2 pi)/2 - z^2/2 + log Phi(alpha z).

    With m = phi(alpha z)/Phi(alpha z): d/dz = -z + alpha m, d/dalpha = z m.
    """
    inv_s = 1.0 / omega
    z = (y - xi) * inv_s
    az = alpha * z
    n = broadcast_size(y, xi, omega, alpha)
    lp = (n * (LOG_TWO - HALF_LOG_TWO_PI) - _reps(n, omega) * sm.sum(sm.log(omega))
          - 0.5 * sm.sum(z * z) + sm.sum(log_Phi(az)))
    parts = [None] * 4
    if any(need):
        m = _mills_lower(az)
        if need[0] or need[1] or need[2]:
            parts = _ls_parts(need, z, inv_s, alpha * m - z, True, (0, 1, 2), 4)
        if need[3]:
            parts[3] = z * m
    return lp, parts


def _skew_normal_cdf_kernel(upper):
    # 1 - F(z | alpha) = F(-z | -alpha) (the reflection of a skew normal): both tails
    # are computed as a CDF
    def kernel(need, y, xi, omega, alpha):
        inv_s = 1.0 / omega
        z = (y - xi) * inv_s
        lF = skew_normal_log_cdf(-z, -alpha) if upper else skew_normal_log_cdf(z, alpha)
        parts = [None] * 4
        if need[0] or need[1] or need[2]:
            dz = sm.exp(sn_logpdf(z, alpha) - lF)
            parts = _ls_parts(need, z, inv_s, -dz if upper else dz, False, (0, 1, 2), 4)
        if need[3]:
            da = sn_dalpha_log(z, alpha, lF)
            parts[3] = -da if upper else da
        return sm.sum(lF), parts
    return kernel


def _skew_normal_draw(g, xi, omega, alpha, size):
    d = alpha / np.sqrt(1.0 + alpha * alpha)
    u = g.standard_normal(size)
    v = g.standard_normal(size)
    return xi + omega * (d * np.abs(u) + np.sqrt(1.0 - d * d) * v)


skew_normal_lpdf, skew_normal_lcdf, skew_normal_lccdf, skew_normal_rng = family(
    "skew_normal",
    (("y", NOT_NAN), ("xi", FINITE), ("omega", POSITIVE), ("alpha", FINITE)),
    lpdf=_skew_normal, lcdf=_skew_normal_cdf_kernel(False),
    lccdf=_skew_normal_cdf_kernel(True), as_float=True, rng=_skew_normal_draw,
    doc="""Skew-normal log density, summed over the broadcast elements.

    SkewNormal(y | xi, omega, alpha) = 2/omega phi(z) Phi(alpha z),  z = (y - xi)/omega;
    y real, xi real (location), omega > 0 (scale), alpha real (shape).

    >>> import stanlite as sl
    >>> round(sl.skew_normal_lpdf(0.5, 0.0, 1.0, 2.0), 6)
    -0.523545
    """,
    lcdf_doc="""Skew-normal log CDF, summed: log(Phi(z) - 2 T(z, alpha)), T Owen's T
    function; in the lower tail (where the two terms cancel) by quadrature in logs, so
    log F stays accurate far out (Stan's formula loses it there).""",
    lccdf_doc="""Skew-normal log complementary CDF, summed:
    log(1 - F(z | alpha)) = log F(-z | -alpha).""",
    rng_doc="""Draws from SkewNormal(xi, omega, alpha): xi + omega (delta |U| + sqrt(1 -
    delta^2) V), delta = alpha / sqrt(1 + alpha^2), U, V independent N(0, 1).""")


# --------------------------------------------------------------------------------------
# exp_mod_normal(y | mu, sigma, lambda)
# --------------------------------------------------------------------------------------
def _exp_mod_normal(need, y, mu, sigma, lam):
    """log EMG = log(lambda) + lambda (mu - y) + (lambda sigma)^2/2 + log Phi(s),
    s = (y - mu)/sigma - lambda sigma (the erfc term of Stan's formula, in log Phi).

    With m = phi(s)/Phi(s): d/dy = -lambda + m/sigma, d/dmu = -d/dy,
    d/dsigma = lambda^2 sigma - m ((y - mu)/sigma^2 + lambda),
    d/dlambda = 1/lambda - (y - mu) + lambda sigma^2 - m sigma.
    """
    d = y - mu
    inv_s = 1.0 / sigma
    ls = lam * sigma
    s = d * inv_s - ls
    n = broadcast_size(y, mu, sigma, lam)
    lp = (_reps(n, lam) * sm.sum(sm.log(lam))
          + sm.sum(0.5 * ls * ls - lam * d + log_Phi(s)))
    parts = [None] * 4
    if any(need):
        m = _mills_lower(s)
        if need[0] or need[1]:
            dy = m * inv_s - lam
            if need[0]:
                parts[0] = dy
            if need[1]:
                parts[1] = -dy
        if need[2]:
            parts[2] = lam * ls - m * (d * inv_s * inv_s + lam)
        if need[3]:
            parts[3] = 1.0 / lam - d + ls * sigma - m * sigma
    return lp, parts


def _exp_mod_normal_cdf_kernel(upper):
    # F = Phi(u) - E, E = exp(q), q = -lambda sigma u + (lambda sigma)^2/2 + log Phi(s),
    # u = (y - mu)/sigma, s = u - lambda sigma. Using E phi(s)/Phi(s) = phi(u):
    # dF/dy = lambda E = -dF/dmu, dF/dsigma = lambda (phi(u) - lambda sigma E),
    # dF/dlambda = sigma (phi(u) + s E). log F = log Phi(u) + log1m_exp(q - log Phi(u));
    # log(1 - F) = log_sum_exp(log Phi(-u), q).
    def kernel(need, y, mu, sigma, lam):
        inv_s = 1.0 / sigma
        u = (y - mu) * inv_s
        ls = lam * sigma
        s = u - ls
        q = 0.5 * ls * ls - ls * u + log_Phi(s)
        if upper:
            lF = sm.log_sum_exp(log_Phi(-u), q)
            sign = -1.0
        else:
            lpu = log_Phi(u)
            lF = lpu + sm.log1m_exp(q - lpu)
            sign = 1.0
        parts = [None] * 4
        if any(need):
            eF = sign * sm.exp(q - lF)                         # +-E/F
            if need[0] or need[1]:
                dy = lam * eF
                if need[0]:
                    parts[0] = dy
                if need[1]:
                    parts[1] = -dy
            if need[2] or need[3]:
                pF = sign * sm.exp(-0.5 * u * u - HALF_LOG_TWO_PI - lF)   # +-phi(u)/F
                if need[2]:
                    parts[2] = lam * (pF - ls * eF)
                if need[3]:
                    parts[3] = sigma * (pF + s * eF)
        return sm.sum(lF), parts
    return kernel


exp_mod_normal_lpdf, exp_mod_normal_lcdf, exp_mod_normal_lccdf, exp_mod_normal_rng = family(
    "exp_mod_normal",
    (("y", NOT_NAN), ("mu", FINITE), ("sigma", POSITIVE), ("lambda", POSITIVE)),
    lpdf=_exp_mod_normal, lcdf=_exp_mod_normal_cdf_kernel(False),
    lccdf=_exp_mod_normal_cdf_kernel(True), params=("y", "mu", "sigma", "lam"),
    rng_params=("mu", "sigma", "lambda_"),
    rng=lambda g, mu, sigma, lam, size: (g.normal(mu, sigma, size)
                                             + g.exponential(1.0 / lam, size)),
    doc="""Exponentially modified normal log density, summed over the broadcast elements.

    ExpModNormal(y | mu, sigma, lambda) = lambda/2 exp(lambda/2 (2 mu + lambda sigma^2
        - 2 y)) erfc((mu + lambda sigma^2 - y) / (sqrt(2) sigma))

    (the law of N(mu, sigma) + Exponential(lambda)); y real, mu real, sigma > 0,
    lambda > 0 (rate).

    >>> import stanlite as sl
    >>> round(sl.exp_mod_normal_lpdf(1.0, 0.0, 1.0, 2.0), 6)
    -1.147874
    """, lcdf_doc="""Exponentially modified normal log CDF, summed:
    F(y) = Phi(u) - exp(-lambda sigma u + (lambda sigma)^2/2) Phi(u - lambda sigma),
    u = (y - mu)/sigma (computed in logs).""",
    lccdf_doc="""Exponentially modified normal log complementary CDF, summed:
    1 - F(y) = Phi(-u) + exp(-lambda sigma u + (lambda sigma)^2/2) Phi(u - lambda sigma).""",
    rng_doc="""Draws from ExpModNormal(mu, sigma, lambda): N(mu, sigma) + Exponential(lambda).""")


# --------------------------------------------------------------------------------------
# von_mises(y | mu, kappa)
# --------------------------------------------------------------------------------------

def _von_mises(need, y, mu, kappa):
    """log VonMises = kappa cos(y - mu) - log(2 pi) - log I_0(kappa).

    d/dy = -kappa sin(y - mu) = -d/dmu;  d/dkappa = cos(y - mu) - I_1(kappa)/I_0(kappa).
    """
    d = y - mu
    c = sm.cos(d)
    n = broadcast_size(y, mu, kappa)
    lp = sm.sum(kappa * c) - n * LOG_TWO_PI - _reps(n, kappa) * sm.sum(log_i0(kappa))
    parts = [None, None, None]
    if need[0] or need[1]:
        dy = -kappa * sm.sin(d)
        if need[0]:
            parts[0] = dy
        if need[1]:
            parts[1] = -dy
    if need[2]:
        parts[2] = c - bessel_ratio(kappa)
    return lp, parts


def _von_mises_cdf_kernel(upper):
    # F(y) = G(y - mu) - G(-pi - mu) on y in [-pi, pi] (Stan's von_mises_cdf: the mass
    # from -pi to y of the density centred at mu); 1 - F(y) = G(pi - mu) - G(y - mu).
    # As c +- h: lower c = (y - pi)/2 - mu, h = (y + pi)/2; upper c = (y + pi)/2 - mu,
    # h = (pi - y)/2.
    def kernel(need, y, mu, kappa):
        if upper:
            c = 0.5 * (y + math.pi) - mu
            h = 0.5 * (math.pi - y)
        else:
            c = 0.5 * (y - math.pi) - mu
            h = 0.5 * (y + math.pi)
        lF = von_mises_log_mass[0](c, h, kappa)
        parts = [None, None, None]
        if need[0] or need[1]:
            fy = sm.exp(vm_logf(y - mu, kappa) - lF)
            fb = sm.exp(vm_logf(math.pi + mu, kappa) - lF)   # at the cut -pi == pi
            if upper:
                dy, dmu = -fy, fy - fb
            else:
                dy, dmu = fy, fb - fy
            if need[0]:
                parts[0] = dy
            if need[1]:
                parts[1] = dmu
        if need[2]:
            parts[2] = von_mises_log_mass[1](c, h, kappa)
        return sm.sum(lF), parts
    return kernel


von_mises_lpdf, von_mises_lcdf, von_mises_lccdf, von_mises_rng = family(
    "von_mises",
    (("y", FINITE), ("mu", FINITE), ("kappa", all_of(NONNEGATIVE, FINITE))),
    lpdf=_von_mises, lcdf=_von_mises_cdf_kernel(False),
    lccdf=_von_mises_cdf_kernel(True),
    cdf_args={"y": in_range(-math.pi, math.pi), "kappa": POSITIVE}, as_float=True,
    rng=lambda g, mu, kappa, size: (np.mod(mu, 2.0 * math.pi)
                                        + g.vonmises(0.0, kappa, size)),
    doc="""Von Mises log density, summed over the broadcast elements.

    VonMises(y | mu, kappa) = exp(kappa cos(y - mu)) / (2 pi I_0(kappa))

    y real (an angle; the density is 2 pi-periodic), mu real, kappa >= 0
    (concentration; kappa = 0 is the uniform density on the circle).

    >>> import stanlite as sl
    >>> round(sl.von_mises_lpdf(0.5, 0.0, 2.0), 6)
    -0.906705
    """, lcdf_doc="""Von Mises log CDF, summed (Stan's von_mises_lcdf).

    F(y | mu, kappa) = int_{-pi}^{y} exp(kappa cos(t - mu)) dt / (2 pi I_0(kappa)),
    y in [-pi, pi], mu real, kappa > 0; computed from the Fourier series
    (y + pi)/(2 pi) + sum_j I_j(kappa)/I_0(kappa) (sin(j(y - mu)) + sin(j(pi + mu)))/(j pi),
    and where F < 1e-3 from tanh-sinh quadrature of the density in logs (so the log
    CDF keeps its relative accuracy far into the tails).
    """,
    lccdf_doc="""Von Mises log complementary CDF, summed: log(1 - F(y | mu, kappa)),
    the mass from y to pi (see :func:`von_mises_lcdf`).""",
    rng_doc="""Draws from VonMises(mu, kappa), in [(mu mod 2 pi) - pi, (mu mod 2 pi) + pi]
    (Stan's convention).""")


@pointwise(skew_normal_lpdf)
def _skew_normal_terms(y, xi, omega, alpha):
    return sn_logpdf(_std(y, xi, omega), alpha) - sm.log(omega)


@pointwise(skew_normal_lcdf)
def _skew_normal_lcdf_terms(y, xi, omega, alpha):
    return skew_normal_log_cdf(_std(y, xi, omega), alpha)


@pointwise(skew_normal_lccdf)
def _skew_normal_lccdf_terms(y, xi, omega, alpha):
    return skew_normal_log_cdf(-_std(y, xi, omega), -alpha)


@pointwise(exp_mod_normal_lpdf)
def _exp_mod_normal_terms(y, mu, sigma, lam):
    d = y - mu
    ls = lam * sigma
    return sm.log(lam) + 0.5 * ls * ls - lam * d + log_Phi(d / sigma - ls)


def _exp_mod_normal_cdf_terms(upper):
    # as _exp_mod_normal_cdf_kernel: F = Phi(u) - exp(q), q in logs
    def terms(y, mu, sigma, lam):
        u = _std(y, mu, sigma)
        ls = lam * sigma
        q = 0.5 * ls * ls - ls * u + log_Phi(u - ls)
        if upper:
            return sm.log_sum_exp(log_Phi(-u), q)
        lpu = log_Phi(u)
        return lpu + sm.log1m_exp(q - lpu)
    return terms


pointwise(exp_mod_normal_lcdf)(_exp_mod_normal_cdf_terms(False))
pointwise(exp_mod_normal_lccdf)(_exp_mod_normal_cdf_terms(True))


@pointwise(von_mises_lpdf)
def _von_mises_terms(y, mu, kappa):
    return kappa * sm.cos(y - mu) - LOG_TWO_PI - log_i0(kappa)


def _von_mises_cdf_terms(upper):
    # as _von_mises_cdf_kernel: log F of the arc (c - h, c + h)
    def terms(y, mu, kappa):
        if upper:
            c, h = 0.5 * (y + math.pi) - mu, 0.5 * (math.pi - y)
        else:
            c, h = 0.5 * (y - math.pi) - mu, 0.5 * (y + math.pi)
        return von_mises_log_mass[0](c, h, kappa)
    return terms


pointwise(von_mises_lcdf)(_von_mises_cdf_terms(False))
pointwise(von_mises_lccdf)(_von_mises_cdf_terms(True))
