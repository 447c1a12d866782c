r"""Residual error models of population PK: the log density of the observations ``y``
around the model's predictions ``f`` (concentrations), NONMEM's ``$ERROR`` blocks as
densities.

=====================================  ===============================================
:func:`additive_error_lpdf`            ``y ~ N(f, a)``: constant sd
:func:`proportional_error_lpdf`        ``y ~ N(f, b f)``: constant coefficient of
                                       variation (``f > 0``)
:func:`combined_error_lpdf`            ``y ~ N(f, sqrt(a^2 + (b f)^2))``: additive near
                                       the limit of quantification, proportional above
:func:`exponential_error_lpdf`         ``log y ~ N(log f, sigma)``: log-normal, NONMEM's
                                       exponential ``Y = F exp(EPS)`` (``y, f > 0``)
=====================================  ===============================================

Each is a thin, named layer over :func:`stanlite.normal_lpdf` /
:func:`stanlite.lognormal_lpdf`, so they are differentiable to any order, summed by
default and elementwise with ``reduce=False`` (pointwise log-likelihoods for LOO;
mixtures). The exponential model is a density *of y* (it includes the Jacobian
``-log y``), so its values compare with the other three (LOO, information
criteria); as a function of the parameters it is ``normal_lpdf(log y, log f,
sigma)`` plus a constant. The matching ``*_rng`` functions simulate observations
(posterior predictive checks, :func:`~stanlite.pk.vpc`).

Why named helpers for one-liners: the one-liners are where models go wrong - a
proportional sd of ``b * f`` with ``f = 0`` at a pre-dose sample is a zero sd, an
error about ``sigma`` far from its cause; here the check names the prediction.

>>> import numpy as np, stanlite as sl
>>> y, f = np.array([1.1, 4.0]), np.array([1.0, 5.0])
>>> sl.pk.combined_error_lpdf(y, f, 0.1, 0.2, reduce=False).round(4)
array([ 0.4789, -1.419 ])
>>> bool(np.isclose(sl.pk.combined_error_lpdf(y, f, 0.1, 0.0),
...                 sl.pk.additive_error_lpdf(y, f, 0.1)))
True
"""

import numpy as np

from ..autodiff.var import Box, guarded
from ..distributions import lognormal_lpdf, normal_lpdf
from ..errors import DomainError
from ..math import log, sqrt

__all__ = ["additive_error_lpdf", "proportional_error_lpdf", "combined_error_lpdf",
           "exponential_error_lpdf", "additive_error_rng", "proportional_error_rng",
           "combined_error_rng", "exponential_error_rng"]


def _positive(who, name, x):
    """``x > 0`` everywhere (guarded: a retaped gradient re-checks it)."""
    def check(v):
        v = np.asarray(v, dtype=float)
        bad = np.flatnonzero(~(v > 0).ravel())
        if bad.size:
            i = int(bad[0])
            at = f"[{i}]" if v.ndim else ""
            raise DomainError(f"{who}: {name} must be > 0, got {name}{at} = "
                              f"{v.ravel()[i]:g}")
        return True
    if isinstance(x, Box):
        guarded(check, x)
    else:
        check(x)


def additive_error_lpdf(y, f, a, *, reduce=True):
    """``sum log N(y | f, a)``: additive (constant sd ``a``) residual error."""
    return normal_lpdf(y, f, a, reduce=reduce)


def proportional_error_lpdf(y, f, b, *, reduce=True):
    """``sum log N(y | f, b f)``: proportional residual error (coefficient of variation
    ``b``). The predictions must be positive: a zero prediction (a pre-dose sample)
    would have sd 0 - use :func:`combined_error_lpdf` there."""
    _positive("proportional_error_lpdf", "f", f)
    return normal_lpdf(y, f, b * f, reduce=reduce)


def _combined_sd(f, a, b):
    return sqrt(a * a + (b * f) * (b * f))


def combined_error_lpdf(y, f, a, b, *, reduce=True):
    """``sum log N(y | f, sqrt(a^2 + (b f)^2))``: combined additive (``a``) and
    proportional (``b``) residual error (NONMEM's ``Y = F + sqrt(a^2 + b^2 F^2) EPS``;
    Monolix's "combined2")."""
    return normal_lpdf(y, f, _combined_sd(f, a, b), reduce=reduce)


def exponential_error_lpdf(y, f, sigma, *, reduce=True):
    """``sum log LogNormal(y | log f, sigma)``: exponential (log-normal) residual error,
    ``log y = log f + eps``, a density of ``y`` (Jacobian ``-log y`` included). ``y``
    and ``f`` must be positive (censor or drop observations below the limit of
    quantification)."""
    _positive("exponential_error_lpdf", "f", f)
    _positive("exponential_error_lpdf", "y", y)
    return lognormal_lpdf(y, log(f), sigma, reduce=reduce)


# --------------------------------------------------------------------------------------
# simulation (plain numpy: generated quantities, VPCs)
# --------------------------------------------------------------------------------------
def _rng(rng):
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def additive_error_rng(f, a, rng=None):
    """Observations ``f + a eps`` (``eps`` standard normal), shaped like ``f``."""
    f = np.asarray(f, dtype=float)
    return f + np.asarray(a, float) * _rng(rng).standard_normal(f.shape)


def proportional_error_rng(f, b, rng=None):
    """Observations ``f (1 + b eps)``."""
    f = np.asarray(f, dtype=float)
    return f + np.asarray(b, float) * f * _rng(rng).standard_normal(f.shape)


def combined_error_rng(f, a, b, rng=None):
    """Observations ``f + sqrt(a^2 + (b f)^2) eps``."""
    f = np.asarray(f, dtype=float)
    sd = np.sqrt(np.asarray(a, float) ** 2 + (np.asarray(b, float) * f) ** 2)
    return f + sd * _rng(rng).standard_normal(f.shape)


def exponential_error_rng(f, sigma, rng=None):
    """Observations ``f exp(sigma eps)``."""
    f = np.asarray(f, dtype=float)
    return f * np.exp(np.asarray(sigma, float) * _rng(rng).standard_normal(f.shape))
