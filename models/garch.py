"""GARCH(1,1) volatility model."""

import numpy as np

import stanlite as sl

__all__ = ["Garch"]


class Garch(sl.Model):
    r"""GARCH(1,1): returns with a conditional variance driven by the last shock and
    the last variance.

    .. math::

        y_t &\sim \mathrm{N}(\mu, \sigma_t), \qquad \sigma_1 \text{ given (data)}, \\
        \sigma_t^2 &= \alpha_0 + \alpha_1 (y_{t-1} - \mu)^2 + \beta_1 \sigma_{t-1}^2,
        \quad t = 2..T, \\
        \alpha_0 &> 0, \quad 0 < \alpha_1 < 1, \quad 0 < \beta_1 < 1 - \alpha_1
        \ \text{(covariance stationarity)},

    flat priors on the constrained parameters, as in the reference program. The bound
    of ``beta1`` depends on ``alpha1`` (``upper=lambda alpha1: 1 - alpha1``): the
    transform's log-Jacobian includes log(1 - alpha1).

    Parameters (in this order): ``mu``, ``alpha0``, ``alpha1``, ``beta1``.

    Source: posteriordb ``garch-garch11`` (BSD-3; Stan User's Guide, "Time-series
    models"). Default data are *simulated* (``models/data/make_data.py``: T = 200,
    seed 20240503, mu = 0.3, alpha0 = 0.1, alpha1 = 0.25, beta1 = 0.65,
    sigma1 = 1). Generated quantities: ``sigma`` (the volatility path), ``log_lik``
    and ``y_rep`` (each return replicated given the observed past).
    """

    T = sl.data.int(lower=1)
    y = sl.data.vector("T")
    sigma1 = sl.data.real(lower=0)

    mu = sl.param.real()
    alpha0 = sl.param.real(lower=0)
    alpha1 = sl.param.real(lower=0, upper=1)
    beta1 = sl.param.real(lower=0, upper=lambda alpha1: 1 - alpha1)

    def _sigma(self, mu, alpha0, alpha1, beta1, sqrt=sl.sqrt, stack=sl.stack):
        """The volatility path sigma_1..sigma_T (the recursion, one step per t)."""
        if self.T == 1:
            return np.full(1, self.sigma1)
        shock = self.y[:-1] - mu
        drive = alpha0 + alpha1 * (shock * shock)         # vector of length T-1
        s2 = self.sigma1 ** 2
        var = [s2]
        for t in range(self.T - 1):
            s2 = drive[t] + beta1 * s2
            var.append(s2)
        return sqrt(stack(var))

    observed = ("y",)                  # y_rep is its replicate (the _rep naming rule)

    def log_prob(self, mu, alpha0, alpha1, beta1):
        return sl.normal_lpdf(self.y, mu, self._sigma(mu, alpha0, alpha1, beta1))

    def log_likelihood(self, mu, alpha0, alpha1, beta1):
        """Pointwise log-likelihood (ArviZ's log_likelihood group, arviz.loo); the
        prior of sample_prior_predictive is log_prob minus its sum."""
        return sl.normal_lpdf(self.y, mu, self._sigma(mu, alpha0, alpha1, beta1),
                              reduce=False)

    def generated_quantities(self, rng, mu, alpha0, alpha1, beta1):
        sigma = self._sigma(mu, alpha0, alpha1, beta1, sqrt=np.sqrt, stack=np.stack)
        z = (self.y - mu) / sigma
        return {"sigma": sigma,
                "log_lik": -0.5 * z * z - np.log(sigma) - 0.5 * np.log(2 * np.pi),
                "y_rep": rng.normal(mu, sigma)}
