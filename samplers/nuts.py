"""The No-U-Turn sampler as Stan runs it today (Hoffman & Gelman 2014; Betancourt
2017, "A conceptual introduction to HMC", appendix A).

One transition from point ``z`` with step size ``eps``:

* draw ``p ~ N(0, M)``; ``H0 = H(z)``; the trajectory starts as the single point z;
* repeatedly double it, forwards or backwards with probability 1/2, by building a
  subtree of ``2^depth`` leapfrog steps;
* *multinomial* sampling inside a subtree: each new state has weight ``exp(H0 - H)``
  and a subtree's proposal is drawn in proportion to the weights, merged pairwise;
* *biased progressive* sampling at the top: the new subtree's proposal replaces the
  current sample with probability ``min(1, W_subtree / W_old)``, favouring states far
  from the start;
* the generalised U-turn criterion on the summed momenta ``rho``: a (sub)trajectory
  stops when ``v_minus . rho <= 0`` or ``v_plus . rho <= 0`` (``v = M^-1 p`` at its
  ends), checked for every merged subtree and - Stan 2.21+ - also across the seam of
  the two halves (``rho_left + p_right_first`` and ``rho_right + p_left_last``),
  which catches U-turns that straddle the halves;
* a divergence when ``H - H0 > 1000`` (a NaN energy counts as infinite);
* ``accept_stat`` = mean over all new states of ``min(1, exp(H0 - H))`` (drives the
  step-size adaptation).

The tree is built recursively as in Stan's ``base_nuts``; the random choices use the
chain's own generator, so a seed reproduces a chain exactly.
"""

import math

import numpy as np


__all__ = ["transition", "TransitionInfo"]


class TransitionInfo:
    """What one transition reports (Stan's sampler diagnostics)."""

    __slots__ = ("accept_stat", "n_leapfrog", "treedepth", "divergent", "energy",
                 "n_failed", "energy_error", "max_energy_error")

    def __init__(self, accept_stat, n_leapfrog, treedepth, divergent, energy, n_failed=0,
                 energy_error=0.0, max_energy_error=0.0):
        self.accept_stat = accept_stat
        self.n_leapfrog = n_leapfrog
        self.treedepth = treedepth
        self.divergent = divergent
        self.energy = energy
        self.n_failed = n_failed      # leapfrog steps whose log density failed (rejected)
        self.energy_error = energy_error            # H(sample) - H(start)
        self.max_energy_error = max_energy_error    # the largest |H - H0| on the trajectory


def _lse(a, b):
    if a == -math.inf:
        return b
    if b == -math.inf:
        return a
    m = a if a > b else b
    return m + math.log(math.exp(a - m) + math.exp(b - m))


class _Tree:
    """Mutable bookkeeping shared by one transition's recursion."""

    __slots__ = ("model", "metric", "eps", "rng", "H0", "max_delta_h", "n_leapfrog",
                 "sum_metro", "divergent", "n_failed", "max_err")

    def __init__(self, model, metric, eps, rng, H0, max_delta_h):
        self.model = model
        self.metric = metric
        self.eps = eps
        self.rng = rng
        self.H0 = H0
        self.max_delta_h = max_delta_h
        self.n_leapfrog = 0
        self.sum_metro = 0.0
        self.divergent = False
        self.n_failed = 0
        self.max_err = 0.0


def _criterion(v_minus, v_plus, rho):
    # ndarray.dot: a third of the call cost of ``@`` on short vectors (the matmul
    # ufunc's dispatch), and these dot products are most of a merge's work
    return v_plus.dot(rho) > 0 and v_minus.dot(rho) > 0


def _build(t, z, depth, sign):
    """Build a subtree of ``2^depth`` steps from ``z`` in direction ``sign``.

    Returns ``(valid, z_end, proposal, log_weight, rho, p_beg, p_end, v_beg, v_end)``
    where ``z_end`` is the last state integrated (the next subtree starts there).
    """
    if depth == 0:
        z = t.metric.step(t.model, z, sign * t.eps)
        t.n_leapfrog += 1
        h = z.h                          # inf for a failed point (and for NaN energy)
        if h == math.inf:
            t.n_failed += z.lp == -math.inf
        err = h - t.H0
        if abs(err) > abs(t.max_err):
            t.max_err = err
        if err > t.max_delta_h:
            t.divergent = True
        d = -err
        t.sum_metro += 1.0 if d > 0 else math.exp(d)
        return (not t.divergent, z, z, d, z.p, z.p, z.p, z.v, z.v)

    ok, z, prop, lw_init, rho_init, p_beg, p_init_end, v_beg, v_init_end = \
        _build(t, z, depth - 1, sign)
    if not ok:
        return (False,) + (None,) * 8
    ok, z, prop_final, lw_final, rho_final, p_final_beg, p_end, v_final_beg, v_end = \
        _build(t, z, depth - 1, sign)
    if not ok:
        return (False,) + (None,) * 8
    lw = _lse(lw_init, lw_final)
    # multinomial: the final half's proposal with probability W_final / W_subtree
    if lw_final > lw or t.rng.random() < math.exp(lw_final - lw):
        prop = prop_final
    rho = rho_init + rho_final
    if depth == 1:
        # two single states: the cross-subtree checks are the whole-subtree check
        # again (v_final_beg is v_end, rho_init + p_final_beg is rho, and so on)
        persist = _criterion(v_beg, v_end, rho)
    else:
        persist = (_criterion(v_beg, v_end, rho)
                   and _criterion(v_beg, v_final_beg, rho_init + p_final_beg)
                   and _criterion(v_init_end, v_end, rho_final + p_init_end))
    return (persist, z, prop, lw, rho, p_beg, p_end, v_beg, v_end)


def transition(model, metric, z, eps, rng, max_depth=10, max_delta_h=1000.0):
    """One NUTS transition from point ``z`` (its ``q``, ``lp``, ``grad``; the momentum
    is resampled). Returns ``(new point, TransitionInfo)``.

    ``metric`` supplies ``start(model, z, rng)`` (fresh momentum, velocity and
    Hamiltonian) and ``step(model, z, eps)`` (one integrator step): the Euclidean
    metrics with the leapfrog, the Riemannian one with the implicit leapfrog."""
    with np.errstate(all="ignore"):
        return _transition(model, metric, z, eps, rng, max_depth, max_delta_h)


def _transition(model, metric, z, eps, rng, max_depth, max_delta_h):
    z = metric.start(model, z, rng)
    H0 = z.h
    t = _Tree(model, metric, eps, rng, H0, max_delta_h)
    sample = z
    z_fwd = z_bck = z
    p0, v0 = z.p, z.v
    p_fwd_bck = p_fwd_fwd = p_bck_fwd = p_bck_bck = p0
    v_fwd_bck = v_fwd_fwd = v_bck_fwd = v_bck_bck = v0
    rho = p0
    log_w = 0.0                                       # the initial point: exp(H0 - H0)
    depth = 0
    # Generator.random() is uniform() on [0, 1) - the same numbers from the same bits -
    # at a quarter of its call cost
    uniform = rng.random
    while depth < max_depth:
        if uniform() > 0.5:
            rho_bck = rho
            p_bck_fwd, v_bck_fwd = p_fwd_fwd, v_fwd_fwd
            ok, z_fwd, prop, lw_sub, rho_fwd, p_fwd_bck, p_fwd_fwd, v_fwd_bck, v_fwd_fwd = \
                _build(t, z_fwd, depth, 1.0)
        else:
            rho_fwd = rho
            p_fwd_bck, v_fwd_bck = p_bck_bck, v_bck_bck
            ok, z_bck, prop, lw_sub, rho_bck, p_bck_fwd, p_bck_bck, v_bck_fwd, v_bck_bck = \
                _build(t, z_bck, depth, -1.0)
        if not ok:
            break
        depth += 1
        # biased progressive sampling: prefer the new subtree
        if lw_sub > log_w or uniform() < math.exp(lw_sub - log_w):
            sample = prop
        log_w = _lse(log_w, lw_sub)
        rho = rho_bck + rho_fwd
        if depth == 1:                  # two single states: one check (see _build)
            persist = _criterion(v_bck_bck, v_fwd_fwd, rho)
        else:
            persist = (_criterion(v_bck_bck, v_fwd_fwd, rho)
                       and _criterion(v_bck_bck, v_fwd_bck, rho_bck + p_fwd_bck)
                       and _criterion(v_bck_fwd, v_fwd_fwd, rho_fwd + p_bck_fwd))
        if not persist:
            break
    accept = t.sum_metro / t.n_leapfrog if t.n_leapfrog else 0.0
    energy = sample.h
    return sample, TransitionInfo(accept, t.n_leapfrog, depth, t.divergent, energy,
                                  t.n_failed, energy - H0, t.max_err)
