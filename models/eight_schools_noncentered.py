"""Eight schools, non-centred parameterisation."""

import stanlite as sl

from ._eight_schools import EightSchoolsData

__all__ = ["EightSchoolsNoncentered"]


class EightSchoolsNoncentered(EightSchoolsData, sl.Model):
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

    theta_trans = sl.param.vector("J")
    mu = sl.param.real()
    tau = sl.param.real(lower=0)

    def transformed_parameters(self, theta_trans, mu, tau):
        return {"theta": theta_trans * tau + mu}

    def log_prob(self, theta_trans, mu, tau, theta):
        lp = sl.normal_lpdf(theta_trans, 0, 1)
        lp = lp + sl.normal_lpdf(self.y, theta, self.sigma)
        lp = lp + sl.normal_lpdf(mu, 0, 5)
        return lp + sl.cauchy_lpdf(tau, 0, 5)
