"""Linear regression of a child's test score on the mother's IQ (kidiq)."""

import numpy as np

import stanlite as sl

__all__ = ["LinearRegression"]

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


class LinearRegression(sl.Model):
    r"""Simple linear regression with a flat prior on the coefficients.

    .. math::

        \sigma \sim \mathrm{Cauchy}^+(0, 2.5), \qquad p(\beta) \propto 1, \\
        \mathrm{kid\_score}_n \sim \mathrm{N}(\beta_1 + \beta_2\,\mathrm{mom\_iq}_n,
        \sigma), \quad n = 1..N.

    Parameters: ``beta`` (2), ``sigma > 0``.

    Source: posteriordb ``kidiq-kidscore_momiq`` (BSD-3; Gelman & Hill 2007, ch. 3);
    default data: the kidiq survey (N = 434).
    Generated quantities: ``y_rep`` and ``log_lik``.
    """

    N = sl.data.int(lower=0)
    kid_score = sl.data.vector("N", lower=0, upper=200)
    mom_iq = sl.data.vector("N", lower=0, upper=200)

    beta = sl.param.vector(2)
    sigma = sl.param.real(lower=0)

    observed = ("kid_score",)
    predictive = {"kid_score": "y_rep"}

    def log_prob(self, beta, sigma):
        lp = sl.cauchy_lpdf(sigma, 0, 2.5)
        return lp + sl.normal_lpdf(self.kid_score, beta[0] + beta[1] * self.mom_iq, sigma)

    def log_likelihood(self, beta, sigma):
        """Pointwise log-likelihood (ArviZ's log_likelihood group, arviz.loo); the
        prior of sample_prior_predictive is log_prob minus its sum."""
        return sl.normal_lpdf(self.kid_score, beta[0] + beta[1] * self.mom_iq, sigma,
                              reduce=False)

    def generated_quantities(self, rng, beta, sigma):
        mu = beta[0] + beta[1] * self.mom_iq
        z = (self.kid_score - mu) / sigma
        return {"y_rep": rng.normal(mu, sigma),
                "log_lik": -0.5 * z * z - np.log(sigma) - _LOG_SQRT_2PI}
