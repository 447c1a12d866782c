"""A hidden Markov model whose transition matrix is ``array[K] simplex[K]``
(``sl.param.simplex("K", array="K")``): ``sl.hmm_marginal`` equals a hand-written
forward algorithm in value and gradient (through the array-of-simplexes transform),
and NUTS recovers simulated parameters."""

import numpy as np
import pytest

import stanlite as sl

TRUE = {"Gamma": np.array([[0.9, 0.1], [0.2, 0.8]]), "rho": np.array([0.5, 0.5]),
        "mu": np.array([-1.5, 1.5]), "sigma": 0.7}


def _simulate(N, seed=2024):
    rng = np.random.default_rng(seed)
    z = np.empty(N, dtype=int)
    z[0] = rng.choice(2, p=TRUE["rho"])
    for n in range(1, N):
        z[n] = rng.choice(2, p=TRUE["Gamma"][z[n - 1]])
    return rng.normal(TRUE["mu"][z], TRUE["sigma"])


class Hmm(sl.Model):
    K = sl.data.int(lower=1)
    N = sl.data.int(lower=1)
    y = sl.data.vector("N")
    Gamma = sl.param.simplex("K", array="K")        # array[K] simplex[K]: row k from state k
    rho = sl.param.simplex("K")
    mu = sl.param.ordered("K")
    sigma = sl.param.real(lower=0)

    def log_omega(self, mu, sigma):
        """K x N: log p(y_n | z_n = k)."""
        return sl.normal_lpdf(self.y, sl.reshape(mu, (self.K, 1)), sigma, reduce=False)

    def prior(self, Gamma, rho, mu, sigma):
        return (sl.normal_lpdf(mu, 0.0, 5.0) + sl.lognormal_lpdf(sigma, 0.0, 1.0)
                + sl.dirichlet_lpdf(Gamma, np.full(self.K, 2.0)))

    def log_prob(self, Gamma, rho, mu, sigma):
        return self.prior(Gamma, rho, mu, sigma) + sl.hmm_marginal(
            self.log_omega(mu, sigma), Gamma, rho)


class HmmByHand(Hmm):
    """The same model with the forward algorithm written out (Stan's loop form)."""

    def log_prob(self, Gamma, rho, mu, sigma):
        lo = self.log_omega(mu, sigma)
        log_gamma = sl.log(Gamma)
        alpha = sl.log(rho) + lo[:, 0]
        for n in range(1, self.N):
            # alpha_j <- log sum_i exp(alpha_i + log Gamma[i, j]) + log omega[j, n]
            alpha = sl.log_sum_exp(sl.reshape(alpha, (self.K, 1)) + log_gamma,
                                   axis=0) + lo[:, n]
        return self.prior(Gamma, rho, mu, sigma) + sl.log_sum_exp(alpha)


def test_hmm_marginal_equals_forward_algorithm_value_and_gradient():
    data = {"K": 3, "N": 25, "y": _simulate(25, seed=7)}
    fused, by_hand = Hmm(**data), HmmByHand(**data)
    assert fused.param_shapes()["Gamma"] == (3, 3)
    assert fused.param_names()[:4] == ["Gamma[1,1]", "Gamma[1,2]", "Gamma[1,3]",
                                       "Gamma[2,1]"]
    rng = np.random.default_rng(1)
    for _ in range(4):
        x = rng.normal(scale=0.8, size=fused.dim)
        lp, g = fused.log_density_gradient(x)
        lp_ref, g_ref = by_hand.log_density_gradient(x)
        assert lp == pytest.approx(lp_ref, rel=1e-11)
        np.testing.assert_allclose(g, g_ref, rtol=1e-9, atol=1e-10)
        # and the gradient against finite differences of the fused density
        h = 1e-6
        fd = [(fused.log_density(x + h * e) - fused.log_density(x - h * e)) / (2 * h)
              for e in np.eye(fused.dim)]
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)
    gam = fused.constrain(x)["Gamma"]
    np.testing.assert_allclose(gam.sum(axis=1), 1.0, rtol=1e-14)


def test_nuts_recovers_simulated_hmm():
    N = 80
    model = Hmm(K=2, N=N, y=_simulate(N))
    fit = model.sample(chains=2, draws=250, warmup=250, seed=31, progress=False,
                       init={"mu": [-1.0, 1.0], "sigma": 1.0})
    assert fit.sampler_stats["divergent__"].sum() == 0
    G = fit["Gamma"].reshape(-1, 2, 2)
    np.testing.assert_allclose(G.sum(-1), 1.0, rtol=1e-12)
    draws = {"Gamma[1,1]": G[:, 0, 0], "Gamma[2,2]": G[:, 1, 1],
             "mu[1]": fit["mu"][..., 0].ravel(), "mu[2]": fit["mu"][..., 1].ravel(),
             "sigma": fit["sigma"].ravel()}
    truth = {"Gamma[1,1]": 0.9, "Gamma[2,2]": 0.8, "mu[1]": -1.5, "mu[2]": 1.5,
             "sigma": 0.7}
    for name, d in draws.items():
        lo, hi = np.quantile(d, [0.005, 0.995])
        assert lo < truth[name] < hi, (name, lo, hi)
    s = fit.summary()
    assert s.loc[["Gamma[1,1]", "Gamma[2,2]", "mu[1]", "sigma"], "r_hat"].max() < 1.05
