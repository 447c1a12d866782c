"""NUTS for the Euclidean metrics with its trajectory bookkeeping compiled (numba).

The same transition as :func:`.nuts.transition` (read its docstring for the
algorithm: multinomial sampling in subtrees, biased progressive sampling at the top,
the generalised U-turn criterion with Stan's two extra checks across the seam, the
divergence threshold, ``accept_stat`` over all new states). When the model's
gradient runs in the compiled tape interpreter (stanlite/autodiff/vm: the model
offers ``compiled_gradient().kernel_program()``), the gradient is called from the
compiled loop :func:`_trajectory` too, and a whole transition runs without returning
to Python - except to draw more uniforms, and at a point the interpreter hands back
(a guard that changed, a value outside a domain: the model's own
``log_density_gradient`` evaluates it, re-recording or raising as it always does).
The spot checks against the eager tape continue after each transition at the
sample. Otherwise the gradient stays in Python; everything between two gradient
calls - the leapfrog's kicks and drift in
the whitened momentum ``p~ = L^T p`` (:mod:`.hamiltonian`), the energy, the U-turn
dot products, the multinomial and progressive draws, the merges of Stan's unrolled
recursion - is one call into compiled code, :func:`_advance`, which returns the row
of the workspace holding the next position to evaluate.

Why: in Python each of the ~10 numpy calls of a leapfrog step costs ~0.3 us on
short vectors, which put the sampler's own cost at ~7-10 us a step, 25-30% of a
35 us gradient (the logistic regression of ``benchmarks/nuts.py``); one compiled call
costs ~0.3 us.

State lives in three arrays so that a call passes few objects: ``W`` (rows of length
``dim``: the two ends of the trajectory, the proposals, the U-turn summaries of the
pending subtrees), ``S`` (float scalars) and ``I`` (integer scalars); their layouts
are the named tuples ``ROW``, ``SC``, ``CNT`` below (a subtree's record: ``SUB``,
``SUB_S``). The decisions - U-turn checks, multinomial and progressive draws, the
energy error's bookkeeping - are :mod:`.nuts_algebra`'s, the Python tree's. The random numbers are drawn in Python from the chain's
generator - the momentum, then uniforms in batches that the kernel consumes in order
(it asks for more, returning ``_NEED_UNIFORMS``, when fewer remain than one call may
use) - so a seed reproduces a chain exactly, and an interrupted chain resumes
bit-identically.

Numerically this is the Python tree's arithmetic with the dot products summed in
index order, so the two agree to rounding, not bit for bit. ``STANLITE_JIT=0`` (or a
missing numba) selects the Python tree.

Segments (:func:`segment`, driven by chain.py): with the model's program in the
interpreter, one call into :func:`_segment` makes many iterations of a chain - each
the transition above, with the step size's dual-averaging update and the variance
window's Welford sum after it during warmup - writing draws and statistics into
arrays, so that Python acts only at the segment's end (~30 us), not at every
iteration (~25 us for eight schools, 20 times its leapfrog steps). The random
numbers come from the chain's own numpy Generator inside compiled code (numba's
Generator, built from the bit generator's addresses by :func:`_generator`: a
Generator argument costs ~30 us a call to convert), drawn in the order and batches
of :func:`transition`; the adaptation's arithmetic is the Python classes'. A segment
is therefore the same iterations as :func:`transition` called one by one, bit for
bit (tests/samplers/test_nuts_segments.py), which is what lets a chain mix the two,
stop anywhere and resume.
"""

import math
import os
import threading
import time

from typing import NamedTuple

import numpy as np

from .hamiltonian import Point, RejectedPoint, TransitionInfo, rejection_reason
from .nuts_algebra import (energy_error, log_sum_exp, merge_no_uturn, multinomial,
                           no_uturn, progressive)

__all__ = ["available", "transition", "warm", "gate", "compiled_seconds"]

try:
    if os.environ.get("STANLITE_JIT", "1").strip().lower() in ("0", "false", "no", "off"):
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

if njit is not None:
    from stanlite.autodiff.vm import kernel as _vm
    _value_grad = _vm.value_grad
    from numba import types as _nt
    from numba.core import cgutils as _cgutils
    from numba.extending import intrinsic as _intrinsic

    @_intrinsic
    def _generator(typingctx, state, next_uint64, next_uint32, next_double):
        """A numpy Generator in compiled code from its bit generator's state and
        functions (the addresses of ``bit_generator.ctypes``, :func:`_rng_pointers`):
        what numba makes of a Generator argument, without the ~30 us that converting
        one costs at every call. Its draws advance the Python object's state."""
        sig = _nt.npy_rng(_nt.uintp, _nt.uintp, _nt.uintp, _nt.uintp)

        def codegen(context, builder, sig, args):
            bg = _cgutils.create_struct_proxy(_nt.npy_bitgen)(context, builder)
            bg.state_address = bg.state = args[0]
            bg.fnptr_next_uint64, bg.fnptr_next_uint32, bg.fnptr_next_double = args[1:]
            rng = _cgutils.create_struct_proxy(_nt.npy_rng)(context, builder)
            rng.bit_generator = bg._getvalue()
            return rng._getvalue()
        return sig, codegen


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
        return _subtree_done(W, S, I, M)
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
    return _subtree_done(W, S, I, M)


@_jit
def _trajectory(W, S, I, M, code, aux, V, A, dim, out, nvar, g, box, r, x):
    """Evaluate the positions the tree asks for in the interpreter and advance, until
    the transition is done (_DONE), more uniforms are needed (_NEED_UNIFORMS: the
    last evaluation is in ``g`` and ``box[0]``, to be passed to :func:`_advance` after
    the refill), or the interpreter hands a point back (its row ``r >= 0`` is
    returned: the caller evaluates it). ``box[1]`` counts the evaluations.

    The position goes to the interpreter copied into ``x`` (a vector of ``dim``), not
    as the view ``W[r]``: making a view takes a reference on the workspace, two
    atomic operations a step that cost more than the copy."""
    while r >= 0:
        for j in range(W.shape[1]):
            x[j] = W[r, j]
        st, lp = _value_grad(code, aux, V, A, dim, out, nvar, x, g)
        if st != 0:
            return r
        box[1] += 1.0
        box[0] = lp
        r = _advance(W, S, I, M, g, lp)
    return r


@_jit
def _open(W, S, I, M, q0, lp0, g0, p0, u, max_depth, max_delta_h, code, aux, V, A, dim,
          out, nvar, g, box):
    """:func:`_begin`, then (from a row to evaluate) :func:`_trajectory`: one call
    into compiled code instead of two (a call costs ~0.5 us plus ~0.1 us an
    argument). Returns what the last of them returned; ``box[1]`` counts the
    evaluations (0 when the trajectory did not start)."""
    box[1] = 0.0
    r = _begin(W, S, I, M, q0, lp0, g0, p0, u, max_depth, max_delta_h)
    if r >= 0:
        r = _trajectory(W, S, I, M, code, aux, V, A, dim, out, nvar, g, box, r,
                        np.empty(W.shape[1]))
    return r


# ---- segments: many iterations of one chain in one call -------------------------------
# the adaptation's scalars in one float array: Stan's dual averaging (adaptation.py
# DualAveraging, its fields in this order), the step size, Welford's count
(_D_COUNTER, _D_S_BAR, _D_X_BAR, _D_MU, _D_DELTA, _D_GAMMA, _D_KAPPA, _D_T0, _D_EPS,
 _D_WN) = range(10)
_N_AD = 10
# per-iteration statistics the segment writes: float columns, then integer columns
(_F_LP, _F_ACCEPT, _F_EPS, _F_ENERGY, _F_ENERGY_ERROR, _F_MAX_ERROR) = range(6)
_N_F = 6
(_J_DEPTH, _J_LEAPFROG, _J_DIVERGENT) = range(3)
_N_J = 3
#: how a segment ended: all its iterations done; stopped after the iteration at which
#: the spot-check schedule is due; an iteration the compiled loop cannot finish (a
#: point the interpreter hands back, a rejected proposal: the Python path reruns it)
SEGMENT_DONE, SEGMENT_CHECK, SEGMENT_HANDOFF = 0, 1, 2


@_jit
def _da_update(ad, accept):
    """``DualAveraging.update`` on the array ``ad`` (the same operations in the same
    order, so the same numbers); returns the next step size."""
    c = ad[_D_COUNTER] + 1.0
    ad[_D_COUNTER] = c
    a = min(1.0, accept) if -math.inf < accept < math.inf else 0.0
    eta = 1.0 / (c + ad[_D_T0])
    s_bar = (1.0 - eta) * ad[_D_S_BAR] + eta * (ad[_D_DELTA] - a)
    ad[_D_S_BAR] = s_bar
    x = ad[_D_MU] - s_bar * math.sqrt(c) / ad[_D_GAMMA]
    x_eta = c ** (-ad[_D_KAPPA])
    ad[_D_X_BAR] = (1.0 - x_eta) * ad[_D_X_BAR] + x_eta * x
    return math.exp(x)


@_jit
def _welford_add(ad, mean, m2, x):
    """``Welford.add`` in place (``m2`` one row for a diagonal estimate, else dim rows);
    the count is ``ad[_D_WN]``."""
    n = ad[_D_WN] + 1.0
    ad[_D_WN] = n
    dim = x.shape[0]
    d = np.empty(dim)
    for j in range(dim):
        d[j] = x[j] - mean[j]
        mean[j] = mean[j] + d[j] / n
    if m2.shape[0] == 1:
        for j in range(dim):
            m2[0, j] = m2[0, j] + (x[j] - mean[j]) * d[j]
    else:
        for i in range(dim):
            xi = x[i] - mean[i]
            for j in range(dim):
                m2[i, j] = m2[i, j] + xi * d[j]


@_jit
def _refill_from(rng, S, I, n_uniforms):
    """:func:`_refill`, drawing from the chain's generator inside compiled code (the
    same numbers as ``rng.random(n)``)."""
    end = S.shape[0]
    first, start = end - n_uniforms, I[CNT.u]
    left = end - start
    for j in range(left):                   # (forwards: start >= first)
        S[first + j] = S[start + j]
    for j in range(first + left, end):
        S[j] = rng.random()
    I[CNT.u] = first


@_jit
def _segment(rp, W, S, I, M, base, p0, u, q, g, lp, ad, mean, m2, n_iter, adapt, w_lo,
             w_hi, first, max_depth, max_delta_h, code, aux, V, A, dim, out, nvar, gbuf,
             box, budget, draws, fs, js):
    """Up to ``n_iter`` NUTS iterations of one chain from ``(q, lp[0], g)`` (updated
    in place), each what :func:`transition` does in Python with the same draws from
    the chain's generator (``rp``: :func:`_rng_pointers`) - the momentum, then
    uniforms in batches of ``u.shape[0]`` - followed,
    when ``adapt``, by the dual-averaging update of the step size ``ad[_D_EPS]``
    and, for iterations ``first + k`` in ``[w_lo, w_hi)``, Welford's update of
    ``mean, m2``. Iteration k's draw goes to ``draws[k]``, its statistics to
    ``fs[k]``, ``js[k]``.

    Returns ``(iterations done, status, evaluations of the program in them)``:
    SEGMENT_CHECK once ``budget`` evaluations are reached (the spot check is due at
    that iteration's sample), SEGMENT_HANDOFF for an iteration that cannot finish
    here (not counted; its draws from ``rng`` are made)."""
    rng = _generator(rp[0], rp[1], rp[2], rp[3])
    n_uniforms = u.shape[0]
    x = np.empty(W.shape[1])             # (_trajectory's copy of a position)
    total = 0
    for k in range(n_iter):
        eps = ad[_D_EPS]
        for a in range(M.shape[0]):
            for j in range(M.shape[1]):
                M[a, j] = eps * base[a, j]
        for j in range(p0.shape[0]):
            p0[j] = rng.standard_normal()
        for j in range(n_uniforms):
            u[j] = rng.random()
        r = _begin(W, S, I, M, q, lp[0], g, p0, u, max_depth, max_delta_h)
        n_eval = 0
        while r != _DONE:
            if r >= 0:
                box[1] = 0.0
                r = _trajectory(W, S, I, M, code, aux, V, A, dim, out, nvar, gbuf, box,
                                r, x)
                n_eval += int(box[1])
                if r >= 0:
                    return k, SEGMENT_HANDOFF, total
            elif r == _NEED_UNIFORMS:
                _refill_from(rng, S, I, n_uniforms)
                r = _advance(W, S, I, M, gbuf, box[0])
            else:
                return k, SEGMENT_HANDOFF, total    # (_BAD_GRADIENT: not here)
        if I[CNT.n_failed]:
            return k, SEGMENT_HANDOFF, total    # (the Python path names the reason)
        h0 = S[SC.h0]
        energy = h0
        if I[CNT.sample_moved]:
            for j in range(q.shape[0]):
                q[j] = W[ROW.sample_q, j]
                g[j] = W[ROW.sample_grad, j]
            lp[0] = S[SC.sample_lp]
            energy = S[SC.sample_h]
        for j in range(q.shape[0]):
            draws[k, j] = q[j]
        fs[k, _F_LP] = lp[0]
        fs[k, _F_ACCEPT] = S[SC.accept]
        fs[k, _F_EPS] = eps
        fs[k, _F_ENERGY] = energy
        fs[k, _F_ENERGY_ERROR] = energy - h0
        fs[k, _F_MAX_ERROR] = S[SC.max_err]
        js[k, _J_DEPTH] = I[CNT.depth]
        js[k, _J_LEAPFROG] = I[CNT.n_leapfrog]
        js[k, _J_DIVERGENT] = I[CNT.divergent]
        if adapt:
            ad[_D_EPS] = _da_update(ad, S[SC.accept])
            if w_lo <= first + k < w_hi:
                _welford_add(ad, mean, m2, q)
        total += n_eval
        if total >= budget:
            return k + 1, SEGMENT_CHECK, total
    return n_iter, SEGMENT_DONE, total


if njit is not None:
    # the interpreter is compiled into _trajectory's (and _open's) cached machine code,
    # but numba keys that cache on this file alone: drop it when the interpreter's
    # source changes
    _vm.drop_stale_cache([_trajectory, _open, _segment], "nuts_jit")

_NO_GRADIENT = np.zeros(0)          # what a failed evaluation passes (never read)


def warm():
    """Load (or compile) the kernel now: before chains are forked, so that each
    worker inherits it instead of loading it from numba's cache (~0.2 s each);
    the interpreter's own kernels too (the first evaluations and the spot checks
    call them from Python: another ~0.2 s a worker otherwise)."""
    if njit is None:
        return
    _vm.warm()
    W, S, I, n = _workspace(1, 1)
    M = np.ones((2, 1))
    x = np.zeros(1)
    _begin(W, S, I, M, x, 0.0, x, x, np.full(n, 0.75), 1, 1000.0)
    _advance(W, S, I, M, x, 0.0)
    code = np.zeros((1, 14), dtype=np.int64)
    aux, V, A, g, box = (np.zeros(1, dtype=np.int64), np.zeros(2), np.zeros(2),
                         np.zeros(1), np.zeros(2))
    _trajectory(W, S, I, M, code, aux, V, A, 1, 1, 2, g, box, _DONE, x.copy())
    _open(W, S, I, M, x, -math.inf, x, x, np.full(n, 0.75), 1, 1000.0, code, aux, V, A,
          1, 1, 2, g, box)
    ad, mean, m2 = _adaptation_arrays(None, None, 1, 0.5)
    rng = np.random.default_rng(0)          # (alive while its pointers are used)
    _segment(_rng_pointers(rng), W, S, I, M, M.copy(), x.copy(), np.zeros(n), x.copy(),
             x.copy(), np.full(1, -math.inf), ad, mean, m2, 1, False, 0, 1, 0, 1, 1000.0,
             code, aux, V, A, 1, 1, 2, g, box, 1, np.zeros((1, 1)), np.zeros((1, _N_F)),
             np.zeros((1, _N_J), dtype=np.int64))


def _compiled(model):
    """The model's retaped gradient, if it offers its program to compiled loops."""
    f = getattr(model, "compiled_gradient", None)
    return f() if f is not None else None


class _Context:
    """What the transitions of one chain reuse, kept on its metric (a chain has its
    own; adaptation replaces it): the workspace (made for the deepest tree asked
    for so far), and the model's retaped gradient - looked up once per model, not
    at every transition (~1 us: it goes through the model)."""

    __slots__ = ("ws", "depth", "model", "cg", "seg", "rng")

    def __init__(self, dim, max_depth):
        self.ws = _workspace(dim, max_depth)
        self.depth = max_depth
        self.model = self.cg = self.seg = self.rng = None


def _context(metric, model, max_depth):
    c = getattr(metric, "_jit_context", None)
    if c is None or c.depth < max_depth:
        c = metric._jit_context = _Context(metric.dim, max_depth)
    if c.model is not model:
        c.model, c.cg = model, _compiled(model)
    return c


def _kernel_buffers(metric, prog, dim):
    """This chain's own value and adjoint buffers for ``prog`` (copies of the
    program's, which hold its constants: chains in threads never share them), a
    gradient buffer and a box for the last lp and the evaluation count."""
    kb = getattr(metric, "_jit_vm", None)
    if kb is None or kb[4] is not prog:
        kb = metric._jit_vm = (prog.V.copy(), prog.A.copy(), np.zeros(dim), np.zeros(2),
                               prog)
    return kb


def _uniform_batch(rng, n):
    """``n`` uniforms on [0, 1) from the chain's generator (a test replaces it)."""
    return rng.random(n)


def _steps(metric, eps):
    """``eps L`` stacked over ``eps/2 L^T``, C-contiguous (each one row for the
    diagonal metrics), cached on the metric for the last step size."""
    c = _step_cache(metric)
    if c[0] != eps:
        c[0], c[1] = eps, eps * c[2]
    return c[1]


def _step_cache(metric):
    """``[eps, eps * base, base]`` on the metric, ``base`` = L stacked over L^T / 2
    (the segments multiply it by their step sizes themselves)."""
    c = getattr(metric, "_jit_steps", None)
    if c is None:
        # L and L^T / 2 once per metric; a step size is then one multiplication
        L, half, _ = metric.whitened_steps(1.0)
        dim = metric.dim
        base = np.concatenate((np.reshape(L, (-1, dim)), np.reshape(half, (-1, dim))))
        c = metric._jit_steps = [None, None, np.ascontiguousarray(base, dtype=float)]
    return c


def _refill(S, I, n_uniforms, rng):
    """Move the unused uniforms to the front of their room at the end of S and draw
    the rest."""
    end = S.shape[0]
    first, start = end - n_uniforms, int(I[CNT.u])
    left = end - start
    S[first:first + left] = S[start:end].copy()
    S[first + left:end] = _uniform_batch(rng, n_uniforms - left)
    I[CNT.u] = first


def transition(model, metric, z, eps, rng, max_depth=10, max_delta_h=1000.0):
    """One NUTS transition from point ``z`` with a Euclidean ``metric`` (one with
    ``whitened_steps``): the same contract as :func:`.nuts.transition` (the new point
    carries no momentum). Call inside ``np.errstate(all="ignore")`` as the chain
    does (a failing density is a rejected proposal).

    With the model's program in the interpreter a transition is usually one call
    into compiled code (:func:`_open`): at ~1.5 us a leapfrog step (eight schools)
    the Python around it is most of its cost, so it is kept to a minimum."""
    ctx = _context(metric, model, max_depth)
    W, S, I, n_uniforms = ctx.ws
    cg = ctx.cg
    M = _steps(metric, eps)
    p0 = rng.standard_normal(metric.dim)
    u = _uniform_batch(rng, n_uniforms)
    prog = cg.kernel_program() if cg is not None else None
    lp, g, err = z.lp, z.grad, None     # the last evaluation: density, gradient, error
    if prog is not None:
        kb = _kernel_buffers(metric, prog, metric.dim)
        box = kb[3]
        r = _open(W, S, I, M, z.q, z.lp, z.grad, p0, u, max_depth, max_delta_h,
                  prog.code, prog.aux, kb[0], kb[1], prog.dim, prog.out, prog.nvar,
                  kb[2], box)
        ran = True                      # r is what _trajectory returned
    else:
        r = _begin(W, S, I, M, z.q, z.lp, z.grad, p0, u, max_depth, max_delta_h)
        ran = False
    n_kernel = 0
    while True:
        if ran:
            ran = False
            n_kernel += int(box[1])
            if r == _NEED_UNIFORMS:
                _refill(S, I, n_uniforms, rng)
                lp, g = float(box[0]), kb[2]
                r = _advance(W, S, I, M, g, lp)
                continue
            if r < 0:
                continue
            # the interpreter handed W[r] back: evaluated below, by the model
        elif r == _DONE:
            break
        elif prog is not None and r >= 0:
            kb = _kernel_buffers(metric, prog, metric.dim)
            box = kb[3]
            box[1] = 0.0
            r = _trajectory(W, S, I, M, prog.code, prog.aux, kb[0], kb[1], prog.dim,
                            prog.out, prog.nvar, kb[2], box, r, np.empty(metric.dim))
            ran = True
            continue
        if r == _BAD_GRADIENT:
            _bad_gradient(g, z.q, metric.dim)
        try:
            lp, g = model.log_density_gradient(W[r].copy())
            lp = float(lp)
        except RejectedPoint as e:
            lp, g, err = math.nan, _NO_GRADIENT, e
        if cg is not None:
            prog = cg.kernel_program()      # (a new recording may have replaced it)
        r = _advance(W, S, I, M, g, lp)
        if r == _NEED_UNIFORMS:
            _refill(S, I, n_uniforms, rng)
            r = _advance(W, S, I, M, g, lp)
    return _result(z, W, S, I, cg, n_kernel, err, lp, g)


def _bad_gradient(g, q, dim):
    from stanlite.errors import ModelError
    raise ModelError(f"log_density_gradient returned a gradient of shape "
                     f"{np.shape(g)} at a position of shape {np.shape(q)}; "
                     f"expected ({dim},) for both, one entry per unconstrained "
                     "parameter")


def _result(z, W, S, I, cg, n_kernel, err, lp, g):
    """``(sample, TransitionInfo)`` of a finished transition; the spot checks of the
    interpreter's program continue at the sample."""
    s = S[:SC.levels].tolist()          # (one conversion, not one per number)
    i = I.tolist()
    if i[CNT.sample_moved]:
        sample = Point(W[ROW.sample_q].copy(), None, s[SC.sample_lp], W[ROW.sample_grad].copy(), None, s[SC.sample_h])
    else:
        sample = Point(z.q, None, z.lp, z.grad, None, s[SC.h0], z.aux)
    if n_kernel:
        cg.kernel_replays(n_kernel, sample.q)
    energy = sample.h
    n_failed = i[CNT.n_failed]
    # a failed step ends the trajectory: the failure is the last evaluation's
    rejected = {rejection_reason(err, lp, g): n_failed} if n_failed else None
    return sample, TransitionInfo(
        s[SC.accept], i[CNT.n_leapfrog], i[CNT.depth], bool(i[CNT.divergent]), energy, n_failed,
        energy - s[SC.h0], s[SC.max_err], rejected)


# ---- segments in threads: the gate ------------------------------------------------------
class _ThreadState(threading.local):
    """Per thread: the gate it holds while its chain runs Python (None: no gate), and
    the CPU seconds it spent inside compiled segments."""
    gate = None
    compiled = 0.0


_THREAD = _ThreadState()
_thread_clock = time.thread_time


class gate:
    """``with gate(lock):`` this thread runs its chain holding ``lock`` and lets go of
    it only inside compiled segments (:func:`segment`), which release the GIL (numba
    ``nogil``) and touch nothing but the chain's own arrays.

    Chains in threads of one process (samplers/runner.py) share the model: its
    retaped gradient's programs, guards and spot-check counters, its eager tape,
    any state ``log_prob`` keeps. With every thread's Python behind one lock, that
    state changes one chain at a time, as when chains run one after another, and
    only the compiled segments - each chain's own workspace, metric buffers, value
    and adjoint buffers and generator - overlap. A chain whose gradient runs in
    Python never lets go: threads give it nothing, and the runner does not use
    them for it (its probe measures :func:`compiled_seconds`).

    >>> import threading
    >>> lock = threading.Lock()
    >>> with gate(lock):
    ...     lock.locked()
    True
    """

    def __init__(self, lock):
        self.lock = lock

    def __enter__(self):
        self.lock.acquire()
        _THREAD.gate = self.lock
        return self

    def __exit__(self, *exc):
        _THREAD.gate = None
        self.lock.release()
        return False


def compiled_seconds():
    """CPU seconds this thread has spent inside compiled segments (:func:`segment`)
    so far: the share of a chain's time that chains in threads run side by side
    (``compiled_seconds()`` before and after, over ``time.thread_time()``'s)."""
    return _THREAD.compiled


# ---- segments (Python side) -----------------------------------------------------------
class Segment:
    """What :func:`segment` ran: ``n`` iterations and how they ended (``status``).
    Unless the status is SEGMENT_HANDOFF (then nothing else is set, and the chain's
    generator is as before the call): their draws ``draws[:n]`` and statistics
    (:meth:`stat_columns`), the point ``z`` and step size ``eps`` after them, and the
    adaptation's state (``ad``, ``mean``, ``m2``) for :meth:`adapted`."""

    __slots__ = ("n", "status", "draws", "fs", "js", "z", "eps", "ad", "mean", "m2")

    def __init__(self, n, status):
        self.n, self.status = n, status

    def stat_columns(self, keep):
        """The statistics of the iterations ``keep`` (a slice or index array of
        ``range(n)``) as lists in chain.STAT_NAMES order (after ``lp__``: accept
        statistic, step size, depth, leapfrog steps, divergent, energy, energy
        error, largest energy error)."""
        f = self.fs[:self.n][keep].T.tolist()
        j = self.js[:self.n][keep].T.tolist()
        return (f[_F_LP], f[_F_ACCEPT], f[_F_EPS], j[_J_DEPTH], j[_J_LEAPFROG],
                j[_J_DIVERGENT], f[_F_ENERGY], f[_F_ENERGY_ERROR], f[_F_MAX_ERROR])

    def n_divergent(self):
        return int(self.js[:self.n, _J_DIVERGENT].sum())

    def adapted(self, da, welford):
        """Move the adaptation's state after the segment into ``da`` (a
        DualAveraging) and ``welford`` (a Welford: new arrays, as its own ``add``
        makes, so that snapshots of the old ones stay as they were)."""
        ad = self.ad
        da.counter = int(ad[_D_COUNTER])
        da.s_bar, da.x_bar = float(ad[_D_S_BAR]), float(ad[_D_X_BAR])
        welford.n = int(ad[_D_WN])
        welford.mean = self.mean
        welford.m2 = self.m2 if welford.dense else self.m2.reshape(-1)


def _segment_buffers(ctx, shape, dim, n_uniforms):
    """The segment's scratch arrays (M, the momentum, the uniforms), kept on the
    chain's context."""
    sb = getattr(ctx, "seg", None)
    if sb is None or sb[0].shape != shape:
        sb = ctx.seg = (np.empty(shape), np.empty(dim), np.empty(n_uniforms))
    return sb


def _adaptation_arrays(da, welford, dim, eps):
    """``(ad, mean, m2)`` for the kernel: copies (it writes into them)."""
    ad = np.zeros(_N_AD)
    ad[_D_EPS] = eps
    if da is None:
        return ad, np.zeros(dim), np.zeros((1, dim))
    ad[_D_COUNTER:_D_T0 + 1] = (da.counter, da.s_bar, da.x_bar, da.mu, da.delta,
                                da.gamma, da.kappa, da.t0)
    ad[_D_WN] = welford.n
    m2 = np.array(welford.m2, dtype=float).reshape(-1 if welford.dense else 1, dim)
    return ad, np.array(welford.mean, dtype=float), m2


def _rng_pointers(rng):
    """The addresses of a Generator's bit-generator state and of its functions
    ``next_uint64``, ``next_uint32``, ``next_double`` (:func:`_generator`), as an
    array; the Generator must stay alive while they are used."""
    import ctypes
    c = rng.bit_generator.ctypes
    return np.array([c.state_address] + [ctypes.cast(f, ctypes.c_void_p).value for f in
                                         (c.next_uint64, c.next_uint32, c.next_double)],
                    dtype=np.uint64)


def segment_ready(model, metric, max_depth):
    """Whether :func:`segment` would run now (the model's program is available to
    compiled loops)."""
    cg = _context(metric, model, max_depth).cg
    return cg is not None and cg.kernel_program() is not None


#: the largest evaluation budget passed to the kernel (an unverified program: no checks)
_NO_CHECK = 1 << 62


def segment(model, metric, rng, z, eps, n, max_depth=10, da=None, welford=None,
            window=(0, 0), first=0, max_delta_h=1000.0):
    """Up to ``n`` NUTS iterations of one chain from ``z`` with step size ``eps`` in
    one call into compiled code (:func:`_segment`): each the transition
    :func:`transition` makes with the same state and generator, and - with ``da``
    (a DualAveraging) and ``welford`` given: warmup - the step size's update after
    each, and the variance estimate's of the iterations ``first + k`` in
    ``window = [lo, hi)``. The chain's generator ``rng`` is drawn from in compiled
    code, number for number as the Python path draws, so the chain's state after a
    segment is the state after its iterations, whatever the segments' lengths.

    The segment stops early where a spot check of the model's program is due (it is
    made, at the last sample) and before an iteration it cannot finish: then the
    result's status is SEGMENT_HANDOFF, nothing else changed (the generator is reset)
    and ``n`` iterations before that one would run (the caller runs them in a
    segment of that length, and the one after in Python). Returns a
    :class:`Segment`, or None when the model's program is not available to compiled
    loops (the Python path then serves)."""
    ctx = _context(metric, model, max_depth)
    cg = ctx.cg
    prog = cg.kernel_program() if cg is not None else None
    if prog is None:
        return None
    W, S, I, n_uniforms = ctx.ws
    dim = metric.dim
    base = _step_cache(metric)[2]
    M, p0, u = _segment_buffers(ctx, base.shape, dim, n_uniforms)
    V, A, gbuf, box, _ = _kernel_buffers(metric, prog, dim)
    q, g, lp = z.q.copy(), z.grad.copy(), np.array([z.lp], dtype=float)
    ad, mean, m2 = _adaptation_arrays(da, welford, dim, eps)
    lo, hi = window
    draws, fs, js = np.empty((n, dim)), np.empty((n, _N_F)), np.empty((n, _N_J), np.int64)
    budget = min(cg.kernel_budget(), _NO_CHECK)
    rp = ctx.rng
    if rp is None or rp[0] is not rng:
        rp = ctx.rng = (rng, _rng_pointers(rng))
    start = rng.bit_generator.state
    t0 = _thread_clock()
    held = _THREAD.gate
    if held is not None:
        held.release()          # other chains' Python may run: this touches none of it
    try:
        k, status, total = _segment(
            rp[1], W, S, I, M, base, p0, u, q, g, lp, ad, mean, m2, n, da is not None,
            lo, hi, first, max_depth, max_delta_h, prog.code, prog.aux, V, A, prog.dim,
            prog.out, prog.nvar, gbuf, box, int(budget), draws, fs, js)
    finally:
        if held is not None:
            held.acquire()
        _THREAD.compiled += _thread_clock() - t0
    seg = Segment(k, status)
    if status == SEGMENT_HANDOFF:
        rng.bit_generator.state = start
        return seg
    if total:
        cg.kernel_replays(total, q)
    seg.draws, seg.fs, seg.js = draws, fs, js
    seg.z = Point(q, None, float(lp[0]), g)
    seg.eps = float(ad[_D_EPS])
    seg.ad, seg.mean, seg.m2 = ad, mean, m2
    return seg
