"""Gaussian-process Poisson regression (latent GP, non-centred)."""

import numpy as np
from scipy.special import gammaln

import stanlite as sl

__all__ = ["GpPoisRegr"]


class GpPoisRegr(sl.Model):
    r"""Poisson counts with a latent Gaussian process log-rate, non-centred.

    .. math::

        \rho &\sim \mathrm{Gamma}(25, 4), \quad \alpha \sim \mathrm{N}^+(0, 2), \quad
        \tilde f \sim \mathrm{N}(0, I_N), \\
        K_{ij} &= \alpha^2 \exp\!\big(-(x_i - x_j)^2 / (2\rho^2)\big)
                  + 10^{-10}\,\delta_{ij}, \qquad K = L L^\top, \qquad f = L \tilde f, \\
        k_n &\sim \mathrm{Poisson}(e^{f_n}), \quad n = 1..N,

    with ``gp_exp_quad_cov`` (formerly ``cov_exp_quad``) and ``cholesky_decompose``;
    Gamma in the shape-rate form.

    Parameters (in this order): ``rho > 0``, ``alpha > 0``, ``f_tilde`` (N);
    ``f`` is a transformed parameter.

    Source: posteriordb ``gp_pois_regr-gp_pois_regr`` (BSD-3; Stan GP case study);
    default data: its N = 11 counts (its field ``y`` is not used).
    Generated quantities: ``k_rep`` and ``log_lik``.
    """

    N = sl.data.int(lower=1)
    x = sl.data.vector("N")
    k = sl.data.array("N", dtype="int", lower=0)

    rho = sl.param.real(lower=0)
    alpha = sl.param.real(lower=0)
    f_tilde = sl.param.vector("N")

    def transformed_parameters(self, rho, alpha, f_tilde):
        cov = sl.add_diag(sl.gp_exp_quad_cov(self.x, alpha, rho), 1e-10)
        return {"f": sl.cholesky_decompose(cov) @ f_tilde}

    observed = ("k",)                  # k_rep is its replicate (the _rep naming rule)

    def log_prob(self, rho, alpha, f_tilde, f):
        lp = sl.gamma_lpdf(rho, 25, 4) + sl.normal_lpdf(alpha, 0, 2)
        lp = lp + sl.normal_lpdf(f_tilde, 0, 1)
        return lp + sl.poisson_log_lpmf(self.k, f)

    def log_likelihood(self, f):
        """Pointwise log-likelihood (ArviZ's log_likelihood group, arviz.loo); the
        prior of sample_prior_predictive is log_prob minus its sum."""
        return sl.poisson_log_lpmf(self.k, f, reduce=False)

    def generated_quantities(self, rng, f):
        return {"k_rep": rng.poisson(np.exp(f)),
                "log_lik": self.k * f - np.exp(f) - gammaln(self.k + 1.0)}
