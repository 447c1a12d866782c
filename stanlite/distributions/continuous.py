"""Continuous distributions on the real line: log densities, CDFs and RNGs.

Every ``<name>_lpdf(y, *params)`` is one fused node (see :mod:`.fused`): the value is
the sum over the broadcast elements, the partial derivatives w.r.t. every argument
come from the same kernel. ``_lcdf``/``_lccdf`` are fused the same way (censoring);
``_rng(*params, rng=None)`` draws with numpy (generated quantities, plain floats).

Parameterisations are Stan's: ``normal(y | mu, sigma)``, ``student_t(y | nu, mu,
sigma)``, ``cauchy(y | mu, sigma)``, ``double_exponential(y | mu, sigma)``,
``logistic(y | mu, sigma)``, ``gumbel(y | mu, beta)``, ``skew_normal(y | xi, omega,
alpha)``, ``exp_mod_normal(y | mu, sigma, lambda)``, ``von_mises(y | mu, kappa)`` and
``uniform(y | alpha, beta)``.

>>> import numpy as np, stanlite as sl
>>> round(sl.student_t_lpdf(0.5, 3.0, 0.0, 1.0), 6)
-1.160974
>>> round(sl.cauchy_lcdf(0.0, 0.0, 2.0), 6)        # log(1/2)
-0.693147
>>> round(sl.uniform_lpdf(np.array([0.2, 0.7]), 0.0, 2.0), 6)   # 2 * -log 2
-1.386294
>>> float(sl.uniform_lpdf(3.0, 0.0, 2.0))          # outside the support
-inf
>>> round(float(sl.grad(lambda nu: sl.student_t_lcdf(-1.0, nu, 0.0, 1.0))(4.0)), 6)
-0.035184

Every density (here and in the other modules) also takes ``reduce=False``, keyword
only: the log densities one per element instead of their sum (see :mod:`.fused`) -
a per-observation log-likelihood, or a per-observation mixture without a loop:

>>> y = np.array([-1.2, 0.3, 2.5])
>>> sl.normal_lpdf(y, 0.0, 1.0, reduce=False).round(6)
array([-1.638939, -0.963939, -4.043939])
>>> terms = np.stack([np.log(0.3) + sl.normal_lpdf(y, -1.0, 1.0, reduce=False),
...                   np.log(0.7) + sl.normal_lpdf(y, 2.0, 1.0, reduce=False)])
>>> sl.log_sum_exp(terms, axis=0).round(6)     # log(0.3 N(y | -1, 1) + 0.7 N(y | 2, 1))
array([-2.128786, -2.14349 , -1.399552])

The same lines work in ``log_prob`` on parameters (``sl.sum`` of the last one is the
mixture's log likelihood, differentiable at every order) and in generated
quantities.
"""

import math

import numpy as np
import scipy.special as sps

from .. import math as sm
from ..autodiff.extend import defjvp, defvjp, primitive
from ..autodiff.vm import opcodes as _op    # the interpreter's lowerings (autodiff/vm)
from ..autodiff.vm.program import (check_lowering as _check_lowering,
                                   deflower as _deflower, density as _ld)
from ..errors import DifferentiationError, DomainError
from ..math import log_Phi
from .family import (FINITE, NONNEGATIVE, NOT_NAN, POSITIVE, all_of, family, in_range)
from .fused import broadcast_size, plain, pointwise, reps
from .rng import as_generator, draw

__all__ = ["normal_lpdf", "normal_lcdf", "normal_lccdf", "normal_rng",
           "std_normal_lpdf", "std_normal_lcdf", "std_normal_lccdf", "std_normal_rng",
           "student_t_lpdf", "student_t_lcdf", "student_t_lccdf", "student_t_rng",
           "cauchy_lpdf", "cauchy_lcdf", "cauchy_lccdf", "cauchy_rng",
           "double_exponential_lpdf", "double_exponential_lcdf",
           "double_exponential_lccdf", "double_exponential_rng",
           "logistic_lpdf", "logistic_lcdf", "logistic_lccdf", "logistic_rng",
           "gumbel_lpdf", "gumbel_lcdf", "gumbel_lccdf", "gumbel_rng",
           "skew_normal_lpdf", "skew_normal_lcdf", "skew_normal_lccdf", "skew_normal_rng",
           "exp_mod_normal_lpdf", "exp_mod_normal_lcdf", "exp_mod_normal_lccdf",
           "exp_mod_normal_rng",
           "von_mises_lpdf", "von_mises_lcdf", "von_mises_lccdf", "von_mises_rng",
           "uniform_lpdf", "uniform_lcdf", "uniform_lccdf", "uniform_rng"]

HALF_LOG_TWO_PI = 0.5 * np.log(2.0 * np.pi)


_reps = reps


# --------------------------------------------------------------------------------------
# normal
# --------------------------------------------------------------------------------------
def _normal(need, y, mu, sigma):
    """log N(y | mu, sigma) = -z^2/2 - log sigma - log(2 pi)/2,  z = (y - mu)/sigma.

    d/dmu = z/sigma = -d/dy;  d/dsigma = (z^2 - 1)/sigma.
    """
    if (type(mu) in _NUMBER and type(sigma) in _NUMBER and not (need[1] or need[2])
            and 1e-100 < sigma < 1e100):      # (1/sigma^2 neither over- nor underflows)
        ty = type(y)
        if ty is float or ty is np.ndarray and y.dtype is _F64 and y.ndim == 1:
            return _normal_plain(need, y, mu, sigma)      # a prior, a likelihood
    inv_s = 1.0 / sigma
    z = (y - mu) * inv_s
    n = broadcast_size(y, mu, sigma)
    lp = -0.5 * sm.sum(z * z) - n * HALF_LOG_TWO_PI - _reps(n, sigma) * sm.sum(sm.log(sigma))
    parts = [None, None, None]
    if need[0] or need[1]:
        dmu = z * inv_s
        if need[0]:
            parts[0] = -dmu
        if need[1]:
            parts[1] = dmu
    if need[2]:
        parts[2] = (z * z - 1.0) * inv_s
    return lp, parts


_NUMBER = (float, int)
_F64 = np.dtype(np.float64)
_HALF_LOG_TWO_PI_F = float(HALF_LOG_TWO_PI)


def _normal_plain(need, y, mu, sigma):
    """``_normal`` for a float or a vector ``y`` with constant-number ``mu`` and
    ``sigma`` (a prior on a parameter or a parameter vector, the common case): the sum
    of squares as one dot product and Python floats for the scalars - a third of the
    general path's calls."""
    # with d = y - mu and w = 1/sigma^2: lp = -w d.d/2 - ..., d/dy = -w d (for a
    # vector, two numpy calls when mu is 0: the dot product and the partial)
    w = 1.0 / (sigma * sigma)
    if type(y) is float:
        d = y - mu
        dd, n = d * d, 1
    else:
        d = y - mu if mu else y
        dd, n = float(d.dot(d)), y.shape[0]
    lp = -0.5 * w * dd - n * _HALF_LOG_TWO_PI_F - n * math.log(sigma)
    parts = [None, None, None]
    if need[0]:
        parts[0] = d * -w
    return lp, parts


def _normal_lcdf(need, y, mu, sigma):
    """log Phi(z); d/dz = exp(log phi(z) - log Phi(z)) (stable in both tails)."""
    inv_s = 1.0 / sigma
    z = (y - mu) * inv_s
    lp = sm.sum(log_Phi(z))
    return lp, _cdf_parts(need, z, inv_s, _mills_lower(z))


def _normal_lccdf(need, y, mu, sigma):
    """log(1 - Phi(z)) = log Phi(-z)."""
    inv_s = 1.0 / sigma
    z = (y - mu) * inv_s
    lp = sm.sum(log_Phi(-z))
    return lp, _cdf_parts(need, z, inv_s, -_mills_lower(-z))


def _cdf_parts(need, z, inv_s, dz):
    # d/dy = dz/sigma, d/dmu = -dz/sigma, d/dsigma = -dz z/sigma
    parts = [None, None, None]
    if need[0] or need[1] or need[2]:
        dy = dz * inv_s
        if need[0]:
            parts[0] = dy
        if need[1]:
            parts[1] = -dy
        if need[2]:
            parts[2] = -dy * z
    return parts


def _mills_lower(z):
    """phi(z) / Phi(z), the derivative of log Phi(z)."""
    return sm.exp(-0.5 * z * z - HALF_LOG_TWO_PI - log_Phi(z))


normal_lpdf, normal_lcdf, normal_lccdf, normal_rng = family(
    "normal",
    (("y", NOT_NAN), ("mu", FINITE), ("sigma", POSITIVE)),
    lpdf=_normal,
    lcdf=_normal_lcdf,
    lccdf=_normal_lccdf,
    rng_args=(("mu", None), ("sigma", POSITIVE)),
    as_float=True,
    rng=lambda g, mu, sigma, size: g.normal(mu, sigma, size),
    doc="""Normal log density, summed: sum_i log N(y_i | mu_i, sigma_i).

    log N(y | mu, sigma) = -((y - mu)/sigma)^2 / 2 - log(sigma) - log(2 pi)/2

    >>> import stanlite as sl
    >>> round(sl.normal_lpdf(1.0, 0.0, 1.0), 6)
    -1.418939
    """,
    rng_doc="""Draws from N(mu, sigma), shaped like the broadcast of the arguments.""")
_deflower(normal_lpdf, _ld(_op.NORMAL, 3))
_check_lowering(normal_lpdf, "not_nan", "finite", "positive_finite")


# std_normal: the same kernels with mu = 0, sigma = 1 (one-argument fused nodes)
def _std_normal(need, y):
    n = broadcast_size(y)
    lp = -0.5 * sm.sum(y * y) - n * HALF_LOG_TWO_PI
    return lp, [-y if need[0] else None]


def _std_normal_lcdf(need, y):
    return sm.sum(log_Phi(y)), [_mills_lower(y) if need[0] else None]


def _std_normal_lccdf(need, y):
    return sm.sum(log_Phi(-y)), [-_mills_lower(-y) if need[0] else None]


std_normal_lpdf, std_normal_lcdf, std_normal_lccdf = family(
    "std_normal",
    (("y", NOT_NAN),),
    lpdf=_std_normal,
    lcdf=_std_normal_lcdf,
    lccdf=_std_normal_lccdf,
    as_float=True)
_deflower(std_normal_lpdf, _ld(_op.STD_NORMAL, 1))
_check_lowering(std_normal_lpdf, "not_nan")


def std_normal_rng(size=None, rng=None):
    """Standard normal draws (``size`` as numpy's)."""
    return draw(as_generator(rng).standard_normal, size=size)


# --------------------------------------------------------------------------------------
# shared pieces
# --------------------------------------------------------------------------------------
LOG_PI = math.log(math.pi)
LOG_TWO = math.log(2.0)
LOG_TWO_PI = math.log(2.0 * math.pi)


def _ls_parts(need, z, inv_s, dz, lpdf, pos=(0, 1, 2), n=3):
    """Partials of ``sum_i h(z_i) [- log sigma_i]`` for ``z = (y - mu)/sigma`` given
    ``dz = h'(z)``: d/dy = dz/sigma, d/dmu = -dz/sigma, d/dsigma = -dz z/sigma
    (``- 1/sigma`` more for a density). ``pos`` = positions of (y, mu, sigma)."""
    parts = [None] * n
    iy, imu, isg = pos
    if need[iy] or need[imu] or need[isg]:
        dy = dz * inv_s
        if need[iy]:
            parts[iy] = dy
        if need[imu]:
            parts[imu] = -dy
        if need[isg]:
            parts[isg] = -(dy * z) - inv_s if lpdf else -(dy * z)
    return parts


def _f(r):
    """A raw numpy result as a stanlite value (float for 0-d)."""
    r = np.asarray(r, dtype=float)
    return float(r) if r.ndim == 0 else r


def _broadcasting(prim):
    """Mark a private ``@primitive`` as elementwise (forward mode expands tangents)."""
    prim._spec.broadcasting = True
    return prim


def _where(cond, a, b):
    return sm.where(cond, a, b)


# --------------------------------------------------------------------------------------
# student_t(y | nu, mu, sigma)
# --------------------------------------------------------------------------------------
def _student_t(need, y, nu, mu, sigma):
    """log t(y | nu, mu, sigma) = lgamma((nu+1)/2) - lgamma(nu/2) - log(nu pi)/2
    - log sigma - (nu+1)/2 log(1 + z^2/nu),  z = (y - mu)/sigma.

    d/dz = -(nu+1) z / (nu + z^2);  d/dnu = (digamma((nu+1)/2) - digamma(nu/2))/2
    - 1/(2 nu) - log1p(z^2/nu)/2 + (nu+1) z^2 / (2 nu (nu + z^2)).
    """
    inv_s = 1.0 / sigma
    z = (y - mu) * inv_s
    n = broadcast_size(y, nu, mu, sigma)
    half_nu = 0.5 * nu
    hp = half_nu + 0.5
    r = z * z / nu
    l1p = sm.log1p(r)
    lp = (_reps(n, nu) * sm.sum(sm.lgamma(hp) - sm.lgamma(half_nu) - 0.5 * sm.log(nu))
          - n * 0.5 * LOG_PI - _reps(n, sigma) * sm.sum(sm.log(sigma)) - sm.sum(hp * l1p))
    need_ls = (need[0], need[2], need[3])
    parts = [None] * 4
    if any(need_ls) or need[1]:
        q = 1.0 / (nu * (1.0 + r))               # 1 / (nu + z^2)
        if any(need_ls):
            parts = _ls_parts(need, z, inv_s, -2.0 * hp * z * q, True, (0, 2, 3), 4)
        if need[1]:
            parts[1] = (0.5 * (sm.digamma(hp) - sm.digamma(half_nu)) - 0.5 / nu - 0.5 * l1p
                        + hp * r * q)
    return lp, parts


def _t_logpdf(t, nu):
    """log density of the standard Student t at t (stanlite ops: differentiable)."""
    hp = 0.5 * nu + 0.5
    return (sm.lgamma(hp) - sm.lgamma(0.5 * nu) - 0.5 * sm.log(nu) - 0.5 * LOG_PI
            - hp * sm.log1p(t * t / nu))


def _t_score(t, nu):
    """d/dnu log t(t | nu) and its nu-derivative (stanlite ops)."""
    s = nu + t * t
    t2 = t * t
    sc = (0.5 * (sm.digamma(0.5 * nu + 0.5) - sm.digamma(0.5 * nu)) - 0.5 / nu
          - 0.5 * sm.log1p(t2 / nu) + (nu + 1.0) * t2 / (2.0 * nu * s))
    # d/dnu of the terms above, one by one
    dsc = (0.25 * (sm.trigamma(0.5 * nu + 0.5) - sm.trigamma(0.5 * nu)) + 0.5 / (nu * nu)
           + 0.5 * t2 / (nu * s)
           + 0.5 * t2 * (nu * s - (nu + 1.0) * (2.0 * nu + t2)) / (nu * nu * s * s))
    return sc, dsc


def _t_series_raw(t, nu, order):
    """log F(t | nu) of the Student t and, for ``order`` >= 1 (2), the ratios
    F_nu/F (and F_nunu/F) of its nu-derivatives to F, for finite t.

    With a = nu/2, s = nu + t^2, x = nu/s, w = t^2/s (DLMF 8.17.8, the hypergeometric
    series of the incomplete beta function, whose terms are differentiated in nu):

    * near the centre (w <= 3/(nu + 5)): F = 1/2 + sign(t) sum_n T_n,
      T_0 = |t| s^(-1/2) x^a / B(1/2, a),  T_n = T_(n-1) (a + n - 1/2)/(n + 1/2) w;
    * in the tails: F = F_tail (t < 0) or 1 - F_tail (t > 0), F_tail = sum_n T_n,
      T_0 = x^a w^(1/2) / (2 a B(a, 1/2)),  T_n = T_(n-1) (a + n - 1/2)/(a + n) x.

    Both series are sums of positive terms for the smaller of the two tails (the
    switch is where the incomplete-beta series are efficient), summed relative to T_0
    (so a tail probability below the float range keeps its log and its ratios), and
    the derivatives sum_n T_n d log T_n/dnu keep their relative accuracy (a few ulps
    for nu up to ~30, ~1e-9 relative for nu ~ 1000). Convergence is geometric (about
    13 nu terms at worst, near the switch); where more than 30000 terms would be
    needed (nu > ~2000 with t near the switch) a DifferentiationError is raised.
    """
    t, nu = np.broadcast_arrays(np.asarray(t, dtype=float), np.asarray(nu, dtype=float))
    shape = t.shape
    t = t.ravel()
    nu = nu.ravel()
    lF = np.zeros(t.shape)
    r1 = np.zeros(t.shape)
    r2 = np.zeros(t.shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        a = 0.5 * nu
        tt = t * t
        s = nu + tt
        x = nu / s
        w = tt / s
        lx = np.log(x)
        tail = w > 1.5 / (a + 2.5)
        if order:
            # terms needed: the series in x (tails) decay like x^n, the one in w like
            # w^n after a peak near n ~ a w/(1 - w); refuse up front if too many
            need = np.where(tail, 40.0 / -lx, a * w / (1.0 - w) + 40.0 / -np.log(w))
            bad = (need > _T_SERIES_MAX) & (t != 0)
            if np.any(bad):
                i = np.argmax(bad)
                raise DifferentiationError(
                    "student_t_lcdf/lccdf: the derivative w.r.t. nu is not available at "
                    f"nu = {float(nu[i])!r}, (y - mu)/sigma = {float(t[i])!r} (its series "
                    f"would need ~{float(need[i]):.3g} terms: nu is too large)")
        dpsi = sps.digamma(a) - sps.digamma(a + 0.5)
        dpsi1 = sps.polygamma(1, a) - sps.polygamma(1, a + 0.5) if order > 1 else 0.0
        c1 = 0.5 * lx + 0.5 * w - 0.5 * dpsi - 0.5 / s
        c2 = 0.5 / (s * s) + 0.5 * tt / (nu * s) - 0.5 * tt / (s * s) - 0.25 * dpsi1
        for region in (False, True):
            idx = np.nonzero(tail == region)[0]
            if not idx.size:
                continue
            A, S, X, W, NU = a[idx], s[idx], x[idx], w[idx], nu[idx]
            if region:
                logT = (-LOG_TWO + A * lx[idx] + 0.5 * np.log(W) - np.log(A)
                        - sps.betaln(A, 0.5))
                b1 = c1[idx] - 1.0 / NU
                b2 = c2[idx] + 1.0 / (NU * NU)
            else:
                logT = (np.log(np.abs(t[idx])) - 0.5 * np.log(S) + A * lx[idx]
                        - sps.betaln(0.5, A))
                b1 = c1[idx]
                b2 = c2[idx]
            s0, s1, s2 = _t_series(region, order, A, S, X, W, NU, b1, b2)
            sg = np.sign(t[idx])
            if region:
                lt = logT + np.log(s0)                          # log F_tail
                lo = sg < 0
                # t < 0: F = F_tail, ratios s_k/s0 (no underflow); t > 0: F = 1 - F_tail
                lF[idx] = np.where(lo, lt, np.log1p(-np.exp(lt)))
                inv = np.where(lo, 1.0 / s0, -np.exp(logT - lF[idx]))
            else:
                e = np.exp(logT)
                F = 0.5 + sg * e * s0
                lF[idx] = np.log(F)
                inv = sg * e / F
            r1[idx] = s1 * inv
            r2[idx] = s2 * inv
    return lF.reshape(shape), r1.reshape(shape), r2.reshape(shape)


_T_SERIES_MAX = 30000


def _t_series(region, order, A, S, X, W, NU, b1, b2, tol=1e-17):
    """sum_n T_n/T_0, and for ``order`` >= 1 (2) sum_n T_n/T_0 L1_n (and
    sum_n T_n/T_0 (L1_n^2 + L2_n)), L1/L2 the first/second nu-derivatives of log T_n
    (see :func:`_t_series_raw`); elements leave as they converge (terms decreasing
    and the geometric remainder below ``tol`` relative)."""
    m = A.size
    T = np.ones(m)
    s0 = np.zeros(m)
    s1 = np.zeros(m)
    s2 = np.zeros(m)
    a1 = np.zeros(m)
    a2 = np.zeros(m)
    h1 = np.zeros(m)
    h2 = np.zeros(m)
    live = np.arange(m)
    for k in range(_T_SERIES_MAX + 1000):
        if region:
            r = (A + k + 0.5) / (A + k + 1.0) * X
        else:
            r = (A + k + 0.5) / (k + 1.5) * W
        s0[live] += T
        rem = r / (1.0 - r)
        done = (r < 1.0) & (T * rem <= tol * s0[live])
        if order:
            if region:
                l1 = b1 + 0.5 * h1 + k * W / NU
            else:
                l1 = b1 + 0.5 * h1 - k / S
            e1 = T * l1
            s1[live] += e1
            a1[live] += np.abs(e1)
            done &= np.abs(e1) * rem <= tol * a1[live]
            if order > 1:
                if region:
                    l2 = b2 + 0.25 * h2 + k * (1.0 / (S * S) - 1.0 / (NU * NU))
                    h2 = h2 - 1.0 / (A + k + 0.5) ** 2 + 1.0 / (A + k + 1.0) ** 2
                else:
                    l2 = b2 - 0.25 * h2 + k / (S * S)
                    h2 = h2 + 1.0 / (A + k + 0.5) ** 2
                e2 = T * (l1 * l1 + l2)
                s2[live] += e2
                a2[live] += np.abs(e2)
                done &= np.abs(e2) * rem <= tol * a2[live]
            if region:
                h1 = h1 + 1.0 / (A + k + 0.5) - 1.0 / (A + k + 1.0)
            else:
                h1 = h1 + 1.0 / (A + k + 0.5)
        T = T * r
        if done.any():
            keep = ~done
            live = live[keep]
            if not live.size:
                return s0, s1, s2
            A, S, X, W, NU, T, b1, b2, h1, h2 = (
                v[keep] for v in (A, S, X, W, NU, T, b1, b2, h1, h2))
    raise DifferentiationError(                       # not reached: see the up-front check
        "student_t_lcdf/lccdf: the series for the derivative w.r.t. nu did not converge "
        f"(nu = {float(2 * A[0])!r})")


def _t_lcdf_raw(t, nu):
    """log F(t | nu): scipy's stdtr (log1p of the other tail above the median), the
    series in logs where the tail probability is below ~1e-300."""
    t, nu = np.broadcast_arrays(np.asarray(t, dtype=float), np.asarray(nu, dtype=float))
    with np.errstate(divide="ignore", under="ignore"):
        lo = sps.stdtr(nu, -np.abs(t))               # the smaller tail
        out = np.where(t > 0, np.log1p(-lo), np.log(lo))
        tiny = (lo < 1e-290) & np.isfinite(t)
        if np.any(tiny):
            out = np.array(out, dtype=float)
            lt = _t_series_raw(-np.abs(t[tiny]), nu[tiny], 0)[0]
            out[tiny] = np.where(t[tiny] > 0, -np.exp(lt), lt)
    return out


def _t_ratios_raw(t, nu, k):
    """d^k F/dnu^k / F (k = 1, 2); 0 at t = -inf/+inf (F flat there)."""
    t, nu = np.broadcast_arrays(np.asarray(t, dtype=float), np.asarray(nu, dtype=float))
    fin = np.isfinite(t)
    out = np.zeros(t.shape)
    if np.any(fin):
        out[fin] = _t_series_raw(t[fin], nu[fin], k)[k]
    return out


@_broadcasting
@primitive
def _t_lcdf(t, nu):
    """log of the Student-t CDF F(t | nu)."""
    return _f(_t_lcdf_raw(t, nu))


@_broadcasting
@primitive
def _t_lcdf_r1(t, nu):
    """F_nu(t | nu) / F(t | nu) = d log F/dnu (series)."""
    return _f(_t_ratios_raw(t, nu, 1))


@_broadcasting
@primitive
def _t_lcdf_r2(t, nu):
    """F_nunu(t | nu) / F(t | nu) (series); its own nu-derivative is missing."""
    return _f(_t_ratios_raw(t, nu, 2))


def _t_pdf_over_cdf(t, nu):
    return sm.exp(_t_logpdf(t, nu) - _t_lcdf(t, nu))


# d log F/dt = f/F;  d(F_nu/F)/dt = (f/F)(score - F_nu/F), d(F_nu/F)/dnu = F_nunu/F -
# (F_nu/F)^2;  d(F_nunu/F)/dt = (f/F)(score^2 + score_nu - F_nunu/F)
def _d_tl_t(g, ans, t, nu):
    return g * sm.exp(_t_logpdf(t, nu) - ans)


def _d_tl_nu(g, ans, t, nu):
    return g * _t_lcdf_r1(t, nu)


def _d_r1_t(g, ans, t, nu):
    return g * _t_pdf_over_cdf(t, nu) * (_t_score(t, nu)[0] - ans)


def _d_r1_nu(g, ans, t, nu):
    return g * (_t_lcdf_r2(t, nu) - ans * ans)


def _d_r2_t(g, ans, t, nu):
    sc, dsc = _t_score(t, nu)
    return g * _t_pdf_over_cdf(t, nu) * (sc * sc + dsc - ans)


defvjp(_t_lcdf, _d_tl_t, _d_tl_nu)
defjvp(_t_lcdf, _d_tl_t, _d_tl_nu)
defvjp(_t_lcdf_r1, _d_r1_t, _d_r1_nu)
defjvp(_t_lcdf_r1, _d_r1_t, _d_r1_nu)
defvjp(_t_lcdf_r2, _d_r2_t, None)
defjvp(_t_lcdf_r2, _d_r2_t, None)


def _student_t_cdf_kernel(upper):
    def kernel(need, y, nu, mu, sigma):
        inv_s = 1.0 / sigma
        z = (y - mu) * inv_s
        t = -z if upper else z               # 1 - F(z) = F(-z)
        lF = _t_lcdf(t, nu)
        parts = [None] * 4
        if need[0] or need[2] or need[3]:
            dz = sm.exp(_t_logpdf(z, nu) - lF)
            parts = _ls_parts(need, z, inv_s, -dz if upper else dz, False, (0, 2, 3), 4)
        if need[1]:
            parts[1] = _t_lcdf_r1(t, nu)
        return sm.sum(lF), parts
    return kernel


student_t_lpdf, student_t_lcdf, student_t_lccdf, student_t_rng = family(
    "student_t",
    (("y", NOT_NAN), ("nu", POSITIVE), ("mu", FINITE), ("sigma", POSITIVE)),
    lpdf=_student_t,
    lcdf=_student_t_cdf_kernel(False),
    lccdf=_student_t_cdf_kernel(True),
    as_float=True,
    rng=lambda g, nu, mu, sigma, size: mu + sigma * g.standard_t(nu, size=size),
    doc="""Student-t log density, summed over the broadcast elements.

    log StudentT(y | nu, mu, sigma) = lgamma((nu+1)/2) - lgamma(nu/2) - log(nu pi)/2
        - log(sigma) - (nu+1)/2 log(1 + ((y - mu)/sigma)^2 / nu)

    y real, nu > 0 (degrees of freedom), mu real, sigma > 0.

    >>> import stanlite as sl
    >>> round(sl.student_t_lpdf(1.0, 4.0, 0.0, 2.0), 6)
    -1.825538
    """,
    lcdf_doc="""Student-t log CDF, summed: sum_i log F(y_i | nu_i, mu_i, sigma_i).

    F(y) = I_x(nu/2, 1/2)/2 for z = (y - mu)/sigma <= 0 (1 minus that for z > 0),
    x = nu / (nu + z^2) (regularized incomplete beta; in logs from a series where F
    is below the float range). The derivative w.r.t. nu comes from a convergent
    series (exact to rounding for moderate nu, ~1e-9 relative at nu ~ 1000; second
    derivatives too). Third derivatives in nu, and the nu-derivative for nu > ~2000
    with z where the series would be too long, raise DifferentiationError.
    """,
    lccdf_doc="""Student-t log complementary CDF, summed: log(1 - F(y)) = log F(-z)
    (see :func:`student_t_lcdf`).""",
    rng_doc="""Draws from StudentT(nu, mu, sigma): mu + sigma * T, T ~ t_nu.""")
_deflower(student_t_lpdf, _ld(_op.STUDENT_T, 4))
_check_lowering(student_t_lpdf, "not_nan", "positive_finite", "finite", "positive_finite")


# --------------------------------------------------------------------------------------
# cauchy(y | mu, sigma)
# --------------------------------------------------------------------------------------
def _cauchy(need, y, mu, sigma):
    """log Cauchy = -log(pi) - log(sigma) - log1p(z^2); d/dz = -2z/(1 + z^2)."""
    inv_s = 1.0 / sigma
    z = (y - mu) * inv_s
    n = broadcast_size(y, mu, sigma)
    lp = -n * LOG_PI - _reps(n, sigma) * sm.sum(sm.log(sigma)) - sm.sum(sm.log1p(z * z))
    return lp, _ls_parts(need, z, inv_s, -2.0 * z / (1.0 + z * z), True)


def _cauchy_cdf_kernel(upper):
    # F(z) = 1/2 + atan(z)/pi = atan2(1, -z)/pi (no cancellation as z -> -inf);
    # 1 - F(z) = atan2(1, z)/pi;  d log F/dz = 1/((1 + z^2) atan2(1, -z))
    def kernel(need, y, mu, sigma):
        inv_s = 1.0 / sigma
        z = (y - mu) * inv_s
        n = broadcast_size(y, mu, sigma)
        ang = sm.atan2(1.0, z if upper else -z)
        lp = sm.sum(sm.log(ang)) - n * LOG_PI
        dz = None
        if need[0] or need[1] or need[2]:
            dz = 1.0 / ((1.0 + z * z) * ang)
            if upper:
                dz = -dz
        return lp, _ls_parts(need, z, inv_s, dz, False)
    return kernel


cauchy_lpdf, cauchy_lcdf, cauchy_lccdf, cauchy_rng = family(
    "cauchy",
    (("y", NOT_NAN), ("mu", FINITE), ("sigma", POSITIVE)),
    lpdf=_cauchy,
    lcdf=_cauchy_cdf_kernel(False),
    lccdf=_cauchy_cdf_kernel(True),
    as_float=True,
    rng=lambda g, mu, sigma, size: mu + sigma * g.standard_cauchy(size=size),
    doc="""Cauchy log density, summed over the broadcast elements.

    log Cauchy(y | mu, sigma) = -log(pi) - log(sigma) - log(1 + ((y - mu)/sigma)^2)

    y real, mu real, sigma > 0.

    >>> import stanlite as sl
    >>> round(sl.cauchy_lpdf(1.0, 0.0, 1.0), 6)
    -1.837877
    """,
    lcdf_doc="""Cauchy log CDF, summed: log(1/2 + atan((y - mu)/sigma)/pi).""",
    lccdf_doc="""Cauchy log complementary CDF, summed: log(1/2 - atan((y - mu)/sigma)/pi).""",
    rng_doc="""Draws from Cauchy(mu, sigma).""")
_deflower(cauchy_lpdf, _ld(_op.CAUCHY, 3))
_check_lowering(cauchy_lpdf, "not_nan", "finite", "positive_finite")


# --------------------------------------------------------------------------------------
# double_exponential(y | mu, sigma)  (Laplace)
# --------------------------------------------------------------------------------------
def _double_exponential(need, y, mu, sigma):
    """log Laplace = -log(2) - log(sigma) - |z|; d/dz = -sign(z) (0 at z = 0, as Stan)."""
    inv_s = 1.0 / sigma
    z = (y - mu) * inv_s
    n = broadcast_size(y, mu, sigma)
    lp = -n * LOG_TWO - _reps(n, sigma) * sm.sum(sm.log(sigma)) - sm.sum(sm.fabs(z))
    dz = -sm.sign(z) if (need[0] or need[1] or need[2]) else None
    return lp, _ls_parts(need, z, inv_s, dz, True)


def _double_exponential_cdf_kernel(upper):
    # F = exp(z)/2 for z < 0, 1 - exp(-z)/2 for z >= 0; each branch is evaluated on
    # an argument clamped to its own side (no overflow, no NaN in the branch not taken)
    def kernel(need, y, mu, sigma):
        inv_s = 1.0 / sigma
        z = (y - mu) * inv_s
        neg = plain(z) < 0
        if upper:
            zn = _where(neg, z, 0.0)
            e = sm.exp(zn)
            lp = sm.sum(_where(neg, sm.log1m(0.5 * e), -LOG_TWO - z))
            dz = _where(neg, -e / (2.0 - e), -1.0) if any(need) else None
        else:
            zp = _where(neg, 0.0, z)
            e = sm.exp(-zp)
            lp = sm.sum(_where(neg, z - LOG_TWO, sm.log1m(0.5 * e)))
            dz = _where(neg, 1.0, e / (2.0 - e)) if any(need) else None
        return lp, _ls_parts(need, z, inv_s, dz, False)
    return kernel


(double_exponential_lpdf,
 double_exponential_lcdf,
 double_exponential_lccdf,
 double_exponential_rng) = family(
    "double_exponential",
    (("y", FINITE), ("mu", FINITE), ("sigma", POSITIVE)),
    lpdf=_double_exponential,
    lcdf=_double_exponential_cdf_kernel(False),
    lccdf=_double_exponential_cdf_kernel(True),
    rng=lambda g, mu, sigma, size: g.laplace(mu, sigma, size),
    doc="""Double exponential (Laplace) log density, summed over the broadcast elements.

    log DoubleExponential(y | mu, sigma) = -log(2) - log(sigma) - |y - mu| / sigma

    y real, mu real, sigma > 0. The derivative at y = mu is taken as 0 (sign(0)).

    >>> import stanlite as sl
    >>> round(sl.double_exponential_lpdf(1.0, 0.0, 2.0), 6)
    -1.886294
    """,
    lcdf_doc="""Double exponential log CDF, summed: F = exp(z)/2 (z < 0), 1 - exp(-z)/2
    (z >= 0), z = (y - mu)/sigma.""",
    lccdf_doc="""Double exponential log complementary CDF, summed: 1 - F = 1 - exp(z)/2
    (z < 0), exp(-z)/2 (z >= 0).""",
    rng_doc="""Draws from DoubleExponential(mu, sigma) (Laplace).""")


# --------------------------------------------------------------------------------------
# logistic(y | mu, sigma)
# --------------------------------------------------------------------------------------
def _logistic(need, y, mu, sigma):
    """log Logistic = log_inv_logit(z) + log1m_inv_logit(z) - log(sigma);
    d/dz = 1 - 2 inv_logit(z) = -tanh(z/2)."""
    inv_s = 1.0 / sigma
    z = (y - mu) * inv_s
    n = broadcast_size(y, mu, sigma)
    lp = (sm.sum(sm.log_inv_logit(z) + sm.log1m_inv_logit(z))
          - _reps(n, sigma) * sm.sum(sm.log(sigma)))
    dz = -sm.tanh(0.5 * z) if (need[0] or need[1] or need[2]) else None
    return lp, _ls_parts(need, z, inv_s, dz, True)


def _logistic_cdf_kernel(upper):
    # log F = log_inv_logit(z), d/dz = inv_logit(-z);
    # log(1 - F) = log1m_inv_logit(z), d/dz = -inv_logit(z)
    def kernel(need, y, mu, sigma):
        inv_s = 1.0 / sigma
        z = (y - mu) * inv_s
        if upper:
            lp = sm.sum(sm.log1m_inv_logit(z))
            dz = -sm.inv_logit(z) if any(need) else None
        else:
            lp = sm.sum(sm.log_inv_logit(z))
            dz = sm.inv_logit(-z) if any(need) else None
        return lp, _ls_parts(need, z, inv_s, dz, False)
    return kernel


logistic_lpdf, logistic_lcdf, logistic_lccdf, logistic_rng = family(
    "logistic",
    (("y", FINITE), ("mu", FINITE), ("sigma", POSITIVE)),
    lpdf=_logistic,
    lcdf=_logistic_cdf_kernel(False),
    lccdf=_logistic_cdf_kernel(True),
    as_float=True,
    rng=lambda g, mu, sigma, size: g.logistic(mu, sigma, size),
    doc="""Logistic log density, summed over the broadcast elements.

    log Logistic(y | mu, sigma) = -z - log(sigma) - 2 log(1 + exp(-z)),
    z = (y - mu)/sigma;  y real, mu real, sigma > 0.

    >>> import stanlite as sl
    >>> round(sl.logistic_lpdf(1.0, 0.0, 1.0), 6)
    -1.626523
    """,
    lcdf_doc="""Logistic log CDF, summed: log inv_logit((y - mu)/sigma).""",
    lccdf_doc="""Logistic log complementary CDF, summed:
    log(1 - inv_logit((y - mu)/sigma)).""",
    rng_doc="""Draws from Logistic(mu, sigma).""")


# --------------------------------------------------------------------------------------
# gumbel(y | mu, beta)
# --------------------------------------------------------------------------------------
def _gumbel(need, y, mu, beta):
    """log Gumbel = -log(beta) - z - exp(-z); d/dz = exp(-z) - 1."""
    inv_s = 1.0 / beta
    z = (y - mu) * inv_s
    u = sm.exp(-z)
    n = broadcast_size(y, mu, beta)
    lp = -_reps(n, beta) * sm.sum(sm.log(beta)) - sm.sum(z + u)
    dz = u - 1.0 if (need[0] or need[1] or need[2]) else None
    return lp, _ls_parts(need, z, inv_s, dz, True)


def _gumbel_cdf_kernel(upper):
    # log F = -exp(-z), d/dz = exp(-z);  log(1 - F) = log1m_exp(-exp(-z)),
    # d/dz = -exp(-z - exp(-z) - log(1 - F)) (finite where exp(-z) overflows)
    def kernel(need, y, mu, beta):
        inv_s = 1.0 / beta
        z = (y - mu) * inv_s
        u = sm.exp(-z)
        if upper:
            ls = sm.log1m_exp(-u)
            lp = sm.sum(ls)
            dz = -sm.exp(-z - u - ls) if any(need) else None
        else:
            lp = -sm.sum(u)
            dz = u
        return lp, _ls_parts(need, z, inv_s, dz, False)
    return kernel


gumbel_lpdf, gumbel_lcdf, gumbel_lccdf, gumbel_rng = family(
    "gumbel",
    (("y", NOT_NAN), ("mu", FINITE), ("beta", POSITIVE)),
    lpdf=_gumbel,
    lcdf=_gumbel_cdf_kernel(False),
    lccdf=_gumbel_cdf_kernel(True),
    as_float=True,
    rng=lambda g, mu, beta, size: g.gumbel(mu, beta, size),
    doc="""Gumbel log density, summed over the broadcast elements.

    log Gumbel(y | mu, beta) = -log(beta) - z - exp(-z),  z = (y - mu)/beta;
    y real, mu real, beta > 0 (scale).

    >>> import stanlite as sl
    >>> round(sl.gumbel_lpdf(1.0, 0.0, 2.0), 6)
    -1.799678
    """,
    lcdf_doc="""Gumbel log CDF, summed: log F = -exp(-(y - mu)/beta).""",
    lccdf_doc="""Gumbel log complementary CDF, summed:
    log(1 - exp(-exp(-(y - mu)/beta))).""",
    rng_doc="""Draws from Gumbel(mu, beta).""")


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


def _sn_logpdf(z, alpha):
    """log of the standard skew-normal density 2 phi(z) Phi(alpha z)."""
    return LOG_TWO - HALF_LOG_TWO_PI - 0.5 * z * z + log_Phi(alpha * z)


def _sn_dalpha_log(z, alpha, lF):
    """d/dalpha of the skew-normal CDF divided by F = exp(lF):
    -2 dT(z, alpha)/dalpha / F = -exp(-z^2 (1 + alpha^2)/2 - lF) / (pi (1 + alpha^2))."""
    q = 1.0 + alpha * alpha
    return -sm.exp(-0.5 * z * z * q - lF) / (math.pi * q)


_LAGUERRE_U, _LAGUERRE_W = np.polynomial.laguerre.laggauss(40)
_LAGUERRE_LOGW = np.log(_LAGUERRE_W)


def _sn_lcdf_raw(z, alpha):
    """log F(z | alpha) of the standard skew normal.

    F = Phi(z) - 2 T(z, alpha) (Owen's T function), except

    * in the lower tail (z < -3, or z < 0 with alpha z < -3), where the two terms
      cancel (F << Phi(z) when alpha > 0) or underflow: there
      F = int_0^inf 2 phi(z - s) Phi(alpha (z - s)) ds by 40-point Gauss-Laguerre
      quadrature in logs after the substitution s = u/lambda, lambda = -z + alpha
      phi(alpha z)/Phi(alpha z) (the log-slope of the integrand at s = 0), which
      leaves a slowly varying, nearly Gaussian factor (~1e-13 relative vs mpmath);
    * where F > 1/2: log F = log1p(-F(-z | -alpha)) (the reflection, computed as above).
    """
    z, alpha = np.broadcast_arrays(np.asarray(z, dtype=float), np.asarray(alpha, dtype=float))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        direct = sps.ndtr(z) - 2.0 * sps.owens_t(z, alpha)
        out = np.array(_sn_lower(z, alpha, direct), dtype=float)
        hi = direct > 0.5
        if np.any(hi):
            zr, ar = -z[hi], -alpha[hi]
            lr = _sn_lower(zr, ar, sps.ndtr(zr) - 2.0 * sps.owens_t(zr, ar))
            out[hi] = np.log1p(-np.exp(lr))
    return out


def _sn_lower(z, alpha, direct):
    """log F from ``direct`` = Phi(z) - 2 T(z, alpha), by quadrature in the lower tail."""
    out = np.log(direct)
    tail = (z < -3.0) | ((z < 0.0) & (alpha * z < -3.0))
    tail &= np.isfinite(z) & np.isfinite(alpha)
    if np.any(tail):
        zt = z[tail]
        at = alpha[tail]
        az = at * zt
        lam = -zt + at * np.exp(-0.5 * az * az - HALF_LOG_TWO_PI - sps.log_ndtr(az))
        t = zt - _LAGUERRE_U[:, None] / lam
        lf = (LOG_TWO - HALF_LOG_TWO_PI - 0.5 * t * t + sps.log_ndtr(at * t)
              + _LAGUERRE_U[:, None] + _LAGUERRE_LOGW[:, None])
        out = np.array(out, dtype=float)
        out[tail] = sps.logsumexp(lf, axis=0) - np.log(lam)
    return out


@_broadcasting
@primitive
def _sn_lcdf(z, alpha):
    """log of the standard skew-normal CDF (see _sn_lcdf_raw)."""
    return _f(_sn_lcdf_raw(z, alpha))


def _d_sn_lcdf_z(g, ans, z, a):
    return g * sm.exp(_sn_logpdf(z, a) - ans)


def _d_sn_lcdf_a(g, ans, z, a):
    return g * _sn_dalpha_log(z, a, ans)


defvjp(_sn_lcdf, _d_sn_lcdf_z, _d_sn_lcdf_a)
defjvp(_sn_lcdf, _d_sn_lcdf_z, _d_sn_lcdf_a)


def _skew_normal_cdf_kernel(upper):
    # 1 - F(z | alpha) = F(-z | -alpha) (the reflection of a skew normal): both tails
    # are computed as a CDF
    def kernel(need, y, xi, omega, alpha):
        inv_s = 1.0 / omega
        z = (y - xi) * inv_s
        lF = _sn_lcdf(-z, -alpha) if upper else _sn_lcdf(z, alpha)
        parts = [None] * 4
        if need[0] or need[1] or need[2]:
            dz = sm.exp(_sn_logpdf(z, alpha) - lF)
            parts = _ls_parts(need, z, inv_s, -dz if upper else dz, False, (0, 1, 2), 4)
        if need[3]:
            da = _sn_dalpha_log(z, alpha, lF)
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
    lpdf=_skew_normal,
    lcdf=_skew_normal_cdf_kernel(False),
    lccdf=_skew_normal_cdf_kernel(True),
    as_float=True,
    rng=_skew_normal_draw,
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
    lpdf=_exp_mod_normal,
    lcdf=_exp_mod_normal_cdf_kernel(False),
    lccdf=_exp_mod_normal_cdf_kernel(True),
    params=("y", "mu", "sigma", "lam"),
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
    """,
    lcdf_doc="""Exponentially modified normal log CDF, summed:
    F(y) = Phi(u) - exp(-lambda sigma u + (lambda sigma)^2/2) Phi(u - lambda sigma),
    u = (y - mu)/sigma (computed in logs).""",
    lccdf_doc="""Exponentially modified normal log complementary CDF, summed:
    1 - F(y) = Phi(-u) + exp(-lambda sigma u + (lambda sigma)^2/2) Phi(u - lambda sigma).""",
    rng_doc="""Draws from ExpModNormal(mu, sigma, lambda): N(mu, sigma) + Exponential(lambda).""")


# --------------------------------------------------------------------------------------
# von_mises(y | mu, kappa)
# --------------------------------------------------------------------------------------
@_broadcasting
@primitive
def _bessel_ratio(kappa):
    """A(kappa) = I_1(kappa)/I_0(kappa) = d log I_0/dkappa, as a ratio of scipy's scaled
    ive (full relative accuracy; the difference of two logs of size ~kappa would lose
    digits for large kappa). A' = 1 - A/kappa - A^2 (DLMF 10.29.1-2), 1/2 at 0."""
    with np.errstate(under="ignore"):
        return _f(sps.ive(1, kappa) / sps.ive(0, kappa))


def _d_bessel_ratio(g, ans, kappa):
    kv = plain(kappa)
    if np.any(kv == 0):
        zero = kv == 0
        safe = _where(zero, 1.0, kappa)
        return g * _where(zero, 0.5, 1.0 - ans / safe - ans * ans)
    return g * (1.0 - ans / kappa - ans * ans)


defvjp(_bessel_ratio, _d_bessel_ratio)
defjvp(_bessel_ratio, _d_bessel_ratio)


@_broadcasting
@primitive
def _log_i0(kappa):
    """log I_0(kappa) = log(ive(0, kappa)) + kappa; d/dkappa = I_1/I_0."""
    return _f(np.log(sps.ive(0, kappa)) + kappa)


defvjp(_log_i0, lambda g, ans, kappa: g * _bessel_ratio(kappa))
defjvp(_log_i0, lambda g, ans, kappa: g * _bessel_ratio(kappa))


def _von_mises(need, y, mu, kappa):
    """log VonMises = kappa cos(y - mu) - log(2 pi) - log I_0(kappa).

    d/dy = -kappa sin(y - mu) = -d/dmu;  d/dkappa = cos(y - mu) - I_1(kappa)/I_0(kappa).
    """
    d = y - mu
    c = sm.cos(d)
    n = broadcast_size(y, mu, kappa)
    lp = sm.sum(kappa * c) - n * LOG_TWO_PI - _reps(n, kappa) * sm.sum(_log_i0(kappa))
    parts = [None, None, None]
    if need[0] or need[1]:
        dy = -kappa * sm.sin(d)
        if need[0]:
            parts[0] = dy
        if need[1]:
            parts[1] = -dy
    if need[2]:
        parts[2] = c - _bessel_ratio(kappa)
    return lp, parts


_VM_CHUNK = 1 << 21


def _vm_ratios(kappa, J):
    """r_j = I_j(kappa)/I_0(kappa), j = 0..J+2 (last axis), and their first and second
    kappa-derivatives from I_j' = (I_(j-1) + I_(j+1))/2 (DLMF 10.29.1):
    r_j' = (r_(j-1) + r_(j+1))/2 - r_j r_1 (r_(-1) = r_1), r_j'' likewise."""
    j = np.arange(J + 3)
    k = kappa[..., None]
    r = sps.ive(j, k) / sps.ive(0, k)
    rm = np.concatenate([r[..., 1:2], r[..., :-1]], axis=-1)       # r_(j-1)
    rp = np.concatenate([r[..., 1:], np.zeros_like(r[..., :1])], axis=-1)
    r1 = r[..., 1:2]
    d1 = 0.5 * (rm + rp) - r * r1
    d1m = np.concatenate([d1[..., 1:2], d1[..., :-1]], axis=-1)
    d1p = np.concatenate([d1[..., 1:], np.zeros_like(d1[..., :1])], axis=-1)
    d2 = 0.5 * (d1m + d1p) - d1 * r1 - r * d1[..., 1:2]
    return r, d1, d2


def _vm_series(c, h, kappa, order):
    """F = G(c + h) - G(c - h) and its first ``order`` kappa-derivatives (flat arrays),
    G(x) = 1/2 + x/(2 pi) + sum_j r_j sin(j x)/(j pi) the centred von Mises CDF
    extended to the real line (the Fourier series of the density integrated
    termwise): F = h/pi + (2/pi) sum_j r_j cos(j c) sin(j h)/j (the difference of
    sines as a product: exact near h = 0). Terms up to j = 10 + 10 sqrt(kappa)
    (r_j ~ exp(-j^2/(2 kappa)): the rest is below rounding); absolute accuracy ~1e-16."""
    out = [np.empty(c.shape) for _ in range(order + 1)]
    J = int(math.ceil(10.0 + 10.0 * math.sqrt(float(np.max(kappa, initial=0.0)))))
    step = max(1, _VM_CHUNK // (J + 3))
    jj = np.arange(1, J + 1)
    for lo in range(0, c.size, step):
        sl_ = slice(lo, lo + step)
        rs = _vm_ratios(kappa[sl_], J)
        trig = np.cos(jj * c[sl_, None]) * np.sin(jj * h[sl_, None]) / jj
        for k in range(order + 1):
            out[k][sl_] = (2.0 / math.pi) * np.sum(rs[k][:, 1:J + 1] * trig, axis=-1)
    out[0] += h / math.pi
    return out


def _ts_nodes(step=1.0 / 64, tmax=4.0):
    """tanh-sinh quadrature on [-1, 1]: node side (-1, 0, 1), distance of the node from
    that end (1 - tanh(pi/2 sinh|tau|), computed without cancellation), log weight."""
    tau = np.arange(-tmax, tmax + 0.5 * step, step)
    q = 0.5 * math.pi * np.sinh(np.abs(tau))
    off = 2.0 / (1.0 + np.exp(2.0 * q))
    lw = (math.log(step) + np.log(0.5 * math.pi * np.cosh(tau))
          - 2.0 * (q + np.log1p(np.exp(-2.0 * q)) - LOG_TWO))
    return np.sign(tau), off, lw


_TS_SIDE, _TS_OFF, _TS_LOGW = _ts_nodes()


def _vm_quadrature(c, h, kappa, order):
    """log F and the ratios F_kappa/F, F_kappakappa/F for F = int_{c-h}^{c+h} of the
    centred density, by tanh-sinh quadrature in logs (513 nodes, clustered doubly
    exponentially at both ends, where a small tail probability concentrates): the
    ratios are weighted means of d/dkappa log f = cos x - A and of
    (cos x - A)^2 - A', A = I_1/I_0, A' = 1 - A/kappa - A^2. Converged to ~1e-14
    relative (checked against mpmath and halving the step)."""
    c, h, k = c[:, None], h[:, None], kappa[:, None]
    x = np.where(_TS_SIDE > 0, (c + h) - h * _TS_OFF, (c - h) + h * _TS_OFF)
    x = np.where(_TS_SIDE == 0, c, x)
    cx = np.cos(x)
    l0 = np.log(sps.ive(0, k))
    lg = k * (cx - 1.0) - LOG_TWO_PI - l0 + _TS_LOGW + np.log(h)
    lF = sps.logsumexp(lg, axis=-1)
    out = [lF]
    if order:
        w = np.exp(lg - lF[:, None])
        a = sps.ive(1, k) / sps.ive(0, k)
        e = cx - a
        out.append(np.sum(w * e, axis=-1))
        if order > 1:
            out.append(np.sum(w * (e * e - (1.0 - a / k - a * a)), axis=-1))
    return out


def _vm_raw(c, h, kappa, k):
    """k = 0: log F; k = 1, 2: F^(k)/F (kappa-derivatives), for
    F = G(c + h) - G(c - h): the Fourier series, or quadrature where F < 1e-3 (there
    the series, exact to ~1e-16 absolute, would lose the relative accuracy), and
    log F = log1p(-(1 - F)) with the complementary arc by quadrature where
    F > 1 - 1e-3 (log F near 0 keeps its relative accuracy)."""
    c, h, kappa = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (c, h, kappa)))
    shape = c.shape
    c, h, kappa = c.ravel(), h.ravel(), kappa.ravel()
    with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
        ser = _vm_series(c, h, kappa, k)
        out = np.log(ser[0]) if k == 0 else ser[k] / ser[0]
        small = ser[0] < 1e-3
        if np.any(small):
            out[small] = _vm_quadrature(c[small], h[small], kappa[small], k)[k]
        big = (ser[0] > 1.0 - 1e-3) & (h < math.pi)
        if k == 0 and np.any(big):
            # log F = log1p(-(1 - F)), 1 - F the mass of the complementary arc
            lc = _vm_quadrature(c[big] + math.pi, math.pi - h[big], kappa[big], 0)[0]
            out[big] = np.log1p(-np.exp(lc))
    return _f(out.reshape(shape))


def _vm_logf(x, kappa):
    """log of the centred von Mises density, kappa cos x - log(2 pi I_0(kappa))."""
    return kappa * sm.cos(x) - LOG_TWO_PI - _log_i0(kappa)


def _vm_prims():
    """_vm[0](c, h, kappa) = log F, _vm[k] = F^(k)/F (k = 1, 2; kappa-derivatives) for
    F = G(c + h) - G(c - h). Derivatives (f the centred density, f_k its kappa-
    derivatives, A = I_1/I_0, A' = 1 - A/kappa - A^2):
    d log F/dc = (f(c+h) - f(c-h))/F, d/dh the same with +, d log F/dkappa = F'/F;
    d(F^(k)/F)/dc = (f_k(c+h) - f_k(c-h))/F - (F^(k)/F) d log F/dc (h: with +),
    d(F'/F)/dkappa = F''/F - (F'/F)^2 (F''/F has no kappa-derivative: third order)."""
    prims = []
    for k in range(3):
        def raw(c, h, kappa, _k=k):
            return _vm_raw(c, h, kappa, _k)
        raw.__name__ = raw.__qualname__ = f"_vm_cdf{k}"
        prims.append(_broadcasting(primitive(raw)))

    def fk_over_F(x, kappa, k, lF):
        p = sm.exp(_vm_logf(x, kappa) - lF)
        if k == 0:
            return p
        a = _bessel_ratio(kappa)
        e = sm.cos(x) - a
        if k == 1:
            return p * e
        return p * (e * e - (1.0 - a / kappa - a * a))

    def rule(k, sign):
        def d(g, ans, c, h, kappa):
            lF = ans if k == 0 else prims[0](c, h, kappa)
            hi = fk_over_F(c + h, kappa, k, lF)
            lo = fk_over_F(c - h, kappa, k, lF)
            out = hi + lo if sign > 0 else hi - lo
            if k:
                p_hi = fk_over_F(c + h, kappa, 0, lF)
                p_lo = fk_over_F(c - h, kappa, 0, lF)
                out = out - ans * (p_hi + p_lo if sign > 0 else p_hi - p_lo)
            return g * out
        return d

    for k, p in enumerate(prims):
        if k == 0:
            def dk(g, ans, c, h, kappa):
                return g * prims[1](c, h, kappa)
        elif k == 1:
            def dk(g, ans, c, h, kappa):
                return g * (prims[2](c, h, kappa) - ans * ans)
        else:
            dk = None
        defvjp(p, rule(k, -1), rule(k, 1), dk)
        defjvp(p, rule(k, -1), rule(k, 1), dk)
    return prims


_vm_cdf = _vm_prims()


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
        lF = _vm_cdf[0](c, h, kappa)
        parts = [None, None, None]
        if need[0] or need[1]:
            fy = sm.exp(_vm_logf(y - mu, kappa) - lF)
            fb = sm.exp(_vm_logf(math.pi + mu, kappa) - lF)   # at the cut -pi == pi
            if upper:
                dy, dmu = -fy, fy - fb
            else:
                dy, dmu = fy, fb - fy
            if need[0]:
                parts[0] = dy
            if need[1]:
                parts[1] = dmu
        if need[2]:
            parts[2] = _vm_cdf[1](c, h, kappa)
        return sm.sum(lF), parts
    return kernel


von_mises_lpdf, von_mises_lcdf, von_mises_lccdf, von_mises_rng = family(
    "von_mises",
    (("y", FINITE), ("mu", FINITE), ("kappa", all_of(NONNEGATIVE, FINITE))),
    lpdf=_von_mises,
    lcdf=_von_mises_cdf_kernel(False),
    lccdf=_von_mises_cdf_kernel(True),
    cdf_args={"y": in_range(-math.pi, math.pi), "kappa": POSITIVE},
    as_float=True,
    rng=lambda g, mu, kappa, size: (np.mod(mu, 2.0 * math.pi)
                                        + g.vonmises(0.0, kappa, size)),
    doc="""Von Mises log density, summed over the broadcast elements.

    VonMises(y | mu, kappa) = exp(kappa cos(y - mu)) / (2 pi I_0(kappa))

    y real (an angle; the density is 2 pi-periodic), mu real, kappa >= 0
    (concentration; kappa = 0 is the uniform density on the circle).

    >>> import stanlite as sl
    >>> round(sl.von_mises_lpdf(0.5, 0.0, 2.0), 6)
    -0.906705
    """,
    lcdf_doc="""Von Mises log CDF, summed (Stan's von_mises_lcdf).

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


# --------------------------------------------------------------------------------------
# uniform(y | alpha, beta)
# --------------------------------------------------------------------------------------
def _uniform(need, y, alpha, beta):
    """log Uniform = -log(beta - alpha) for alpha <= y <= beta, -inf otherwise (then
    with zero partials, as Stan); d/dalpha = 1/(beta - alpha) = -d/dbeta, d/dy = 0."""
    yv, av, bv = plain(y), plain(alpha), plain(beta)
    if np.any((yv < av) | (yv > bv)):
        return -math.inf, [0.0 if k else None for k in need]
    n = broadcast_size(y, alpha, beta)
    w = beta - alpha
    reps = n // broadcast_size(alpha, beta)
    lp = -reps * sm.sum(sm.log(w))
    parts = [None, None, None]
    if need[0]:
        parts[0] = 0.0
    if need[1] or need[2]:
        iw = reps / w
        if need[1]:
            parts[1] = iw
        if need[2]:
            parts[2] = -iw
    return lp, parts


def _uniform_cdf_kernel(upper):
    # F = (y - alpha)/(beta - alpha) on [alpha, beta], 0 below, 1 above. The log of
    # the probability outside is -inf for the whole sum (zero partials), 0 for an
    # element on the certain side (its partials are 0).
    def kernel(need, y, alpha, beta):
        yv, av, bv = plain(y), plain(alpha), plain(beta)
        if np.any(yv >= bv if upper else yv <= av):
            return -math.inf, [0.0 if k else None for k in need]
        shape = np.broadcast_shapes(np.shape(yv), np.shape(av), np.shape(bv))
        out = np.broadcast_to((yv < av) if upper else (yv > bv), shape)   # probability 1
        w = beta - alpha
        num = beta - y if upper else y - alpha
        if np.any(out):
            num = _where(out, w, num)                    # log(w/w) = 0, flat
        lp = sm.sum(sm.log(num) - sm.log(w))
        parts = [None, None, None]
        if any(need):
            inum = 1.0 / num
            iw = 1.0 / w
            keep = np.where(out, 0.0, 1.0)               # full shape: every partial
            if upper:
                d = (-inum, iw, inum - iw)               # d/dy, d/dalpha, d/dbeta
            else:
                d = (inum, iw - inum, -iw)
            for k in range(3):
                if need[k]:
                    parts[k] = d[k] * keep
        return lp, parts
    return kernel


def _beta_above_alpha(fn, alpha, beta):
    bad = ~(np.asarray(beta) > np.asarray(alpha))
    if np.any(bad):
        b = np.broadcast_to(np.asarray(beta, dtype=float), np.shape(bad))
        a = np.broadcast_to(np.asarray(alpha, dtype=float), np.shape(bad))
        i = tuple(np.argwhere(bad)[0]) if np.ndim(bad) else ()
        where = f"beta[{', '.join(str(int(k)) for k in i)}]" if i else "beta"
        raise DomainError(f"{fn}: {where} must be greater than alpha "
                          f"({float(a[i])!r}), but is {float(b[i])!r}")


def _beta_above_alpha_y(fn, y, alpha, beta):
    _beta_above_alpha(fn, alpha, beta)


uniform_lpdf, uniform_lcdf, uniform_lccdf, uniform_rng = family(
    "uniform",
    (("y", NOT_NAN), ("alpha", FINITE), ("beta", FINITE)),
    lpdf=_uniform,
    lcdf=_uniform_cdf_kernel(False),
    lccdf=_uniform_cdf_kernel(True),
    relations=(_beta_above_alpha_y,),
    rng_relations=(_beta_above_alpha,),
    as_float=True,
    rng=lambda g, alpha, beta, size: g.uniform(alpha, beta, size),
    doc="""Uniform log density, summed over the broadcast elements.

    log Uniform(y | alpha, beta) = -log(beta - alpha) for y in [alpha, beta], and -inf
    if any y lies outside its interval (Stan: a zero density, not an error).
    alpha real, beta > alpha.

    >>> import stanlite as sl
    >>> round(sl.uniform_lpdf(0.5, 0.0, 4.0), 6)
    -1.386294
    """,
    lcdf_doc="""Uniform log CDF, summed: log((y - alpha)/(beta - alpha)) on
    [alpha, beta], 0 above beta, -inf at or below alpha.""",
    lccdf_doc="""Uniform log complementary CDF, summed: log((beta - y)/(beta - alpha))
    on [alpha, beta], 0 below alpha, -inf at or above beta.""",
    rng_doc="""Draws from Uniform(alpha, beta).""")


# --------------------------------------------------------------------------------------
# elementwise forms (``reduce=False``, see :mod:`.fused`): one function per family and
# tail, stanlite operations on the arguments as given (traced or plain)
# --------------------------------------------------------------------------------------
def _std(y, mu, sigma):
    return (y - mu) / sigma


@pointwise(normal_lpdf)
def _normal_terms(y, mu, sigma):
    z = _std(y, mu, sigma)
    return -0.5 * z * z - sm.log(sigma) - HALF_LOG_TWO_PI


@pointwise(normal_lcdf)
def _normal_lcdf_terms(y, mu, sigma):
    return log_Phi(_std(y, mu, sigma))


@pointwise(normal_lccdf)
def _normal_lccdf_terms(y, mu, sigma):
    return log_Phi(-_std(y, mu, sigma))


@pointwise(std_normal_lpdf)
def _std_normal_terms(y):
    return -0.5 * y * y - HALF_LOG_TWO_PI


@pointwise(std_normal_lcdf)
def _std_normal_lcdf_terms(y):
    return log_Phi(y)


@pointwise(std_normal_lccdf)
def _std_normal_lccdf_terms(y):
    return log_Phi(-y)


@pointwise(student_t_lpdf)
def _student_t_terms(y, nu, mu, sigma):
    return _t_logpdf(_std(y, mu, sigma), nu) - sm.log(sigma)


@pointwise(student_t_lcdf)
def _student_t_lcdf_terms(y, nu, mu, sigma):
    return _t_lcdf(_std(y, mu, sigma), nu)


@pointwise(student_t_lccdf)
def _student_t_lccdf_terms(y, nu, mu, sigma):
    return _t_lcdf(-_std(y, mu, sigma), nu)


@pointwise(cauchy_lpdf)
def _cauchy_terms(y, mu, sigma):
    z = _std(y, mu, sigma)
    return -LOG_PI - sm.log(sigma) - sm.log1p(z * z)


@pointwise(cauchy_lcdf)
def _cauchy_lcdf_terms(y, mu, sigma):
    return sm.log(sm.atan2(1.0, -_std(y, mu, sigma))) - LOG_PI


@pointwise(cauchy_lccdf)
def _cauchy_lccdf_terms(y, mu, sigma):
    return sm.log(sm.atan2(1.0, _std(y, mu, sigma))) - LOG_PI


@pointwise(double_exponential_lpdf)
def _double_exponential_terms(y, mu, sigma):
    return -LOG_TWO - sm.log(sigma) - sm.fabs(_std(y, mu, sigma))


@pointwise(double_exponential_lcdf)
def _double_exponential_lcdf_terms(y, mu, sigma):
    z = _std(y, mu, sigma)
    neg = z < 0                     # (a comparison of a traced value is guarded)
    return _where(neg, z - LOG_TWO, sm.log1m(0.5 * sm.exp(-_where(neg, 0.0, z))))


@pointwise(double_exponential_lccdf)
def _double_exponential_lccdf_terms(y, mu, sigma):
    z = _std(y, mu, sigma)
    neg = z < 0
    return _where(neg, sm.log1m(0.5 * sm.exp(_where(neg, z, 0.0))), -LOG_TWO - z)


@pointwise(logistic_lpdf)
def _logistic_terms(y, mu, sigma):
    z = _std(y, mu, sigma)
    return sm.log_inv_logit(z) + sm.log1m_inv_logit(z) - sm.log(sigma)


@pointwise(logistic_lcdf)
def _logistic_lcdf_terms(y, mu, sigma):
    return sm.log_inv_logit(_std(y, mu, sigma))


@pointwise(logistic_lccdf)
def _logistic_lccdf_terms(y, mu, sigma):
    return sm.log1m_inv_logit(_std(y, mu, sigma))


@pointwise(gumbel_lpdf)
def _gumbel_terms(y, mu, beta):
    z = _std(y, mu, beta)
    return -sm.log(beta) - z - sm.exp(-z)


@pointwise(gumbel_lcdf)
def _gumbel_lcdf_terms(y, mu, beta):
    return -sm.exp(-_std(y, mu, beta))


@pointwise(gumbel_lccdf)
def _gumbel_lccdf_terms(y, mu, beta):
    return sm.log1m_exp(-sm.exp(-_std(y, mu, beta)))


@pointwise(skew_normal_lpdf)
def _skew_normal_terms(y, xi, omega, alpha):
    return _sn_logpdf(_std(y, xi, omega), alpha) - sm.log(omega)


@pointwise(skew_normal_lcdf)
def _skew_normal_lcdf_terms(y, xi, omega, alpha):
    return _sn_lcdf(_std(y, xi, omega), alpha)


@pointwise(skew_normal_lccdf)
def _skew_normal_lccdf_terms(y, xi, omega, alpha):
    return _sn_lcdf(-_std(y, xi, omega), -alpha)


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
    return kappa * sm.cos(y - mu) - LOG_TWO_PI - _log_i0(kappa)


def _von_mises_cdf_terms(upper):
    # as _von_mises_cdf_kernel: log F of the arc (c - h, c + h)
    def terms(y, mu, kappa):
        if upper:
            c, h = 0.5 * (y + math.pi) - mu, 0.5 * (math.pi - y)
        else:
            c, h = 0.5 * (y - math.pi) - mu, 0.5 * (y + math.pi)
        return _vm_cdf[0](c, h, kappa)
    return terms


pointwise(von_mises_lcdf)(_von_mises_cdf_terms(False))
pointwise(von_mises_lccdf)(_von_mises_cdf_terms(True))


@pointwise(uniform_lpdf)
def _uniform_terms(y, alpha, beta):
    outside = (y < alpha) | (y > beta)
    return _where(outside, -math.inf, -sm.log(beta - alpha))


def _uniform_cdf_terms(upper):
    # an element on the impossible side is -inf, one on the certain side 0 (a safe
    # numerator w there, so that no log of 0 or of a negative enters a derivative)
    def terms(y, alpha, beta):
        dead, one = ((y >= beta), (y < alpha)) if upper else ((y <= alpha), (y > beta))
        w = beta - alpha
        num = beta - y if upper else y - alpha
        if np.any(dead | one):
            num = _where(dead | one, w, num)
        c = sm.log(num) - sm.log(w)
        return _where(dead, -math.inf, c) if np.any(dead) else c
    return terms


pointwise(uniform_lcdf)(_uniform_cdf_terms(False))
pointwise(uniform_lccdf)(_uniform_cdf_terms(True))
