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

The tree itself - its workspace (three arrays: ``W`` rows of length ``dim``, ``S``
float and ``I`` integer scalars, laid out by named tuples) and :func:`_begin` /
:func:`_advance` - is :mod:`.nuts_tree_jit`. The random numbers are drawn in Python
from the chain's generator - the momentum, then uniforms in batches that the kernel
consumes in order (it asks for more, returning ``_NEED_UNIFORMS``, when fewer remain
than one call may use) - so a seed reproduces a chain exactly, and an interrupted
chain resumes bit-identically. ``STANLITE_JIT=0`` (or a missing numba) selects the
Python tree.

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
import threading
import time
import weakref

import numpy as np

from .hamiltonian import Point, RejectedPoint, TransitionInfo, rejection_reason

from .nuts_tree_jit import (  # noqa: F401  (_jit, njit: rhmc's kernels use them too)
    CNT, ROW, SC, _BAD_GRADIENT, _DONE, _NEED_UNIFORMS, _advance, _begin,
    _jit, _workspace, available, njit)

__all__ = ["available", "transition", "warm", "gate", "compiled_seconds"]

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
# then nutpie's diagonal adaptation (adaptation.py GradientAdaptation): its windows'
# counts, its schedule, its count of metric updates
(_G_FN, _G_BN, _G_EARLY_END, _G_FINAL_START, _G_EARLY_SWITCH, _G_LATE_SWITCH,
 _G_UPDATES) = range(10, 17)
_N_AD = 17
# the rows of its windows' array: the foreground's draws (mean, m2) and gradients
# (mean, m2), then the background's
(_GW_FQ, _GW_FQ2, _GW_FG, _GW_FG2, _GW_BQ, _GW_BQ2, _GW_BG, _GW_BG2) = range(8)
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
def _welford_row(n, gw, row, x):
    """``Welford.add`` of ``x`` to the mean ``gw[row]`` and m2 ``gw[row + 1]`` (the
    count, already advanced, is ``n``)."""
    for j in range(x.shape[0]):
        d = x[j] - gw[row, j]
        gw[row, j] = gw[row, j] + d / n
        gw[row + 1, j] = gw[row + 1, j] + (x[j] - gw[row, j]) * d


@_jit
def _grad_adapt(ad, gw, inv, base, i, q, g, good):
    """``GradientAdaptation.update`` (the diagonal one) at warmup iteration ``i`` on
    the arrays ``ad``, ``gw`` (:data:`_GW_FQ` ...) and ``inv``, with the same
    operations in the same order; a new inverse metric is written into ``inv`` and
    its whitened factor into ``base`` (``sqrt(inv)`` over half of it, as
    ``DiagMetric`` makes it). Returns whether the metric changed. The first change
    is never made here (the chain searches the step size again after it, in
    Python), nor the windows' clearing in the final window (at the commit)."""
    if i >= ad[_G_FINAL_START]:
        return False
    if good:
        for j in range(g.shape[0]):
            if not -math.inf < g[j] < math.inf:
                good = False
                break
    if good:
        for cnt, row in ((_G_FN, _GW_FQ), (_G_BN, _GW_BQ)):
            n = ad[cnt] + 1.0
            ad[cnt] = n
            _welford_row(n, gw, row, q)
            _welford_row(n, gw, row + 2, g)
    switch = ad[_G_EARLY_SWITCH] if i < ad[_G_EARLY_END] else ad[_G_LATE_SWITCH]
    if ad[_G_BN] >= switch and i + switch <= ad[_G_FINAL_START]:
        for r in range(4):
            for j in range(gw.shape[1]):
                gw[r, j] = gw[r + 4, j]
                gw[r + 4, j] = 0.0
        ad[_G_FN] = ad[_G_BN]
        ad[_G_BN] = 0.0
    if ad[_G_FN] < 3.0:
        return False
    for j in range(inv.shape[0]):
        b = gw[_GW_FG2, j]
        # (sqrt(var q / var g) where numpy's would be finite and positive: the
        # division only where it cannot fail - numba raises on a zero divisor)
        v = math.sqrt(gw[_GW_FQ2, j] / b) if b > 0.0 else math.nan
        if not (0.0 < v < math.inf):
            v = inv[j]
        v = min(max(v, 1e-10), 1e10)
        inv[j] = v
        r = math.sqrt(v)
        base[0, j] = r
        base[1, j] = 0.5 * r
    ad[_G_UPDATES] += 1.0
    return True


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
             box, budget, draws, fs, js, grad, gw, inv):
    """Up to ``n_iter`` NUTS iterations of one chain from ``(q, lp[0], g)`` (updated
    in place), each what :func:`transition` does in Python with the same draws from
    the chain's generator (``rp``: :func:`_rng_pointers`) - the momentum, then
    uniforms in batches of ``u.shape[0]`` - followed,
    when ``adapt``, by the dual-averaging update of the step size ``ad[_D_EPS]``
    and, for iterations ``first + k`` in ``[w_lo, w_hi)``, Welford's update of
    ``mean, m2``; with ``grad`` instead, nutpie's diagonal adaptation from the
    draw and its gradient (:func:`_grad_adapt`: ``gw``, ``inv``, and ``base``, the
    metric's whitened factor, change). Iteration k's draw goes to ``draws[k]``,
    its statistics to ``fs[k]``, ``js[k]``.

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
            if grad:
                # (chain.py _grad_adapt_step: a divergent transition's draw, or one
                # that did not move, is not used)
                _grad_adapt(ad, gw, inv, base, first + k, q, g,
                            I[CNT.divergent] == 0 and I[CNT.sample_moved] != 0)
            elif w_lo <= first + k < w_hi:
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
    # and the tree's (_begin, _advance) and the decisions they inline
    from . import nuts_algebra as _algebra, nuts_tree_jit as _tree
    _tree.drop_stale_cache([_trajectory, _open, _segment], "nuts_jit",
                           [_tree.__file__, _algebra.__file__])

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
             np.zeros((1, _N_J), dtype=np.int64), False, np.zeros((8, 1)), np.ones(1))


def _compiled(model):
    """The model's retaped gradient, if it offers its program to compiled loops."""
    f = getattr(model, "compiled_gradient", None)
    return f() if f is not None else None


class Workspace:
    """One chain's state for the compiled tree, reused by its transitions and
    segments: the tree's arrays (made for the deepest tree asked for so far), the
    model's retaped gradient (looked up once per model, not at every transition:
    ~1 us through the model), the interpreter's value and adjoint buffers, the
    segments' scratch arrays and generator pointers, and the step matrix ``eps``
    times the metric's :meth:`~.hamiltonian.UnitMetric.whitened_factor`.

    It belongs to the chain's :class:`.nuts.NutsKernel` (or, for a caller of
    :func:`transition` without one, to :func:`workspace_of` the metric) and never
    to the metric or the model: what it derives from the metric is checked against
    the metric's factor at every use, so a metric's ``set()`` takes effect at the
    next transition (a copy cached on the metric once outlived it: commit 290fed3)."""

    __slots__ = ("arrays", "depth", "model", "cg", "seg", "rng", "vm", "base", "eps", "M")

    def __init__(self):
        self.arrays = self.model = self.cg = self.seg = self.rng = self.vm = None
        self.base = self.eps = self.M = None
        self.depth = -1

    def ready(self, metric, model, max_depth):
        """This workspace, with arrays for ``metric``'s dimension and ``max_depth``
        and the retaped gradient of ``model``."""
        if self.depth < max_depth or self.arrays[0].shape[1] != metric.dim:
            self.arrays = _workspace(metric.dim, max_depth)
            self.depth = max_depth
        if self.model is not model:
            self.model, self.cg = model, _compiled(model)
        return self

    def vm_buffers(self, prog, dim):
        """This chain's own value and adjoint buffers for ``prog`` (copies of the
        program's, which hold its constants: chains in threads never share them), a
        gradient buffer and a box for the last lp and the evaluation count."""
        kb = self.vm
        if kb is None or kb[4] is not prog:
            kb = self.vm = (prog.V.copy(), prog.A.copy(), np.zeros(dim), np.zeros(2), prog)
        return kb

    def steps(self, metric, eps):
        """``eps`` times the metric's whitened factor (``eps L`` over ``eps/2 L^T``),
        kept for the last step size and factor."""
        base = metric.whitened_factor()
        if base is not self.base or eps != self.eps:
            # (holding ``base`` keeps its identity from being reused by another array)
            self.base, self.eps, self.M = base, eps, eps * base
        return self.M


#: the workspaces of callers of transition() / segment() without a NutsKernel, by
#: metric (weakly: a workspace lives as long as the chain's metric)
_WORKSPACES = weakref.WeakKeyDictionary()


def workspace_of(metric):
    """The :class:`Workspace` that serves ``metric``'s chain when the caller passes
    none (one per metric object: a chain has its own metric)."""
    ws = _WORKSPACES.get(metric)
    if ws is None:
        ws = _WORKSPACES[metric] = Workspace()
    return ws


def _uniform_batch(rng, n):
    """``n`` uniforms on [0, 1) from the chain's generator (a test replaces it)."""
    return rng.random(n)


def _refill(S, I, n_uniforms, rng):
    """Move the unused uniforms to the front of their room at the end of S and draw
    the rest."""
    end = S.shape[0]
    first, start = end - n_uniforms, int(I[CNT.u])
    left = end - start
    S[first:first + left] = S[start:end].copy()
    S[first + left:end] = _uniform_batch(rng, n_uniforms - left)
    I[CNT.u] = first


def transition(model, metric, z, eps, rng, max_depth=10, max_delta_h=1000.0,
               workspace=None):
    """One NUTS transition from point ``z`` with a Euclidean ``metric`` (one with
    ``whitened_steps``): the same contract as :func:`.nuts.transition` (the new point
    carries no momentum). Call inside ``np.errstate(all="ignore")`` as the chain
    does (a failing density is a rejected proposal).

    With the model's program in the interpreter a transition is usually one call
    into compiled code (:func:`_open`): at ~1.5 us a leapfrog step (eight schools)
    the Python around it is most of its cost, so it is kept to a minimum.
    ``workspace``: the chain's (:class:`Workspace`; default :func:`workspace_of`
    the metric)."""
    ws = (workspace or workspace_of(metric)).ready(metric, model, max_depth)
    W, S, I, n_uniforms = ws.arrays
    cg = ws.cg
    M = ws.steps(metric, eps)
    p0 = rng.standard_normal(metric.dim)
    u = _uniform_batch(rng, n_uniforms)
    prog = cg.kernel_program() if cg is not None else None
    lp, g, err = z.lp, z.grad, None     # the last evaluation: density, gradient, error
    if prog is not None:
        kb = ws.vm_buffers(prog, metric.dim)
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
            kb = ws.vm_buffers(prog, metric.dim)
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

    __slots__ = ("n", "status", "draws", "fs", "js", "z", "eps", "ad", "mean", "m2",
                 "gw", "inv")

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

    def grad_adapted(self, ga, last):
        """Move nutpie's adaptation's state after the segment into ``ga`` (a
        GradientAdaptation; new arrays and Welfords, as its own updates make:
        snapshots stay), ``last`` the segment's last iteration; returns whether
        its metric changed (then ``ga.inv`` is the new one)."""
        from .adaptation import Welford
        ad, gw = self.ad, self.gw

        def window(n, row):
            w = {"qs": [], "gs": []}
            for key, r in (("q", row), ("g", row + 2)):
                e = w[key] = Welford(gw.shape[1])
                e.n, e.mean, e.m2 = n, gw[r].copy(), gw[r + 1].copy()
            return w
        ga.fg, ga.bg = window(int(ad[_G_FN]), _GW_FQ), window(int(ad[_G_BN]), _GW_BQ)
        if last >= ga.final_start:
            ga.update(last, None, None)     # (the final window: the windows go)
        changed = int(ad[_G_UPDATES]) != ga.n_updates
        if changed:
            ga.inv, ga.n_updates = self.inv, int(ad[_G_UPDATES])
        return changed


def _segment_buffers(ws, shape, dim, n_uniforms):
    """The segment's scratch arrays (M, the momentum, the uniforms), kept in the
    chain's workspace."""
    sb = ws.seg
    if sb is None or sb[0].shape != shape:
        sb = ws.seg = (np.empty(shape), np.empty(dim), np.empty(n_uniforms))
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


def segment_ready(model, metric, max_depth, workspace=None):
    """Whether :func:`segment` would run now (the model's program is available to
    compiled loops)."""
    cg = (workspace or workspace_of(metric)).ready(metric, model, max_depth).cg
    return cg is not None and cg.kernel_program() is not None


#: the largest evaluation budget passed to the kernel (an unverified program: no checks)
_NO_CHECK = 1 << 62


def segment(model, metric, rng, z, eps, n, max_depth=10, da=None, welford=None,
            window=(0, 0), first=0, max_delta_h=1000.0, workspace=None, grad=None):
    """Up to ``n`` NUTS iterations of one chain from ``z`` with step size ``eps`` in
    one call into compiled code (:func:`_segment`): each the transition
    :func:`transition` makes with the same state and generator, and - with ``da``
    (a DualAveraging) and ``welford`` given: warmup - the step size's update after
    each, and the variance estimate's of the iterations ``first + k`` in
    ``window = [lo, hi)``; with ``grad`` (a diagonal
    :class:`.adaptation.GradientAdaptation` whose metric changed once already, and
    ``da``) nutpie's adaptation instead of the windows, the metric changing in the
    segment (:meth:`Segment.grad_adapted` hands it over). The chain's generator ``rng`` is drawn from in compiled
    code, number for number as the Python path draws, so the chain's state after a
    segment is the state after its iterations, whatever the segments' lengths.

    The segment stops early where a spot check of the model's program is due (it is
    made, at the last sample) and before an iteration it cannot finish: then the
    result's status is SEGMENT_HANDOFF, nothing else changed (the generator is reset)
    and ``n`` iterations before that one would run (the caller runs them in a
    segment of that length, and the one after in Python). Returns a
    :class:`Segment`, or None when the model's program is not available to compiled
    loops (the Python path then serves)."""
    ws = (workspace or workspace_of(metric)).ready(metric, model, max_depth)
    cg = ws.cg
    prog = cg.kernel_program() if cg is not None else None
    if prog is None:
        return None
    W, S, I, n_uniforms = ws.arrays
    dim = metric.dim
    base = metric.whitened_factor()
    M, p0, u = _segment_buffers(ws, base.shape, dim, n_uniforms)
    V, A, gbuf, box, _ = ws.vm_buffers(prog, dim)
    q, g, lp = z.q.copy(), z.grad.copy(), np.array([z.lp], dtype=float)
    ad, mean, m2 = _adaptation_arrays(da, welford, dim, eps)
    if grad is not None:
        gw, inv = _grad_arrays(grad, ad)
        base = base.copy()              # (the metric's own factor stays as it is)
    else:
        gw, inv = _NO_WINDOWS, _NO_INV
    lo, hi = window
    draws, fs, js = np.empty((n, dim)), np.empty((n, _N_F)), np.empty((n, _N_J), np.int64)
    budget = min(cg.kernel_budget(), _NO_CHECK)
    rp = ws.rng
    if rp is None or rp[0] is not rng:
        rp = ws.rng = (rng, _rng_pointers(rng))
    start = rng.bit_generator.state
    t0 = _thread_clock()
    held = _THREAD.gate
    if held is not None:
        held.release()          # other chains' Python may run: this touches none of it
    try:
        k, status, total = _segment(
            rp[1], W, S, I, M, base, p0, u, q, g, lp, ad, mean, m2, n, da is not None,
            lo, hi, first, max_depth, max_delta_h, prog.code, prog.aux, V, A, prog.dim,
            prog.out, prog.nvar, gbuf, box, int(budget), draws, fs, js,
            grad is not None, gw, inv)
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
    seg.gw, seg.inv = gw, inv
    return seg


_NO_WINDOWS, _NO_INV = np.zeros((8, 1)), np.ones(1)     # (no gradient adaptation)


def _grad_arrays(ga, ad):
    """A diagonal GradientAdaptation ``ga`` as the kernel's arrays: its scalars into
    ``ad``; returns ``(gw, inv)`` (copies: the kernel writes into them)."""
    ad[_G_FN:_G_UPDATES + 1] = (ga.fg["q"].n, ga.bg["q"].n, ga.early_end, ga.final_start,
                                ga.early_switch, ga.late_switch, ga.n_updates)
    gw = np.array([ga.fg["q"].mean, ga.fg["q"].m2, ga.fg["g"].mean, ga.fg["g"].m2,
                   ga.bg["q"].mean, ga.bg["q"].m2, ga.bg["g"].mean, ga.bg["g"].m2],
                  dtype=float)
    return gw, np.array(ga.inv, dtype=float)
