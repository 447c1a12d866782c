"""Continuous distributions on the real line: log densities, CDFs and RNGs.

Every ``<name>_lpdf(y, *params)`` is one fused node (see :mod:`.fused`): the value is
the sum over the broadcast elements, the partial derivatives w.r.t. every argument
come from the same kernel. ``_lcdf``/``_lccdf`` are fused the same way (censoring);
``_rng(*params, rng=None)`` draws with numpy (generated quantities, plain floats).

Parameterisations are Stan's: ``normal(y | mu, sigma)``, ``student_t(y | nu, mu,
sigma)``, ``cauchy(y | mu, sigma)``, ``double_exponential(y | mu, sigma)``,
``logistic(y | mu, sigma)``, ``gumbel(y | mu, beta)`` and ``uniform(y | alpha, beta)``
(``skew_normal``, ``exp_mod_normal`` and ``von_mises`` are in :mod:`.more_continuous`).

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

from .. import math as sm
from ..autodiff.vm import opcodes as _op    # the interpreter's lowerings (autodiff/vm)
from ..autodiff.vm.declare import defkernel as _defkernel
from ..autodiff.vm.scalar import _digamma
from ..autodiff.vm.program import (check_lowering as _check_lowering,
                                   deflower as _deflower, density as _ld,
                                   density_op as _density_op)
from ..errors import DomainError
from ..math import log_Phi
from ..math.cdf_series import student_t_log_cdf, student_t_log_cdf_dnu, t_logpdf
from .family import FINITE, NOT_NAN, POSITIVE, family
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
    "normal", (("y", NOT_NAN), ("mu", FINITE), ("sigma", POSITIVE)), lpdf=_normal,
    lcdf=_normal_lcdf, lccdf=_normal_lccdf,
    rng_args=(("mu", None), ("sigma", POSITIVE)), as_float=True,
    rng="normal",
    doc="""Normal log density, summed: sum_i log N(y_i | mu_i, sigma_i).

    log N(y | mu, sigma) = -((y - mu)/sigma)^2 / 2 - log(sigma) - log(2 pi)/2

    >>> import stanlite as sl
    >>> round(sl.normal_lpdf(1.0, 0.0, 1.0), 6)
    -1.418939
    """,
    rng_doc="""Draws from N(mu, sigma), shaped like the broadcast of the arguments.""")
# the interpreter's NORMAL op, by element (autodiff/vm/program.py density_op; its sweeps
# are also normal_id_glm's)
def _scale_positive(y, mu, s):
    # the domain of the location-scale densities' interpreter ops (normal, cauchy)
    return s > 0.0


def _normal_lp(y, mu, s):
    z = (y - mu) / s
    return -0.5 * z * z - math.log(s)


def _normal_partials(m, g, y, mu, s):
    z = (y - mu) / s
    dmu = g * z / s
    return -dmu, dmu, g * (z * z - 1.0) / s


_density_op(normal_lpdf, _op.NORMAL, ("not_nan", "finite", "positive_finite"),
            _normal_lp, _normal_partials, _scale_positive, constant=HALF_LOG_TWO_PI)


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
    "std_normal", (("y", NOT_NAN),), lpdf=_std_normal, lcdf=_std_normal_lcdf,
    lccdf=_std_normal_lccdf, as_float=True)
_deflower(std_normal_lpdf, _ld(_op.STD_NORMAL, 1))
_check_lowering(std_normal_lpdf, "not_nan")


def _std_normal_value(V, code, r, n, a, sa, b, sb, c, sc):
    lp = 0.0
    for i in range(n):
        y = V[a + i * sa]
        lp += -0.5 * y * y
    return _op.OK, lp - n * HALF_LOG_TWO_PI


def _std_normal_grad(V, A, code, r, g, m, n, a, sa, b, sb, c, sc):
    if m & 1:
        for i in range(n):
            A[a + i * sa] -= g * V[a + i * sa]


_defkernel(_op.STD_NORMAL, _std_normal_value, _std_normal_grad, kind="density")


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


def _student_t_cdf_kernel(upper):
    def kernel(need, y, nu, mu, sigma):
        inv_s = 1.0 / sigma
        z = (y - mu) * inv_s
        t = -z if upper else z               # 1 - F(z) = F(-z)
        lF = student_t_log_cdf(t, nu)
        parts = [None] * 4
        if need[0] or need[2] or need[3]:
            dz = sm.exp(t_logpdf(z, nu) - lF)
            parts = _ls_parts(need, z, inv_s, -dz if upper else dz, False, (0, 2, 3), 4)
        if need[1]:
            parts[1] = student_t_log_cdf_dnu(t, nu)
        return sm.sum(lF), parts
    return kernel


student_t_lpdf, student_t_lcdf, student_t_lccdf, student_t_rng = family(
    "student_t",
    (("y", NOT_NAN), ("nu", POSITIVE), ("mu", FINITE), ("sigma", POSITIVE)),
    lpdf=_student_t, lcdf=_student_t_cdf_kernel(False),
    lccdf=_student_t_cdf_kernel(True), as_float=True,
    rng=lambda g, nu, mu, sigma, size: mu + sigma * g.standard_t(nu, size=size),
    doc="""Student-t log density, summed over the broadcast elements.

    log StudentT(y | nu, mu, sigma) = lgamma((nu+1)/2) - lgamma(nu/2) - log(nu pi)/2
        - log(sigma) - (nu+1)/2 log(1 + ((y - mu)/sigma)^2 / nu)

    y real, nu > 0 (degrees of freedom), mu real, sigma > 0.

    >>> import stanlite as sl
    >>> round(sl.student_t_lpdf(1.0, 4.0, 0.0, 2.0), 6)
    -1.825538
    """, lcdf_doc="""Student-t log CDF, summed: sum_i log F(y_i | nu_i, mu_i, sigma_i).

    F(y) = I_x(nu/2, 1/2)/2 for z = (y - mu)/sigma <= 0 (1 minus that for z > 0),
    x = nu / (nu + z^2) (regularized incomplete beta; in logs from a series where F
    is below the float range). The derivative w.r.t. nu comes from a convergent
    series (exact to rounding for moderate nu, ~1e-9 relative at nu ~ 1000; second
    derivatives too). Third derivatives in nu, and the nu-derivative for nu > ~2000
    with z where the series would be too long, raise DifferentiationError.
    """, lccdf_doc="""Student-t log complementary CDF, summed: log(1 - F(y)) = log F(-z)
    (see :func:`student_t_lcdf`).""",
    rng_doc="""Draws from StudentT(nu, mu, sigma): mu + sigma * T, T ~ t_nu.""")
_deflower(student_t_lpdf, _ld(_op.STUDENT_T, 4))
_check_lowering(student_t_lpdf, "not_nan", "positive_finite", "finite", "positive_finite")


# the interpreter's STUDENT_T sweeps: (y | nu, mu, sigma), sigma at X1 with stride X2
def _student_t_value(V, code, r, n, a, sa, b, sb, c, sc):
    d = code[r, _op.X1]
    sd = code[r, _op.X2]
    lp = 0.0
    for i in range(n):
        nu = V[b + i * sb]
        s = V[d + i * sd]
        if not (nu > 0.0 and s > 0.0):
            return _op.DOMAIN, 0.0
        z = (V[a + i * sa] - V[c + i * sc]) / s
        lp += (math.lgamma(0.5 * (nu + 1.0)) - math.lgamma(0.5 * nu)
               - 0.5 * math.log(nu) - 0.5 * LOG_PI - math.log(s)
               - 0.5 * (nu + 1.0) * math.log1p(z * z / nu))
    return _op.OK, lp


def _student_t_grad(V, A, code, r, g, m, n, a, sa, b, sb, c, sc):
    d = code[r, _op.X1]
    sd = code[r, _op.X2]
    for i in range(n):
        nu = V[b + i * sb]
        s = V[d + i * sd]
        dev = V[a + i * sa] - V[c + i * sc]
        z = dev / s
        q = z * z / nu
        w = (nu + 1.0) / (nu * s * s + dev * dev)
        if m & 1:
            A[a + i * sa] -= g * w * dev
        if m & 4:
            A[c + i * sc] += g * w * dev
        if m & 2:
            A[b + i * sb] += g * 0.5 * (_digamma(0.5 * (nu + 1.0)) - _digamma(0.5 * nu)
                                        - 1.0 / nu - math.log1p(q)
                                        + (nu + 1.0) * q / (nu * (1.0 + q)))
        if m & 8:
            A[d + i * sd] += g * (w * dev * dev - 1.0) / s


_defkernel(_op.STUDENT_T, _student_t_value, _student_t_grad, kind="density")


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
    "cauchy", (("y", NOT_NAN), ("mu", FINITE), ("sigma", POSITIVE)), lpdf=_cauchy,
    lcdf=_cauchy_cdf_kernel(False), lccdf=_cauchy_cdf_kernel(True), as_float=True,
    rng=lambda g, mu, sigma, size: mu + sigma * g.standard_cauchy(size=size),
    doc="""Cauchy log density, summed over the broadcast elements.

    log Cauchy(y | mu, sigma) = -log(pi) - log(sigma) - log(1 + ((y - mu)/sigma)^2)

    y real, mu real, sigma > 0.

    >>> import stanlite as sl
    >>> round(sl.cauchy_lpdf(1.0, 0.0, 1.0), 6)
    -1.837877
    """, lcdf_doc="""Cauchy log CDF, summed: log(1/2 + atan((y - mu)/sigma)/pi).""",
    lccdf_doc="""Cauchy log complementary CDF, summed: log(1/2 - atan((y - mu)/sigma)/pi).""",
    rng_doc="""Draws from Cauchy(mu, sigma).""")
# the interpreter's CAUCHY op, by element (autodiff/vm/program.py density_op)
def _cauchy_lp(y, mu, s):
    z = (y - mu) / s
    return -math.log1p(z * z) - math.log(s)


def _cauchy_partials(m, g, y, mu, s):
    z = (y - mu) / s
    w = 1.0 / (1.0 + z * z)
    dy = -g * 2.0 * z * w / s
    return dy, -dy, g * (2.0 * z * z * w - 1.0) / s


_density_op(cauchy_lpdf, _op.CAUCHY, ("not_nan", "finite", "positive_finite"),
            _cauchy_lp, _cauchy_partials, _scale_positive, constant=LOG_PI)


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


def _ls_tail(std_tail, upper):
    """The lcdf kernel (lccdf with ``upper``) of a location-scale family
    (y | mu, sigma) from its standard tail, ``std_tail(z, upper, need) -> (summed log
    tail, its derivative in z or None)``: the standardization and the chain rule
    (:func:`_ls_parts`) written once."""
    def kernel(need, y, mu, sigma):
        inv_s = 1.0 / sigma
        z = (y - mu) * inv_s
        lp, dz = std_tail(z, upper, need)
        return lp, _ls_parts(need, z, inv_s, dz, False)
    return kernel


def _double_exponential_tail(z, upper, need):
    # F = exp(z)/2 for z < 0, 1 - exp(-z)/2 for z >= 0; each branch is evaluated on
    # an argument clamped to its own side (no overflow, no NaN in the branch not taken)
    neg = plain(z) < 0
    if upper:
        zn = _where(neg, z, 0.0)
        e = sm.exp(zn)
        lp = sm.sum(_where(neg, sm.log1m(0.5 * e), -LOG_TWO - z))
        return lp, _where(neg, -e / (2.0 - e), -1.0) if any(need) else None
    zp = _where(neg, 0.0, z)
    e = sm.exp(-zp)
    lp = sm.sum(_where(neg, z - LOG_TWO, sm.log1m(0.5 * e)))
    return lp, _where(neg, 1.0, e / (2.0 - e)) if any(need) else None


(double_exponential_lpdf,
 double_exponential_lcdf,
 double_exponential_lccdf,
 double_exponential_rng) = family(
    "double_exponential", (("y", FINITE), ("mu", FINITE), ("sigma", POSITIVE)),
    lpdf=_double_exponential, lcdf=_ls_tail(_double_exponential_tail, False),
    lccdf=_ls_tail(_double_exponential_tail, True),
    rng="laplace",
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


def _logistic_tail(z, upper, need):
    # log F = log_inv_logit(z), d/dz = inv_logit(-z);
    # log(1 - F) = log1m_inv_logit(z), d/dz = -inv_logit(z)
    if upper:
        lp = sm.sum(sm.log1m_inv_logit(z))
        return lp, -sm.inv_logit(z) if any(need) else None
    lp = sm.sum(sm.log_inv_logit(z))
    return lp, sm.inv_logit(-z) if any(need) else None


logistic_lpdf, logistic_lcdf, logistic_lccdf, logistic_rng = family(
    "logistic", (("y", FINITE), ("mu", FINITE), ("sigma", POSITIVE)), lpdf=_logistic,
    lcdf=_ls_tail(_logistic_tail, False), lccdf=_ls_tail(_logistic_tail, True), as_float=True,
    rng="logistic",
    doc="""Logistic log density, summed over the broadcast elements.

    log Logistic(y | mu, sigma) = -z - log(sigma) - 2 log(1 + exp(-z)),
    z = (y - mu)/sigma;  y real, mu real, sigma > 0.

    >>> import stanlite as sl
    >>> round(sl.logistic_lpdf(1.0, 0.0, 1.0), 6)
    -1.626523
    """, lcdf_doc="""Logistic log CDF, summed: log inv_logit((y - mu)/sigma).""",
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


def _gumbel_tail(z, upper, need):
    # log F = -exp(-z), d/dz = exp(-z);  log(1 - F) = log1m_exp(-exp(-z)),
    # d/dz = -exp(-z - exp(-z) - log(1 - F)) (finite where exp(-z) overflows)
    u = sm.exp(-z)
    if upper:
        ls = sm.log1m_exp(-u)
        return sm.sum(ls), -sm.exp(-z - u - ls) if any(need) else None
    return -sm.sum(u), u


gumbel_lpdf, gumbel_lcdf, gumbel_lccdf, gumbel_rng = family(
    "gumbel", (("y", NOT_NAN), ("mu", FINITE), ("beta", POSITIVE)), lpdf=_gumbel,
    lcdf=_ls_tail(_gumbel_tail, False), lccdf=_ls_tail(_gumbel_tail, True), as_float=True,
    rng="gumbel",
    doc="""Gumbel log density, summed over the broadcast elements.

    log Gumbel(y | mu, beta) = -log(beta) - z - exp(-z),  z = (y - mu)/beta;
    y real, mu real, beta > 0 (scale).

    >>> import stanlite as sl
    >>> round(sl.gumbel_lpdf(1.0, 0.0, 2.0), 6)
    -1.799678
    """, lcdf_doc="""Gumbel log CDF, summed: log F = -exp(-(y - mu)/beta).""",
    lccdf_doc="""Gumbel log complementary CDF, summed:
    log(1 - exp(-exp(-(y - mu)/beta))).""", rng_doc="""Draws from Gumbel(mu, beta).""")


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
    "uniform", (("y", NOT_NAN), ("alpha", FINITE), ("beta", FINITE)), lpdf=_uniform,
    lcdf=_uniform_cdf_kernel(False), lccdf=_uniform_cdf_kernel(True),
    relations=(_beta_above_alpha_y,), rng_relations=(_beta_above_alpha,), as_float=True,
    rng="uniform",
    doc="""Uniform log density, summed over the broadcast elements.

    log Uniform(y | alpha, beta) = -log(beta - alpha) for y in [alpha, beta], and -inf
    if any y lies outside its interval (Stan: a zero density, not an error).
    alpha real, beta > alpha.

    >>> import stanlite as sl
    >>> round(sl.uniform_lpdf(0.5, 0.0, 4.0), 6)
    -1.386294
    """, lcdf_doc="""Uniform log CDF, summed: log((y - alpha)/(beta - alpha)) on
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
    return t_logpdf(_std(y, mu, sigma), nu) - sm.log(sigma)


@pointwise(student_t_lcdf)
def _student_t_lcdf_terms(y, nu, mu, sigma):
    return student_t_log_cdf(_std(y, mu, sigma), nu)


@pointwise(student_t_lccdf)
def _student_t_lccdf_terms(y, nu, mu, sigma):
    return student_t_log_cdf(-_std(y, mu, sigma), nu)


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
