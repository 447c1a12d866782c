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

``adaptation="nutpie"`` (:class:`GradientAdaptation`) replaces the windows with
nutpie's (Seyboldt et al.): the metric from the draws *and their gradients*, which
the sampler computes anyway. For a Gaussian the gradient is linear in the draw, so
``sqrt(var(q_i) / var(grad_i))`` is the variance exactly from 3 draws, where the
variance of the draws alone needs hundreds; the metric is updated after every
iteration from the first, over a trailing window that forgets the draws made far from
the typical set. ``"nutpie-lowrank"`` adds the directions of a correlated posterior
(:func:`lowrank_inverse_metric`). On the 100-d Gaussian of ``benchmarks/nuts.py`` it
reaches Stan's sampling efficiency with about an eighth of its warmup gradients
(``benchmarks/adaptation.py``, table in ``benchmarks/README.md``).
"""

import math

import numpy as np

__all__ = ["DualAveraging", "Welford", "window_ends", "WindowedAdaptation", "ADAPTATIONS",
           "GradientAdaptation", "grad_schedule", "lowrank_inverse_metric"]


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

    def to_dict(self):
        # no copies: add() replaces the arrays instead of writing into them, so a
        # chain's state keeps a snapshot for free (a dense 100-d m2 is 80 kB)
        return {"n": self.n, "mean": self.mean, "m2": self.m2, "dense": self.dense}

    @classmethod
    def from_dict(cls, d, dim):
        w = cls(dim, d["dense"])
        w.n, w.mean, w.m2 = d["n"], np.array(d["mean"], dtype=float), \
            np.array(d["m2"], dtype=float)
        return w

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


# ---- adaptation from draws and gradients (nutpie's) -------------------------------------
#: the values of ``model.sample(adaptation=...)``: Stan's windowed variance adaptation,
#: nutpie's diagonal estimate from draws and gradients, and that with a low-rank
#: correction (a dense metric)
ADAPTATIONS = ("stan", "nutpie", "nutpie-lowrank")


def grad_schedule(num_warmup, early_window=0.3, final_window=0.15):
    """nutpie's warmup phases as ``(early_end, final_start)``: iterations
    ``[0, early_end)`` switch estimators every 10 draws, ``[early_end, final_start)``
    every 80, and from ``final_start`` on the metric is fixed and only the step size
    adapts (its dual averaging not restarted there, as nuts-rs's: chain.py
    ``_grad_adapt_step``)."""
    early_end = int(early_window * num_warmup)
    final_start = num_warmup - int(final_window * num_warmup)
    return early_end, final_start


def _scaled_window(qs, gs):
    """The draws and gradients of a window centred and scaled by the estimated
    standard deviations ``sigma = (var q / var g)^(1/4)`` (``q / sigma`` and
    ``g * sigma``: a Gaussian's scales are then 1): ``(sigma, X, G)``, one row a draw."""
    X = np.array(qs)
    G = np.array(gs)
    X -= X.mean(axis=0)
    G -= G.mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma = np.sqrt(np.sqrt(np.sum(X * X, axis=0) / np.sum(G * G, axis=0)))
    sigma = np.where(np.isfinite(sigma) & (sigma > 0), sigma, 1.0)
    return sigma, X / sigma, G * sigma


def _spd_geometric_mean(A, B, a_min):
    """The eigenvalues and -vectors of ``S`` with ``S B S = A`` (A, B symmetric
    positive definite, ``a_min`` a lower bound of A's eigenvalues): the geometric
    mean of ``A`` and ``B^-1``, ``B^-1/2 (B^1/2 A B^1/2)^1/2 B^-1/2``. For draws with
    covariance ``A`` and gradients with covariance ``B`` of a Gaussian, both are
    estimates of the same covariance ``S`` (``B = S^-1``); the mean minimises the
    Fisher divergence of the Gaussian ``N(., S)`` (Seyboldt).

    The eigenvalues are clipped to the bounds ``S B S = A`` implies,
    ``sqrt(min eig A / max eig B) <= eig S <= sqrt(max eig A / min eig B)``: when
    ``B`` is ill-conditioned (early warmup, draws far in a tail) rounding can put
    the smallest one at zero or below, and the metric would not be positive
    definite."""
    w, U = np.linalg.eigh(B)
    w = np.maximum(w, 1e-300)
    root = (U * np.sqrt(w)) @ U.T
    inv_root = (U / np.sqrt(w)) @ U.T
    m, V = np.linalg.eigh(root @ A @ root)
    S = inv_root @ ((V * np.sqrt(np.maximum(m, 0.0))) @ V.T) @ inv_root
    lam, vecs = np.linalg.eigh(0.5 * (S + S.T))
    lo, hi = math.sqrt(a_min / w[-1]), math.sqrt(np.trace(A) / w[0])
    return np.clip(lam, lo, hi), vecs


def lowrank_inverse_metric(qs, gs, cutoff=2.0, gamma=1e-3):
    """The dense inverse metric ``diag(sigma) (I + U (lam - 1) U^T) diag(sigma)`` from a
    window of draws ``qs`` and their gradients ``gs``: ``sigma`` the diagonal
    draws-and-gradients estimate; ``U, lam`` the eigenvectors and -values of the
    scaled covariance estimated in the span of the scaled draws and gradients (at
    most ``2n`` directions from ``n`` draws) as the geometric mean of the draws'
    covariance and the gradients' precision (:func:`_spd_geometric_mean`, both
    regularised by ``gamma I``), keeping only eigenvalues above ``cutoff`` or below
    ``1 / cutoff``: every other direction keeps scale 1 after the diagonal scaling.
    """
    sigma, X, G = _scaled_window(qs, gs)
    n, dim = X.shape
    # an orthonormal basis of a space holding the draws and the gradients: all of it
    # when there are as many of them as dimensions, else their span by QR (a
    # dependent column adds a direction in which both vary by nothing: its
    # regularised estimate is 1, and the cutoff drops it)
    basis = None if 2 * n >= dim else np.linalg.qr(np.vstack([X, G]).T)[0]
    if basis is not None:
        X, G = X @ basis, G @ basis
    k = X.shape[1]
    lam, V = _spd_geometric_mean(X.T @ X / n + gamma * np.eye(k),
                                 G.T @ G / n + gamma * np.eye(k), gamma)
    keep = (lam > cutoff) | (lam < 1.0 / cutoff)
    U = V[:, keep] if basis is None else basis @ V[:, keep]
    out = np.eye(dim) + (U * (lam[keep] - 1.0)) @ U.T
    return sigma[:, None] * out * sigma[None, :]


def _positive_definite(a):
    if not np.all(np.isfinite(a)):
        return False
    try:
        np.linalg.cholesky(0.5 * (a + a.T))
    except np.linalg.LinAlgError:
        return False
    return True


def _clamped(inv, previous, lo=1e-10, hi=1e10):
    """A diagonal estimate with its non-finite or non-positive entries replaced by
    the previous metric's and the rest clamped to ``[lo, hi]`` (a window in which a
    coordinate or its gradient did not move says nothing about its scale)."""
    ok = np.isfinite(inv) & (inv > 0)
    return np.clip(np.where(ok, inv, previous), lo, hi)


class GradientAdaptation:
    """nutpie's metric adaptation (Seyboldt et al., the "grad-based" diagonal): the
    inverse metric ``M^-1_ii = sqrt(var(q_i) / var(grad_i))`` of the draws of a short
    window and their gradients - exact for any Gaussian with a diagonal covariance
    from as few as 3 draws, where the variance of the draws alone needs many -
    updated after every warmup iteration from the very first.

    Two estimators run side by side, a foreground one (the metric's) and a
    background one; when the background one has seen ``switch`` draws (10 in the
    early window, 80 after) it becomes the foreground one and a fresh background
    starts, so the metric always rests on the last ``switch`` to ``2 switch`` draws:
    early draws, far from the typical set, are forgotten. The start is the metric of
    the initial gradient, ``1 / |grad|`` (a Gaussian's variance when the point is one
    sd from the mode). In the final window (:func:`grad_schedule`) only the step size
    adapts. Divergent transitions' draws are not used, nor draws at which the
    transition did not move (the chain decides: ``good``). The diagonal update runs
    in compiled segments too (nuts_jit.py ``_grad_adapt``: the same arithmetic).

    ``lowrank``: the metric is dense, ``diag + low rank`` from
    :func:`lowrank_inverse_metric` of the foreground window, recomputed every
    ``lowrank_every`` iterations and at every switch (an eigendecomposition costs
    more than a diagonal update, so not at every iteration).

    The state is plain data (:meth:`to_dict`) and, as :class:`Welford`, replaces its
    arrays and lists instead of mutating them, so a chain's snapshot costs nothing.
    """

    MIN_DRAWS = 3          # the fewest draws the foreground needs for an estimate

    def __init__(self, dim, num_warmup, lowrank=False, early_switch=10, late_switch=80,
                 lowrank_every=10, cutoff=2.0):
        self.dim, self.num_warmup, self.lowrank = dim, num_warmup, lowrank
        self.early_end, self.final_start = grad_schedule(num_warmup)
        self.early_switch, self.late_switch = early_switch, late_switch
        self.lowrank_every, self.cutoff = lowrank_every, cutoff
        self.fg = self._window()
        self.bg = self._window()
        self.inv = None
        self.n_updates = 0      # metric changes so far (the first re-runs the step search)

    def _window(self):
        return {"q": Welford(self.dim), "g": Welford(self.dim), "qs": [], "gs": []}

    def _add(self, w, q, g):
        w["q"].add(q)
        w["g"].add(g)
        if self.lowrank:
            w["qs"] = w["qs"] + [q]         # new lists: snapshots stay as they were
            w["gs"] = w["gs"] + [g]

    def start(self, q, g):
        """The initial inverse metric from the initial point's gradient; the point
        is the estimators' first draw."""
        g = np.asarray(g, dtype=float)
        with np.errstate(divide="ignore"):
            inv = _clamped(1.0 / np.abs(g), np.ones(self.dim))
        if np.all(np.isfinite(g)):
            self._add(self.fg, q, g)
            self._add(self.bg, q, g)
        self.inv = np.diag(inv) if self.lowrank else inv
        return self.inv

    def switch_every(self, i):
        return self.early_switch if i < self.early_end else self.late_switch

    def update(self, i, q, g, good=True):
        """Warmup iteration ``i`` ended at ``q`` with gradient ``g`` (``good``: not a
        divergent transition). Returns the new inverse metric, or None when it
        stays."""
        if i >= self.final_start:
            if self.fg["q"].n:          # the windows are done with: a small state
                self.fg, self.bg = self._window(), self._window()
            return None
        if good and np.all(np.isfinite(g)):
            self._add(self.fg, q, g)
            self._add(self.bg, q, g)
        switch = self.switch_every(i)
        switched = False
        # switch only when the new foreground can serve a whole period before the
        # metric freezes (nutpie's rule)
        if self.bg["q"].n >= switch and i + switch <= self.final_start:
            self.fg, self.bg = self.bg, self._window()
            switched = True
        if self.fg["q"].n < self.MIN_DRAWS:
            return None
        if self.lowrank:
            # the first iterations (few draws: cheap) and then every lowrank_every
            if not (switched or i < self.early_switch or (i + 1) % self.lowrank_every == 0):
                return None
            inv = lowrank_inverse_metric(self.fg["qs"], self.fg["gs"], self.cutoff)
            if not _positive_definite(inv):
                return None             # (rounding in an extreme window: keep the last)
        else:
            var_q = self.fg["q"].m2
            var_g = self.fg["g"].m2          # (both over n - 1: the ratio is the same)
            with np.errstate(divide="ignore", invalid="ignore"):
                inv = _clamped(np.sqrt(var_q / var_g), self.inv)
        self.inv = inv
        self.n_updates += 1
        return inv

    # ---- plain data (the chain's state) --------------------------------------------
    def to_dict(self):
        return {"lowrank": self.lowrank, "num_warmup": self.num_warmup, "inv": self.inv,
                "n_updates": self.n_updates, "fg": _window_dict(self.fg),
                "bg": _window_dict(self.bg)}

    @classmethod
    def from_dict(cls, d, dim):
        a = cls(dim, d["num_warmup"], lowrank=d["lowrank"])
        a.inv = None if d["inv"] is None else np.array(d["inv"], dtype=float)
        a.n_updates = int(d["n_updates"])
        a.fg, a.bg = (_window_from(d[k], dim) for k in ("fg", "bg"))
        return a


def _window_dict(w):
    return {"q": w["q"].to_dict(), "g": w["g"].to_dict(), "qs": list(w["qs"]),
            "gs": list(w["gs"])}


def _window_from(d, dim):
    return {"q": Welford.from_dict(d["q"], dim), "g": Welford.from_dict(d["g"], dim),
            "qs": [np.asarray(x, dtype=float) for x in d["qs"]],
            "gs": [np.asarray(x, dtype=float) for x in d["gs"]]}
