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
* a metric with a ``min_int_time`` (the Riemannian one) has runs of fewer than
  ``min_int_time / eps`` states exempt from the U-turn checks, so trajectories last
  at least that long (its slow directions; the rule depends on the run alone, so the
  tree stays reversible); Euclidean metrics have none;
* a divergence when ``H - H0 > 1000`` (a NaN energy counts as infinite);
* ``accept_stat`` = mean over all new states of ``min(1, exp(H0 - H))`` (drives the
  step-size adaptation).

The tree is Stan's ``base_nuts`` recursion, unrolled into a loop (the same merges in
the same order); the random choices use the chain's own generator, so a seed
reproduces a chain exactly. Its decisions - the energy error and divergence, the
multinomial and progressive draws, the U-turn criterion and a merge's three checks -
are the functions of :mod:`.nuts_algebra`, which the compiled tree calls too.

How it is made cheap (in Python every numpy call costs ~0.3 us on short vectors,
a function call ~0.1 us; both are counted here):

* Two integrators feed the same tree code (:func:`_python_tree`). A Euclidean
  metric (``whitened_steps``) is integrated inline in the whitened momentum
  ``p~ = L^T p`` (:mod:`.hamiltonian`), where the velocity is ``p~`` itself: six
  numpy calls a step, no point objects. Any other metric (the Riemannian one) goes
  through its ``start`` / ``step`` methods.
* The U-turn dot products are computed by linearity. A subtree carries, besides
  ``rho``, the products ``d = v . rho`` at its two ends and ``k = v . p`` of its two
  end states (:class:`UTurnSummary`); merging ``A`` (built first) with ``B``,

      v_Abeg . (rho_A + rho_B)   = d_Abeg + v_Abeg . rho_B
      v_Bbeg . (rho_A + p_Bbeg)  = v_Bbeg . rho_A + k_Bbeg          (and so on)

  so each of the six tests costs one dot product and no vector sum. Two single
  states need one (Euclidean) or two, since their cross checks are the whole check
  again; two pairs of states (Euclidean) four.
* The uniforms come in batches (:func:`_uniforms`).

With numba installed (a dependency; ``STANLITE_JIT=0`` turns it off) a Euclidean
metric's transition goes instead to :mod:`.nuts_jit`, the same tree with everything
between two gradient calls compiled: one call a leapfrog step instead of ten numpy
calls. The Python tree below then serves the Riemannian metric. A chain's
:class:`NutsKernel` makes that choice once and owns the compiled tree's workspace.
"""

import math
import operator
from typing import NamedTuple

import numpy as np

from . import nuts_jit
from .hamiltonian import Point, RejectedPoint, TransitionInfo, rejection_reason
from .nuts_algebra import (energy_error, log_sum_exp, merge_no_uturn, multinomial,
                           no_uturn, progressive)


__all__ = ["transition", "TransitionInfo", "UTurnSummary", "NutsKernel"]


def _uniforms(rng, n=16):
    """Uniforms on [0, 1) drawn in batches (16, then 32, 64, ...): a transition
    needs about one per state, and ``Generator.random(n)`` costs about as much as
    three single draws. What a transition leaves unused is discarded."""
    while True:
        yield from rng.random(n).tolist()
        n *= 2


class UTurnSummary(NamedTuple):
    """What a run of states (a subtree, the trajectory so far) carries for the U-turn
    checks of its merges (:mod:`.nuts_algebra`): the sum of its momenta, its two end
    states' momenta and velocities, and the scalars the checks are built from by
    linearity. "beg" is the end the run started from, "end" the one it grew to."""

    rho: np.ndarray             # the sum of the momenta
    p_beg: np.ndarray           # momentum and velocity of the first state
    v_beg: np.ndarray
    p_end: np.ndarray           # ... and of the last
    v_end: np.ndarray
    k_beg: float                # v . p of the first and of the last state
    k_end: float
    d_beg: float                # v . rho at the first and at the last state
    d_end: float

    def reversed(self):
        """The same run read from its other end."""
        return _summary(UTurnSummary, (self.rho, self.p_end, self.v_end, self.p_beg,
                                       self.v_beg, self.k_end, self.k_beg, self.d_end,
                                       self.d_beg))


# a summary from a tuple of its fields in order: a third of the cost of the class's
# keyword-checking constructor, and summaries are made once per state
_summary = tuple.__new__


def _single(p, v, k):
    """The summary of a single state."""
    return _summary(UTurnSummary, (p, p, v, p, v, k, k, k, k))


def _pair(pa, va, ka, pb, vb, kb):
    """The U-turn summary of two adjacent single states ``a`` then ``b``, or None:
    their cross checks are the whole check again, and ``v_a . p_b = v_b . p_a`` when
    ``v`` is ``p`` (the whitened momentum)."""
    x = va.dot(pb)
    d_beg = ka + x
    d_end = kb + (x if va is pa and vb is pb else vb.dot(pa))
    if no_uturn(d_beg, d_end):
        return _summary(UTurnSummary, (pa + pb, pa, va, pb, vb, ka, kb, d_beg, d_end))
    return None


def _merge(a, b):
    """The U-turn summary of subtree ``a`` followed by ``b`` (``a``'s last state next
    to ``b``'s first), or None when the merged trajectory makes a U-turn: each of
    the six products of :func:`.nuts_algebra.merge_no_uturn` is a summary's scalar
    plus one dot product (no vector sum). (Summaries are unpacked by position, in
    :class:`UTurnSummary`'s field order: any 9-tuple in that order serves.)"""
    rho_a, a_p_beg, a_v_beg, a_p_end, a_v_end, a_k_beg, a_k_end, a_d_beg, _ = a
    rho_b, b_p_beg, b_v_beg, b_p_end, b_v_end, b_k_beg, b_k_end, _, b_d_end = b
    if a_p_beg is a_p_end and b_p_beg is b_p_end:
        return _pair(a_p_beg, a_v_beg, a_k_beg, b_p_beg, b_v_beg, b_k_beg)
    # ndarray.dot: a third of the call cost of ``@`` on short vectors (the matmul
    # ufunc's dispatch), and these dot products are most of a merge's work
    d_beg = a_d_beg + a_v_beg.dot(rho_b)
    d_end = b_d_end + b_v_end.dot(rho_a)
    if merge_no_uturn(d_beg, d_end,
                      a_d_beg + a_v_beg.dot(b_p_beg), b_k_beg + b_v_beg.dot(rho_a),
                      a_k_end + a_v_end.dot(rho_b), b_d_end + b_v_end.dot(a_p_end)):
        return _summary(UTurnSummary, (rho_a + rho_b, a_p_beg, a_v_beg, b_p_end,
                                       b_v_end, a_k_beg, b_k_end, d_beg, d_end))
    return None


def _join(a, b):
    """The U-turn summary of subtree ``a`` followed by ``b`` without the checks: for
    a run of states shorter than the metric's minimum integration time (see
    :func:`_python_tree`), which is not tested for a U-turn."""
    rho_a, a_p_beg, a_v_beg, a_p_end, a_v_end, a_k_beg, a_k_end, a_d_beg, _ = a
    rho_b, b_p_beg, b_v_beg, b_p_end, b_v_end, b_k_beg, b_k_end, _, b_d_end = b
    return _summary(UTurnSummary, (rho_a + rho_b, a_p_beg, a_v_beg, b_p_end, b_v_end,
                                   a_k_beg, b_k_end, a_d_beg + a_v_beg.dot(rho_b),
                                   b_d_end + b_v_end.dot(rho_a)))


def _merge_pairs(a, b):
    """:func:`_merge` of two pairs of states ``(a0, a1)`` then ``(b0, b1)``: when
    ``v`` is ``p`` (the whitened momentum) its six dot products are sums of the four
    ``a_i . b_j``, since ``rho_a = a0 + a1`` and ``rho_b = b0 + b1``."""
    rho_a, a0, a_v_beg, a1, _, a_k_beg, a_k_end, a_d_beg, _ = a
    rho_b, b0, b_v_beg, b1, _, b_k_beg, b_k_end, _, b_d_end = b
    if a_v_beg is not a0 or b_v_beg is not b0:
        return _merge(a, b)
    g00 = a0.dot(b0)
    g01 = a0.dot(b1)
    g11 = a1.dot(b1)
    g10 = a1.dot(b0)
    d_beg = a_d_beg + g00 + g01
    d_end = b_d_end + g01 + g11
    if merge_no_uturn(d_beg, d_end, a_d_beg + g00, b_k_beg + g00 + g10,
                      a_k_end + g10 + g11, b_d_end + g11):
        return _summary(UTurnSummary, (rho_a + rho_b, a0, a0, b1, b1, a_k_beg, b_k_end,
                                       d_beg, d_end))
    return None


def _whitened(model, metric, z, eps, rng, add=operator.add, sub=operator.sub,
              inf=math.inf):
    """The leapfrog of a Euclidean metric in the whitened momentum, inline:
    ``(z0, p0, v0, k0, leaf, turn)`` (see :func:`_python_tree`)."""
    drift, half, apply = metric.whitened_steps(eps)
    grad = model.log_density_gradient
    p0 = rng.standard_normal(metric.dim)
    k0 = float(p0.dot(p0))
    H0 = 0.5 * k0 - z.lp
    # the start point; like every point this path returns, without its momentum
    # (the next transition draws its own)
    z0 = Point(z.q, None, z.lp, z.grad, None, H0 if -inf < H0 < inf else inf, z.aux)
    # the integration state at the end being extended: position, momentum and the
    # half kick that ended the last step, which starts the next one in the same
    # direction (backwards, both are subtracted: the step with -eps); the start
    # point's kick serves both directions
    q, p, kick = z.q, p0, apply(half, z.grad)
    other = (q, p, kick)
    step = add

    def turn(forward):
        nonlocal q, p, kick, other, step
        s = add if forward else sub
        if s is not step:
            other, (q, p, kick) = (q, p, kick), other
            step = s

    def leaf():
        nonlocal q, p, kick
        ph = step(p, kick)
        q = step(q, apply(drift, ph))
        try:
            lp, g = grad(q)
        except RejectedPoint as e:
            return None, inf, rejection_reason(e), None, None
        kick = apply(half, g)
        p = step(ph, kick)
        k = float(p.dot(p))
        h = 0.5 * k - lp
        if -inf < h < inf:
            return (q, None, lp, g, None, h), h, p, p, k
        # a NaN or infinite density or energy
        return None, inf, rejection_reason(None, lp, g), None, None

    return z0, p0, p0, k0, leaf, turn


def _stepped(model, metric, z, eps, rng, inf=math.inf):
    """Any metric through its ``start`` / ``step`` (the Riemannian one):
    ``(z0, p0, v0, k0, leaf, turn)`` (see :func:`_python_tree`)."""
    z0 = metric.start(model, z, rng)
    cur = other = z0
    e = eps
    forward_now = True

    def turn(forward):
        nonlocal cur, other, e, forward_now
        if forward is not forward_now:
            cur, other = other, cur
            e = eps if forward else -eps
            forward_now = forward

    def leaf():
        nonlocal cur
        cur = metric.step(model, cur, e)
        h = cur.h                        # inf for a failed point (and for NaN energy)
        if h == inf:
            # no proposal when the density failed (not when a Riemannian step did)
            if cur.lp == -inf:
                return None, inf, cur.why or rejection_reason(None, cur.lp), None, None
            return cur, inf, None, None, None
        return cur, h, cur.p, cur.v, float(cur.v.dot(cur.p))

    return z0, z0.p, z0.v, float(z0.v.dot(z0.p)), leaf, turn


def transition(model, metric, z, eps, rng, max_depth=10, max_delta_h=1000.0):
    """One NUTS transition from point ``z`` (its ``q``, ``lp``, ``grad``; the momentum
    is resampled). Returns ``(new point, TransitionInfo)``.

    ``metric`` is a Euclidean metric of :mod:`.hamiltonian` (integrated inline in the
    whitened momentum; the new point carries no momentum) or supplies
    ``start(model, z, rng)`` (fresh momentum, velocity and Hamiltonian) and
    ``step(model, z, eps)`` (one integrator step), as the Riemannian metric does with
    the implicit leapfrog."""
    with np.errstate(all="ignore"):
        return _transition(model, metric, z, eps, rng, max_depth, max_delta_h)


#: whether Euclidean metrics take the compiled tree (a test switches it)
use_jit = nuts_jit.available()


class NutsKernel:
    """One chain's NUTS transitions with ``metric``: the tree is chosen once, here -
    the compiled one (:mod:`.nuts_jit`) for a Euclidean metric when numba is in
    use, else the Python one - and the compiled tree's :class:`.nuts_jit.Workspace`
    belongs to this object (one per chain), not to the metric.

    >>> from stanlite.samplers.hamiltonian import DiagMetric
    >>> kernel = NutsKernel(DiagMetric(2))
    >>> kernel.compiled == (use_jit and nuts_jit.available())
    True
    """

    __slots__ = ("metric", "compiled", "workspace")

    def __init__(self, metric):
        self.metric = metric
        self.compiled = use_jit and hasattr(metric, "whitened_steps")
        self.workspace = nuts_jit.Workspace() if self.compiled else None

    def transition(self, model, z, eps, rng, max_depth=10, max_delta_h=1000.0):
        """:func:`transition` with this kernel's metric, without the errstate (the
        chain sets it once for a run)."""
        if self.compiled:
            return nuts_jit.transition(model, self.metric, z, eps, rng, max_depth,
                                       max_delta_h, self.workspace)
        return _python_tree(model, self.metric, z, eps, rng, max_depth, max_delta_h)

    def segment(self, model, rng, z, eps, n, **options):
        """:func:`.nuts_jit.segment` in this kernel's workspace (None: no compiled
        segment can run; the Python tree serves)."""
        if not self.compiled:
            return None
        return nuts_jit.segment(model, self.metric, rng, z, eps, n,
                                workspace=self.workspace, **options)


class ChainTransition:
    """One chain's NUTS transition function (the signature of :func:`_transition`)
    with the compiled tree's :class:`.nuts_jit.Workspace` its own, made at first use
    and reused by every transition and segment of the chain, whatever metric the
    chain's warmup moves to (the workspace checks the metric's whitened factor at
    each use): the chain, not its metric, owns the scratch space (issue 23, point 5).
    """

    __slots__ = ("workspace",)

    def __init__(self):
        self.workspace = None

    def own(self):
        """This chain's workspace (made at the first call)."""
        ws = self.workspace
        if ws is None:
            ws = self.workspace = nuts_jit.Workspace()
        return ws

    def __call__(self, model, metric, z, eps, rng, max_depth=10, max_delta_h=1000.0):
        if use_jit and hasattr(metric, "whitened_steps"):
            return nuts_jit.transition(model, metric, z, eps, rng, max_depth,
                                       max_delta_h, self.own())
        return _python_tree(model, metric, z, eps, rng, max_depth, max_delta_h)


def _transition(model, metric, z, eps, rng, max_depth=10, max_delta_h=1000.0):
    # transition() without the errstate (chain.run sets it once for the whole run);
    # the compiled tree's workspace is then nuts_jit.workspace_of(metric)
    if use_jit and hasattr(metric, "whitened_steps"):
        return nuts_jit.transition(model, metric, z, eps, rng, max_depth, max_delta_h)
    return _python_tree(model, metric, z, eps, rng, max_depth, max_delta_h)


def _python_tree(model, metric, z, eps, rng, max_depth, max_delta_h):
    """The Python tree (any metric: see :func:`transition`)."""
    # the integrator: ``z0`` the start point with its Hamiltonian ``h``, ``p0, v0,
    # k0 = v0 . p0`` its momentum, and two functions, ``turn(forward)`` (integrate
    # from that end of the trajectory from now on) and ``leaf()``, one step from
    # there: ``(proposal, h, p, v, v . p)``, ``h`` infinite for a failed step and the
    # proposal None when the density failed (a Point, or a Point's arguments; ``p``
    # is then the reason, rejection_reason's key)
    make = _whitened if hasattr(metric, "whitened_steps") else _stepped
    z0, p0, v0, k0, leaf, turn = make(model, metric, z, eps, rng)
    # A metric may ask for a minimum integration time (the Riemannian one: its slow
    # directions, rhmc.SoftAbsMetric.min_int_time): a run of fewer than ``n_min``
    # states is then not tested for a U-turn. The test stays a function of the run
    # alone (its length and states, whichever of them the trajectory started from),
    # which is all the tree's reversibility needs.
    t_min = getattr(metric, "min_int_time", 0.0) or 0.0
    n_min = math.ceil(t_min / abs(eps)) if t_min > 0 and eps else 0
    H0 = z0.h
    if not -math.inf < H0 < math.inf:
        # no energy error can be measured from such a start (the chain never holds
        # one; a caller may pass it): the transition stays put, as the compiled tree
        if not isinstance(z0, Point):
            z0 = Point(*z0)
        return z0, TransitionInfo(0.0, 0, 0, False, math.inf, 0, math.nan, 0.0)
    uniform = _uniforms(rng).__next__
    n_leapfrog = 0
    sum_metro = 0.0
    max_err = 0.0
    max_abs = 0.0
    divergent = False
    n_failed = 0
    rejected = None             # {reason: 1} when a step's density failed

    def build(depth):
        """A subtree of ``2^depth`` new states from the current end:
        ``(proposal, log weight, UTurnSummary)``, or None when it diverged or made
        a U-turn (the whole transition stops).

        Stan's recursion, unrolled: states come in pairs, and after pair ``c`` the
        pending subtrees of equal size are merged, as many as ``c`` has trailing
        one bits (a binary counter), in the order the recursion merges them."""
        nonlocal n_leapfrog, sum_metro, max_err, max_abs, divergent, n_failed, rejected
        size = 1 << depth
        pending = []                # (proposal, log weight, summary) of each level
        for i in range(size):
            prop, h, p, v, k = leaf()
            err = h - H0
            divergent, sum_metro, max_abs, max_err = energy_error(
                err, sum_metro, max_abs, max_err, max_delta_h)
            if divergent:
                if prop is None:
                    n_failed += 1
                    rejected = {p: 1}
                n_leapfrog += i + 1
                return None
            if not i & 1:
                prop_a, lw_a, pa, va, ka = prop, -err, p, v, k
                continue
            # the U-turn checks come first: a subtree that fails them is discarded
            # whole, so its proposal needs no draw
            if n_min > 2:
                s_a = _single(pa, va, ka)
                summary = _join(s_a, _single(p, v, k))
            else:
                summary = _pair(pa, va, ka, p, v, k)
            if summary is None:
                n_leapfrog += i + 1
                return None
            lw, keep_a = multinomial(lw_a, -err, uniform())
            if keep_a:
                prop = prop_a
            c = i >> 1
            merge = _merge_pairs                     # the first merge joins two pairs
            n_run = 2
            while c & 1:
                prop_a, lw_a, u_a = pending.pop()
                n_run *= 2
                summary = (merge if n_run >= n_min else _join)(u_a, summary)
                merge = _merge
                if summary is None:
                    n_leapfrog += i + 1
                    return None
                lw, keep_a = multinomial(lw_a, lw, uniform())
                if keep_a:
                    prop = prop_a
                c >>= 1
            pending.append((prop, lw, summary))
        n_leapfrog += size
        if size == 1:
            return prop_a, lw_a, _single(pa, va, ka)
        return pending[0]

    sample = z0
    traj = _single(p0, v0, k0)      # the trajectory's summary, "end" the growing end
    end_forward = True              # whether that end is the forward one
    log_w = 0.0                     # the initial point's weight: exp(H0 - H0)
    depth = 0
    while depth < max_depth:
        forward = uniform() > 0.5
        turn(forward)
        sub = build(depth)
        if sub is None:
            break
        depth += 1
        prop, lw_sub, u = sub
        sure, p = progressive(log_w, lw_sub)
        if sure or uniform() < p:
            sample = prop
        log_w = log_sum_exp(log_w, lw_sub)
        if forward is not end_forward:          # the end the subtree grew from
            traj = traj.reversed()
            end_forward = forward
        # at depth 2: the start point and one state, then a pair
        if (1 << depth) < n_min:
            traj = _join(traj, u)
        else:
            traj = (_merge_pairs if depth == 2 else _merge)(traj, u)
        if traj is None:
            break
    accept = sum_metro / n_leapfrog if n_leapfrog else 0.0
    if not isinstance(sample, Point):         # a Euclidean state's Point arguments
        sample = Point(*sample)
    energy = sample.h
    return sample, TransitionInfo(accept, n_leapfrog, depth, divergent, energy,
                                  n_failed, energy - H0, max_err, rejected)
