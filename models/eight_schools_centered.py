"""Eight schools, centred parameterisation."""

import stanlite as sl

from ._eight_schools import EightSchoolsData

__all__ = ["EightSchoolsCentered"]


class EightSchoolsCentered(EightSchoolsData, sl.Model):
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

    theta = sl.param.vector("J")
    mu = sl.param.real()
    tau = sl.param.real(lower=0)

    def log_prob(self, theta, mu, tau):
        lp = sl.cauchy_lpdf(tau, 0, 5)
        lp = lp + sl.normal_lpdf(theta, mu, tau)
        lp = lp + sl.normal_lpdf(self.y, theta, self.sigma)
        return lp + sl.normal_lpdf(mu, 0, 5)
