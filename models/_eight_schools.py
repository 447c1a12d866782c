"""What the two parameterisations of eight schools share: the data, the likelihood
and the generated quantities (each subclass declares its parameters and prior)."""

import numpy as np

import stanlite as sl

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


class EightSchoolsData:
    """The eight schools' data, ``y_j ~ N(theta_j, sigma_j)`` pointwise and replicated:
    a mixin before ``sl.Model`` (a Model subclass must have a log_prob), whose class
    gives ``theta`` (a parameter, or a transformed one) and ``log_prob``."""

    J = sl.data.int(lower=0)
    y = sl.data.vector("J")
    sigma = sl.data.vector("J", lower=0)

    observed = ("y",)                  # y_rep is its replicate (the _rep naming rule)

    def log_likelihood(self, theta):
        """Pointwise log-likelihood (ArviZ's log_likelihood group, arviz.loo); the
        prior of sample_prior_predictive is log_prob minus its sum."""
        return sl.normal_lpdf(self.y, theta, self.sigma, reduce=False)

    def generated_quantities(self, rng, theta):
        z = (self.y - theta) / self.sigma
        return {"y_rep": rng.normal(theta, self.sigma),
                "log_lik": -0.5 * z * z - np.log(self.sigma) - _LOG_SQRT_2PI}
