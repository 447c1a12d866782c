"""Whole ODE solves in compiled code, where the right-hand side is a compiled program.

:func:`solve` is tried first by :func:`.ode._solve`: when the user's ``f`` lowered to
the compiled tape interpreter (:mod:`.ode_compiled`), the plain solve and the
forward-sensitivity (or tangent) system are integrated by one numba call
(:mod:`.ode_steppers`: scipy's RK45 or BDF step for step, with the rules of
:func:`.ode_integrate.integrate`). Otherwise - no program (not lowerable, not
compiled yet, ``STANLITE_BACKEND=python``), a dense trajectory for the adjoint method
(its forward and backward solves stay with scipy), or this route switched off - it
returns None and the caller steps scipy's solver as before. The two routes agree to
rounding (same method, same program).

The program's guards and spot checks keep their meaning: a guard that fails or a
value outside a function's domain anywhere in the solve stops the kernel, and the
solve is redone on scipy's route, whose right-hand side evaluations re-record, fall
back to the eager tape or raise as they always do; the evaluations a solve made count
as replays, and a spot check against the eager tape that falls due is made at the
solve's initial point (:meth:`~stanlite.autodiff.compile._Retaped.kernel_replays`);
if it disagrees, the solve is redone on scipy's route too.

Switch: ``STANLITE_ODE=scipy`` in the environment, or ``ENABLED = False`` here,
forces scipy's route (the benchmarks compare both).
"""

import numpy as np

from ..config import setting
from ..errors import SolverError
from . import ode_integrate as _oi

__all__ = ["solve", "ENABLED", "STATS"]

#: try the compiled integrator first (False: scipy's stepper always)
ENABLED = setting("STANLITE_ODE").lower() != "scipy"
#: solves done here, and solves handed back to scipy's route (by reason)
STATS = {"compiled": 0, "redone": 0}


def _program(rhs, t0, z0, args):
    """``(evaluator, p, k, directions or None)`` for a compiled solve, or None."""
    from .ode_rhs import TangentRHS
    if type(rhs) is TangentRHS:
        cm = rhs._compiled_tangent(t0, z0, args)
        if cm is None:
            return None
        _, c, p, D = cm
        return c, p, rhs.k, D
    if rhs.root is not rhs:
        return None
    cp = rhs._compiled(t0, z0, args)
    if cp is None:
        return None
    return cp[0], cp[1], 0, None


def _programs(c, t0, z0, p):
    """The evaluator's lowered programs, most recent first, or None (it fell back).

    A program fresh from a recording owes a check against the eager tape at its first
    new point: made here, at the solve's initial point, through the checked path (at
    the recording point itself the program was compared when it was made)."""
    at = c._check_at
    if at is not None and c.fallback is None:
        x = c._x(t0, z0[:c.n], p)
        if not (type(at) is np.ndarray and at.shape == x.shape and (at == x).all()):
            if c._full(t0, z0[:c.n], p) is None:
                return None
    if c.fallback is not None:
        return None
    progs = [q for q in c._programs.get((c.dim,), ()) if hasattr(q, "code")]
    return progs or None


_NO_DIRECTIONS = (np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0))


def solve(pb, z0, t0, ts, args):
    """``Y`` (``Y[i]`` the state at ``ts[i]``) by the compiled integrator, or None
    (this route does not apply: the caller integrates with scipy)."""
    ctl = pb.ctl
    if not ENABLED or ctl.method not in ("rk45", "bdf"):
        return None
    # (recording f, or checking it against the eager tape, may meet inf/NaN at the
    # start: the route that reports it does so, as scipy's route runs f)
    with np.errstate(all="ignore"):
        got = _program(pb.rhs, t0, z0, args)
        if got is None:
            return None
        c, p, k, D = got
        n = c.n
        m = n * (1 + k)
        if z0.shape != (m,) or z0.dtype != np.float64:
            return None
    # (C-contiguous arrays only: another layout would compile the kernels again)
    z0 = np.ascontiguousarray(z0)
    p = np.ascontiguousarray(p, dtype=np.float64)
    from . import ode_steppers as dp
    ptr, idx, val = _NO_DIRECTIONS if D is None else (D.ptr, D.idx, D.val)
    atol = ctl.atol_for(m)
    atol = np.full(m, atol) if type(atol) is float else np.ascontiguousarray(atol,
                                                                              float)
    ts = np.ascontiguousarray(ts, dtype=np.float64)
    Y = np.empty((len(ts), m))
    y = np.empty(m)
    info = np.zeros(dp.INFO_SIZE)
    x0 = c._x(t0, z0[:n], p)
    while True:
        with np.errstate(all="ignore"):
            progs = _programs(c, t0, z0, p)
        if progs is None:
            return None
        bundle = _bundle(c, progs, n)
        if bundle is None:
            return None
        bundle = private(bundle)
        if ctl.method == "rk45":
            st = dp.dopri(*bundle, c.dim, n, k, p, ptr, idx, val, z0, float(t0), ts,
                          ctl.rtol, atol, ctl.max_num_steps, _stiff_after(), Y, y, info)
        else:
            st = dp.bdf(*bundle, c.dim, n, k, p, ptr, idx, val, z0, float(t0), ts,
                        ctl.rtol, atol, ctl.max_num_steps, Y, y, info)
        nfev = int(info[dp.I_NFEV])
        with np.errstate(all="ignore"):
            kept = c.kernel_replays(nfev, x0, (c.dim,))
        if st > 0 and kept and len(progs) < BUNDLE:
            # no program's path holds at some point of the solve: record that path
            # there (the evaluator's checked path) and solve again, so that the answer
            # comes from this route whichever call recorded (a model's compiled
            # gradient replays a solve and expects the numbers its recording saw)
            where = bundle[-1]
            with np.errstate(all="ignore"):
                c._full(float(where[0]), where[1:].copy(), p)
            if len(c._programs.get((c.dim,), ())) > len(progs):
                continue
        break
    if not kept:
        STATS["redone"] += 1            # the spot check disagreed: the eager tape now
        return None
    if st < -1 and st != dp.BAD_START:
        raise _failure(dp, st, ctl, ts, y, info)
    if st != 0:
        # a domain error, a path no program covers (or a first step scipy's route
        # explains better): scipy's route, whose evaluations fall back to the eager tape
        STATS["redone"] += 1
        return None
    STATS["compiled"] += 1
    return Y


# programs of one right-hand side the kernels try in turn (guard paths: ``if t > 0``)
BUNDLE = 4


def _bundle(c, progs, n):
    """The steppers' right-hand side for ``progs`` (:data:`.ode_steppers.RHS_SIG`):
    ``(fp, ci, cf, cur, where)`` (``fp`` the function's addresses, the function
    kept alive on the evaluator), the first ``BUNDLE`` programs tried in turn from the
    one that ran last - by their generated code (:mod:`.ode_codegen`) once this
    right-hand side has run ``ode_codegen.AFTER`` evaluations and the code is
    compiled (:class:`.ode_codegen.Pending`: compiled in another process meanwhile),
    else by the
    interpreter's adapter over the programs' tables concatenated with offsets (kept on
    the evaluator until its programs change); None if a program's buffers differ in
    size. Shared: each solve runs on a :func:`private` copy."""
    from . import ode_codegen, ode_steppers as dp
    chosen = progs[:BUNDLE]
    ids = tuple(map(id, chosen))
    kept = getattr(c, "_ode_bundle", None)
    if kept is None or kept[0] != ids:
        if any(q.A.shape != q.V.shape for q in chosen):
            return None
        off = lambda arrs: np.cumsum([0] + [len(a) for a in arrs]).astype(np.int64)
        codes = [q.code for q in chosen]
        auxs = [q.aux for q in chosen]
        Vs = [q.V for q in chosen]
        ci, cf = dp.pack(np.concatenate(codes), off(codes), np.concatenate(auxs),
                         off(auxs), np.concatenate(Vs), off(Vs),
                         np.concatenate([q.A for q in chosen]),
                         np.array([q.out for q in chosen], dtype=np.int64),
                         np.array([q.nvar for q in chosen], dtype=np.int64), c.dim)
        kept = c._ode_bundle = [ids, chosen, dp.interp, dp.address(dp.interp), ci, cf,
                                False, False]
    after = ode_codegen.AFTER
    state = kept[6]
    if state is False and after is not None and c._replays >= after:
        # (tried once per bundle: the function, None, or a compile in another process)
        state = kept[6] = ode_codegen.generate(chosen, n, c.dim)
    elif state is False and after is not None and not kept[7]:
        # before AFTER evaluations: the generated code only if an earlier process
        # compiled it (the disk cache: a load of ~5-10 ms, no compile) - AFTER spares
        # a right-hand side that runs little a numba compile, not a load; the numbers
        # are the interpreter's, so using it from the first solve changes no result
        # (tried once per bundle: the source text and its hash, ~2 ms)
        kept[7] = True
        fn = ode_codegen.generate(chosen, n, c.dim, compiled_only=True)
        if fn is not None:
            state = kept[6] = fn
    if isinstance(state, ode_codegen.Pending):
        # the interpreter meanwhile: the generated code's numbers are its own, so the
        # solve at which the switch happens does not change a result
        state = state.ready()
        if state is not None:
            kept[6] = state
    if state is not None and state is not False and state is not True and \
            kept[2] is not state:
        kept[2:4] = state, dp.address(state)
        kept[6] = True
    return (kept[3], kept[4], kept[5], np.array([0, len(chosen)], dtype=np.int64),
            np.zeros(1 + n))


def private(bundle):
    """A copy of ``bundle`` one solve (one thread) may write: the value and adjoint
    buffers, the program choice, the failure point."""
    fp, ci, cf, cur, where = bundle
    return fp, ci, cf.copy(), cur.copy(), where.copy()


def _stiff_after():
    return _oi._STIFF_AFTER          # (read at each solve: a test may lower it)


def _failure(dp, st, ctl, ts, y, info):
    """The :class:`SolverError` of a failed compiled solve (the messages of
    :func:`.ode_integrate.integrate`)."""
    _fail, _nonfinite = _oi._fail, _oi._nonfinite
    t, total = info[dp.I_T], int(info[dp.I_TOTAL])
    if st == dp.TOO_SMALL:
        return _fail(ctl, f"the step size fell below 10 spacings of the floating-point "
                          f"numbers at t ({ctl.method.upper()} failed)", t, total)
    if st == dp.NOT_FINITE:
        return _fail(ctl, f"the solution is not finite (components {_nonfinite(y)})",
                     t, total)
    nxt = ts[int(info[dp.I_NEXT])]
    hlamb = info[dp.I_HLAMB]
    if st == dp.MAX_STEPS:
        note = ""
        if hlamb > 3.25:
            note = (f" (the step size is limited by stability, h*|lambda| ~ "
                    f"{hlamb:.2f}: the problem looks stiff; use ode_bdf)")
        return SolverError(
            f"{ctl.name}: max_num_steps = {ctl.max_num_steps} exceeded between t = "
            f"{info[dp.I_T_LAST]:.6g} and the next output time {nxt:.6g}; reached t = "
            f"{t:.6g} after {total} steps{note}")
    return SolverError(
        f"{ctl.name}: the problem is stiff at t = {t:.6g} (step size "
        f"{info[dp.I_H]:.3g} limited by stability, h*|lambda| ~ {hlamb:.2f}); reaching "
        f"the next output time {nxt:.6g} would take ~{info[dp.I_NEED]:.3g} steps > "
        f"max_num_steps = {ctl.max_num_steps} ({total} steps taken); use ode_bdf")
