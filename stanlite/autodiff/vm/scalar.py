"""Scalar helpers of the compiled interpreter, and its compiler decorator.

The stable forms of math/elementwise.py and math/special.py on one float64 (log1p_exp,
inv_logit, log1m_exp, digamma, sign), compiled by numba. They are shared by the
interpreter's kernels (:mod:`.kernel`) and by its generated unary ops
(:mod:`.unary_generated`, which resolves a derivative's helper ``f`` that has no
interpreter op of its own to ``_f`` here), so they live apart from both: the
generated module cannot import the kernel that imports it.

Without numba (or with ``STANLITE_JIT=0``) ``_jit`` is the identity and these run
as plain Python (a debugging aid; see :func:`.kernel.available`).
"""

import math

from ...config import switched_off

__all__ = []

try:
    if switched_off("STANLITE_JIT"):
        raise ImportError("disabled by STANLITE_JIT")
    from numba import njit
except ImportError:
    njit = None
else:
    # stanlite's kernels load from numba's cache without initialising all of numba's
    # CPU target or parsing their bitcode (~0.3 s of a cached first draw; fast_load.py)
    from .fast_load import install as _install_fast_load
    _install_fast_load()

# error_model="numpy": 1/0 gives inf as numpy does (the domain is checked explicitly)
_jit = (lambda f: f) if njit is None else njit(cache=True, nogil=True,
                                               error_model="numpy")


@_jit
def _log1p_exp(x):
    if x > 0.0:
        return x + math.log1p(math.exp(-x))
    return math.log1p(math.exp(x))


@_jit
def _inv_logit(x):
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@_jit
def _log1m_exp(x):
    # log(1 - e^x) for x < 0: two regimes for accuracy (Maechler 2012)
    if x > -0.6931471805599453:
        return math.log(-math.expm1(x))
    return math.log1p(-math.exp(x))


@_jit
def _sign(x):
    # sign(x), 0 at 0: the subgradient of |x| (math/arithmetic.py fabs); NaN: NaN
    if x > 0.0:
        return 1.0
    if x < 0.0:
        return -1.0
    return x * 0.0


@_jit
def _digamma_pos(x):
    # x > 0: the recurrence psi(x) = psi(x + 1) - 1/x up to x >= 10, then the
    # asymptotic series psi(x) ~ log x - 1/(2x) - sum B_2k / (2k x^2k) (DLMF 5.11.2) in
    # f = 1/x^2: at x >= 10 its first omitted term (B_16 / 16 / x^16 ~ 4e-17) is below
    # the result's rounding. The recurrence's terms are summed apart and subtracted
    # once, two at a time (1/x + 1/(x+1) = (2x+1) / (x(x+1)): half the divisions).
    s = 0.0
    while x < 9.0:
        s += (2.0 * x + 1.0) / (x * (x + 1.0))
        x += 2.0
    if x < 10.0:
        s += 1.0 / x
        x += 1.0
    f = 1.0 / (x * x)
    t = f * (-1.0 / 12.0 + f * (1.0 / 120.0 + f * (-1.0 / 252.0 + f * (
        1.0 / 240.0 + f * (-1.0 / 132.0 + f * (691.0 / 32760.0 + f * (-1.0 / 12.0)))))))
    return (math.log(x) - (0.5 / x - t)) - s


@_jit
def _digamma(x):
    """psi(x) to ~1e-15 relative (absolute near its zero at 1.4616...), as
    scipy.special.psi: -inf at +0, +inf at -0, NaN at the other poles (x = -1, -2,
    ...) and at -inf."""
    if x > 0.0:
        return _digamma_pos(x)
    if x == 0.0:
        return math.copysign(math.inf, -x) if x == x else x
    # (every float at or below -2^52 is an integer; and numba's floor is an int64,
    # which overflows below -2^63)
    if x != x or x <= -4503599627370496.0 or x == math.floor(x):
        return math.nan
    # the reflection psi(x) = psi(1 - x) - pi / tan(pi x) (DLMF 5.5.4); tan has period
    # pi, so x is first reduced to r = x - n, n the nearest integer: exact (Sterbenz;
    # n = 0 for |x| < 1/2), so no loss for large |x| nor near a pole, where tan(pi r)
    # keeps its relative accuracy (x - floor(x) would round 1 - |x| for small |x|)
    r = x - math.floor(x + 0.5)
    return _digamma_pos(1.0 - x) - math.pi / math.tan(math.pi * r)


_INV_E = 0.36787944117144233        # 1/e; -1/e = -(_INV_E + _INV_E_LO)
_INV_E_LO = -1.2428753672788363e-17


@_jit
def _lambert_w(x, branch):
    """W_0 (branch 0) or W_{-1} (branch -1) of x, as math/special.py's lambert_w0 /
    lambert_wm1: the branch-point series where e x + 1 < 1e-6 (Corless et al. 1996,
    eq. 4.22), else Halley's iteration on w e^w = x to convergence; NaN outside the
    domain (the tape decides there), -inf at W_{-1}(0)."""
    if x != x or x < -_INV_E or (branch == -1 and x > 0.0):
        return math.nan
    if branch == -1 and x == 0.0:
        return -math.inf
    if x == math.inf:
        return math.inf
    q = ((x + _INV_E) + _INV_E_LO) * math.e         # e x + 1, no cancellation
    p = math.sqrt(2.0 * max(q, 0.0))
    if branch == -1:
        p = -p
    if q < 0.3:
        # near the branch point: a start from the series (the value itself, exact to
        # rounding, for q < 1e-6, where Halley's step divides by w + 1 ~ 0)
        w = -1.0 + p * (1.0 + p * (-1.0 / 3.0 + p * (11.0 / 72.0 + p * (
            -43.0 / 540.0 + p * (769.0 / 17280.0 + p * (-221.0 / 8505.0))))))
        if q < 1e-6:
            return w
    elif branch == 0:
        w = math.log1p(x) if x < 3.0 else math.log(x) - math.log(math.log(x))
    else:
        lx = math.log(-x)
        w = lx - math.log(-lx)
    for _ in range(50):
        ew = math.exp(w)
        f = w * ew - x
        wp1 = w + 1.0
        d = f / (ew * wp1 - (w + 2.0) * f / (2.0 * wp1))
        w -= d
        if abs(d) <= 2.2e-16 * abs(w):
            break
    return w


# Stirling's series of log Gamma (DLMF 5.11.1): lgamma(x) = (x - 1/2) log x - x
# + log(2 pi)/2 + sum_k B_2k / (2k (2k - 1) x^(2k-1)); these are the coefficients
# B_2k / (2k (2k - 1)), k = 1..7
_STIRLING = (1.0 / 12.0, -1.0 / 360.0, 1.0 / 1260.0, -1.0 / 1680.0, 1.0 / 1188.0,
             -691.0 / 360360.0, 1.0 / 156.0)
_HALF_LOG_2PI = 0.9189385332046728           # log(2 pi) / 2
_STIRLING_FROM = 10.0


@_jit
def _lgamma_stirling_diff(x):
    """lgamma(x) minus its Stirling approximation (x - 1/2) log x - x + log(2 pi)/2,
    for x >= 10: the series above in 1/x^2. At x = 10 the first omitted term (k = 8,
    3617/122400 / x^15 = 3e-17) is below the rounding of the 8e-3 result, and it only
    shrinks with x; the sum is never formed from lgamma itself, so no cancellation."""
    f = 1.0 / (x * x)
    s = _STIRLING[6]
    for j in range(5, -1, -1):
        s = _STIRLING[j] + f * s
    return s / x


@_jit
def _lbeta(a, b):
    """log B(a, b) = lgamma(a) + lgamma(b) - lgamma(a + b) for a, b > 0 (DLMF 5.12.1),
    accurate where that sum cancels (one or both arguments large): with x = min(a, b),
    y = max(a, b) and r = x / (x + y), Stirling's formula (DLMF 5.11.1) for every
    lgamma of an argument >= 10 leaves the differences of the series' tails
    (_lgamma_stirling_diff) and
      both >= 10:  (x - 1/2) log r + y log1p(-r) + log(2 pi)/2 - log(y)/2,
      only y >= 10: lgamma(x) + (y - 1/2) log1p(-r) + x (1 - log(x + y))
    (the leading terms' logs combined analytically, so nothing of size y log y is
    subtracted). Below 10 both, the lgamma sum (its terms are at most lgamma(20) ~ 39,
    no large cancellation). NaN for a or b < 0 or NaN; +inf if either is 0."""
    x = a if a < b else b
    y = b if a < b else a
    if x != x or y != y or x < 0.0:
        return math.nan
    if x == 0.0:
        return math.inf
    if y == math.inf:
        return -math.inf
    if y < _STIRLING_FROM:
        return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)
    xy = x + y
    r = x / xy
    if x < _STIRLING_FROM:
        corr = _lgamma_stirling_diff(y) - _lgamma_stirling_diff(xy)
        return math.lgamma(x) + ((y - 0.5) * math.log1p(-r) + x * (1.0 - math.log(xy))
                                 + corr)
    corr = (_lgamma_stirling_diff(x) + _lgamma_stirling_diff(y)
            - _lgamma_stirling_diff(xy))
    return ((x - 0.5) * math.log(r) + y * math.log1p(-r)
            + (_HALF_LOG_2PI - 0.5 * math.log(y)) + corr)


@_jit
def _lchoose(n, k):
    """log C(n, k) = lgamma(n+1) - lgamma(k+1) - lgamma(n-k+1) (DLMF 1.2.6, 5.2.1),
    Stan's domain n >= -1, k >= -1, n - k >= -1 (NaN outside); 0 at k = 0 and k = n.
    For n >= 8 as -log(n+1) - log B(n-k+1, k+1) (Gamma(n+2) = (n+1) Gamma(n+1)): no
    cancellation for large n; below, the lgamma form (log(n+1) has a pole at n = -1)."""
    if n != n or k != k or n < -1.0 or k < -1.0 or n - k < -1.0:
        return math.nan
    if k == 0.0 or k == n:
        return 0.0
    if n < 8.0:
        return math.lgamma(n + 1.0) - math.lgamma(k + 1.0) - math.lgamma(n - k + 1.0)
    return -math.log1p(n) - _lbeta(n - k + 1.0, k + 1.0)


@_jit
def _digamma_diff(x, y):
    """psi(x) - psi(x + y) for x > 0, x + y > 0, without the cancellation of the two
    digammas when |y| << x (lbeta's and lchoose's derivatives: psi(x) ~ log x, so
    their difference ~ -y/x is lost to ~1e-15 / (y/x) relative). The recurrence
    psi(x) = psi(x + 1) - 1/x (DLMF 5.5.2) shifts x and x + y to >= 10, its terms paired:
    1/(x+i) - 1/(x+y+i) = y / ((x+i)(x+y+i)); there, with s = x + y, the asymptotic
    series psi(z) = log z - 1/(2z) - sum_k c_k z^-2k (DLMF 5.11.2) gives
    log(x/s) - y/(2 x s) - sum_k c_k (a^k - b^k), a = 1/x^2, b = 1/s^2, with
    a - b = y (x + s) / (x s)^2 and a^k - b^k = (a - b) sum_j a^j b^(k-1-j): every
    term carries the factor y."""
    if x != x or y != y or x <= 0.0 or x + y <= 0.0:
        return math.nan
    if y == 0.0:
        return 0.0
    if x + y == math.inf:
        return -math.inf
    acc = 0.0
    while x < 10.0 or x + y < 10.0:
        acc += y / (x * (x + y))
        x += 1.0
    s = x + y
    lg = math.log1p(-y / s) if abs(y) < 0.5 * s else math.log(x / s)
    a = 1.0 / (x * x)
    b = 1.0 / (s * s)
    d = y * (x + s) * a * b                   # a - b
    # c_k = B_2k / (2k), k = 1..7: 1/12, -1/120, 1/252, -1/240, 1/132, -691/32760, 1/12
    c = (1.0 / 12.0, -1.0 / 120.0, 1.0 / 252.0, -1.0 / 240.0, 1.0 / 132.0,
         -691.0 / 32760.0, 1.0 / 12.0)
    t = 0.0
    pk = d                                    # a^k - b^k, k = 1
    bk = b                                    # b^k
    for k in range(7):
        t += c[k] * pk
        # a^(k+1) - b^(k+1) = a (a^k - b^k) + b^k (a - b)
        pk = a * pk + bk * d
        bk *= b
    return lg - y / (2.0 * x * s) - t - acc


# -- Owen's T ----------------------------------------------------------------------------
# 24-point Gauss-Legendre rule on [0, 1] (nodes, weights), computed to 50 digits with
# mpmath and rounded: numpy's leggauss weights are off by ~1e-15 relative, which this
# Gaussian integrand (slopes up to ~70 in the scaled variable) turns into errors of
# ~1e-14
_GL24_X = (0.00240639000148932, 0.012635722014345251, 0.030862723998633622,
           0.056792236497799485, 0.08999900701304854, 0.12993790421072282,
           0.17595317403151223, 0.22728926430558022, 0.2831032461869774,
           0.3424786601519183, 0.40444056626319186, 0.4679715535686972,
           0.5320284464313028, 0.5955594337368082, 0.6575213398480817,
           0.7168967538130225, 0.7727107356944197, 0.8240468259684878,
           0.8700620957892772, 0.9100009929869515, 0.9432077635022005,
           0.9691372760013663, 0.9873642779856547, 0.9975936099985107)
_GL24_W = (0.0061706148999936, 0.014265694314466832, 0.022138719408709904,
           0.02964929245771839, 0.03667324070554015, 0.04309508076597664,
           0.04880932605205694, 0.05372213505798282, 0.0577528340268628,
           0.060835236463901696, 0.06291872817341415, 0.06396909767337608,
           0.06396909767337608, 0.06291872817341415, 0.060835236463901696,
           0.0577528340268628, 0.05372213505798282, 0.04880932605205694,
           0.04309508076597664, 0.03667324070554015, 0.02964929245771839,
           0.022138719408709904, 0.014265694314466832, 0.0061706148999936)
_OT_CUT = 8.5                       # h x beyond which exp(-h^2 x^2 / 2) is dropped
_SPLIT = 134217729.0                # 2^27 + 1: Dekker's split of a double in halves
_INV_SQRT2_HI = 0.7071067811865476  # 1/sqrt(2) = _HI + _LO
_INV_SQRT2_LO = -4.833646656726457e-17
_INV_2PI = 0.15915494309189535
_TWO_OVER_SQRT_PI = 1.1283791670955126


@_jit
def _two_prod_err(a, b):
    """a b - fl(a b), exactly (Dekker 1971; no fused multiply-add needed), for
    |a|, |b| < 2^996 (the split overflows beyond)."""
    p = a * b
    t = _SPLIT * a
    ah = t - (t - a)
    al = a - ah
    t = _SPLIT * b
    bh = t - (t - b)
    bl = b - bh
    return ((ah * bh - p) + ah * bl + al * bh) + al * bl


@_jit
def _exp_half_sq(h, hlo):
    """exp(-(h + hlo)^2 / 2) for 0 <= h < 2^996, hlo a small correction of h: to ~2 ulp.
    exp(-h*h/2) would carry the rounding of h*h (relative 1e-16, absolute h^2 1e-16
    in the exponent: 1e-13 of the value at h = 30); with h = hi + lo split in halves
    hi^2 is exact and the rest is a small exponent."""
    t = _SPLIT * h
    hi = t - (t - h)
    lo = h - hi
    return math.exp(-0.5 * hi * hi) * math.exp(-0.5 * lo * (2.0 * hi + lo)
                                                - hlo * (h + 0.5 * hlo))


@_jit
def _upper_normal_tail(x, xlo):
    """1 - Phi(x + xlo) = erfc((x + xlo) / sqrt 2) / 2, with the rounding of the
    argument x / sqrt(2) (and xlo) put back to first order: erfc's relative slope is
    ~2x^2 at x, so the rounded argument alone would cost ~x^2 1e-16 relative (7e-15 at
    x = 8)."""
    x0 = x * _INV_SQRT2_HI
    d = _two_prod_err(x, _INV_SQRT2_HI) + x * _INV_SQRT2_LO + xlo * _INV_SQRT2_HI
    return 0.5 * (math.erfc(x0) - d * _TWO_OVER_SQRT_PI * math.exp(-x0 * x0))


@_jit
def _owens_t_quad(h, hlo, a):
    """T(h + hlo, a) for h > 0, a > 0, where a <= 1 or h >= _OT_CUT: the defining
    integral with exp(-h^2/2) taken out,
      T = exp(-h^2/2) / (2 pi) int_0^tau exp(-h^2 x^2 / 2) / (1 + x^2) dx,
    tau = min(a, _OT_CUT / h) <= 1. Beyond h x = 8.5 the integrand's remaining mass is
    below erfc(8.5 / sqrt 2) = 2e-17 of the integral (which is >= half the Gaussian's
    over [0, tau] since 1 + x^2 <= 2); on [0, tau] the Gaussian has at most 8.5
    standard deviations and 1/(1 + x^2)'s poles are >= 1 away, so 24 Gauss-Legendre
    nodes reach ~1e-17 (checked against mpmath: 20 nodes give 2e-14 at h tau = 8.5).
    Every term is positive: relative accuracy down to underflow."""
    tau = a if a * h <= _OT_CUT else _OT_CUT / h
    c = h * tau
    s = 0.0
    for i in range(24):
        x = tau * _GL24_X[i]
        ct = c * _GL24_X[i]
        s += _GL24_W[i] * math.exp(-0.5 * ct * ct) / (1.0 + x * x)
    return tau * s * _exp_half_sq(h, hlo) * _INV_2PI


@_jit
def _owens_t(h, a):
    """Owen's T function T(h, a) = 1/(2 pi) int_0^a exp(-h^2 (1 + x^2) / 2) / (1 + x^2)
    dx (Owen 1956), even in h and odd in a; to ~5e-16 relative (against mpmath over
    h in [0, 40], a in [1e-8, 1e10]; scipy's owens_t is off by up to 2.5e-9 there, at
    small a). For a <= 1, or h >= 8.5 (where the integrand is gone before x = 1), the
    integral itself (_owens_t_quad). Otherwise the identity (Owen 1956, eq. 2.3; Q the
    upper normal tail)
      T(h, a) + T(a h, 1/a) = (Q(h) + Q(a h)) / 2 - Q(h) Q(a h)
                            = Q(h) (1/2 - Q(a h)) + Q(a h) / 2     (h, a >= 0),
    a sum of positive terms, and T(a h, 1/a) <= T(h, a) for a > 1, so the subtraction
    loses at most a bit; a h is carried as a double-double (its rounding would cost
    (a h)^2 1e-16 relative through exp and erfc). T(0, a) = atan(a) / (2 pi); T = 0
    beyond h = 39 (below exp(-h^2/2), which underflows)."""
    if h != h or a != a:
        return math.nan
    h = abs(h)
    sg = 1.0
    if a < 0.0:
        a = -a
        sg = -1.0
    if a == 0.0 or h > 39.0:
        return 0.0 * sg
    if h == 0.0:
        return sg * math.atan(a) * _INV_2PI
    if a <= 1.0 or h >= _OT_CUT:
        return sg * _owens_t_quad(h, 0.0, a)
    q1 = _upper_normal_tail(h, 0.0)
    ah = a * h
    if ah > 39.0:                   # Q(a h) and T(a h, 1/a) underflow
        return sg * 0.5 * q1
    ahlo = _two_prod_err(a, h) if a < 1e299 else 0.0
    q2 = _upper_normal_tail(ah, ahlo)
    t2 = _owens_t_quad(ah, ahlo, 1.0 / a)
    return sg * ((q1 * (0.5 - q2) + 0.5 * q2) - t2)
