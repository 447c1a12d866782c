"""Two Stan-style loop models, each written twice in stanlite: with scalar Python loops,
as a Stan user writes them, and vectorised; shared by ``benchmarks/loops.py`` (the
gradient of each form at distinct points), ``benchmarks/nuts.py`` (ESS/s of the loop
form against the peers' natural vectorised forms) and ``tests/test_loop_models.py``
(the two forms agree in value and gradient).

hmm        an HMM forward algorithm (Stan user's guide, "Hidden Markov models"):
           T = 200 observations, K = 3 hidden states with a uniform initial
           distribution, normal emissions y[t] ~ N(mu[z[t]], sigma) with ordered
           means mu ~ N(0, 5) and sigma ~ N+(0, 2), each row of the transition matrix
           a simplex (flat Dirichlet). Data: simulated (``loop_data.py``) from
           mu = (-3, 0, 3), sigma = 1, staying in a state with probability 0.9.
             loop form:        for t, for k, for j: acc[j] = gamma[j] + log(theta[j][k])
                               + normal_lpdf(y[t] | mu[k], sigma); gamma'[k] =
                               log_sum_exp(acc) over K scalars (1791 of them)
             vectorised form:  the same recursion over t, each step a K x K
                               log_sum_exp over axis 0 and K emission densities
                               computed for all t at once

coal       the coal-mining change point (Stan user's guide, "Change point models"):
           disasters D[t], t = 1..T (T = 112), e ~ exponential(r_e),
           l ~ exponential(r_l), lp[s] = log(1/T) + sum_t poisson(D[t] | t < s ? e : l),
           target += log_sum_exp(lp), the change point s marginalised out.
           Data: the British coal-mining disaster counts are not in this repository or
           ../shared/data, so they are *simulated* (``loop_data.py``): 40 draws of
           Poisson(3) then 72 of Poisson(1), numpy seed 3; r_e = r_l = 1 / mean(D).
             loop form:        for s, for t: lp[s] += poisson_lpmf(D[t] | ...)
                               (T^2 = 12,544 scalar calls), as in the guide
             vectorised form:  the guide's dynamic-programming form with cumulative
                               sums of the elementwise Poisson log pmf at e and at l

The transition rows of the HMM are three separate ``simplex(3)`` parameters (stanlite
has no array-of-simplexes declaration), so K is fixed at 3.
"""

import math

import numpy as np

import stanlite as sl
from loop_data import HMM_K, coal_data, hmm_data

__all__ = ["HMM_K", "hmm_data", "coal_data", "HmmLoop", "HmmVectorised", "CoalLoop",
           "CoalVectorised", "LOOP_MODELS"]

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


# ------------------------------------------------------------------------------------
# HMM
# ------------------------------------------------------------------------------------
class _HmmBase:
    """The HMM's data, parameters and priors (a mixin: sl.Model reads the declarations
    from every class of the MRO)."""

    T = sl.data.int(lower=1)
    y = sl.data.vector("T")

    mu = sl.param.ordered(HMM_K)
    sigma = sl.param.real(lower=0)
    theta1 = sl.param.simplex(HMM_K)     # row k of the transition matrix: from state k
    theta2 = sl.param.simplex(HMM_K)
    theta3 = sl.param.simplex(HMM_K)

    def _priors(self, mu, sigma):
        return sl.normal_lpdf(mu, 0, 5) + sl.normal_lpdf(sigma, 0, 2)


class HmmLoop(_HmmBase, sl.Model):
    """The HMM forward algorithm with scalar loops over t, k and j (the loop form)."""

    def log_prob(self, mu, sigma, theta1, theta2, theta3):
        K, y = HMM_K, self.y
        theta = (theta1, theta2, theta3)
        log_theta = [[sl.log(theta[j][k]) for k in range(K)] for j in range(K)]
        gamma = [math.log(1.0 / K) + sl.normal_lpdf(y[0], mu[k], sigma) for k in range(K)]
        for t in range(1, self.T):
            new = []
            for k in range(K):
                emit = sl.normal_lpdf(y[t], mu[k], sigma)
                acc = [gamma[j] + log_theta[j][k] + emit for j in range(K)]
                new.append(sl.log_sum_exp(acc))
            gamma = new
        return self._priors(mu, sigma) + sl.log_sum_exp(gamma)


class HmmVectorised(_HmmBase, sl.Model):
    """The same forward algorithm, vectorised over the states (one step per t)."""

    def log_prob(self, mu, sigma, theta1, theta2, theta3):
        K = HMM_K
        log_theta = sl.log(sl.stack([theta1, theta2, theta3]))     # [from, to]
        z = (self.y[:, None] - mu[None, :]) / sigma                  # T x K
        emit = -0.5 * z * z - sl.log(sigma) - _HALF_LOG_2PI
        gamma = math.log(1.0 / K) + emit[0]
        for t in range(1, self.T):
            gamma = sl.log_sum_exp(gamma[:, None] + log_theta, axis=0) + emit[t]
        return self._priors(mu, sigma) + sl.log_sum_exp(gamma)


# ------------------------------------------------------------------------------------
# coal-mining change point
# ------------------------------------------------------------------------------------
class _CoalBase:
    """The change point's data, parameters and priors (a mixin, as _HmmBase)."""

    T = sl.data.int(lower=1)
    D = sl.data.array("T", dtype="int", lower=0)
    r_e = sl.data.real(lower=0)
    r_l = sl.data.real(lower=0)

    e = sl.param.real(lower=0)
    l = sl.param.real(lower=0)   # noqa: E741 - the guide's name

    def _priors(self, e, l):    # noqa: E741
        return sl.exponential_lpdf(e, self.r_e) + sl.exponential_lpdf(l, self.r_l)


class CoalLoop(_CoalBase, sl.Model):
    """The change point marginalised with T^2 scalar ``poisson_lpmf`` calls (the guide's
    first form)."""

    def log_prob(self, e, l):   # noqa: E741
        T, D = self.T, self.D
        log_unif = -math.log(T)
        lp = []
        for s in range(1, T + 1):
            acc = log_unif
            for t in range(1, T + 1):
                acc = acc + sl.poisson_lpmf(D[t - 1], e if t < s else l)
            lp.append(acc)
        return self._priors(e, l) + sl.log_sum_exp(lp)


class CoalVectorised(_CoalBase, sl.Model):
    """The guide's dynamic-programming form: cumulative sums of the Poisson log pmf."""

    def __init__(self, **data):
        super().__init__(**data)
        self._D = np.asarray(self.D, dtype=float)
        self._lgamma = np.array([math.lgamma(d + 1.0) for d in self._D])

    def log_prob(self, e, l):   # noqa: E741
        pe = self._D * sl.log(e) - e - self._lgamma      # poisson_lpmf(D[t] | e), all t
        pl = self._D * sl.log(l) - l - self._lgamma
        ce, cl = sl.cumulative_sum(pe), sl.cumulative_sum(pl)
        # (0-based s) sum_{t < s} pe[t] + sum_{t >= s} pl[t]
        lp = (ce - pe) + (cl[-1] - cl + pl) - math.log(self.T)
        return self._priors(e, l) + sl.log_sum_exp(lp)


#: name -> (loop class, vectorised class, data function)
LOOP_MODELS = {"hmm": (HmmLoop, HmmVectorised, hmm_data),
               "coal": (CoalLoop, CoalVectorised, coal_data)}
