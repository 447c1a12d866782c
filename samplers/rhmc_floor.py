"""The trajectory floor of Riemannian HMC chosen from the problem
(``sampler_options["min_int_time"] = "auto"``, the default; issue 24, point 2).

Why a floor: with the SoftAbs metric the directions whose marginal spread the local
Hessian does not see (the funnel's v, the banana's ridge) move slowly in the
metric's time, while the generalised U-turn criterion, summed over every direction,
stops when the whitened ones turn (:mod:`.rhmc`'s docstring, "Mixing along the
funnel's neck"). The floor - runs shorter than it are not tested for a U-turn -
lets the slow ones swing for their half-period.

What it is: at the end of each of Stan's warmup windows but the last, over the
latter half of the warmup's samples, ``lambda`` = the largest generalised eigenvalue
of (the samples' covariance, the mean of their local covariances ``Sigma(q)^-1``)
(:func:`scale_understatement`), corrected for the sample covariance's own
inflation (:func:`spike_estimate`); the floor is ``FLOOR_SCALE * sqrt(lambda)``, or
0 below ``FLOOR_THRESHOLD`` (:func:`auto_min_int_time`). The sums are kept per
:data:`FLOOR_BLOCK` samples (:class:`FloorSums`); :meth:`.rhmc.SoftAbsMetric.
adapt_min_int_time` reads them. :mod:`.rhmc` re-exports every name here.
"""

import math

import numpy as np

__all__ = ["FLOOR_SCALE", "FLOOR_THRESHOLD", "FLOOR_BLOCK", "FLOOR_GROWTH", "FloorSums",
           "scale_understatement", "spike_estimate", "auto_min_int_time", "floor_cap"]

#: ``min_int_time="auto"`` (the default): ``FLOOR_SCALE * sqrt(lambda)`` where
#: ``sqrt(lambda)``, the factor by which the metric understates the draws' spread
#: (:func:`auto_min_int_time`), is at least ``FLOOR_THRESHOLD``; else 0
FLOOR_SCALE = 2.0
FLOOR_THRESHOLD = 2.0
#: a window's end sets the floor to at most this times the last one (or the
#: smallest non-zero floor, ``FLOOR_SCALE * FLOOR_THRESHOLD``): :func:`floor_cap`
FLOOR_GROWTH = 2.0
#: warmup samples per block of the floor's sums (Stan's windows end at multiples
#: of 25 iterations, so the latter half of the samples is whole blocks there)
FLOOR_BLOCK = 25


def scale_understatement(cov, local):
    """``lambda_max``: the largest generalised eigenvalue of ``(cov, local)``, i.e.
    the most, over directions ``w``, that the variance of the draws ``w^T cov w``
    exceeds the mean local variance ``w^T local w`` the metric gives (``local``:
    the mean over the draws of ``Sigma(q)^-1``). NaN when ``local`` is not positive
    definite or either is not finite.

    Why the mean of the local covariances (not of the metrics): along a direction
    whose local scale varies but whose draws follow it (the funnel's x, local
    variance ``e^v``), the mean local variance is the draws' variance, ratio 1;
    along one whose marginal spread the local curvature does not see (the funnel's
    v: mean local variance 0.50 at d = 10 and 0.092 at d = 51 from exact draws,
    alpha 30, against the marginal 9) the ratio is that gap."""
    cov = np.asarray(cov, dtype=float)
    local = np.asarray(local, dtype=float)
    if not (np.all(np.isfinite(cov)) and np.all(np.isfinite(local))):
        return math.nan
    try:
        L = np.linalg.cholesky(0.5 * (local + local.T))
    except np.linalg.LinAlgError:
        return math.nan
    Li = np.linalg.inv(L)
    W = Li @ cov @ Li.T
    return float(np.linalg.eigvalsh(0.5 * (W + W.T))[-1])


def spike_estimate(ell, n, dim):
    """The population eigenvalue behind a sample covariance's top (generalised)
    eigenvalue ``ell`` from ``n`` draws in ``dim`` dimensions, all other directions
    having eigenvalue 1: 1 when ``ell`` is within the noise's edge ``(1 +
    sqrt(g))^2`` (``g = dim / n``, Marchenko-Pastur), else the ``lam`` with ``ell =
    lam + g lam / (lam - 1)`` (the spiked-covariance limit of Baik, Ben Arous &
    Peche 2005). Why: a d-dimensional Gaussian's sample covariance from 50-225
    warmup draws puts its top eigenvalue at 1.5-2.6 (d = 10) where the truth is 1,
    while a real gap (the funnel's v, ~20) is hardly inflated at all: dividing by
    the noise's factor would shrink the gap too, at d = 51 by half."""
    g = dim / n
    if not ell > (1.0 + math.sqrt(g)) ** 2:
        return 1.0
    b = ell + 1.0 - g
    return 0.5 * (b + math.sqrt(max(b * b - 4.0 * ell, 0.0)))


def auto_min_int_time(lam, n, dim):
    """The trajectory floor for a posterior whose draws' spread the metric
    understates by ``lam`` (:func:`scale_understatement`, from ``n`` draws in
    ``dim`` dimensions): ``FLOOR_SCALE * r`` with ``r = sqrt(spike_estimate(lam,
    n, dim))``, or 0 where ``r < FLOOR_THRESHOLD``.

    A direction whose scale is ``r`` times the metric's moves in the metric's time
    ``r`` times slower than a whitened one, while the plain U-turn criterion stops
    when the whitened ones turn (after about 3): the floor lets the slow one swing
    for its own half-period. ``FLOOR_SCALE`` by measurement rather than the
    harmonic ``pi``: on the funnel from exact draws (alpha 30) ``r`` is 4.6 at d =
    10 and 10 at d = 51, and v's half-periods along single long trajectories 8-10
    and 20-25 (``benchmarks/README.md``): 2 r. A Gaussian with its exact metric has
    ``r`` about 1, under the threshold: no floor, where one would only cost steps
    (a 3-d Gaussian with floor 8: 255 steps a transition against 17, the step size
    0.19 -> 0.049)."""
    if not (math.isfinite(lam) and lam > 0 and n > 0):
        return 0.0
    r = math.sqrt(spike_estimate(lam, n, dim))
    return FLOOR_SCALE * r if r >= FLOOR_THRESHOLD else 0.0



def floor_cap(previous):
    """The largest floor a window's end may choose after ``previous`` (0: none yet):
    ``FLOOR_GROWTH * max(previous, FLOOR_SCALE * FLOOR_THRESHOLD)``.

    Why. The estimate comes from the latter half of a few hundred correlated warmup
    draws, and one excursion can dominate it: on the funnel (d = 10, 300 warmup
    iterations, seed 2) the chain's last block sat at v ~ 9.6, where SoftAbs's lift
    caps the x's local variance at alpha (30) against their spread e^v ~ 15000, and
    lambda went from 8.3 at one window's end to 1335 at the next: a floor of 73 and
    trajectories of 1023 steps, against 4.7-10.8 over seeds 3-7. A real gap shows
    at every window and is reached in a few (1000 warmup iterations adapt the floor
    at four windows' ends: up to 8, 16, 32, 64, against the funnel's 8-10 at
    d = 10 and 20-25 at d = 51); a lone excursion moves the floor at most twofold.
    Cost only: a floor never changes the stationary distribution."""
    return FLOOR_GROWTH * max(previous, FLOOR_SCALE * FLOOR_THRESHOLD)


class FloorSums:
    """The warmup's samples ``q`` and their local covariances ``Sigma(q)^-1 = Q
    diag(1/f) Q^T``, summed per :data:`FLOOR_BLOCK` samples (so that the latter half
    of the samples so far is a sum of blocks, without keeping every sample's
    d x d matrix): sums of ``dq``, ``dq dq^T`` (``dq = q`` minus the first ``q``,
    against cancellation) and of the local covariances."""

    __slots__ = ("blocks", "shift")

    def __init__(self):
        self.blocks = []            # [n, sum dq, sum dq dq^T, sum Sigma(q)^-1]
        self.shift = None

    def add(self, q, Q, finv):
        """Note the sample ``q`` with its metric's eigenvectors ``Q`` and ``1/f``."""
        if self.shift is None:
            self.shift = np.array(q, dtype=float)
        dq = q - self.shift
        if not self.blocks or self.blocks[-1][0] == FLOOR_BLOCK:
            n = dq.shape[0]
            self.blocks.append([0, np.zeros(n), np.zeros((n, n)), np.zeros((n, n))])
        b = self.blocks[-1]
        # a new block rather than one changed in place: a chain's committed state
        # holds the blocks (to_dict), and an iteration that is not committed must
        # not reach into it
        self.blocks[-1] = [b[0] + 1, b[1] + dq, b[2] + np.outer(dq, dq),
                           b[3] + (Q * finv) @ Q.T]

    def to_dict(self):
        """Plain data for a chain's state (its blocks are never changed in place, so
        this shares their arrays); :meth:`from_dict` reads it back."""
        return {"shift": self.shift,
                "blocks": [{"n": b[0], "sum": b[1], "outer": b[2], "local": b[3]}
                           for b in self.blocks]}

    @classmethod
    def from_dict(cls, d):
        out = cls()
        if d:
            out.shift = None if d["shift"] is None else np.asarray(d["shift"], dtype=float)
            out.blocks = [[int(b["n"]), np.asarray(b["sum"], dtype=float),
                           np.asarray(b["outer"], dtype=float),
                           np.asarray(b["local"], dtype=float)] for b in d["blocks"]]
        return out

    def latter_half(self):
        """``(cov, local, m)`` of the blocks from the one holding the middle sample
        on (the latter half: whole blocks at Stan's window ends, which fall at
        multiples of 25): the ``m`` samples' covariance and mean local covariance;
        None with fewer than ``dim + 2`` samples."""
        total = sum(b[0] for b in self.blocks)
        used = self.blocks[(total // 2) // FLOOR_BLOCK:]
        m = sum(b[0] for b in used)
        if not used or m < used[0][1].shape[0] + 2:
            return None
        s1 = sum(b[1] for b in used)
        s2 = sum(b[2] for b in used)
        cov = (s2 - np.outer(s1, s1) / m) / (m - 1)
        return cov, sum(b[3] for b in used) / m, m
