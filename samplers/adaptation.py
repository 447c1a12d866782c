"""Warmup adaptation as Stan does it: dual-averaging step size, windowed metric.

Step size (Hoffman & Gelman 2014, section 3.2; Nesterov 2009): with target
acceptance ``delta`` and iteration ``m`` of the current window,

    s_m   = (1 - 1/(m + t0)) s_{m-1} + (delta - a_m) / (m + t0)
    x_m   = mu - sqrt(m) s_m / gamma,            eps_m = exp(x_m)
    xb_m  = m^-kappa x_m + (1 - m^-kappa) xb_{m-1}

with ``gamma = 0.05, kappa = 0.75, t0 = 10`` and ``mu = log(10 eps_0)``; at the end
of warmup ``eps = exp(xb)``.

Metric: Stan's windows - an initial fast buffer (75 iterations) adapting only the
step size, then slow windows of 25, 50, 100, ... iterations (the last one stretched to
the terminal buffer) each estimating the posterior (co)variance with Welford's
algorithm, then a terminal fast buffer (50). Each estimate is shrunk towards
``1e-3 I``:  ``(n/(n+5)) var + 1e-3 (5/(n+5))``. When the three defaults do not fit
in the warmup, they become 15% / 75% / 10% of it. After each slow window the step
size is re-initialised and its dual averaging restarted at ``mu = log(10 eps)``.
The schedule is a pure function (:func:`window_ends`), so it is testable as a list.
"""

import math

import numpy as np

__all__ = ["DualAveraging", "Welford", "window_ends", "WindowedAdaptation"]


class DualAveraging:
    """Stan's step-size adaptation (``stepsize_adaptation.hpp``)."""

    def __init__(self, delta=0.8, gamma=0.05, kappa=0.75, t0=10.0):
        if not 0 < delta < 1:
            raise ValueError(f"adapt_delta must be in (0, 1), got {delta}")
        self.delta, self.gamma, self.kappa, self.t0 = delta, gamma, kappa, t0
        self.mu = 0.0
        self.restart()

    def restart(self, eps=None):
        self.counter = 0
        self.s_bar = 0.0
        self.x_bar = 0.0
        if eps is not None:
            self.mu = float(np.log(10.0 * eps))

    def update(self, accept_stat):
        """One iteration's acceptance statistic in; the next step size out."""
        # scalar math on floats (math, not numpy: a numpy call on a number costs
        # a microsecond, and this runs every warmup iteration)
        self.counter += 1
        a = min(1.0, accept_stat) if math.isfinite(accept_stat) else 0.0
        eta = 1.0 / (self.counter + self.t0)
        self.s_bar = (1.0 - eta) * self.s_bar + eta * (self.delta - a)
        x = self.mu - self.s_bar * math.sqrt(self.counter) / self.gamma
        x_eta = self.counter ** (-self.kappa)
        self.x_bar = (1.0 - x_eta) * self.x_bar + x_eta * x
        return _exp(x)

    def final(self):
        return _exp(self.x_bar)


def _exp(x):
    try:
        return math.exp(x)
    except OverflowError:          # as np.exp: an infinite step size, not an error
        return math.inf


class Welford:
    """Running mean and (co)variance (Welford 1962), diagonal or dense."""

    def __init__(self, dim, dense=False):
        self.dim, self.dense = dim, dense
        self.restart()

    def restart(self):
        self.n = 0
        self.mean = np.zeros(self.dim)
        self.m2 = np.zeros((self.dim, self.dim) if self.dense else self.dim)

    def add(self, x):
        self.n += 1
        d = x - self.mean
        self.mean = self.mean + d / self.n
        if self.dense:
            self.m2 = self.m2 + np.outer(x - self.mean, d)
        else:
            self.m2 = self.m2 + (x - self.mean) * d

    def regularized(self):
        """Stan's shrunk estimate ``(n/(n+5)) var + 1e-3 (5/(n+5))`` (times I).

        One deliberate difference from Stan, for a dense metric estimated from no
        more draws than dimensions (``n <= dim``: early windows of a high-dimensional
        warmup). There the sample covariance ``S`` is singular, and Stan's estimate
        gives the directions outside its span a variance of ~1e-4 whatever their
        real scale: the next window's trajectories crawl along them at tree depth
        9-10 (a 100-d Gaussian spends 12x more gradients in warmup than in
        sampling). We first shrink ``S`` towards its own diagonal (Ledoit & Wolf's
        target, weight ``lambda = n / (n + dim)`` on ``S``), which keeps the
        measured scales in every direction, then apply Stan's regularisation. With
        more draws than dimensions the estimate is Stan's exactly.
        """
        n = self.n
        var = self.m2 / (n - 1.0)
        shrink = 1e-3 * 5.0 / (n + 5.0)
        if self.dense:
            if n <= self.dim:
                lam = n / (n + self.dim)
                var = lam * var + (1.0 - lam) * np.diag(np.diag(var))
            return (n / (n + 5.0)) * var + shrink * np.eye(self.dim)
        return (n / (n + 5.0)) * var + shrink


def window_ends(num_warmup, init_buffer=75, term_buffer=50, base_window=25):
    """The iterations (0-based) at which a slow window ends and the metric updates.

    Returns ``(ends, (init_buffer, term_buffer, base_window))`` with the buffers
    actually used (Stan's 15%/75%/10% fallback when the defaults do not fit).
    """
    if num_warmup < 20:
        return [], (num_warmup, 0, 0)
    if init_buffer + base_window + term_buffer > num_warmup:
        init_buffer = int(0.15 * num_warmup)
        term_buffer = int(0.1 * num_warmup)
        base_window = num_warmup - (init_buffer + term_buffer)
    last = num_warmup - term_buffer - 1
    ends = []
    size = base_window
    nxt = init_buffer + size - 1
    counter = init_buffer
    while True:
        ends.append(nxt)
        if nxt == last:
            break
        # compute_next_window: double, and stretch the last window to the buffer
        counter = nxt + 1
        size *= 2
        nxt = counter + size - 1
        if nxt != last and nxt + 2 * size >= num_warmup - term_buffer:
            nxt = last
        if nxt > last:
            nxt = last
    return ends, (init_buffer, term_buffer, base_window)


class WindowedAdaptation:
    """Metric estimation over Stan's slow windows; ``update(i, q)`` returns the new
    inverse metric when window ``i`` ends, else ``None``."""

    def __init__(self, dim, num_warmup, dense=False, init_buffer=75, term_buffer=50,
                 base_window=25):
        self.ends, (self.init_buffer, self.term_buffer, _) = window_ends(
            num_warmup, init_buffer, term_buffer, base_window)
        self.end_set = set(self.ends)
        self.num_warmup = num_warmup
        self.estimator = Welford(dim, dense)

    def in_window(self, i):
        return self.init_buffer <= i < self.num_warmup - self.term_buffer and bool(self.ends)

    def update(self, i, q):
        if self.in_window(i):
            self.estimator.add(q)
        if i in self.end_set:
            inv = self.estimator.regularized()
            self.estimator.restart()
            return inv
        return None


def init_stepsize(model, metric, z, eps, rng):
    """Stan's step-size heuristic (``base_hmc::init_stepsize``): from ``eps``, double
    (or halve) it until one leapfrog step from ``z`` with a fresh momentum crosses an
    acceptance probability of 0.8. Raises ``ValueError`` for an improper posterior
    (eps > 1e7) or when no step size is small enough."""
    if eps == 0 or eps > 1e7 or not np.isfinite(eps):
        return eps

    def delta_h():
        with np.errstate(all="ignore"):
            z0 = metric.start(model, z, rng)
            return z0.h - metric.step(model, z0, eps).h

    log08 = np.log(0.8)
    direction = 1 if delta_h() > log08 else -1
    while True:
        d = delta_h()
        if direction == 1 and not d > log08:
            break
        if direction == -1 and not d < log08:
            break
        eps = 2.0 * eps if direction == 1 else 0.5 * eps
        if eps > 1e7:
            raise ValueError("the posterior may be improper: the step-size search grew "
                             "past 1e7; check the model's priors and constraints")
        if eps == 0:
            raise ValueError("no acceptably small step size: the log density or its "
                             "gradient may be wrong (try sl.check_grad on it)")
    return eps
