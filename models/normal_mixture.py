"""Two-component normal mixture."""

import numpy as np

import stanlite as sl

__all__ = ["NormalMixture"]

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


class NormalMixture(sl.Model):
    r"""A two-component normal mixture with ordered means (label switching removed).

    .. math::

        \mu &\sim \mathrm{N}(0, 2) \ (\mu_1 < \mu_2), \qquad
        \sigma_k \sim \mathrm{N}^+(0, 2), \qquad \theta \sim \mathrm{Beta}(5, 5), \\
        p(y_n) &= \theta\,\mathrm{N}(y_n \mid \mu_1, \sigma_1)
               + (1 - \theta)\,\mathrm{N}(y_n \mid \mu_2, \sigma_2), \quad n = 1..N,

    each term ``log_mix(theta, normal_lpdf(y_n | mu_1, sigma_1),
    normal_lpdf(y_n | mu_2, sigma_2))``.

    Parameters (in this order): ``mu`` (ordered, 2), ``sigma`` (2, > 0),
    ``theta`` in (0, 1).

    Source: posteriordb ``low_dim_gauss_mix-low_dim_gauss_mix`` (BSD-3); default
    data: its N = 1000 simulated draws. Generated quantities: ``log_lik`` and
    ``y_rep``.
    """

    N = sl.data.int(lower=0)
    y = sl.data.vector("N")

    mu = sl.param.ordered(2)
    sigma = sl.param.vector(2, lower=0)
    theta = sl.param.real(lower=0, upper=1)

    def _components(self, mu, sigma, log=sl.log):
        """Per-observation log densities of the two components."""
        out = []
        for k in range(2):
            z = (self.y - mu[k]) / sigma[k]
            out.append(-0.5 * z * z - log(sigma[k]) - _LOG_SQRT_2PI)
        return out

    observed = ("y",)                  # y_rep is its replicate (the _rep naming rule)

    def log_prob(self, mu, sigma, theta):
        lp = sl.normal_lpdf(sigma, 0, 2) + sl.normal_lpdf(mu, 0, 2)
        lp = lp + sl.beta_lpdf(theta, 5, 5)
        lp1, lp2 = self._components(mu, sigma)
        return lp + sl.sum(sl.log_mix(theta, lp1, lp2))

    def log_likelihood(self, mu, sigma, theta):
        """Pointwise log-likelihood (ArviZ's log_likelihood group, arviz.loo); the
        prior of sample_prior_predictive is log_prob minus its sum."""
        lp1, lp2 = self._components(mu, sigma)
        return sl.log_mix(theta, lp1, lp2)

    def generated_quantities(self, rng, mu, sigma, theta):
        lp1, lp2 = self._components(mu, sigma, log=np.log)
        first = rng.random(self.N) < theta
        return {"log_lik": np.logaddexp(np.log(theta) + lp1, np.log1p(-theta) + lp2),
                "y_rep": np.where(first, rng.normal(mu[0], sigma[0], self.N),
                                  rng.normal(mu[1], sigma[1], self.N))}
