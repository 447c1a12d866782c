"""Eight schools, non-centred parameterisation."""

import numpy as np

import stanlite as sl

__all__ = ["EightSchoolsNoncentered"]

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


class EightSchoolsNoncentered(sl.Model):
    r"""The eight schools hierarchical model, non-centred parameterisation.

    .. math::

        \tilde\theta_j &\sim \mathrm{N}(0, 1), \qquad
        \mu \sim \mathrm{N}(0, 5), \qquad \tau \sim \mathrm{Cauchy}^+(0, 5), \\
        \theta_j &= \mu + \tau \tilde\theta_j, \qquad
        y_j \sim \mathrm{N}(\theta_j, \sigma_j), \quad j = 1..J.

    Parameters (in this order): ``theta_trans`` (J; the :math:`\tilde\theta` above),
    ``mu``, ``tau > 0``; ``theta`` is a transformed parameter, as posteriordb's
    reference draws store it (they hold ``theta``, ``mu``, ``tau``).

    Source: posteriordb ``eight_schools-eight_schools_noncentered`` (BSD-3; Rubin
    1981); default data: the eight schools of Rubin (1981).
    Generated quantities: ``y_rep`` and ``log_lik``.
    """

    J = sl.data.int(lower=0)
    y = sl.data.vector("J")
    sigma = sl.data.vector("J", lower=0)

    theta_trans = sl.param.vector("J")
    mu = sl.param.real()
    tau = sl.param.real(lower=0)

    observed = ("y",)                  # y_rep is its replicate (the _rep naming rule)

    def transformed_parameters(self, theta_trans, mu, tau):
        return {"theta": theta_trans * tau + mu}

    def log_prob(self, theta_trans, mu, tau, theta):
        lp = sl.normal_lpdf(theta_trans, 0, 1)
        lp = lp + sl.normal_lpdf(self.y, theta, self.sigma)
        lp = lp + sl.normal_lpdf(mu, 0, 5)
        return lp + sl.cauchy_lpdf(tau, 0, 5)

    def log_likelihood(self, theta):
        """Pointwise log-likelihood (ArviZ's log_likelihood group, arviz.loo); the
        prior of sample_prior_predictive is log_prob minus its sum."""
        return sl.normal_lpdf(self.y, theta, self.sigma, reduce=False)

    def generated_quantities(self, rng, theta):
        z = (self.y - theta) / self.sigma
        return {"y_rep": rng.normal(theta, self.sigma),
                "log_lik": -0.5 * z * z - np.log(self.sigma) - _LOG_SQRT_2PI}
