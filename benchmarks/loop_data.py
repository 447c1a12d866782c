"""Data of the two Stan-style loop models (``loop_models.py``), fixed seeds; kept free
of stanlite so that the peers' benchmark processes (``nuts.py``) do not import it.

hmm    T observations of a 3-state HMM with normal emissions: means (-3, 0, 3),
       sigma 1, a state kept with probability 0.9 (else one of the other two), the
       first state uniform; numpy seed 20261126.
coal   a *simulated* stand-in for the British coal-mining disaster counts (no copy is
       in this repository or ../shared/data): 40 draws of Poisson(3) then 72 of
       Poisson(1), ``np.random.default_rng(3)``; the rates' exponential priors have
       r_e = r_l = 1 / mean(D).
"""

import numpy as np

__all__ = ["HMM_K", "hmm_data", "coal_data"]

HMM_K = 3


def hmm_data(T=200, seed=20261126):
    """``{"T", "y"}``: T observations of the 3-state HMM described above."""
    rng = np.random.default_rng(seed)
    K = HMM_K
    mu, sigma = np.array([-3.0, 0.0, 3.0]), 1.0
    P = np.full((K, K), 0.1 / (K - 1))
    np.fill_diagonal(P, 0.9)
    z = np.empty(T, dtype=int)
    z[0] = rng.integers(K)
    for t in range(1, T):
        z[t] = rng.choice(K, p=P[z[t - 1]])
    return {"T": T, "y": rng.normal(mu[z], sigma)}


def coal_data():
    """``{"T", "D", "r_e", "r_l"}``: 40 x Poisson(3) then 72 x Poisson(1), seed 3."""
    rng = np.random.default_rng(3)
    D = np.concatenate([rng.poisson(3.0, 40), rng.poisson(1.0, 72)]).astype(np.int64)
    r = float(1.0 / D.mean())
    return {"T": len(D), "D": D, "r_e": r, "r_l": r}
