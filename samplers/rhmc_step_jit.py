"""One implicit (generalised) leapfrog step of SoftAbs RHMC as one compiled call.

What lives here: :func:`implicit_step`, the step of :meth:`.rhmc.SoftAbsMetric._step`
- the momentum fixed point at ``q0``, the position fixed point, the explicit
half-kick at ``q1`` and the geometry there - with the model's three compiled programs
(its gradient, its Hessian, and the third-order sweep ``(q, vec M) -> tr(M H(q))``)
called from inside the loop through the tape interpreter
(:mod:`stanlite.autodiff.vm.kernel`), as the compiled NUTS tree calls the gradient
(:mod:`.nuts_jit`).

Why. At d = 10 one implicit step makes about ten evaluations of the model's
programs (each 2-3 gradients' worth), ten small eigendecompositions and ten Anderson
updates; called from Python each of these ~30 pieces costs 10-40 us of wrappers,
checks and allocations, which was more than half of the step (``benchmarks/README.md``:
0.73 ms a step, 56% outside the model's programs and the eigendecompositions). Here
the whole step is one call.

The arithmetic is :meth:`.rhmc.SoftAbsMetric._step`'s, in the same order (Anderson
acceleration with the same histories and stopping rules, the same predictors and
restarts from the plain start), so the two agree to rounding
(``tests/samplers/test_rhmc_step_jit.py``). Whatever the compiled loop does not
decide it hands back (:data:`HANDOFF`): an interpreter status other than OK (a guard
that changed, a value outside a domain) or a non-finite Hessian or gradient - the
Python step then redoes the whole step, with the model's own calls raising,
re-recording or rejecting as they always do.

Numba's disk cache does not see changes in the functions this module calls
(:mod:`.rhmc_kernels`, the interpreter): after editing those, delete
``samplers/__pycache__/rhmc_step_jit*.nb*`` or this step keeps the old code (seen:
a changed least-squares update in the Python step but not here).
"""

import math

import numpy as np

from . import rhmc_kernels as _K
from .nuts_jit import _jit, njit

__all__ = ["available", "implicit_step", "OK", "FAILED", "HANDOFF", "N_COUNTS"]

#: step outcomes: converged; a fixed point failed (a divergence, as in Python);
#: handed back to the Python step
OK, FAILED, HANDOFF = 0, 1, 2

# counts[...] the step adds to (rhmc.PROFILE's keys)
(C_P_IT, C_Q_IT, C_HESS, C_SWEEP, C_EIGH, C_RESTART, C_GRAD) = range(7)
N_COUNTS = 7

# fixed-point outcomes inside the kernel
_CONVERGED, _STALLED, _BAD = 0, 1, 2

if njit is not None:
    from stanlite.autodiff.vm import kernel as _vm
    _value_grad = _vm.value_grad
    _value_only = _vm.value_only
else:                                                   # pragma: no cover
    _value_grad = _value_only = None


def available():
    """Whether the compiled step can run (numba importable, not disabled)."""
    return njit is not None


@_jit
def _all_finite(x):
    for i in range(x.shape[0]):
        if not math.isfinite(x[i]):
            return False
    return True


@_jit
def _evaluate(mode, x, out, ctx_f, ctx_i, G0, Q, finv, J, H_prog, H_aux, H_V, S_prog,
              S_aux, S_V, S_A, xs, gs, hres, counts):
    """``out = G(x)`` of the momentum (``mode`` 0) or position (1) fixed point; ->
    interpreter status (0 OK; else hand back).

    ``G0`` rows: 0 ``base = p0 + e grad0``, 1 ``q0``, 2 ``v0``, 3 ``p_h``; ``ctx_f``:
    ``[e, alpha]``; ``ctx_i``: the programs' ``dim, out, nvar, size`` (Hessian:
    0-3, sweep: 4-7). The momentum map fills the sweep's input ``xs = (q0, vec
    M(x))`` (``M`` from the geometry at ``q0``: ``Q, finv, J``); its gradient's ``q``
    part, into ``gs``, is ``grad_q tr(M H(q0))``; ``hres`` receives the Hessian."""
    n = x.shape[0]
    half = ctx_f[0]
    if mode == 0:
        _fill_trace_input(xs, Q, finv, J, x)
        # p -> base - e grad_q tr(M(p) A(q0)) = base + e grad_q tr(M(p) H(q0))
        st, _ = _value_grad(S_prog, S_aux, S_V, S_A, ctx_i[4], ctx_i[5], ctx_i[6],
                            xs, gs)
        counts[C_SWEEP] += 1
        counts[C_P_IT] += 1
        if st != 0:
            return st
        for i in range(n):
            out[i] = G0[0, i] + half * gs[i]
        return 0
    st = _value_only(H_prog, H_aux, H_V, ctx_i[0], ctx_i[1], ctx_i[3], x, hres)
    counts[C_HESS] += 1
    counts[C_Q_IT] += 1
    if st != 0:
        return st
    if not _all_finite(hres):
        return -1
    A = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            A[i, j] = -hres[i * n + j]
    v = _K.softabs_velocity(A, ctx_f[1], G0[3])
    counts[C_EIGH] += 1
    for i in range(n):
        out[i] = G0[1, i] + half * (G0[2, i] + v[i])
    return 0


@_jit
def _fill_trace_input(xs, Q, finv, J, p):
    """``xs[n:] = vec M(p)`` (the sweep program's input after ``q0``)."""
    n = p.shape[0]
    M = _K.trace_matrix(Q, finv, J, p)
    for i in range(n):
        for j in range(n):
            xs[n + i * n + j] = M[i, j]


@_jit
def _solve(mode, x0, free_first, W, tol, max_iter, ctx_f, ctx_i, G0, Q, finv, J,
           H_prog, H_aux, H_V, S_prog, S_aux, S_V, S_A, xs, gs, hres, counts, sol):
    """:func:`.rhmc._anderson` (depth 4, mixing 1) on the momentum or position map,
    the solution into ``sol``; -> (outcome, interpreter status). ``free_first``: the
    first evaluation is ``q0 + 2 e v0`` (the position map at ``q0``, known)."""
    n = x0.shape[0]
    depth = 4
    dX = np.empty((n, depth))
    dF = np.empty((n, depth))
    dW = np.empty((n, depth))
    count = 0
    x = x0.copy()
    gx = np.empty(n)
    x_prev = np.empty(n)
    f_prev = np.empty(n)
    wf_prev = np.empty(n)
    if free_first:
        for i in range(n):
            gx[i] = G0[1, i] + 2.0 * ctx_f[0] * G0[2, i]
    else:
        st = _evaluate(mode, x, gx, ctx_f, ctx_i, G0, Q, finv, J, H_prog, H_aux, H_V,
                       S_prog, S_aux, S_V, S_A, xs, gs, hres, counts)
        if st != 0:
            return _BAD, st
    r0 = -1.0
    best = math.inf
    k_best = 0
    for k in range(max_iter):
        if not _all_finite(gx):
            return _STALLED, 0
        fx = gx - x
        wf = W @ fx
        r = math.sqrt(np.dot(wf, wf))
        if r <= tol:
            sol[:] = gx
            return _CONVERGED, 0
        if r < best:
            best = r
            k_best = k
        if r0 < 0.0:
            r0 = r
        elif not r < 1e3 * r0 or k - k_best >= 8 or k == max_iter - 1:
            return _STALLED, 0
        if k > 0:
            j = (k - 1) % depth
            for i in range(n):
                dX[i, j] = x[i] - x_prev[i]
                dF[i, j] = fx[i] - f_prev[i]
                dW[i, j] = wf[i] - wf_prev[i]
            count = min(count + 1, depth)
        x_prev[:] = x
        f_prev[:] = fx
        wf_prev[:] = wf
        x = _K.anderson_step(x, fx, wf, dX, dF, dW, count, 1.0)
        st = _evaluate(mode, x, gx, ctx_f, ctx_i, G0, Q, finv, J, H_prog, H_aux, H_V,
                       S_prog, S_aux, S_V, S_A, xs, gs, hres, counts)
        if st != 0:
            return _BAD, st
    return _STALLED, 0


@_jit
def _solve_from(mode, start, predicted, plain, free_plain, W, tol, max_iter, ctx_f,
                ctx_i, G0, Q, finv, J, H_prog, H_aux, H_V, S_prog, S_aux, S_V, S_A, xs,
                gs, hres, counts, sol):
    """:func:`_solve` from the predictor ``start`` (when ``predicted``), and once more
    from the plain start if that stalls (a predictor can start the iteration outside
    the solution's basin; counted as a restart); -> the outcome."""
    out = _STALLED
    if predicted:
        out, st = _solve(mode, start, False, W, tol, max_iter, ctx_f, ctx_i, G0, Q,
                         finv, J, H_prog, H_aux, H_V, S_prog, S_aux, S_V, S_A, xs, gs,
                         hres, counts, sol)
        if out == _STALLED:
            counts[C_RESTART] += 1
    if out == _STALLED:
        out, st = _solve(mode, plain, free_plain, W, tol, max_iter, ctx_f, ctx_i, G0,
                         Q, finv, J, H_prog, H_aux, H_V, S_prog, S_aux, S_V, S_A, xs,
                         gs, hres, counts, sol)
    return out


@_jit
def implicit_step(q0, p0, grad0, Q, f, finv, J, force, has_force, dv, dv_scale, has_dv,
                  eps, alpha, tol, max_iter,
                  G_prog, G_aux, G_V, G_A, g_dim, g_out, g_nvar,
                  H_prog, H_aux, H_V, h_dim, h_out, h_size,
                  S_prog, S_aux, S_V, S_A, s_dim, s_out, s_nvar,
                  counts, res, Q1, J1):
    """One implicit leapfrog step of size ``eps`` from ``(q0, p0)`` whose geometry is
    ``Q, f, finv, J``; -> (outcome, lp1, log det Sigma(q1)).

    ``force`` (``has_force``) is the last half-kick's ``dH/dq`` and ``dv`` the last
    step's change of velocity scaled by ``eps / dv_eps`` (``dv_scale``, ``has_dv``):
    the predictors. On OK ``res`` rows hold ``q1, p1, grad1, v1, force1, dv1, lam1,
    f1, finv1`` and ``A1`` (rows 9..): the next point and its geometry (``Q1``,
    ``J1``). ``counts`` accumulates the evaluations (the ``C_*`` indices)."""
    n = q0.shape[0]
    half = 0.5 * eps
    ctx_f = np.array([half, alpha])
    ctx_i = np.array([h_dim, h_out, 0, h_size, s_dim, s_out, s_nvar, 0], dtype=np.int64)
    G0 = np.empty((4, n))
    for i in range(n):
        G0[0, i] = p0[i] + half * grad0[i]
        G0[1, i] = q0[i]
    # the metric's own norms at q0: |dp| in Sigma^-1, |dq| in Sigma
    wp = np.empty((n, n))
    wq = np.empty((n, n))
    for k in range(n):
        sp = math.sqrt(finv[k])
        sq = math.sqrt(f[k])
        for i in range(n):
            wp[k, i] = sp * Q[i, k]
            wq[k, i] = sq * Q[i, k]
    xs = np.empty(s_dim)
    xs[:n] = q0
    gs = np.empty(s_dim)
    hres = np.empty(h_size)
    sol = np.empty(n)
    # 1. the momentum fixed point at q0, from the last force (predictor) or p0
    start = p0.copy()
    if has_force:
        for i in range(n):
            start[i] = p0[i] - half * force[i]
    out = _solve_from(0, start, has_force, p0, False, wp, tol, max_iter, ctx_f, ctx_i,
                      G0, Q, finv, J, H_prog, H_aux, H_V, S_prog, S_aux, S_V, S_A, xs,
                      gs, hres, counts, sol)
    if out == _BAD:
        return HANDOFF, 0.0, 0.0
    if out == _STALLED:
        return FAILED, 0.0, 0.0
    p_h = sol.copy()
    v0 = _K.velocity(Q, finv, p_h)
    G0[2] = v0
    G0[3] = p_h
    # 2. the position fixed point, from the last change of velocity or q0
    qs = q0.copy()
    if has_dv:
        for i in range(n):
            qs[i] = q0[i] + half * (2.0 * v0[i] + dv_scale * dv[i])
    out = _solve_from(1, qs, has_dv, q0, True, wq, tol, max_iter, ctx_f, ctx_i, G0, Q,
                      finv, J, H_prog, H_aux, H_V, S_prog, S_aux, S_V, S_A, xs, gs,
                      hres, counts, sol)
    if out == _BAD:
        return HANDOFF, 0.0, 0.0
    if out == _STALLED:
        return FAILED, 0.0, 0.0
    q1 = sol.copy()
    # 3. the explicit half-kick at q1: gradient, Hessian, geometry, one sweep
    g1 = np.empty(n)
    st, lp1 = _value_grad(G_prog, G_aux, G_V, G_A, g_dim, g_out, g_nvar, q1, g1)
    counts[C_GRAD] += 1
    if st != 0 or not math.isfinite(lp1):
        return HANDOFF, 0.0, 0.0
    st = _value_only(H_prog, H_aux, H_V, h_dim, h_out, h_size, q1, hres)
    counts[C_HESS] += 1
    if st != 0 or not _all_finite(hres):
        return HANDOFF, 0.0, 0.0
    A1 = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            A1[i, j] = -hres[i * n + j]
    S1, lam1, Qn, f1, finv1, logdet = _K.eig_softabs(A1, alpha)
    counts[C_EIGH] += 1
    Jn = _K.divided_differences(lam1, f1, alpha)
    xs[:n] = q1
    _fill_trace_input(xs, Qn, finv1, Jn, p_h)
    st, _ = _value_grad(S_prog, S_aux, S_V, S_A, s_dim, s_out, s_nvar, xs, gs)
    counts[C_SWEEP] += 1
    if st != 0:
        return HANDOFF, 0.0, 0.0
    force1 = np.empty(n)
    p1 = np.empty(n)
    for i in range(n):
        force1[i] = -gs[i] - g1[i]
        p1[i] = p_h[i] - half * force1[i]
    v1 = _K.velocity(Qn, finv1, p1)
    dv1 = _K.velocity(Qn, finv1, p_h) - v0
    res[0] = q1
    res[1] = p1
    res[2] = g1
    res[3] = v1
    res[4] = force1
    res[5] = dv1
    res[6] = lam1
    res[7] = f1
    res[8] = finv1
    res[9:9 + n] = S1
    Q1[:, :] = Qn
    J1[:, :] = Jn
    return OK, lp1, logdet


if njit is not None:
    # the SoftAbs kernels (rhmc_kernels.py) are compiled into this module's cached
    # machine code, but numba keys that cache on this file alone: drop it when they
    # (or the interpreter they call) change
    from stanlite.autodiff.vm.stale_cache import flush_when_changed as _flush_when_changed
    _dispatchers = [d for d in list(globals().values())
                    if hasattr(d, "_cache") and hasattr(d, "py_func")]
    _vm.drop_stale_cache(_dispatchers, "rhmc_step_jit")
    _flush_when_changed(_dispatchers, "rhmc_step_jit", [_K.__file__], "rhmc-deps")

