"""Autoregressive model of order K."""

import numpy as np

import stanlite as sl

__all__ = ["ArK"]


class ArK(sl.Model):
    r"""AR(K): each observation regressed on the K before it.

    .. math::

        \alpha \sim \mathrm{N}(0, 10), \quad \beta_k \sim \mathrm{N}(0, 10), \quad
        \sigma \sim \mathrm{Cauchy}^+(0, 2.5), \\
        y_t \sim \mathrm{N}\Big(\alpha + \sum_{k=1}^K \beta_k\, y_{t-k},\ \sigma\Big),
        \quad t = K+1..T.

    Parameters (in this order): ``alpha``, ``beta`` (K), ``sigma > 0``.

    Source: posteriordb ``arK-arK`` (BSD-3; Stan example models); default data: its
    simulated series (K = 5, T = 200). Generated quantities: ``y_rep`` (one-step-ahead
    predictions for t = K+1..T), ``y_rep_full`` (the whole series: the K observed
    values conditioned on, then ``y_rep``; the replicate of ``y`` for ArviZ) and
    ``log_lik``.
    """

    K = sl.data.int(lower=0)
    T = sl.data.int(lower=0)
    y = sl.data.vector("T")

    alpha = sl.param.real()
    beta = sl.param.vector("K")
    sigma = sl.param.real(lower=0)

    observed = ("y",)
    predictive = {"y": "y_rep_full"}

    def transformed_data(self):
        K, T = self.K, self.T
        # lags[t - K, k - 1] = y[t - k] (0-based t = K..T-1); target: y[K:]
        lags = np.stack([self.y[K - k:T - k] for k in range(1, K + 1)], axis=1) \
            if K > 0 else np.zeros((max(T - K, 0), 0))
        return {"lags": lags, "target": self.y[K:]}

    def _mean(self, alpha, beta):
        return alpha + self.lags @ beta if self.K > 0 else alpha + 0.0 * self.target

    def log_prob(self, alpha, beta, sigma):
        lp = sl.normal_lpdf(alpha, 0, 10) + sl.normal_lpdf(beta, 0, 10)
        lp = lp + sl.cauchy_lpdf(sigma, 0, 2.5)
        return lp + sl.normal_lpdf(self.target, self._mean(alpha, beta), sigma)

    def log_likelihood(self, alpha, beta, sigma):
        """Pointwise log-likelihood (ArviZ's log_likelihood group, arviz.loo); the
        prior of sample_prior_predictive is log_prob minus its sum."""
        return sl.normal_lpdf(self.target, self._mean(alpha, beta), sigma, reduce=False)

    def generated_quantities(self, rng, alpha, beta, sigma):
        mu = self._mean(alpha, beta)
        z = (self.target - mu) / sigma
        y_rep = rng.normal(mu, sigma)
        return {"y_rep": y_rep, "y_rep_full": np.concatenate([self.y[:self.K], y_rep]),
                "log_lik": -0.5 * z * z - np.log(sigma) - 0.5 * np.log(2 * np.pi)}
