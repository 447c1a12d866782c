"""The pieces every Hamiltonian sampler shares: phase-space points, Euclidean
metrics, the leapfrog integrator.

A point is ``(q, p, lp, grad)`` on the unconstrained space; the potential is
``U(q) = -log p(q)`` and the Hamiltonian ``H(q, p) = U(q) + K(p)``. A Euclidean
metric with inverse ``M^-1`` (the "inverse metric", which adaptation sets to the
posterior variance) gives

    p ~ N(0, M),   K(p) = p^T M^-1 p / 2,   dK/dp = M^-1 p   ("p sharp", the velocity)

``unit_e`` has ``M = I``, ``diag_e`` a diagonal ``M^-1``, ``dense_e`` a full one
(kept with its Cholesky factor, since p is drawn as ``L^-T z`` with ``M^-1 = L L^T``).

Whitened momentum. With any factor ``M^-1 = L L^T`` (``L = sqrt(M^-1)`` for the
diagonal metrics, the Cholesky factor for the dense one) the momentum
``p~ = L^T p`` is standard normal, and

    K = p~.p~ / 2,   q' = q + eps L p~,   p~' = p~ + (eps/2) L^T grad,
    (M^-1 p_a) . (p_b + p_c + ...) = p~_a . (p~_b + p~_c + ...)

so a trajectory integrated in ``p~`` needs no velocity ``M^-1 p`` at all: the U-turn
dot products and the kinetic energy are plain dot products of whitened momenta, and
``eps L`` and ``eps/2 L^T`` are computed once per step size
(:meth:`UnitMetric.whitened_steps`, used by NUTS).

Samplers (NUTS, static HMC, and the Riemannian sampler with its own metric) are
written against these small pieces, BlackJAX-style, not against a model.
"""

import math
import operator
import re

import numpy as np
from scipy.linalg import solve_triangular

from stanlite.errors import DomainError

__all__ = ["Point", "UnitMetric", "DiagMetric", "DenseMetric", "make_metric",
           "leapfrog", "RejectedPoint", "TransitionInfo",
           "rejection_reason", "NON_FINITE_DENSITY"]

#: what a failing log density may raise instead of returning NaN: the proposal is
#: rejected and the chain goes on, as Stan does with std::domain_error. That is a
#: DomainError (an argument outside a function's domain: sigma <= 0), the
#: ArithmeticError family (SolverError, overflow, division by zero,
#: FloatingPointError) and numpy's LinAlgError (a matrix that is not positive
#: definite, as Stan's cholesky_decompose). Nothing else: a TypeError, NameError,
#: IndexError, a broadcasting ValueError, ModelError, DataError or
#: DifferentiationError is a programming error in the model and surfaces at once
#: with its traceback, instead of being retried as a rejection everywhere.
RejectedPoint = (DomainError, ArithmeticError, np.linalg.LinAlgError)

#: the rejection reason of a log density (or gradient) that is NaN or infinite
NON_FINITE_DENSITY = "non-finite log density"

# numbers in a message (values differ at every point; the reason does not)
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])"
                     r"|(?<![\w])-?(?:nan|inf)(?![\w])", re.IGNORECASE)


def rejection_reason(error=None, lp=None, grad=None):
    """Why a proposal was rejected, as a short key for the per-reason counts of a
    chain (``fit.diagnose()``): ``"DomainError: normal_lpdf: sigma must be
    positive, but is #"`` (the numbers in a message replaced by ``#``, so that one
    cause is one key), ``"non-finite log density"`` or ``"non-finite gradient"``
    (``lp`` and ``grad`` say which; ``"non-finite energy"`` when both are finite)."""
    if error is not None:
        msg = _NUMBER.sub("#", " ".join(str(error).split()))
        if len(msg) > 160:
            msg = msg[:157] + "..."
        return f"{type(error).__name__}: {msg}" if msg else type(error).__name__
    if lp is None or not -math.inf < lp < math.inf:
        return NON_FINITE_DENSITY
    if grad is None or not np.all(np.isfinite(grad)):
        return "non-finite gradient"
    return "non-finite energy"


class Point:
    """A phase-space point: position ``q``, momentum ``p``, log density ``lp`` and its
    gradient, plus what the trajectory needs at every state: the velocity ``v``
    (``dK/dp``, "p sharp") and the Hamiltonian ``h`` (``inf`` for a failed point).
    ``aux`` is for metrics that depend on ``q`` (the Riemannian sampler caches its
    metric's factorisation there)."""

    __slots__ = ("q", "p", "lp", "grad", "v", "h", "aux", "kick", "why")

    def __init__(self, q, p, lp, grad, v=None, h=None, aux=None, kick=None, why=None):
        self.q = q
        self.p = p
        self.lp = lp
        self.grad = grad
        self.v = v
        self.h = h
        self.aux = aux
        self.kick = kick        # (half step, half step * grad): the leapfrog's last kick
        self.why = why          # a failed point: the rejection reason (rejection_reason)

    def copy(self):
        return Point(self.q, self.p, self.lp, self.grad, self.v, self.h, self.aux)


class TransitionInfo:
    """What one transition reports (Stan's sampler diagnostics)."""

    __slots__ = ("accept_stat", "n_leapfrog", "treedepth", "divergent", "energy",
                 "n_failed", "energy_error", "max_energy_error", "rejected")

    def __init__(self, accept_stat, n_leapfrog, treedepth, divergent, energy, n_failed=0,
                 energy_error=0.0, max_energy_error=0.0, rejected=None):
        self.accept_stat = accept_stat
        self.n_leapfrog = n_leapfrog
        self.treedepth = treedepth
        self.divergent = divergent
        self.energy = energy
        self.n_failed = n_failed      # leapfrog steps whose log density failed (rejected)
        self.energy_error = energy_error            # H(sample) - H(start)
        self.max_energy_error = max_energy_error    # the largest |H - H0| on the trajectory
        # why the failed steps failed: None, or {rejection_reason: count} (n_failed
        # in all); a failed step ends a trajectory, so it holds one reason at most
        self.rejected = rejected


class UnitMetric:
    """M = I."""

    name = "unit_e"

    def __init__(self, dim):
        self.dim = dim
        self.inv = np.ones(dim)
        self._factor(np.ones(dim))

    def _factor(self, L, apply=operator.mul):
        # L with M^-1 = L L^T, and how it multiplies a vector (elementwise for the
        # diagonal metrics, a matrix product for the dense one)
        self._L, self._LT, self._apply = L, L.T, apply
        self._steps = (None, None)
        self._whitened_factor = None

    def whitened_steps(self, eps):
        """``(eps L, eps/2 L^T, apply)`` for the leapfrog in the whitened momentum
        ``p~ = L^T p`` (module docstring): a step is ``p~ += apply(half, grad)``,
        ``q += apply(drift, p~)``, ``p~ += apply(half, grad)`` with the gradient at
        the new ``q``; backwards, each ``+`` is a ``-``. Cached for the last step
        size."""
        c = self._steps
        if c[0] != eps:
            c = self._steps = (eps, (eps * self._L, (0.5 * eps) * self._LT, self._apply))
        return c[1]

    def whitened_factor(self):
        """``L`` stacked over ``L^T / 2`` (each one row for the diagonal metrics) as
        one C-contiguous array: :meth:`whitened_steps` at ``eps`` is ``eps`` times
        it, and the compiled tree (:mod:`.nuts_jit`) multiplies it by its step
        sizes itself. Made once per factor: after :meth:`set` it is a new array."""
        f = self._whitened_factor
        if f is None:
            dim = self.dim
            f = np.concatenate((np.reshape(self._L, (-1, dim)),
                                np.reshape(0.5 * self._LT, (-1, dim))))
            f = self._whitened_factor = np.ascontiguousarray(f, dtype=float)
        return f

    def sample_momentum(self, rng):
        return rng.standard_normal(self.dim)

    def kinetic(self, p):
        with np.errstate(over="ignore", invalid="ignore"):
            return 0.5 * float(p @ p)

    def velocity(self, p):
        return p

    def drift(self, p, eps):
        """``eps M^-1 p``: the position update of a leapfrog step."""
        return eps * self.velocity(p)

    # ---- the interface the trajectory code (static HMC, the step-size search, NUTS
    # for metrics without whitened_steps) is written against; the Riemannian metric
    # implements the same two methods with its own integrator
    def start(self, model, z, rng):
        """``z`` with a fresh momentum ``p ~ N(0, M)``, its velocity and Hamiltonian."""
        p = self.sample_momentum(rng)
        v = self.velocity(p)
        h = _energy(z.lp, p, v)
        return Point(z.q, p, z.lp, z.grad, v, h, z.aux)

    def step(self, model, z, eps):
        """One leapfrog step (see :func:`leapfrog`)."""
        return leapfrog(model, self, z, eps)


def _energy(lp, p, v):
    # H = -log p(q) + p.v / 2 for every Euclidean metric (K = p^T M^-1 p / 2); any
    # non-finite piece (a failed density, a NaN gradient carried into p) gives inf
    h = -lp + 0.5 * float(p.dot(v))       # (.dot: cheaper than @ on short vectors)
    return h if -math.inf < h < math.inf else math.inf


class _GivenMetric(UnitMetric):
    """A metric of a given inverse ``inv`` (default: the identity, ``_identity(dim)``),
    checked and factored by the subclass's ``set`` (also how adaptation changes it)."""

    _identity = staticmethod(np.ones)

    def __init__(self, dim, inv=None):
        self.dim = dim
        self.set(self._identity(dim) if inv is None else inv)


class DiagMetric(_GivenMetric):
    """Diagonal inverse metric ``inv`` (the posterior variances after adaptation)."""

    name = "diag_e"

    def set(self, inv):
        inv = np.array(inv, dtype=float)        # our own copy: states share it
        if inv.shape != (self.dim,) or not np.all(inv > 0) or not np.all(np.isfinite(inv)):
            raise ValueError(f"diag_e inverse metric must be {self.dim} positive finite "
                             "numbers")
        self.inv = inv
        root = np.sqrt(inv)
        self._sd = 1.0 / root
        self._drift = (None, None, None, None)
        self._factor(root)

    def sample_momentum(self, rng):
        return rng.standard_normal(self.dim) * self._sd

    def kinetic(self, p):
        with np.errstate(over="ignore", invalid="ignore"):
            return 0.5 * float(p @ (self.inv * p))

    def velocity(self, p):
        return self.inv * p

    def drift(self, p, eps):
        # (eps M^-1) p with eps M^-1 kept for the last two step sizes (a transition
        # steps with +eps and -eps): one multiplication per step instead of two
        c = self._drift
        if c[0] == eps:
            return c[1] * p
        if c[2] == eps:
            return c[3] * p
        d = eps * self.inv
        self._drift = (eps, d, c[0], c[1])
        return d * p


class DenseMetric(_GivenMetric):
    """Dense inverse metric ``inv`` (the posterior covariance after adaptation)."""

    name = "dense_e"
    _identity = staticmethod(np.eye)

    def set(self, inv):
        inv = np.asarray(inv, dtype=float)
        if inv.shape != (self.dim, self.dim):
            raise ValueError(f"dense_e inverse metric must be {self.dim}x{self.dim}")
        inv = 0.5 * (inv + inv.T)
        try:
            self._chol = np.linalg.cholesky(inv)
        except np.linalg.LinAlgError:
            raise ValueError("dense_e inverse metric must be positive definite") from None
        self.inv = inv
        # ndarray.dot, not @: a third of the call cost on short vectors
        self._factor(self._chol, np.ndarray.dot)

    def sample_momentum(self, rng):
        # p = L^-T z has covariance (L L^T)^-1 = M
        return solve_triangular(self._chol, rng.standard_normal(self.dim), lower=True,
                                trans="T")

    def kinetic(self, p):
        with np.errstate(over="ignore", invalid="ignore"):
            return 0.5 * float(p @ (self.inv @ p))

    def velocity(self, p):
        return self.inv.dot(p)


def make_metric(kind, dim, inv=None):
    kinds = {"unit_e": UnitMetric, "diag_e": DiagMetric, "dense_e": DenseMetric}
    if kind not in kinds:
        raise ValueError(f"metric must be one of {sorted(kinds)}, got {kind!r}")
    if kind == "unit_e":
        return UnitMetric(dim)
    return kinds[kind](dim, inv)


def leapfrog(model, metric, z, eps):
    """One leapfrog step of size ``eps`` (negative: backwards) from point ``z``:
    half kick, drift, half kick. Returns a new point with its velocity and
    Hamiltonian; a point whose log density failed (raised, or is not finite, or has
    a non-finite gradient) has ``h = inf`` and ``lp = -inf`` and is rejected by the
    caller's energy check.

    Called inside ``np.errstate(all="ignore")`` by the transitions (set once per
    transition, not per step: a non-finite value here is a rejection, not news).
    """
    half = 0.5 * eps
    kick = z.kick
    # a step in the same direction as the one that made z starts with the kick that
    # ended it (the same numbers: one multiplication saved per step)
    p = z.p + (kick[1] if kick is not None and kick[0] == half else half * z.grad)
    q = z.q + metric.drift(p, eps)
    try:
        lp, g = model.log_density_gradient(q)
    except RejectedPoint as e:
        return Point(q, p, -math.inf, None, p, math.inf, why=rejection_reason(e))
    hg = half * g
    p = p + hg
    v = metric.velocity(p)
    h = _energy(lp, p, v)
    if h == math.inf:
        return Point(q, p, -math.inf, g, v, math.inf, why=rejection_reason(None, lp, g))
    return Point(q, p, lp, g, v, h, None, (half, hg))
