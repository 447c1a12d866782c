"""The gradient's cost inside compiled code: the compiled tape interpreter's
``value_grad`` (stanlite/autodiff/vm/kernel.py) called from a numba loop over many
distinct points, as the compiled NUTS trajectory calls it - no Python, no sampler
around it. benchmarks/nuts.py reports it beside the gradient through Python
(``model.log_density_gradient``) and the chains' CPU time per leapfrog step.

The loop is cached on disk by numba (compiling it links the interpreter: ~10 s
once); its cache is dropped when the interpreter's source changes, as the
samplers' are."""

import time

import numpy as np
from numba import njit

from stanlite.autodiff.vm import kernel as _kernel

value_grad = _kernel.value_grad


@njit(cache=True, nogil=True)
def _loop(code, aux, V, A, dim, out, nvar, X, g):
    """``value_grad`` at every row of ``X``; -> (sum of the log densities, number
    of points the interpreter handed back)."""
    total = 0.0
    handed = 0
    for i in range(X.shape[0]):
        st, lp = value_grad(code, aux, V, A, dim, out, nvar, X[i], g)
        if st != 0:
            handed += 1
        else:
            total += lp
    return total, handed


_kernel.drop_stale_cache([_loop], "bench_kernel_timing")


def in_kernel_seconds(model, points, repeats=20):
    """``(CPU seconds per gradient: the minimum over repeats, the median, points
    handed back)`` of the model's lowered program at ``points`` (rows: unconstrained
    points), or None when the model has no program in the interpreter. CPU time of
    this thread, as the other gradient columns: a preempted loop is not charged for
    the wait (the machine is shared)."""
    cg = model.compiled_gradient() if hasattr(model, "compiled_gradient") else None
    prog = cg.kernel_program() if cg is not None else None
    if prog is None:
        return None
    X = np.ascontiguousarray(points, dtype=float)
    V, A, g = prog.V.copy(), prog.A.copy(), np.zeros(prog.dim)
    args = (prog.code, prog.aux, V, A, prog.dim, prog.out, prog.nvar)
    _loop(*args, X[:2], g)                  # load (or compile) it
    times = []
    for _ in range(repeats):
        t0 = time.thread_time()
        _, handed = _loop(*args, X, g)
        times.append((time.thread_time() - t0) / len(X))
    return min(times), float(np.median(times)), int(handed)
