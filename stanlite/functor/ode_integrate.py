"""Integration on plain floats: scipy's RK45 and BDF, one step at a time.

Everything here works on plain numpy arrays; the derivative machinery of
:mod:`.ode` only decides *which* system to integrate. Stepping the scipy solver
classes ourselves (instead of calling ``solve_ivp``) gives what the ODE super nodes
need:

* outputs at the requested times from each step's dense interpolant (steps are not
  forced to land on output times; the last step lands on ``ts[-1]`` exactly);
* Stan's step budget: at most ``max_num_steps`` accepted steps *between two
  consecutive output times* (CVODES' ``mxstep``; boost's ``max_num_steps``);
* every failure as a :class:`~stanlite.errors.SolverError` naming the solver, the
  time reached and the steps taken: scipy's own failure (step size underflow,
  Newton iterations that do not converge), a state that is no longer finite, or a
  step budget that runs out;
* for RK45, Hairer's stiffness test (Hairer & Wanner, *Solving ODEs II*, sec. IV.2,
  as in the DOPRI5 code): ``h |lambda| ~ h ||k7 - k6|| / ||y1 - y6||`` compares the
  last two stages, both evaluated at ``t + h``; a value above 3.25 means the step
  size sits on the boundary of the method's stability region. When that persists
  over 15 steps, the number of steps still needed to reach the next output time is
  extrapolated from the current step size, and if it exceeds the budget the solve
  stops at once with a message that says to use ``ode_bdf`` - instead of grinding
  through ``max_num_steps`` (10^6 by default) steps first;
* for the adjoint method, the whole forward trajectory (a :class:`DenseSolution` of
  the steps' interpolants) and the backward solve of the adjoint system with jumps at
  the output times (:func:`integrate_backward`).
"""

import bisect

import numpy as np
from scipy.linalg.lapack import dgetrf as _getrf, dgetrs as _getrs

from ..errors import SolverError

# scipy.integrate (which imports scipy.optimize, scipy.sparse, scipy.spatial: ~0.15 s)
# is imported by the first solve, not by ``import stanlite``: most models have no ODE
# (issue 20, point 6; tests/test_lazy_imports.py)

__all__ = ["Control", "integrate", "integrate_backward", "DenseSolution"]

_EPS = np.finfo(float).eps


class Control:
    """How to integrate: the method (``"rk45"``/``"bdf"``), tolerances, step budget,
    and the solver's name for messages (``ode_rk45``, ``ode_adjoint (backward)``...).

    ``atol`` is a scalar or one value per state of the *user's* system; derived
    systems (sensitivities, tangents) stack ``1 + k`` copies of the state and get
    the same tolerance for each copy (:meth:`atol_for`).
    """

    __slots__ = ("name", "method", "rtol", "atol", "max_num_steps")

    def __init__(self, name, method, rtol, atol, max_num_steps):
        self.name = name
        self.method = method
        # scipy's floor (100 machine epsilons) applied here, silently and documented,
        # rather than as a warning from inside scipy
        self.rtol = max(float(rtol), 100 * _EPS)
        self.atol = atol
        self.max_num_steps = int(max_num_steps)

    def atol_for(self, n):
        a = self.atol
        if type(a) is float:
            return a
        m = a.shape[0]
        if n == m:
            return a
        return np.tile(a, n // m)

    def renamed(self, suffix):
        return Control(f"{self.name} ({suffix})", self.method, self.rtol, self.atol,
                       self.max_num_steps)

    def __repr__(self):
        return (f"Control({self.name}, {self.method}, rtol={self.rtol:g}, "
                f"atol={self.atol}, max_num_steps={self.max_num_steps})")


def _make_solver(fun, jac, t0, y0, t_bound, ctl, atol, first_step=None):
    from scipy.integrate import BDF, RK45
    from scipy.sparse import issparse
    if ctl.method == "bdf":
        solver = BDF(fun, t0, y0, t_bound, rtol=ctl.rtol, atol=atol, jac=jac,
                     first_step=first_step)
        if not issparse(solver.J):
            _fast_lu(solver)
    else:
        solver = RK45(fun, t0, y0, t_bound, rtol=ctl.rtol, atol=atol,
                      first_step=first_step)
    # scipy sizes the first step from f(t0, y0); a NaN there makes the step size NaN,
    # and its step loop, whose exits compare against it, then never returns (seen
    # with V = 0 proposed by a diverging warmup trajectory: x / V = inf, f = NaN)
    f0 = solver.D[1] if ctl.method == "bdf" else solver.f    # (BDF keeps h f(t0, y0))
    if not (np.isfinite(f0).all() and np.isfinite(solver.h_abs)):
        raise _fail(ctl, f"the derivative at the initial state is not finite "
                         f"(components {_nonfinite(f0)})", t0, 0)
    return solver


def _nonfinite(v):
    return np.flatnonzero(~np.isfinite(v))[:3].tolist()


def _fast_lu(solver):
    """BDF's dense LU factorisation and solve (one of each per Newton iteration) by
    LAPACK's getrf/getrs directly: scipy.linalg's wrappers check their inputs for
    finiteness and batching at ~10x the cost of the factorisation of a small system.
    A singular or non-finite matrix gives inf/NaN corrections, which fail the Newton
    iteration, so the step is retried smaller - as with scipy's own functions."""
    def lu(A):
        solver.nlu += 1
        a, piv, _ = _getrf(A, overwrite_a=True)
        return a, piv

    def solve_lu(LU, b):
        return _getrs(LU[0], LU[1], b, overwrite_b=True)[0]

    solver.lu = lu
    solver.solve_lu = solve_lu


def _fail(ctl, what, t, steps):
    return SolverError(f"{ctl.name}: {what} at t = {t:.6g} after {steps} steps")


def _check_step(solver, msg, ctl, total):
    """After ``msg = solver.step()``: scipy's failure or a non-finite state is an error."""
    if solver.status == "failed":
        raise _fail(ctl, f"scipy's {ctl.method.upper()} failed ({msg})", solver.t, total)
    y = solver.y
    if not np.isfinite(y).all():
        raise _fail(ctl, f"the solution is not finite (components {_nonfinite(y)})",
                    solver.t, total)


class _Stiffness:
    """Hairer's stiffness test on the accepted steps of scipy's RK45 (DOPRI5).

    The last two stages of a Dormand-Prince step are both evaluated at ``t + h``:
    ``k6 = f(t + h, y6)`` and ``k7 = f(t + h, y1)`` (FSAL). Their difference over
    ``y1 - y6`` estimates the dominant eigenvalue of the Jacobian along the step;
    ``h |lambda| > 3.25`` puts ``h lambda`` on the boundary of DOPRI5's stability
    region (which crosses the negative real axis near -3.3).
    """

    __slots__ = ("count", "calm", "hlamb")

    def __init__(self):
        self.count = 0
        self.calm = 0
        self.hlamb = 0.0

    def update(self, solver):
        """Record one accepted step; True after 15 consecutive stiff-looking steps."""
        h = solver.h_previous
        K = solver.K
        # the sixth stage's argument: y0 + h * sum_j a_6j k_j (scipy keeps the stages)
        y6 = solver.y_old + h * (solver.A[5, :5] @ K[:5])
        den = float(np.sum((solver.y - y6) ** 2))
        if den > 0.0:
            self.hlamb = abs(h) * float(np.sqrt(np.sum((K[6] - K[5]) ** 2) / den))
        if self.hlamb > 3.25:
            self.calm = 0
            self.count += 1
            if self.count >= 15:
                self.count = 0
                return True
        else:
            self.calm += 1
            if self.calm == 6:
                self.count = 0
        return False


# the stiffness test costs a few microseconds per step: run it only once a solve has
# taken this many steps in one output interval (non-stiff problems never get there)
_STIFF_AFTER = 200


def integrate(fun, y0, t0, ts, ctl, jac=None, dense=False):
    """Integrate ``y' = fun(t, y)`` from ``(t0, y0)``; return ``(Y, sol, steps)``.

    ``Y[i]`` is the solution at ``ts[i]`` (``ts`` non-decreasing, ``ts[0] > t0``),
    ``sol`` the :class:`DenseSolution` over ``[t0, ts[-1]]`` when ``dense`` (else
    ``None``), ``steps`` the number of accepted steps. ``jac(t, y)`` is used by BDF.
    """
    T = len(ts)
    n = len(y0)
    Y = np.empty((T, n))
    atol = ctl.atol_for(n)
    t_end = float(ts[-1])
    with np.errstate(all="ignore"):     # (a non-finite f(t0, y0) is reported below)
        solver = _make_solver(fun, jac, float(t0), y0, t_end, ctl, atol)
    pieces = [] if dense else None
    stiff = _Stiffness() if ctl.method == "rk45" else None
    max_steps = ctl.max_num_steps
    i = 0
    steps = 0          # accepted steps since the last output time
    total = 0
    t_last = float(t0)
    with np.errstate(all="ignore"):
        while True:
            msg = solver.step()
            total += 1
            steps += 1
            _check_step(solver, msg, ctl, total)
            t = solver.t
            if dense:
                pieces.append(solver.dense_output())
            if t >= ts[i]:
                interp = pieces[-1] if dense else solver.dense_output()
                while i < T and ts[i] <= t:
                    Y[i] = solver.y if ts[i] == t else interp(ts[i])
                    i += 1
                if i == T:
                    break
                steps = 0
                t_last = t
                continue
            if steps >= max_steps:
                raise SolverError(
                    f"{ctl.name}: max_num_steps = {max_steps} exceeded between "
                    f"t = {t_last:.6g} and the next output time {ts[i]:.6g}; reached "
                    f"t = {t:.6g} after {total} steps{_stiff_note(stiff)}")
            if stiff is not None and steps >= _STIFF_AFTER and stiff.update(solver):
                need = steps + (ts[i] - t) / max(solver.h_abs, 1e-300)
                if need > max_steps:
                    raise SolverError(
                        f"{ctl.name}: the problem is stiff at t = {t:.6g} (step size "
                        f"{solver.h_abs:.3g} limited by stability, h*|lambda| ~ "
                        f"{stiff.hlamb:.2f}); reaching the next output time "
                        f"{ts[i]:.6g} would take ~{need:.3g} steps > max_num_steps = "
                        f"{max_steps} ({total} steps taken); use ode_bdf")
    sol = DenseSolution(pieces) if dense else None
    return Y, sol, total


def _stiff_note(stiff):
    if stiff is not None and stiff.hlamb > 3.25:
        return (f" (the step size is limited by stability, h*|lambda| ~ "
                f"{stiff.hlamb:.2f}: the problem looks stiff; use ode_bdf)")
    return ""


class DenseSolution:
    """The forward trajectory as the accepted steps' interpolants (for the adjoint
    method's backward pass, which needs y(t) at arbitrary times)."""

    __slots__ = ("pieces", "ends")

    def __init__(self, pieces):
        self.pieces = pieces
        self.ends = [float(p.t) for p in pieces]

    def __call__(self, t):
        i = bisect.bisect_left(self.ends, t)
        if i == len(self.pieces):
            i -= 1
        return self.pieces[i](t)


def integrate_backward(fun, z, ts, t0, jumps, ctl, atol, jac=None):
    """Integrate ``z' = fun(t, z)`` backwards from ``ts[-1]`` to ``t0`` with jumps.

    Starts from ``z`` (at ``ts[-1]``); at every earlier output time ``ts[i]`` the
    vector ``jumps(i)`` (or ``None``) is added to ``z`` before going on - the adjoint
    method's ``lambda(t_i^-) = lambda(t_i^+) + dL/dy(t_i)``. Each piece between
    jumps is a fresh solve (the solution has a kink there). A piece whose state is
    all zeros stays zero (the adjoint system is linear) and is skipped. Returns
    ``z`` at ``t0``.
    """
    T = len(ts)
    t_cur = float(ts[-1])
    max_steps = ctl.max_num_steps
    h = None           # the step size reached in the previous piece
    with np.errstate(all="ignore"):
        for i in range(T - 1, -1, -1):
            target = float(ts[i - 1]) if i > 0 else float(t0)
            if target < t_cur and z.any():
                # a restart after a jump keeps the step size the previous piece had
                # reached (instead of scipy's initial-step guess, which costs one more
                # evaluation and usually starts too small)
                first = None if h is None else min(h, t_cur - target)
                solver = _make_solver(fun, jac, t_cur, z, target, ctl, atol, first)
                steps = 0
                while solver.status == "running":
                    msg = solver.step()
                    steps += 1
                    _check_step(solver, msg, ctl, steps)
                    if solver.status == "running":
                        # (the last step of a piece is cut short to land on its end:
                        # its size says nothing about the solution)
                        h = solver.h_abs
                        if steps >= max_steps:
                            raise SolverError(
                                f"{ctl.name}: max_num_steps = {max_steps} exceeded "
                                f"between t = {t_cur:.6g} and t = {target:.6g} "
                                f"(integrating backwards); reached t = {solver.t:.6g}")
                z = solver.y
            t_cur = target
            if i > 0:
                j = jumps(i - 1)
                if j is not None:
                    z = z + j
    return z
