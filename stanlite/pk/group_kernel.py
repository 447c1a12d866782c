"""The population solver's compiled loop: every subject's whole event timeline in one
numba call (imported on first use: it needs numba and the ODE steppers).

A subject's plan (:mod:`.population`) is a short program of operations on the
coupled state ``z = [x, dx/dtheta_1, ..., dx/dtheta_k]`` (``k = 0``: the amounts
alone):

=========  =============================================================================
``SOLVE``  integrate from the current time through ``ts[a:b]`` (dense outputs; the
           last is the end of the segment) with the current parameter row
           (:func:`~stanlite.functor.ode_steppers.dopri` or ``bdf``); ``rec[j] >= 0``
           stores that output as record ``rec[j]``'s row
``OUT``    store the current state as record ``a``'s row (a record at the current time)
``RESET``  the state (amounts and sensitivities) to zero
``BOLUS``  ``x[a] += amount`` (a plain amount: the sensitivities do not jump)
``RATE``   the parameter row ``a`` (theta and the infusion rates) for the next solves
=========  =============================================================================

The loop holds no Python object and the steppers release the GIL, so subjects split
between threads run in parallel; a subject's numbers depend on nothing but its own
plan and parameters (its program choice restarts at the first program), so a split
gives the same bits as one thread.
"""

import numpy as np

from ..autodiff.vm.opcodes import OK
from ..functor import ode_steppers as _dp

__all__ = ["run", "SOLVE", "OUT", "RESET", "BOLUS", "RATE"]

SOLVE, OUT, RESET, BOLUS, RATE = 0, 1, 2, 3, 4

_jit = _dp._jit
_dopri = _dp.dopri
_bdf = _dp.bdf
_I_NFEV = _dp.I_NFEV


@_jit
def run(fp, ci, cf, cur, where, dim, n, k, ptr, idx, val, subjects, op_ptr, kind, arg_a,
        arg_b, amount, t_start, prow, ts_all, rec_all, bdf, rtol, atol, max_steps,
        stiff_after, Z, status, info, nfev, at):
    """Run the plans of ``subjects``; ``Z[r]`` the state at record ``r``, ``status[s]``
    the steppers' status of subject ``s`` (OK, a program status or a failure),
    ``info[s]`` its stepper information at the failure and ``at[s]`` the failed
    operation, ``nfev[s]`` its right-hand side evaluations."""
    m = n * (1 + k)
    z = np.zeros(m)
    y = np.empty(m)
    for si in range(subjects.shape[0]):
        s = subjects[si]
        for i in range(m):
            z[i] = 0.0
        cur[0] = 0                      # the same program choice whatever ran before
        t = t_start[s]
        nfev[s] = 0.0
        row = 0
        st = OK
        for o in range(op_ptr[s], op_ptr[s + 1]):
            op = kind[o]
            if op == SOLVE:
                a, b = arg_a[o], arg_b[o]
                ts = ts_all[a:b]
                Y = np.empty((b - a, m))
                if bdf:
                    st = _bdf(fp, ci, cf, cur, where, dim, n, k, prow[row], ptr, idx,
                              val, z, t, ts, rtol, atol, max_steps, Y, y, info[s])
                else:
                    st = _dopri(fp, ci, cf, cur, where, dim, n, k, prow[row], ptr, idx,
                                val, z, t, ts, rtol, atol, max_steps, stiff_after, Y, y,
                                info[s])
                nfev[s] += info[s, _I_NFEV]
                if st != OK:
                    at[s] = o
                    break
                for j in range(b - a):
                    r = rec_all[a + j]
                    if r >= 0:
                        for i in range(m):
                            Z[r, i] = Y[j, i]
                for i in range(m):
                    z[i] = Y[b - a - 1, i]
                t = ts[b - a - 1]
            elif op == OUT:
                r = arg_a[o]
                for i in range(m):
                    Z[r, i] = z[i]
            elif op == RESET:
                for i in range(m):
                    z[i] = 0.0
            elif op == BOLUS:
                z[arg_a[o]] += amount[o]
            else:
                row = arg_a[o]
        status[s] = st



# the loop carries the interpreter's machine code in its numba cache (see
# ode_steppers): drop it when the interpreter's source changes - and the steppers'
# (dopri, bdf, inlined into it), whose file numba does not watch for this one
_dp._k.drop_stale_cache([run], "group_kernel")
if _dp._k.njit is not None:
    from ..autodiff.vm.stale_cache import flush_when_changed as _flush_when_changed
    _flush_when_changed([run], "group_kernel", [_dp.__file__], "ode-deps")
