"""Radon: a varying-intercept (hierarchical) linear regression."""

import numpy as np

import stanlite as sl

__all__ = ["Radon"]

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


class Radon(sl.Model):
    r"""Varying-intercept regression of log radon on the floor of measurement, with
    county intercepts drawn from a common normal (centred parameterisation).

    .. math::

        \sigma_y \sim \mathrm{N}^+(0, 1), \quad \sigma_\alpha \sim \mathrm{N}^+(0, 1),
        \quad \mu_\alpha \sim \mathrm{N}(0, 10), \quad \beta \sim \mathrm{N}(0, 10), \\
        \alpha_j \sim \mathrm{N}(\mu_\alpha, \sigma_\alpha), \quad j = 1..J, \\
        \log\mathrm{radon}_n \sim \mathrm{N}(\alpha_{c[n]} + \beta\,
        \mathrm{floor}_n, \sigma_y), \quad n = 1..N.

    Parameters (in this order): ``alpha`` (J), ``beta``, ``mu_alpha``,
    ``sigma_alpha > 0``, ``sigma_y > 0``; ``county_idx`` is 1-based, as in Stan.

    Source: the structure and priors of posteriordb's
    ``radon_variable_intercept_centered`` (Gelman & Hill 2007, ch. 12). The Minnesota
    radon survey is not shipped: the default data are a *simulated* radon-like survey
    (``models/data/make_data.py``: J = 30 counties of 1 to 48 houses, N = 350,
    seed 20240502, mu_alpha = 1.5, sigma_alpha = 0.35, beta = -0.65, sigma_y = 0.75).
    Any data of the same layout (e.g. posteriordb's ``radon_mn``) can be passed.
    Generated quantities: ``y_rep`` and ``log_lik``.
    """

    J = sl.data.int(lower=0)
    N = sl.data.int(lower=0)
    county_idx = sl.data.array("N", dtype="int", lower=1, upper="J")
    floor_measure = sl.data.vector("N")
    log_radon = sl.data.vector("N")

    alpha = sl.param.vector("J")
    beta = sl.param.real()
    mu_alpha = sl.param.real()
    sigma_alpha = sl.param.real(lower=0)
    sigma_y = sl.param.real(lower=0)

    observed = ("log_radon",)
    predictive = {"log_radon": "y_rep"}

    def transformed_data(self):
        return {"county": self.county_idx - 1}        # 0-based county indices

    def log_prob(self, alpha, beta, mu_alpha, sigma_alpha, sigma_y):
        lp = sl.normal_lpdf(sigma_y, 0, 1) + sl.normal_lpdf(sigma_alpha, 0, 1)
        lp = lp + sl.normal_lpdf(mu_alpha, 0, 10) + sl.normal_lpdf(beta, 0, 10)
        lp = lp + sl.normal_lpdf(alpha, mu_alpha, sigma_alpha)
        mu = alpha[self.county] + self.floor_measure * beta
        return lp + sl.normal_lpdf(self.log_radon, mu, sigma_y)

    def log_likelihood(self, alpha, beta, sigma_y):
        """Pointwise log-likelihood (ArviZ's log_likelihood group, arviz.loo); the
        prior of sample_prior_predictive is log_prob minus its sum."""
        mu = alpha[self.county] + self.floor_measure * beta
        return sl.normal_lpdf(self.log_radon, mu, sigma_y, reduce=False)

    def generated_quantities(self, rng, alpha, beta, sigma_y):
        mu = alpha[self.county] + self.floor_measure * beta
        z = (self.log_radon - mu) / sigma_y
        return {"y_rep": rng.normal(mu, sigma_y),
                "log_lik": -0.5 * z * z - np.log(sigma_y) - _LOG_SQRT_2PI}
