"""Eight schools, centred parameterisation."""

import numpy as np

import stanlite as sl

__all__ = ["EightSchoolsCentered"]

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


class EightSchoolsCentered(sl.Model):
    r"""The eight schools hierarchical model, centred parameterisation.

    .. math::

        \mu &\sim \mathrm{N}(0, 5), \qquad \tau \sim \mathrm{Cauchy}^+(0, 5), \\
        \theta_j &\sim \mathrm{N}(\mu, \tau), \qquad
        y_j \sim \mathrm{N}(\theta_j, \sigma_j), \quad j = 1..J.

    Parameters (in this order): ``theta`` (J), ``mu``, ``tau > 0``. The posterior has
    a funnel between ``tau`` and ``theta``: plain NUTS should report divergences.

    Source: posteriordb ``eight_schools-eight_schools_centered`` (BSD-3; Rubin 1981,
    Gelman et al. BDA3 §5.5); default data: the eight schools of Rubin (1981).
    Generated quantities: ``y_rep`` (posterior predictive) and ``log_lik``.
    """

    J = sl.data.int(lower=0)
    y = sl.data.vector("J")
    sigma = sl.data.vector("J", lower=0)

    theta = sl.param.vector("J")
    mu = sl.param.real()
    tau = sl.param.real(lower=0)

    observed = ("y",)                  # y_rep is its replicate (the _rep naming rule)

    def log_prob(self, theta, mu, tau):
        lp = sl.cauchy_lpdf(tau, 0, 5)
        lp = lp + sl.normal_lpdf(theta, mu, tau)
        lp = lp + sl.normal_lpdf(self.y, theta, self.sigma)
        return lp + sl.normal_lpdf(mu, 0, 5)

    def log_likelihood(self, theta):
        """Pointwise log-likelihood (ArviZ's log_likelihood group, arviz.loo); the
        prior of sample_prior_predictive is log_prob minus its sum."""
        return sl.normal_lpdf(self.y, theta, self.sigma, reduce=False)

    def generated_quantities(self, rng, theta):
        z = (self.y - theta) / self.sigma
        return {"y_rep": rng.normal(theta, self.sigma),
                "log_lik": -0.5 * z * z - np.log(self.sigma) - _LOG_SQRT_2PI}
