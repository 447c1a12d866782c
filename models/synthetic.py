r"""Synthetic posteriors with known moments: the targets on which the samplers' tests
and benchmarks judge their adaptation and geometry.

Not in the zoo's registry (``names()``/``get``): they have no default data, their
sizes and scales are the caller's. One class each here, so that a test and a
benchmark sample the same model, and chain processes unpickle them by reference.

    >>> import numpy as np
    >>> from stanlite.models.synthetic import Banana, Scales
    >>> Banana(b=2.0, s=0.3).dim, Scales(D=3, sd=np.ones(3)).dim
    (2, 3)
"""

import numpy as np

import stanlite as sl

__all__ = ["Banana", "Scales", "CorrelatedGaussian", "PrecisionGaussian", "correlated_cov"]


class Banana(sl.Model):
    r"""A banana-shaped ridge:

    .. math::

        x_1 \sim \mathrm{N}(0, 1), \qquad
        x_2 \mid x_1 \sim \mathrm{N}(b (x_1^2 - 1), s),

    so E = (0, 0) and Var = (1, s^2 + 2 b^2); the potential's Hessian is indefinite
    away from the ridge (a target for Riemannian HMC's SoftAbs metric).
    """
    b = sl.data.real()
    s = sl.data.real(lower=0)
    x = sl.param.vector(2)

    def log_prob(self, x):
        return (sl.normal_lpdf(x[0], 0.0, 1.0)
                + sl.normal_lpdf(x[1], self.b * (x[0] ** 2 - 1.0), self.s))


class Scales(sl.Model):
    r"""Independent normals of very different scales, :math:`x_d \sim \mathrm{N}(0,
    \mathrm{sd}_d)` (what a diagonal metric's adaptation must learn)."""
    D = sl.data.int(lower=1)
    sd = sl.data.vector("D", lower=0)
    x = sl.param.vector("D")

    def log_prob(self, x):
        return sl.normal_lpdf(x, 0.0, self.sd)


class CorrelatedGaussian(sl.Model):
    r""":math:`x \sim \mathrm{N}(m, L L^\top)` through ``multi_normal_cholesky_lpdf``
    (with :func:`correlated_cov`: what a dense or low-rank metric must learn)."""
    D = sl.data.int(lower=1)
    m = sl.data.vector("D")
    L = sl.data.matrix("D", "D")
    x = sl.param.vector("D")

    def log_prob(self, x):
        return sl.multi_normal_cholesky_lpdf(x, self.m, self.L)


class PrecisionGaussian(sl.Model):
    r""":math:`x \sim \mathrm{N}(\mu, P^{-1})` written as the quadratic form
    :math:`-\tfrac12 (x - \mu)^\top P (x - \mu)`: a constant Hessian ``P``, so
    Riemannian HMC's SoftAbs metric is the exact precision wherever alpha does not
    lift it (the case where a trajectory floor should stay 0)."""
    D = sl.data.int(lower=1)
    mu = sl.data.vector("D")
    P = sl.data.matrix("D", "D")
    x = sl.param.vector("D")

    def log_prob(self, x):
        r = x - self.mu
        return -0.5 * sl.dot(r, self.P @ r)


def correlated_cov(D=8, lo=0.3, hi=3.0, rho=0.9):
    """The covariance S = diag(sd) R diag(sd), R_ij = rho^|i-j|, with ``D`` standard
    deviations log-spaced from ``lo`` to ``hi`` (D = 100 and the defaults: a condition
    number of about 1.3e4)."""
    sd = np.exp(np.linspace(np.log(lo), np.log(hi), D))
    idx = np.arange(D)
    return sd[:, None] * rho ** np.abs(idx[:, None] - idx[None, :]) * sd[None, :]
