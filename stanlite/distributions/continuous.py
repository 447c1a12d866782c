"""Continuous distributions on the real line: log densities, CDFs and RNGs.

Every ``<name>_lpdf(y, *params)`` is one fused node (see :mod:`.fused`): the value is
the sum over the broadcast elements, the partial derivatives w.r.t. every argument
come from the same kernel. ``_lcdf``/``_lccdf`` are fused the same way (censoring);
``_rng(*params, rng=None)`` draws with numpy (generated quantities, plain floats).
"""

import numpy as np
import scipy.special as sps

from .. import math as sm
from ..math import log_Phi
from .fused import broadcast_size, check_not_nan, check_positive, check_finite, fused
from .rng import as_generator, draw

__all__ = ["normal_lpdf", "normal_lcdf", "normal_lccdf", "normal_rng",
           "std_normal_lpdf", "std_normal_lcdf", "std_normal_lccdf", "std_normal_rng"]

HALF_LOG_TWO_PI = 0.5 * np.log(2.0 * np.pi)


def _reps(n, x):
    """How many times each element of ``x`` is repeated in an n-element broadcast."""
    return n // max(1, int(np.prod(np.shape(x) if not hasattr(x, "shape") else x.shape,
                                   dtype=np.int64)))


# --------------------------------------------------------------------------------------
# normal
# --------------------------------------------------------------------------------------
def _normal(need, y, mu, sigma):
    """log N(y | mu, sigma) = -z^2/2 - log sigma - log(2 pi)/2,  z = (y - mu)/sigma.

    d/dmu = z/sigma = -d/dy;  d/dsigma = (z^2 - 1)/sigma.
    """
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


def _check_normal(fn):
    def check(y, mu, sigma):
        check_not_nan(fn, "y", y)
        check_finite(fn, "mu", mu)
        check_positive(fn, "sigma", sigma)
    return check


normal_lpdf = fused("normal_lpdf", _normal, _check_normal("normal_lpdf"))
normal_lpdf.__doc__ = """Normal log density, summed: sum_i log N(y_i | mu_i, sigma_i).

    log N(y | mu, sigma) = -((y - mu)/sigma)^2 / 2 - log(sigma) - log(2 pi)/2

    >>> import stanlite as sl
    >>> round(sl.normal_lpdf(1.0, 0.0, 1.0), 6)
    -1.418939
    """


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


normal_lcdf = fused("normal_lcdf", _normal_lcdf, _check_normal("normal_lcdf"))
normal_lccdf = fused("normal_lccdf", _normal_lccdf, _check_normal("normal_lccdf"))


def normal_rng(mu, sigma, rng=None):
    """Draws from N(mu, sigma), shaped like the broadcast of the arguments."""
    check_positive("normal_rng", "sigma", sigma)
    return draw(as_generator(rng).normal, mu, sigma)


# std_normal: the same kernels with mu = 0, sigma = 1 (one-argument fused nodes)
def _std_normal(need, y):
    n = broadcast_size(y)
    lp = -0.5 * sm.sum(y * y) - n * HALF_LOG_TWO_PI
    return lp, [-y if need[0] else None]


def _std_normal_lcdf(need, y):
    return sm.sum(log_Phi(y)), [_mills_lower(y) if need[0] else None]


def _std_normal_lccdf(need, y):
    return sm.sum(log_Phi(-y)), [-_mills_lower(-y) if need[0] else None]


def _check_y(fn):
    return lambda y: check_not_nan(fn, "y", y)


std_normal_lpdf = fused("std_normal_lpdf", _std_normal, _check_y("std_normal_lpdf"))
std_normal_lcdf = fused("std_normal_lcdf", _std_normal_lcdf, _check_y("std_normal_lcdf"))
std_normal_lccdf = fused("std_normal_lccdf", _std_normal_lccdf, _check_y("std_normal_lccdf"))


def std_normal_rng(size=None, rng=None):
    """Standard normal draws (``size`` as numpy's)."""
    return draw(as_generator(rng).standard_normal, size=size)
