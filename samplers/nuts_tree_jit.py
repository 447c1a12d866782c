"""The compiled NUTS tree (numba): its workspace layout and the trajectory's
bookkeeping between two gradient evaluations, :func:`_begin` and :func:`_advance`.
:mod:`.nuts_jit` drives it (the gradient, the random numbers, the segments of many
iterations); :mod:`.nuts_jit`'s docstring says why it is compiled and how it is
called. The decisions - U-turn checks, multinomial and progressive draws, the energy
error's bookkeeping - are :mod:`.nuts_algebra`'s, the Python tree's.

Numerically this is the Python tree's arithmetic with the dot products summed in
index order, so the two agree to rounding, not bit for bit.
"""

import math
from typing import NamedTuple

import numpy as np

from stanlite.config import switched_off

from .nuts_algebra import (energy_error, log_sum_exp, merge_no_uturn, multinomial,
                           no_uturn, progressive)

__all__ = ["available", "ROW", "SC", "CNT", "SUB", "SUB_S", "SUMMARY"]

try:
    if switched_off("STANLITE_JIT"):
        raise ImportError("disabled by STANLITE_JIT")
    from numba import njit
except ImportError:                                 # the Python tree is used instead
    njit = None

# compiled on first call, and cached on disk by numba; without numba the same
# functions run as (slow) Python, which only a debugging session would want
_jit = (lambda f: f) if njit is None else njit(cache=True, nogil=True)
# the small pieces of a leapfrog step and a merge, inlined where they are called by
# numba's own inliner (LLVM left them as calls, each passing the workspace's arrays
# field by field): eight schools' bookkeeping 0.42 -> 0.32 us a leapfrog step
_inline = (lambda f: f) if njit is None else njit(cache=True, nogil=True, inline="always")


def available():
    """Whether the compiled kernel is in use (numba importable, not disabled)."""
    return njit is not None


# ---- workspace layout ---------------------------------------------------------------
# State lives in three arrays (few objects to pass at a call): W, rows of length dim;
# S, float scalars; I, integer scalars. Their layouts are the named tuples below, the
# only place that knows an offset; numba reads a global tuple as a constant, so
# ``W[ROW.sample_q, j]`` compiles as a literal index would.
class _Rows(NamedTuple):
    """Rows of W."""
    end_fwd: int        # the forward end: position, momentum, last half kick (+0, +1, +2)
    end_bwd: int        # the backward end, likewise (the end being extended: I.forward)
    sample_q: int       # the sample: position and gradient
    sample_grad: int
    first_q: int        # the first state of a pair: position, gradient, momentum
    first_grad: int
    first_p: int
    current: int        # the subtree being completed: a subtree record (SUB)
    traj_rho: int       # the trajectory's rho, and its two end momenta (+0, +1; which
    traj_p: int         # is its "beg" and which its "end": I[CNT.traj_beg], traj_end)
    levels: int         # the pending subtree of level l: a record at levels + l * SUB_ROWS


class _SubtreeRows(NamedTuple):
    """A subtree record's rows, from its first: its U-turn summary's rho and end
    momenta, its proposal's position and gradient."""
    rho: int
    p_beg: int
    p_end: int
    q: int
    grad: int


class _SubtreeScalars(NamedTuple):
    """A subtree record's scalars in S, from its first: the proposal's log density
    and energy, the subtree's log weight, then its U-turn summary (SUMMARY)."""
    lp: int
    h: int
    lw: int
    summary: int


class _Summary(NamedTuple):
    """A U-turn summary's scalars in S, from its first (nuts.UTurnSummary's)."""
    k_beg: int
    k_end: int
    d_beg: int
    d_end: int


class _Scalars(NamedTuple):
    """S: float scalars; after them the pending levels' scalars, then the uniforms."""
    h0: int             # the start's Hamiltonian
    sum_metro: int      # the acceptance statistic's sum, the largest |H - H0|, its value
    max_err: int
    max_abs: int
    log_w: int          # the trajectory's log weight
    sample_lp: int      # the sample's log density and energy
    sample_h: int
    first_lp: int       # the first state of a pair: log density, energy, v.p, log weight
    first_h: int
    first_k: int
    first_lw: int
    current: int        # the current subtree's scalars (SUB_SCALARS of them)
    traj: int           # the trajectory's U-turn summary (a _Summary)
    max_delta_h: int
    accept: int         # the transition's acceptance statistic
    levels: int         # pending level l's scalars at levels + l * SUB_SCALARS


class _Counters(NamedTuple):
    """I: integer scalars."""
    n_leapfrog: int
    depth: int
    divergent: int
    n_failed: int
    forward: int        # the direction of the subtree being built
    end_forward: int    # whether the trajectory's "end" is its forward end
    size: int           # the subtree's number of states, and the index of the next
    index: int
    n_pending: int      # pending subtrees
    traj_beg: int       # the rows of the trajectory's end momenta
    traj_end: int
    u: int              # the next uniform in S, and the end of the uniforms
    u_end: int
    max_depth: int
    sample_moved: int   # whether the sample is not the start point


SUB = _SubtreeRows(*range(5))
SUB_ROWS = len(SUB)
SUB_S = _SubtreeScalars(0, 1, 2, 3)
SUMMARY = _Summary(*range(4))
SUB_SCALARS = 3 + len(SUMMARY)
ROW = _Rows(end_fwd=0, end_bwd=3, sample_q=6, sample_grad=7, first_q=8, first_grad=9,
            first_p=10, current=11, traj_rho=11 + SUB_ROWS, traj_p=12 + SUB_ROWS,
            levels=14 + SUB_ROWS)
SC = _Scalars(*range(11), current=11, traj=11 + SUB_SCALARS, max_delta_h=15 + SUB_SCALARS,
              accept=16 + SUB_SCALARS, levels=17 + SUB_SCALARS)
CNT = _Counters(*range(15))
_N_INT = len(CNT)

_DONE, _NEED_UNIFORMS, _BAD_GRADIENT = -1, -2, -3

def _workspace(dim, max_depth):
    """``(W, S, I, n_uniforms)``: S ends with room for ``n_uniforms`` uniforms,
    enough for several calls (one may use up to ``max_depth + 3``)."""
    levels = max_depth + 1
    n_uniforms = max(32, 2 * (max_depth + 3))
    return (np.zeros((ROW.levels + SUB_ROWS * levels, dim)),
            np.zeros(SC.levels + SUB_SCALARS * levels + n_uniforms),
            np.zeros(_N_INT, dtype=np.int64), n_uniforms)


@_inline
def _dot(W, a, b):
    # four running sums (a fixed order: the same numbers on every machine), so the
    # additions need not wait for each other
    n = W.shape[1]
    s0 = s1 = s2 = s3 = 0.0
    m = n - n % 4
    for j in range(0, m, 4):
        s0 += W[a, j] * W[b, j]
        s1 += W[a, j + 1] * W[b, j + 1]
        s2 += W[a, j + 2] * W[b, j + 2]
        s3 += W[a, j + 3] * W[b, j + 3]
    for j in range(m, n):
        s0 += W[a, j] * W[b, j]
    return (s0 + s1) + (s2 + s3)


@_inline
def _copy_row(W, src, dst):
    for j in range(W.shape[1]):
        W[dst, j] = W[src, j]


@_inline
def _drift(W, M, x, dst, sign):
    # W[dst] += sign * (eps L) W[x]; M stacks eps L over (eps/2) L^T, each one row
    # (the diagonal metrics) or a full matrix. The dense case is a function of its
    # own: its product allocates, and a function that allocates keeps reference
    # counts on the arrays passed to it - atomic operations at every call, which
    # the diagonal case then paid too (perf: ~15% of a step on eight schools)
    n = W.shape[1]
    if M.shape[0] == 2:
        for j in range(n):
            W[dst, j] += sign * (M[0, j] * W[x, j])
    else:
        _drift_dense(W, M, x, dst, sign)


@_jit
def _drift_dense(W, M, x, dst, sign):
    n = W.shape[1]
    v = np.dot(M[:n], W[x])             # BLAS, as the Python tree's ndarray.dot
    for i in range(n):
        W[dst, i] += sign * v[i]


@_inline
def _kick(W, M, g, dst):
    # W[dst] = (eps/2) L^T g, the half kick (M as in _drift)
    n = W.shape[1]
    if M.shape[0] == 2:
        for j in range(n):
            W[dst, j] = M[1, j] * g[j]
    else:
        _kick_dense(W, M, g, dst)


@_jit
def _kick_dense(W, M, g, dst):
    n = W.shape[1]
    v = np.dot(M[n:], g)
    for i in range(n):
        W[dst, i] = v[i]


@_inline
def _merge_ok(W, S, ra, ba, ea, sa, rb, bb, eb, sb):
    """The U-turn checks of subtree a followed by b, each given by the rows of its
    rho and end momenta and the offset in S of its summary's scalars; by linearity
    each of the six products is a scalar plus one dot product (nuts._merge).
    Returns (ok, d_beg, d_end)."""
    d_a_beg, d_b_end = S[sa + SUMMARY.d_beg], S[sb + SUMMARY.d_end]
    d_beg = d_a_beg + _dot(W, ba, rb)
    d_end = d_b_end + _dot(W, eb, ra)
    ok = merge_no_uturn(d_beg, d_end,
                        d_a_beg + _dot(W, ba, bb), S[sb + SUMMARY.k_beg] + _dot(W, bb, ra),
                        S[sa + SUMMARY.k_end] + _dot(W, ea, rb), d_b_end + _dot(W, eb, ea))
    return ok, d_beg, d_end


@_inline
def _step_from_end(W, I, M):
    """Half kick and drift at the end being extended; returns the row of the new
    position (the caller evaluates the gradient there)."""
    e = ROW.end_fwd if I[CNT.forward] else ROW.end_bwd
    sign = 1.0 if I[CNT.forward] else -1.0
    n = W.shape[1]
    for j in range(n):
        W[e + 1, j] += sign * W[e + 2, j]
    _drift(W, M, e + 1, e, sign)
    return e


@_inline
def _take_uniform(S, I):
    k = I[CNT.u]
    I[CNT.u] = k + 1
    return S[k]


@_inline
def _start_subtree(W, S, I, M):
    I[CNT.forward] = 1 if _take_uniform(S, I) > 0.5 else 0
    I[CNT.size] = 1 << I[CNT.depth]
    I[CNT.index] = 0
    I[CNT.n_pending] = 0
    return _step_from_end(W, I, M)


@_jit
def _begin(W, S, I, M, q0, lp0, g0, p0, u, max_depth, max_delta_h):
    """A transition from ``(q0, lp0, g0)`` with momentum ``p0``; ``u`` the first
    uniforms. Returns the row of the first position to evaluate (or _DONE)."""
    n = W.shape[1]
    if q0.shape[0] != n or g0.shape[0] != n:
        return _BAD_GRADIENT
    k0 = 0.0
    for j in range(n):
        k0 += p0[j] * p0[j]
    H0 = 0.5 * k0 - lp0
    if not (-math.inf < H0 < math.inf):
        H0 = math.inf
    S[:] = 0.0
    I[:] = 0
    S[SC.h0] = H0
    S[SC.max_delta_h] = max_delta_h
    S[SC.sample_lp] = lp0
    S[SC.sample_h] = H0
    I[CNT.max_depth] = max_depth
    u0 = S.shape[0] - u.shape[0]
    for j in range(u.shape[0]):
        S[u0 + j] = u[j]
    I[CNT.u], I[CNT.u_end] = u0, S.shape[0]
    for e in (ROW.end_fwd, ROW.end_bwd):
        for j in range(n):
            W[e, j] = q0[j]
            W[e + 1, j] = p0[j]
    _kick(W, M, g0, ROW.end_fwd + 2)
    _copy_row(W, ROW.end_fwd + 2, ROW.end_bwd + 2)
    # the trajectory so far, the start point: rho = p0 at both ends
    for j in range(n):
        W[ROW.traj_rho, j] = p0[j]
        W[ROW.traj_p, j] = p0[j]
        W[ROW.traj_p + 1, j] = p0[j]
    I[CNT.traj_beg], I[CNT.traj_end] = ROW.traj_p, ROW.traj_p + 1
    for f in range(len(SUMMARY)):
        S[SC.traj + f] = k0
    I[CNT.end_forward] = 1
    if max_depth < 1 or H0 == math.inf:     # (no energy error can be measured)
        return _finish(S, I)
    return _start_subtree(W, S, I, M)


@_inline
def _finish(S, I):
    n = I[CNT.n_leapfrog]
    S[SC.accept] = S[SC.sum_metro] / n if n else 0.0
    return _DONE


@_inline
def _copy_record(W, S, rows, scalars, to_rows, to_scalars):
    """Copy a subtree record (its rows in W, its scalars in S)."""
    for f in range(SUB_ROWS):
        _copy_row(W, rows + f, to_rows + f)
    for f in range(SUB_SCALARS):
        S[to_scalars + f] = S[scalars + f]


@_inline
def _set_proposal(W, S, scalars, q_row, g, lp, h):
    """The current subtree's proposal: the position in row ``q_row``, gradient
    ``g``, log density and energy."""
    c = ROW.current
    _copy_row(W, q_row, c + SUB.q)
    for j in range(W.shape[1]):
        W[c + SUB.grad, j] = g[j]
    S[scalars + SUB_S.lp], S[scalars + SUB_S.h] = lp, h


@_inline
def _pair_into_current(W, S, I, e, g, lp, h, k, lw_b):
    """The pair of the first state (rows first_*) and the state at end ``e``
    becomes the current subtree: the U-turn check first (a pair that turns is
    discarded whole: False, its proposal needs no draw), then the multinomial
    draw of its proposal."""
    n = W.shape[1]
    c, sc = ROW.current, SC.current
    x = _dot(W, ROW.first_p, e + 1)
    d_beg = S[SC.first_k] + x
    d_end = k + x
    if not no_uturn(d_beg, d_end):
        return False
    for j in range(n):
        W[c + SUB.rho, j] = W[ROW.first_p, j] + W[e + 1, j]
    _copy_row(W, ROW.first_p, c + SUB.p_beg)
    _copy_row(W, e + 1, c + SUB.p_end)
    s = sc + SUB_S.summary
    S[s + SUMMARY.k_beg], S[s + SUMMARY.k_end] = S[SC.first_k], k
    S[s + SUMMARY.d_beg], S[s + SUMMARY.d_end] = d_beg, d_end
    lw, keep_first = multinomial(S[SC.first_lw], lw_b, _take_uniform(S, I))
    if keep_first:
        _copy_row(W, ROW.first_q, c + SUB.q)
        _copy_row(W, ROW.first_grad, c + SUB.grad)
        S[sc + SUB_S.lp], S[sc + SUB_S.h] = S[SC.first_lp], S[SC.first_h]
    else:
        _set_proposal(W, S, sc, e, g, lp, h)
    S[sc + SUB_S.lw] = lw
    return True


@_inline
def _merge_pending(W, S, I, i):
    """Stan's recursion unrolled: after pair ``c = i >> 1``, merge as many pending
    subtrees into the current one as c has trailing one bits. False at a U-turn."""
    n = W.shape[1]
    c, sc = ROW.current, SC.current
    cs = sc + SUB_S.summary
    k = i >> 1
    while k & 1:
        lev = I[CNT.n_pending] - 1
        r0 = ROW.levels + SUB_ROWS * lev
        s0 = SC.levels + SUB_SCALARS * lev
        ps = s0 + SUB_S.summary
        good, d_beg, d_end = _merge_ok(W, S, r0 + SUB.rho, r0 + SUB.p_beg, r0 + SUB.p_end,
                                       ps, c + SUB.rho, c + SUB.p_beg, c + SUB.p_end, cs)
        if not good:
            return False
        for j in range(n):
            W[c + SUB.rho, j] += W[r0 + SUB.rho, j]
        _copy_row(W, r0 + SUB.p_beg, c + SUB.p_beg)
        S[cs + SUMMARY.k_beg] = S[ps + SUMMARY.k_beg]
        S[cs + SUMMARY.d_beg], S[cs + SUMMARY.d_end] = d_beg, d_end
        lw, keep_first = multinomial(S[s0 + SUB_S.lw], S[sc + SUB_S.lw],
                                     _take_uniform(S, I))
        if keep_first:
            _copy_row(W, r0 + SUB.q, c + SUB.q)
            _copy_row(W, r0 + SUB.grad, c + SUB.grad)
            S[sc + SUB_S.lp], S[sc + SUB_S.h] = S[s0 + SUB_S.lp], S[s0 + SUB_S.h]
        S[sc + SUB_S.lw] = lw
        k >>= 1
        I[CNT.n_pending] = lev
    return True


@_inline
def _subtree_done(W, S, I, M):
    """The current subtree is complete: it joins the trajectory (biased progressive
    sampling of the proposal, the U-turn checks of the whole); returns the row of
    the next subtree's first position, or _DONE."""
    n = W.shape[1]
    c, sc = ROW.current, SC.current
    I[CNT.n_leapfrog] += I[CNT.size]
    I[CNT.depth] += 1
    lw_sub = S[sc + SUB_S.lw]
    log_w = S[SC.log_w]
    sure, p = progressive(log_w, lw_sub)
    if sure or _take_uniform(S, I) < p:
        _copy_row(W, c + SUB.q, ROW.sample_q)
        _copy_row(W, c + SUB.grad, ROW.sample_grad)
        S[SC.sample_lp], S[SC.sample_h] = S[sc + SUB_S.lp], S[sc + SUB_S.h]
        I[CNT.sample_moved] = 1
    S[SC.log_w] = log_sum_exp(log_w, lw_sub)
    t = SC.traj
    if I[CNT.forward] != I[CNT.end_forward]:
        # the trajectory's "end" is the one the subtree grew from
        I[CNT.traj_beg], I[CNT.traj_end] = I[CNT.traj_end], I[CNT.traj_beg]
        S[t + SUMMARY.k_beg], S[t + SUMMARY.k_end] = S[t + SUMMARY.k_end], S[t + SUMMARY.k_beg]
        S[t + SUMMARY.d_beg], S[t + SUMMARY.d_end] = S[t + SUMMARY.d_end], S[t + SUMMARY.d_beg]
        I[CNT.end_forward] = I[CNT.forward]
    tb, te = I[CNT.traj_beg], I[CNT.traj_end]
    cs = sc + SUB_S.summary
    good, d_beg, d_end = _merge_ok(W, S, ROW.traj_rho, tb, te, t,
                                   c + SUB.rho, c + SUB.p_beg, c + SUB.p_end, cs)
    if not good:
        return _finish(S, I)
    for j in range(n):
        W[ROW.traj_rho, j] += W[c + SUB.rho, j]
    _copy_row(W, c + SUB.p_end, te)
    S[t + SUMMARY.k_end] = S[cs + SUMMARY.k_end]
    S[t + SUMMARY.d_beg], S[t + SUMMARY.d_end] = d_beg, d_end
    if I[CNT.depth] >= I[CNT.max_depth]:
        return _finish(S, I)
    return _start_subtree(W, S, I, M)


@_jit
def _advance(W, S, I, M, g, lp):
    """The state just evaluated at the end being extended (``lp`` its log density,
    ``g`` the gradient; a NaN ``lp`` for a density that raised) joins the tree.
    Returns the row of the next position, or _DONE, or - before changing anything -
    _NEED_UNIFORMS when fewer remain than this call may use (one for the pair, one
    per merge, one for the progressive draw, one for the next direction)."""
    if I[CNT.u] + I[CNT.depth] + 3 > I[CNT.u_end]:
        return _NEED_UNIFORMS
    n = W.shape[1]
    e = ROW.end_fwd if I[CNT.forward] else ROW.end_bwd
    sign = 1.0 if I[CNT.forward] else -1.0
    h = math.inf
    k = 0.0
    ok = -math.inf < lp < math.inf
    if ok and g.shape[0] != n:
        return _BAD_GRADIENT            # (compiled code does not check its indices)
    if ok:
        _kick(W, M, g, e + 2)
        for j in range(n):
            W[e + 1, j] += sign * W[e + 2, j]
        k = _dot(W, e + 1, e + 1)
        h = 0.5 * k - lp
        if not (-math.inf < h < math.inf):
            h = math.inf
            ok = False
    i = I[CNT.index]
    err = h - S[SC.h0]
    divergent, S[SC.sum_metro], S[SC.max_abs], S[SC.max_err] = energy_error(
        err, S[SC.sum_metro], S[SC.max_abs], S[SC.max_err], S[SC.max_delta_h])
    if divergent:
        I[CNT.divergent] = 1
        I[CNT.n_failed] += 0 if ok else 1
        I[CNT.n_leapfrog] += i + 1
        return _finish(S, I)
    if not i & 1:
        # the first state of a pair (or a subtree of one state)
        _copy_row(W, e, ROW.first_q)
        for j in range(n):
            W[ROW.first_grad, j] = g[j]
        _copy_row(W, e + 1, ROW.first_p)
        S[SC.first_lp], S[SC.first_h], S[SC.first_k], S[SC.first_lw] = lp, h, k, -err
        if I[CNT.size] > 1:
            I[CNT.index] = i + 1
            return _step_from_end(W, I, M)
        c, sc = ROW.current, SC.current
        for f in (SUB.rho, SUB.p_beg, SUB.p_end):
            _copy_row(W, ROW.first_p, c + f)
        _set_proposal(W, S, sc, ROW.first_q, g, lp, h)
        S[sc + SUB_S.lw] = -err
        for f in range(len(SUMMARY)):
            S[sc + SUB_S.summary + f] = k
    else:
        if not (_pair_into_current(W, S, I, e, g, lp, h, k, -err)
                and _merge_pending(W, S, I, i)):
            I[CNT.n_leapfrog] += i + 1
            return _finish(S, I)
        if i + 1 < I[CNT.size]:
            # the current subtree waits at the next level for its sibling
            lev = I[CNT.n_pending]
            _copy_record(W, S, ROW.current, SC.current, ROW.levels + SUB_ROWS * lev,
                         SC.levels + SUB_SCALARS * lev)
            I[CNT.n_pending] = lev + 1
            I[CNT.index] = i + 1
            return _step_from_end(W, I, M)
    # (one place, so that the completed subtree's code is inlined once)
    return _subtree_done(W, S, I, M)


def drop_stale_cache(dispatchers, tag, paths):
    """Drop numba's on-disk cache of ``dispatchers`` when the source files ``paths``
    they depend on changed since it was written (their hash is kept beside the
    cache, ``<tag>.<name>.nuts-deps``). numba keys a cached function on its own
    file's time stamp only, but a function carries the machine code of what it
    calls: :mod:`.nuts_algebra`'s functions inlined here, this module's
    :func:`_advance` in :mod:`.nuts_jit`'s loops. (Call it before their first
    call: at import.)"""
    if njit is None:
        return
    from stanlite.autodiff.vm.stale_cache import flush_when_changed
    flush_when_changed(dispatchers, tag, paths, "nuts-deps")


if njit is not None:
    from . import nuts_algebra as _algebra
    drop_stale_cache([_begin, _advance], "nuts_tree_jit", [_algebra.__file__])
