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
are the constants below. The random numbers are drawn in Python from the chain's
generator - the momentum, then uniforms in batches that the kernel consumes in order
(it asks for more, returning ``_NEED_UNIFORMS``, when fewer remain than one call may
use) - so a seed reproduces a chain exactly, and an interrupted chain resumes
bit-identically.

Numerically this is the Python tree's arithmetic with the dot products summed in
index order, so the two agree to rounding, not bit for bit. ``STANLITE_JIT=0`` (or a
missing numba) selects the Python tree.
"""

import math
import os

import numpy as np

from .hamiltonian import Point, RejectedPoint, TransitionInfo, rejection_reason

__all__ = ["available", "transition", "warm"]

try:
    if os.environ.get("STANLITE_JIT", "1").strip().lower() in ("0", "false", "no", "off"):
        raise ImportError("disabled by STANLITE_JIT")
    from numba import njit
except ImportError:                                 # the Python tree is used instead
    njit = None

# compiled on first call, and cached on disk by numba; without numba the same
# functions run as (slow) Python, which only a debugging session would want
_jit = (lambda f: f) if njit is None else njit(cache=True, nogil=True)


def available():
    """Whether the compiled kernel is in use (numba importable, not disabled)."""
    return njit is not None


# ---- workspace layout ---------------------------------------------------------------
# rows of W: the trajectory's two ends (position, momentum, the last half kick);
# _END_FWD + 0/1/2 and _END_BWD + 0/1/2
_END_FWD, _END_BWD = 0, 3
_SQ, _SG = 6, 7                 # the sample's position and gradient
_AQ, _AG, _AP = 8, 9, 10        # the first state of a pair: position, gradient, momentum
_CQ, _CG = 11, 12               # the current subtree's proposal
_CR, _CB, _CE = 13, 14, 15      # the current subtree's summary: rho, p at its two ends
_TR = 16                        # the trajectory's rho; its end momenta: I[_T_BEG], I[_T_END]
_TB0, _TE0 = 17, 18
_LEVEL0, _PER_LEVEL = 19, 5     # pending subtree l: rho, p_beg, p_end, proposal q, grad

# S: float scalars
(_H0, _SUM_METRO, _MAX_ERR, _MAX_ABS, _LOG_W, _S_LP, _S_H, _A_LP, _A_H, _A_K, _A_LW,
 _C_LP, _C_H, _C_LW, _C_KB, _C_KE, _C_DB, _C_DE, _T_KB, _T_KE, _T_DB, _T_DE,
 _MAX_DH, _ACCEPT) = range(24)
_S_LEVEL0, _S_PER_LEVEL = 24, 7  # pending l: lp, h, lw, k_beg, k_end, d_beg, d_end

# I: integer scalars
(_N_LEAPFROG, _DEPTH, _DIVERGENT, _N_FAILED, _FORWARD, _END_FORWARD, _SIZE, _INDEX,
 _N_PENDING, _T_BEG, _T_END, _U, _U_END, _MAX_DEPTH, _SAMPLE_MOVED) = range(15)
_N_INT = 15

_DONE, _NEED_UNIFORMS, _BAD_GRADIENT = -1, -2, -3

if njit is not None:
    from stanlite.autodiff.vm import kernel as _vm
    _value_grad = _vm.value_grad


def _workspace(dim, max_depth):
    """``(W, S, I, n_uniforms)``: S ends with room for ``n_uniforms`` uniforms,
    enough for several calls (one may use up to ``max_depth + 3``)."""
    levels = max_depth + 1
    n_uniforms = max(32, 2 * (max_depth + 3))
    return (np.zeros((_LEVEL0 + _PER_LEVEL * levels, dim)),
            np.zeros(_S_LEVEL0 + _S_PER_LEVEL * levels + n_uniforms),
            np.zeros(_N_INT, dtype=np.int64), n_uniforms)


@_jit
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


@_jit
def _copy_row(W, src, dst):
    for j in range(W.shape[1]):
        W[dst, j] = W[src, j]


@_jit
def _drift(W, M, x, dst, sign):
    # W[dst] += sign * (eps L) W[x]; M stacks eps L over (eps/2) L^T, each one row
    # (the diagonal metrics) or a full matrix
    n = W.shape[1]
    if M.shape[0] == 2:
        for j in range(n):
            W[dst, j] += sign * (M[0, j] * W[x, j])
    else:
        v = np.dot(M[:n], W[x])             # BLAS, as the Python tree's ndarray.dot
        for i in range(n):
            W[dst, i] += sign * v[i]


@_jit
def _kick(W, M, g, dst):
    # W[dst] = (eps/2) L^T g, the half kick (M as in _drift)
    n = W.shape[1]
    if M.shape[0] == 2:
        for j in range(n):
            W[dst, j] = M[1, j] * g[j]
    else:
        v = np.dot(M[n:], g)
        for i in range(n):
            W[dst, i] = v[i]


@_jit
def _lse(a, b):
    return a + math.log1p(math.exp(b - a)) if a > b else b + math.log1p(math.exp(a - b))


@_jit
def _merge_ok(W, ra, ba, ea, kab, kae, dab, dae, rb, bb, eb, kbb, kbe, dbb, dbe):
    """The U-turn checks of subtree a followed by b (rows of rho and the end
    momenta, k = p.p of the ends, d = p.rho at the ends); by linearity each
    check is one dot product (nuts._merge). Returns (ok, d_beg, d_end)."""
    d_beg = dab + _dot(W, ba, rb)
    d_end = dbe + _dot(W, eb, ra)
    ok = (d_beg > 0.0 and d_end > 0.0
          and dab + _dot(W, ba, bb) > 0.0 and kbb + _dot(W, bb, ra) > 0.0
          and kae + _dot(W, ea, rb) > 0.0 and dbe + _dot(W, eb, ea) > 0.0)
    return ok, d_beg, d_end


@_jit
def _step_from_end(W, I, M):
    """Half kick and drift at the end being extended; returns the row of the new
    position (the caller evaluates the gradient there)."""
    e = _END_FWD if I[_FORWARD] else _END_BWD
    sign = 1.0 if I[_FORWARD] else -1.0
    n = W.shape[1]
    for j in range(n):
        W[e + 1, j] += sign * W[e + 2, j]
    _drift(W, M, e + 1, e, sign)
    return e


@_jit
def _take_uniform(S, I):
    k = I[_U]
    I[_U] = k + 1
    return S[k]


@_jit
def _start_subtree(W, S, I, M):
    I[_FORWARD] = 1 if _take_uniform(S, I) > 0.5 else 0
    I[_SIZE] = 1 << I[_DEPTH]
    I[_INDEX] = 0
    I[_N_PENDING] = 0
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
    S[_H0] = H0
    S[_MAX_DH] = max_delta_h
    S[_S_LP] = lp0
    S[_S_H] = H0
    I[_MAX_DEPTH] = max_depth
    u0 = S.shape[0] - u.shape[0]
    for j in range(u.shape[0]):
        S[u0 + j] = u[j]
    I[_U], I[_U_END] = u0, S.shape[0]
    for e in (_END_FWD, _END_BWD):
        for j in range(n):
            W[e, j] = q0[j]
            W[e + 1, j] = p0[j]
    _kick(W, M, g0, _END_FWD + 2)
    _copy_row(W, _END_FWD + 2, _END_BWD + 2)
    # the trajectory so far, the start point: rho = p0 at both ends
    for j in range(n):
        W[_TR, j] = p0[j]
        W[_TB0, j] = p0[j]
        W[_TE0, j] = p0[j]
    I[_T_BEG], I[_T_END] = _TB0, _TE0
    S[_T_KB] = S[_T_KE] = S[_T_DB] = S[_T_DE] = k0
    I[_END_FORWARD] = 1
    if max_depth < 1 or H0 == math.inf:     # (no energy error can be measured)
        return _finish(S, I)
    return _start_subtree(W, S, I, M)


@_jit
def _finish(S, I):
    n = I[_N_LEAPFROG]
    S[_ACCEPT] = S[_SUM_METRO] / n if n else 0.0
    return _DONE


@_jit
def _advance(W, S, I, M, g, lp):
    """The state just evaluated at the end being extended (``lp`` its log density,
    ``g`` the gradient; a NaN ``lp`` for a density that raised) joins the tree.
    Returns the row of the next position, or _DONE, or - before changing anything -
    _NEED_UNIFORMS when fewer remain than this call may use (one for the pair, one
    per merge, one for the progressive draw, one for the next direction)."""
    if I[_U] + I[_DEPTH] + 3 > I[_U_END]:
        return _NEED_UNIFORMS
    n = W.shape[1]
    e = _END_FWD if I[_FORWARD] else _END_BWD
    sign = 1.0 if I[_FORWARD] else -1.0
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
    i = I[_INDEX]
    H0 = S[_H0]
    err = h - H0
    if err > 0.0:
        if err > S[_MAX_ABS]:
            S[_MAX_ABS] = err
            S[_MAX_ERR] = err
        if err > S[_MAX_DH]:
            I[_DIVERGENT] = 1
            I[_N_FAILED] += 0 if ok else 1
            I[_N_LEAPFROG] += i + 1
            return _finish(S, I)
        S[_SUM_METRO] += math.exp(-err)
    else:
        S[_SUM_METRO] += 1.0
        if -err > S[_MAX_ABS]:
            S[_MAX_ABS] = -err
            S[_MAX_ERR] = err
    size = I[_SIZE]
    if not i & 1:
        # the first state of a pair (or a subtree of one state)
        _copy_row(W, e, _AQ)
        for j in range(n):
            W[_AG, j] = g[j]
        _copy_row(W, e + 1, _AP)
        S[_A_LP], S[_A_H], S[_A_K], S[_A_LW] = lp, h, k, -err
        if size > 1:
            I[_INDEX] = i + 1
            return _step_from_end(W, I, M)
        _copy_row(W, _AQ, _CQ)
        _copy_row(W, _AG, _CG)
        _copy_row(W, _AP, _CR)
        _copy_row(W, _AP, _CB)
        _copy_row(W, _AP, _CE)
        S[_C_LP], S[_C_H], S[_C_LW] = lp, h, -err
        S[_C_KB] = S[_C_KE] = S[_C_DB] = S[_C_DE] = k
    else:
        # a pair: a (rows _A*) then this state; the U-turn checks first (a pair
        # that turns is discarded whole, its proposal needs no draw)
        x = _dot(W, _AP, e + 1)
        d_beg = S[_A_K] + x
        d_end = k + x
        if not (d_beg > 0.0 and d_end > 0.0):
            I[_N_LEAPFROG] += i + 1
            return _finish(S, I)
        for j in range(n):
            W[_CR, j] = W[_AP, j] + W[e + 1, j]
        _copy_row(W, _AP, _CB)
        _copy_row(W, e + 1, _CE)
        S[_C_KB], S[_C_KE], S[_C_DB], S[_C_DE] = S[_A_K], k, d_beg, d_end
        # multinomial: this state with probability W_state / W_pair
        lw_a = S[_A_LW]
        lw = _lse(-err, lw_a)
        if _take_uniform(S, I) >= math.exp(-err - lw):
            _copy_row(W, _AQ, _CQ)
            _copy_row(W, _AG, _CG)
            S[_C_LP], S[_C_H] = S[_A_LP], S[_A_H]
        else:
            _copy_row(W, e, _CQ)
            for j in range(n):
                W[_CG, j] = g[j]
            S[_C_LP], S[_C_H] = lp, h
        # Stan's recursion unrolled: after pair c, merge as many pending
        # subtrees as c has trailing one bits
        c = i >> 1
        while c & 1:
            lev = I[_N_PENDING] - 1
            r0 = _LEVEL0 + _PER_LEVEL * lev
            s0 = _S_LEVEL0 + _S_PER_LEVEL * lev
            good, d_beg, d_end = _merge_ok(
                W, r0, r0 + 1, r0 + 2, S[s0 + 3], S[s0 + 4], S[s0 + 5], S[s0 + 6],
                _CR, _CB, _CE, S[_C_KB], S[_C_KE], S[_C_DB], S[_C_DE])
            if not good:
                I[_N_LEAPFROG] += i + 1
                return _finish(S, I)
            for j in range(n):
                W[_CR, j] += W[r0, j]
            _copy_row(W, r0 + 1, _CB)
            S[_C_KB], S[_C_DB], S[_C_DE] = S[s0 + 3], d_beg, d_end
            lw_p = S[s0 + 2]
            lw_all = _lse(lw, lw_p)
            if _take_uniform(S, I) >= math.exp(lw - lw_all):
                _copy_row(W, r0 + 3, _CQ)
                _copy_row(W, r0 + 4, _CG)
                S[_C_LP], S[_C_H] = S[s0], S[s0 + 1]
            lw = lw_all
            c >>= 1
            I[_N_PENDING] = lev
        S[_C_LW] = lw
        if i + 1 < size:
            lev = I[_N_PENDING]
            r0 = _LEVEL0 + _PER_LEVEL * lev
            s0 = _S_LEVEL0 + _S_PER_LEVEL * lev
            _copy_row(W, _CR, r0)
            _copy_row(W, _CB, r0 + 1)
            _copy_row(W, _CE, r0 + 2)
            _copy_row(W, _CQ, r0 + 3)
            _copy_row(W, _CG, r0 + 4)
            S[s0], S[s0 + 1], S[s0 + 2] = S[_C_LP], S[_C_H], lw
            S[s0 + 3], S[s0 + 4] = S[_C_KB], S[_C_KE]
            S[s0 + 5], S[s0 + 6] = S[_C_DB], S[_C_DE]
            I[_N_PENDING] = lev + 1
            I[_INDEX] = i + 1
            return _step_from_end(W, I, M)
    # the subtree is complete (rows _C*)
    I[_N_LEAPFROG] += size
    I[_DEPTH] += 1
    lw_sub = S[_C_LW]
    log_w = S[_LOG_W]
    # biased progressive sampling: prefer the new subtree
    if lw_sub > log_w or _take_uniform(S, I) < math.exp(lw_sub - log_w):
        _copy_row(W, _CQ, _SQ)
        _copy_row(W, _CG, _SG)
        S[_S_LP], S[_S_H] = S[_C_LP], S[_C_H]
        I[_SAMPLE_MOVED] = 1
    S[_LOG_W] = _lse(log_w, lw_sub)
    if I[_FORWARD] != I[_END_FORWARD]:
        # the trajectory's "end" is the one the subtree grew from
        I[_T_BEG], I[_T_END] = I[_T_END], I[_T_BEG]
        S[_T_KB], S[_T_KE] = S[_T_KE], S[_T_KB]
        S[_T_DB], S[_T_DE] = S[_T_DE], S[_T_DB]
        I[_END_FORWARD] = I[_FORWARD]
    tb, te = I[_T_BEG], I[_T_END]
    good, d_beg, d_end = _merge_ok(
        W, _TR, tb, te, S[_T_KB], S[_T_KE], S[_T_DB], S[_T_DE],
        _CR, _CB, _CE, S[_C_KB], S[_C_KE], S[_C_DB], S[_C_DE])
    if not good:
        return _finish(S, I)
    for j in range(n):
        W[_TR, j] += W[_CR, j]
    _copy_row(W, _CE, te)
    S[_T_KE], S[_T_DB], S[_T_DE] = S[_C_KE], d_beg, d_end
    if I[_DEPTH] >= I[_MAX_DEPTH]:
        return _finish(S, I)
    return _start_subtree(W, S, I, M)


@_jit
def _trajectory(W, S, I, M, code, aux, V, A, dim, out, nvar, g, box, r):
    """Evaluate the positions the tree asks for in the interpreter and advance, until
    the transition is done (_DONE), more uniforms are needed (_NEED_UNIFORMS: the
    last evaluation is in ``g`` and ``box[0]``, to be passed to :func:`_advance` after
    the refill), or the interpreter hands a point back (its row ``r >= 0`` is
    returned: the caller evaluates it). ``box[1]`` counts the evaluations."""
    while r >= 0:
        st, lp = _value_grad(code, aux, V, A, dim, out, nvar, W[r], g)
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
        r = _trajectory(W, S, I, M, code, aux, V, A, dim, out, nvar, g, box, r)
    return r


if njit is not None:
    # the interpreter is compiled into _trajectory's (and _open's) cached machine code,
    # but numba keys that cache on this file alone: drop it when the interpreter's
    # source changes
    _vm.drop_stale_cache([_trajectory, _open], "nuts_jit")

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
    _trajectory(W, S, I, M, code, aux, V, A, 1, 1, 2, g, box, _DONE)
    _open(W, S, I, M, x, -math.inf, x, x, np.full(n, 0.75), 1, 1000.0, code, aux, V, A,
          1, 1, 2, g, box)


def _compiled(model):
    """The model's retaped gradient, if it offers its program to compiled loops."""
    f = getattr(model, "compiled_gradient", None)
    return f() if f is not None else None


class _Context:
    """What the transitions of one chain reuse, kept on its metric (a chain has its
    own; adaptation replaces it): the workspace (made for the deepest tree asked
    for so far), and the model's retaped gradient - looked up once per model, not
    at every transition (~1 us: it goes through the model)."""

    __slots__ = ("ws", "depth", "model", "cg")

    def __init__(self, dim, max_depth):
        self.ws = _workspace(dim, max_depth)
        self.depth = max_depth
        self.model = self.cg = None


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
    c = getattr(metric, "_jit_steps", None)
    if c is None:
        # L and L^T / 2 once per metric; a step size is then one multiplication
        L, half, _ = metric.whitened_steps(1.0)
        dim = metric.dim
        base = np.concatenate((np.reshape(L, (-1, dim)), np.reshape(half, (-1, dim))))
        c = metric._jit_steps = [None, None, np.ascontiguousarray(base, dtype=float)]
    if c[0] != eps:
        c[0], c[1] = eps, eps * c[2]
    return c[1]


def _refill(S, I, n_uniforms, rng):
    """Move the unused uniforms to the front of their room at the end of S and draw
    the rest."""
    end = S.shape[0]
    first, start = end - n_uniforms, int(I[_U])
    left = end - start
    S[first:first + left] = S[start:end].copy()
    S[first + left:end] = _uniform_batch(rng, n_uniforms - left)
    I[_U] = first


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
                            prog.out, prog.nvar, kb[2], box, r)
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
    s = S[:_S_LEVEL0].tolist()          # (one conversion, not one per number)
    i = I.tolist()
    if i[_SAMPLE_MOVED]:
        sample = Point(W[_SQ].copy(), None, s[_S_LP], W[_SG].copy(), None, s[_S_H])
    else:
        sample = Point(z.q, None, z.lp, z.grad, None, s[_H0], z.aux)
    if n_kernel:
        cg.kernel_replays(n_kernel, sample.q)
    energy = sample.h
    n_failed = i[_N_FAILED]
    # a failed step ends the trajectory: the failure is the last evaluation's
    rejected = {rejection_reason(err, lp, g): n_failed} if n_failed else None
    return sample, TransitionInfo(
        s[_ACCEPT], i[_N_LEAPFROG], i[_DEPTH], bool(i[_DIVERGENT]), energy, n_failed,
        energy - s[_H0], s[_MAX_ERR], rejected)
