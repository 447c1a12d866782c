"""Bayesian logistic regression (fused GLM likelihood)."""

import numpy as np

import stanlite as sl

__all__ = ["LogisticRegression", "LogisticRegressionDensity"]


class LogisticRegressionDensity(sl.Model):
    """:class:`LogisticRegression`'s data, parameters and log density alone: no
    observed field, pointwise log-likelihood or generated quantities (the model the
    sampler benchmarks time, benchmarks/nuts.py and advi.py)."""

    N = sl.data.int(lower=0)
    K = sl.data.int(lower=0)
    X = sl.data.matrix("N", "K")
    y = sl.data.array("N", dtype="int", lower=0, upper=1)

    alpha = sl.param.real()
    beta = sl.param.vector("K")

    def log_prob(self, alpha, beta):
        lp = sl.normal_lpdf(alpha, 0, 2.5) + sl.normal_lpdf(beta, 0, 2.5)
        return lp + sl.bernoulli_logit_glm_lpmf(self.y, self.X, alpha, beta)


class LogisticRegression(LogisticRegressionDensity):
    r"""Logistic regression with weakly informative normal priors.

    .. math::

        \alpha \sim \mathrm{N}(0, 2.5), \qquad \beta_k \sim \mathrm{N}(0, 2.5), \\
        y_n \sim \mathrm{Bernoulli}\big(\mathrm{logit}^{-1}(\alpha + x_n^\top\beta)\big),
        \quad n = 1..N,

    the likelihood as one fused node, ``bernoulli_logit_glm_lpmf(y | X, alpha, beta)``.

    Parameters: ``alpha``, ``beta`` (K).

    Source: the textbook model (e.g. Stan User's Guide, "Logistic and probit
    regression"); posteriordb's ``sblrc-blr`` is a *linear* regression, so the default
    data are simulated (``models/data/make_data.py``: N = 200, K = 3, seed 20240501,
    alpha = -0.5, beta = (1, -0.75, 0.4)).
    Generated quantities: ``y_rep`` and ``log_lik``.
    """

    observed = ("y",)                  # y_rep is its replicate (the _rep naming rule)

    def log_likelihood(self, alpha, beta):
        """Pointwise log-likelihood (ArviZ's log_likelihood group, arviz.loo); the
        prior of sample_prior_predictive is log_prob minus its sum."""
        return sl.bernoulli_logit_glm_lpmf(self.y, self.X, alpha, beta, reduce=False)

    def generated_quantities(self, rng, alpha, beta):
        eta = alpha + self.X @ beta
        # log p(y | eta) = y eta - log(1 + e^eta), stably
        log_lik = self.y * eta - np.logaddexp(0.0, eta)
        return {"y_rep": (rng.random(self.N) < 1.0 / (1.0 + np.exp(-eta))).astype(np.int64),
                "log_lik": log_lik}
