"""Static HMC (Stan's ``static_hmc``): a fixed integration time, then Metropolis.

One transition kernel with the signature of :func:`.nuts.transition`: the Euclidean
``sampler="hmc"`` of :mod:`.chain` and the static Riemannian kernel of :mod:`.rhmc`
(``num_steps``) both call it, so it lives below both (chain.py imports rhmc's kernel;
rhmc importing chain back was the import loop chain.py <-> rhmc.py of issue 23).
"""

import math

import numpy as np

from .hamiltonian import NON_FINITE_DENSITY, TransitionInfo

__all__ = ["static_hmc"]


def static_hmc(model, metric, z, eps, rng, max_depth=10, int_time=2 * math.pi):
    """Static HMC (Stan's ``static_hmc``): L = max(1, round(int_time / eps)) integrator
    steps, then a Metropolis accept/reject on the energy difference."""
    with np.errstate(all="ignore"):
        z0 = metric.start(model, z, rng)
        H0 = z0.h
        n = max(1, int(int_time / eps + 0.5))
        z1 = z0
        for _ in range(n):
            z1 = metric.step(model, z1, eps)
            if z1.h == math.inf:
                break
    h = z1.h
    # (an energy that fell: accepted, without exp of a difference past 709 overflowing)
    accept = 0.0 if not h < math.inf else 1.0 if h <= H0 else math.exp(H0 - h)
    divergent = h - H0 > 1000.0
    out = z1 if rng.random() < accept else z0
    failed = z1.lp == -math.inf
    return out, TransitionInfo(accept, n, 0, divergent, out.h, int(failed),
                               out.h - H0, h - H0,
                               {z1.why or NON_FINITE_DENSITY: 1} if failed else None)
