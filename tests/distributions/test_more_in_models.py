"""The issue-21 distributions inside models: the recorded (retaped) gradient equals
the eager one and central differences at several points (so value branches such as
ordered_probit's choice of tail are re-decided at every replay), the interpreter
falls back to the Python replay and says which density it lacks, and the pointwise
forms give a per-observation log-likelihood in generated quantities."""

import numpy as np

import stanlite as sl

from testkit import check_model_gradient


class _Ordinal(sl.Model):
    N = sl.data.int(lower=1)
    K = sl.data.int(lower=1)
    x = sl.data.matrix("N", "K")
    k = sl.data.vector("N")
    t = sl.data.vector("N")
    counts = sl.data.vector("N")
    beta = sl.param.vector("K")
    c = sl.param.ordered(2)
    sigma = sl.param.real(lower=0)
    phi = sl.param.real(lower=0)

    def log_prob(self, beta, c, sigma, phi):
        k = self.k.astype(int)
        y = self.counts.astype(int)
        return (sl.normal_lpdf(beta, 0.0, 2.0) + sl.normal_lpdf(c, 0.0, 3.0)
                + sl.lognormal_lpdf(phi, 0.0, 1.0)
                + sl.ordered_probit_lpmf(k, self.x @ beta, c)
                + sl.rayleigh_lpdf(self.t, sigma) + sl.loglogistic_lccdf(self.t, sigma, 2.0)
                + sl.neg_binomial_2_log_glm_lpmf(y, self.x, 0.2, beta, phi))

    def generated_quantities(self, rng, beta, c, sigma, phi):
        return {"log_lik": sl.ordered_probit_lpmf(self.k.astype(int), self.x @ beta, c,
                                                  reduce=False)
                + sl.rayleigh_lpdf(self.t, sigma, reduce=False)}


def _model():
    rng = np.random.default_rng(3)
    N, K = 30, 2
    x = rng.normal(size=(N, K))
    k = rng.integers(1, 4, N).astype(float)
    return _Ordinal(N=N, K=K, x=x, k=k, t=rng.rayleigh(1.5, N),
                    counts=rng.poisson(2.0, N).astype(float))


def test_recorded_gradient_and_fallback():
    m = _model()
    rng = np.random.default_rng(4)
    for scale in (0.3, 3.0, 0.3):          # far predictors flip ordered_probit's tails
        x = rng.normal(size=m.dim) * scale
        check_model_gradient(m, x, rtol=1e-6, atol=1e-6)
    r = m.compiled_gradient()
    assert not r.compiled and "ordered_probit_lpmf" in r.vm_skipped


def test_pointwise_log_likelihood_in_generated_quantities():
    m = _model()
    fit = m.sample(chains=1, draws=20, warmup=30, seed=5)
    ll = np.asarray(fit["log_lik"])
    assert ll.shape[-1] == 30 and np.all(np.isfinite(ll))


class _Pointwise(sl.Model):
    """log_prob from the pointwise forms: a two-component mixture per observation and
    a weighted per-row GLM likelihood."""
    N = sl.data.int(lower=1)
    t = sl.data.vector("N")
    x = sl.data.matrix("N", 2)
    y = sl.data.vector("N")
    s = sl.param.vector(2, lower=0)
    alpha = sl.param.vector(3)
    beta = sl.param.matrix(2, 3)
    phi = sl.param.real(lower=0)

    def log_prob(self, s, alpha, beta, phi):
        terms = sl.stack([np.log(0.3) + sl.rayleigh_lpdf(self.t, s[0], reduce=False),
                          np.log(0.7) + sl.loglogistic_lpdf(self.t, s[1], 2.0,
                                                            reduce=False)])
        w = np.linspace(0.5, 1.5, self.N)
        y = self.y.astype(int)
        return (sl.normal_lpdf(alpha, 0.0, 1.0) + sl.normal_lpdf(beta, 0.0, 1.0)
                + sl.lognormal_lpdf(phi, 0.0, 1.0)
                + sl.sum(sl.log_sum_exp(terms, axis=0))
                + sl.sum(w * sl.categorical_logit_glm_lpmf(y, self.x, alpha, beta,
                                                           reduce=False))
                + sl.sum(w * sl.beta_neg_binomial_lpmf(y, phi, 3.0, 1.5, reduce=False)))


def test_pointwise_forms_in_log_prob_replayed():
    rng = np.random.default_rng(6)
    N = 12
    m = _Pointwise(N=N, t=rng.rayleigh(1.2, N), x=rng.normal(size=(N, 2)),
                   y=rng.integers(1, 4, N).astype(float))
    for scale in (0.5, 2.0, 0.5):
        x = rng.normal(size=m.dim) * scale
        lp, g = m.log_density_gradient(x)
        eager = m._gradient(x, True)
        np.testing.assert_allclose(lp, eager[0], rtol=1e-12)
        np.testing.assert_allclose(g, eager[1], rtol=1e-10, atol=1e-12)
        h = 1e-6
        fd = [(m.log_density(x + h * e) - m.log_density(x - h * e)) / (2 * h)
              for e in np.eye(m.dim)]
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)
