"""Log CDFs that need series or quadrature, with their parameter derivatives: the
standard Student t, the standard skew normal and the von Mises interval mass.

These are the special functions behind ``student_t_lcdf``, ``skew_normal_lcdf`` and
``von_mises_lcdf`` (:mod:`stanlite.distributions.continuous` and
:mod:`stanlite.distributions.more_continuous`); they live in the math library because
they are functions, reusable and testable on their own, not distributions. Each is a primitive that is differentiable w.r.t. every argument:

* :func:`student_t_log_cdf` ``(t, nu)``: log F(t | nu) of the standard Student t.
  d/dt is the density over F; d/dnu has no closed form and comes from a series
  (:func:`student_t_log_cdf_dnu`, itself differentiable once more in nu, with a
  second series for d^2F/dnu^2);
* :func:`skew_normal_log_cdf` ``(z, alpha)``: log(Phi(z) - 2 T(z, alpha)) (T Owen's
  T), with the alpha-derivative in closed form and Gauss-Laguerre quadrature in logs
  where the CDF underflows;
* :func:`von_mises_log_mass` ``[k](c, h, kappa)``: for k = 0 the log of the von Mises
  (centred at 0) mass of the interval (c - h, c + h), for k = 1, 2 its kappa-
  derivatives over the mass; Fourier series in the bulk and tanh-sinh quadrature in
  logs in the tails.

>>> import stanlite as sl
>>> from stanlite.math import cdf_series
>>> round(float(cdf_series.student_t_log_cdf(-1.0, 4.0)), 6)
-1.676911
>>> round(float(sl.grad(lambda nu: cdf_series.student_t_log_cdf(-1.0, nu))(4.0)), 6)
-0.035184
>>> round(float(cdf_series.skew_normal_log_cdf(0.5, 2.0)), 6)
-0.89575
>>> round(float(cdf_series.von_mises_log_mass[0](0.1, 0.5, 2.0)), 6)
-0.749656
"""

import math

import numpy as np
import scipy.special as sps

from ..autodiff.extend import defjvp, defvjp, primitive
from ..errors import DifferentiationError
from .elementwise import cos, exp, log, log1p
from ..autodiff.var import value_of
from .special import _owens_t_loop, digamma, lgamma, log_Phi, trigamma
from .structure import where

# (public as this module's functions; not star-exported into stanlite.math, whose
# namespace holds Stan's function names)

__all__ = ["student_t_log_cdf", "student_t_log_cdf_dnu", "skew_normal_log_cdf",
           "von_mises_log_mass"]

HALF_LOG_TWO_PI = 0.5 * np.log(2.0 * np.pi)
LOG_PI = math.log(math.pi)
LOG_TWO = math.log(2.0)
LOG_TWO_PI = math.log(2.0 * math.pi)


def _f(r):
    """A raw numpy result as a stanlite value (float for 0-d)."""
    r = np.asarray(r, dtype=float)
    return float(r) if r.ndim == 0 else r


def _broadcasting(prim):
    """Mark a ``@primitive`` as elementwise (forward mode expands tangents)."""
    prim._spec.broadcasting = True
    return prim


# --------------------------------------------------------------------------------------
# the standard Student t: log CDF and its nu-derivatives by series
# --------------------------------------------------------------------------------------
def t_logpdf(t, nu):
    """log density of the standard Student t at t (stanlite ops: differentiable)."""
    hp = 0.5 * nu + 0.5
    return (lgamma(hp) - lgamma(0.5 * nu) - 0.5 * log(nu) - 0.5 * LOG_PI
            - hp * log1p(t * t / nu))


def _t_score(t, nu):
    """d/dnu log t(t | nu) and its nu-derivative (stanlite ops)."""
    s = nu + t * t
    t2 = t * t
    sc = (0.5 * (digamma(0.5 * nu + 0.5) - digamma(0.5 * nu)) - 0.5 / nu
          - 0.5 * log1p(t2 / nu) + (nu + 1.0) * t2 / (2.0 * nu * s))
    # d/dnu of the terms above, one by one
    dsc = (0.25 * (trigamma(0.5 * nu + 0.5) - trigamma(0.5 * nu)) + 0.5 / (nu * nu)
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
def student_t_log_cdf(t, nu):
    """log F(t | nu), the CDF of the standard Student t with nu > 0 degrees of freedom:
    F(t | nu) = int_-inf^t Gamma((nu+1)/2) / (sqrt(nu pi) Gamma(nu/2))
    (1 + s^2/nu)^(-(nu+1)/2) ds.

    scipy's ``stdtr`` (the larger tail through log1p of the smaller), a series in logs
    where the tail underflows. d/dt = f/F; d/dnu = :func:`student_t_log_cdf_dnu`.

    >>> round(float(student_t_log_cdf(-2.0, 3.0)), 6)
    -2.664086
    """
    return _f(_t_lcdf_raw(t, nu))


@_broadcasting
@primitive
def student_t_log_cdf_dnu(t, nu):
    """d/dnu log F(t | nu) = F_nu / F for the standard Student t (a series: no closed
    form); differentiable once more in nu (a second series gives F_nunu / F).

    >>> round(float(student_t_log_cdf_dnu(-1.0, 4.0)), 6)
    -0.035184
    """
    return _f(_t_ratios_raw(t, nu, 1))


@_broadcasting
@primitive
def _t_lcdf_r2(t, nu):
    """F_nunu(t | nu) / F(t | nu) (series); its own nu-derivative is missing."""
    return _f(_t_ratios_raw(t, nu, 2))


def _t_pdf_over_cdf(t, nu):
    return exp(t_logpdf(t, nu) - student_t_log_cdf(t, nu))


# d log F/dt = f/F;  d(F_nu/F)/dt = (f/F)(score - F_nu/F), d(F_nu/F)/dnu = F_nunu/F -
# (F_nu/F)^2;  d(F_nunu/F)/dt = (f/F)(score^2 + score_nu - F_nunu/F)
def _d_tl_t(g, ans, t, nu):
    return g * exp(t_logpdf(t, nu) - ans)


def _d_tl_nu(g, ans, t, nu):
    return g * student_t_log_cdf_dnu(t, nu)


def _d_r1_t(g, ans, t, nu):
    return g * _t_pdf_over_cdf(t, nu) * (_t_score(t, nu)[0] - ans)


def _d_r1_nu(g, ans, t, nu):
    return g * (_t_lcdf_r2(t, nu) - ans * ans)


def _d_r2_t(g, ans, t, nu):
    sc, dsc = _t_score(t, nu)
    return g * _t_pdf_over_cdf(t, nu) * (sc * sc + dsc - ans)


defvjp(student_t_log_cdf, _d_tl_t, _d_tl_nu)
defjvp(student_t_log_cdf, _d_tl_t, _d_tl_nu)
defvjp(student_t_log_cdf_dnu, _d_r1_t, _d_r1_nu)
defjvp(student_t_log_cdf_dnu, _d_r1_t, _d_r1_nu)
defvjp(_t_lcdf_r2, _d_r2_t, None)
defjvp(_t_lcdf_r2, _d_r2_t, None)


# --------------------------------------------------------------------------------------
# the standard skew normal: log CDF through Owen's T
# --------------------------------------------------------------------------------------
def sn_logpdf(z, alpha):
    """log of the standard skew-normal density 2 phi(z) Phi(alpha z)."""
    return LOG_TWO - HALF_LOG_TWO_PI - 0.5 * z * z + log_Phi(alpha * z)


def sn_dalpha_log(z, alpha, lF):
    """d/dalpha of the skew-normal CDF divided by F = exp(lF):
    -2 dT(z, alpha)/dalpha / F = -exp(-z^2 (1 + alpha^2)/2 - lF) / (pi (1 + alpha^2))."""
    q = 1.0 + alpha * alpha
    return -exp(-0.5 * z * z * q - lF) / (math.pi * q)


_LAGUERRE_U, _LAGUERRE_W = np.polynomial.laguerre.laggauss(40)
_LAGUERRE_LOGW = np.log(_LAGUERRE_W)


def _owens_t_array(h, a):
    """Owen's T over equal-shape float arrays: the library's owens_t value (vm/scalar.py
    _owens_t, ~5e-16 relative; scipy's is off by up to 2.5e-9), so the skew normal's CDF
    and owens_t itself are one function."""
    out = np.empty(np.shape(h))
    # (ascontiguousarray makes 0-d arrays 1-d: only the flat views passed are made so)
    _owens_t_loop(np.ascontiguousarray(h, dtype=float).ravel(),
                  np.ascontiguousarray(a, dtype=float).ravel(), out.reshape(-1))
    return out


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
        direct = sps.ndtr(z) - 2.0 * _owens_t_array(z, alpha)
        out = np.array(_sn_lower(z, alpha, direct), dtype=float)
        hi = direct > 0.5
        if np.any(hi):
            zr, ar = -z[hi], -alpha[hi]
            lr = _sn_lower(zr, ar, sps.ndtr(zr) - 2.0 * _owens_t_array(zr, ar))
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
def skew_normal_log_cdf(z, alpha):
    """log F(z | alpha) = log(Phi(z) - 2 T(z, alpha)), the CDF of the standard skew
    normal (density 2 phi(z) Phi(alpha z); T is Owen's T function). d/dz = f/F and, in
    closed form, d/dalpha = -exp(-z^2 (1 + alpha^2)/2) / (pi (1 + alpha^2) F);
    Gauss-Laguerre quadrature in logs where F underflows.

    >>> round(float(skew_normal_log_cdf(0.5, 2.0)), 6)
    -0.89575
    """
    return _f(_sn_lcdf_raw(z, alpha))


def _d_sn_lcdf_z(g, ans, z, a):
    return g * exp(sn_logpdf(z, a) - ans)


def _d_sn_lcdf_a(g, ans, z, a):
    return g * sn_dalpha_log(z, a, ans)


defvjp(skew_normal_log_cdf, _d_sn_lcdf_z, _d_sn_lcdf_a)
defjvp(skew_normal_log_cdf, _d_sn_lcdf_z, _d_sn_lcdf_a)


# --------------------------------------------------------------------------------------
# von Mises: Bessel ratio, log I_0 and the log mass of an interval
# --------------------------------------------------------------------------------------
@_broadcasting
@primitive
def bessel_ratio(kappa):
    """A(kappa) = I_1(kappa)/I_0(kappa) = d log I_0/dkappa, as a ratio of scipy's scaled
    ive (full relative accuracy; the difference of two logs of size ~kappa would lose
    digits for large kappa). A' = 1 - A/kappa - A^2 (DLMF 10.29.1-2), 1/2 at 0."""
    with np.errstate(under="ignore"):
        return _f(sps.ive(1, kappa) / sps.ive(0, kappa))


def _d_bessel_ratio(g, ans, kappa):
    kv = value_of(kappa)
    if np.any(kv == 0):
        zero = kv == 0
        safe = where(zero, 1.0, kappa)
        return g * where(zero, 0.5, 1.0 - ans / safe - ans * ans)
    return g * (1.0 - ans / kappa - ans * ans)


defvjp(bessel_ratio, _d_bessel_ratio)
defjvp(bessel_ratio, _d_bessel_ratio)


@_broadcasting
@primitive
def log_i0(kappa):
    """log I_0(kappa) = log(ive(0, kappa)) + kappa; d/dkappa = I_1/I_0."""
    return _f(np.log(sps.ive(0, kappa)) + kappa)


defvjp(log_i0, lambda g, ans, kappa: g * bessel_ratio(kappa))
defjvp(log_i0, lambda g, ans, kappa: g * bessel_ratio(kappa))


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


def vm_logf(x, kappa):
    """log of the centred von Mises density, kappa cos x - log(2 pi I_0(kappa))."""
    return kappa * cos(x) - LOG_TWO_PI - log_i0(kappa)


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
        raw.__name__ = raw.__qualname__ = f"von_mises_log_mass{k}"
        prims.append(_broadcasting(primitive(raw)))

    def fk_over_F(x, kappa, k, lF):
        p = exp(vm_logf(x, kappa) - lF)
        if k == 0:
            return p
        a = bessel_ratio(kappa)
        e = cos(x) - a
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


# von_mises_log_mass[0](c, h, kappa): log of the mass of (c - h, c + h) under the von
# Mises density centred at 0; [1], [2]: its first and second kappa-derivatives over
# the mass (see _vm_prims)
von_mises_log_mass = _vm_prims()
