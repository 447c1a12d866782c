"""Steady states: the amounts at a steady-state record, in closed form or by a root.

A record with ``ss > 0`` declares that its dose has been given every ``ii`` forever
(the record's dose being the last of the series, NONMEM's SS data item). The amounts
at the record's time ``t`` are those of the periodic solution, at the phase ``psi =
ii - tlag`` after the previous dose of the series (the record's own dose falls at
``t + tlag``; ``tlag < ii`` is required: NONMEM's "advance to the appropriate point
in the steady-state cycle").

Linear models, in closed form. With ``Phi(u) = e^{K u}`` and ``G(u) = int_0^u
Phi``, summing the geometric series of past doses:

* bolus ``A`` into ``c``:      ``x_ss = Phi(psi) (I - Phi(ii))^-1 A e_c``
  (at ``tlag = 0`` the trough; the record's bolus then gives the peak
  ``(I - Phi(ii))^-1 A e_c``);
* infusion at rate ``R`` for ``d``: the infusions started ``psi + k ii`` ago, ``k >=
  0``; those with ``psi + k ii < d`` (``k < k*``) are still running::

      x_ss = R sum_{k < k*} G(psi + k ii) e_c
             + Phi(psi + k* ii - d) (I - Phi(ii))^-1 R G(d) e_c,

  and they go on after the record (for ``d - psi - k ii``): "ghost" infusions the
  superposition adds (:mod:`.solve`). ``d > ii`` (overlapping infusions) included;
* constant infusion at steady state (``ii = 0``): ``x_ss = R G(inf) e_c = -R K^-1 e_c``,
  constant as long as the infusion runs (until a reset).

One ``n x n`` solve per steady-state record with the differentiable ``solve``: the
derivatives in every parameter - ``ii`` included, through ``Phi(ii)``, ``psi`` and the
infusion phases (Torsten's issue 15 was a wrong derivative in ``ii``) - are exact.

General ODE models (:mod:`.nonlinear`): the trough ``x`` solves ``x = F_ii(x + A e_c)``
(``F_u`` the evolution over ``u`` without dosing, by the ODE super node) with the
algebraic-solver super node, whose implicit-function-theorem derivatives again cover
every parameter including ``ii``; see :func:`ode_steady_state`.
"""

import math
from dataclasses import dataclass

import numpy as np

from ..autodiff.var import Box, guarded, shape_of
from ..errors import DomainError, SolverError
from ..functor.algebra_solver import algebra_solver
from ..functor import ode_native as _native
from ..functor.ode import (_Problem as _OdeProblem, _check_values, _directions, _solve,
                           ode_bdf, ode_rk45)
from ..functor.ode_integrate import Control
from ..functor.ode_rhs import OdeRHS
from ..math.linalg import matmul, solve
from ..math.structure import concatenate, expand_dims, scatter_add, stack
from .dosing import BOLUS, CONSTANT, INFUSION

__all__ = ["linear_steady_state", "SteadyStates", "OdeSystem", "ode_steady_state"]


class Ghost:
    """An infusion of a steady-state series still running at the record: it goes on
    at ``rate`` for ``dur`` after the record's time."""

    __slots__ = ("item", "rate", "dur")

    def __init__(self, item, rate, dur):
        self.item = item
        self.rate = rate
        self.dur = dur


class SteadyStates:
    """``state`` (n_items, n_cmt): the amounts at each steady-state record (before its
    own dose); ``ghosts``: the running infusions they carry."""

    def __init__(self, state, ghosts):
        self.state = state
        self.ghosts = ghosts


def _sel(x, idx):
    """``x[idx]`` for a vector (plain or traced); a scalar stays a scalar."""
    if shape_of(x) == ():
        return x
    return x[idx]


def _traced(*xs):
    return any(isinstance(x, Box) for x in xs)


def _unit(A, c, n):
    """Rows ``A[q] e_c``: (Q, n) with the amounts in column c."""
    Q = shape_of(A)[0]
    zero = np.zeros(Q)
    return stack([A if j == c else zero for j in range(n)], axis=1)


def phase(ev, p, d, idx, who):
    """``psi = ii - tlag`` of the steady-state items ``idx`` (``ii`` without a lag),
    checking ``0 <= tlag < ii``."""
    ii = _sel(d.ss_ii, idx)
    if d.ss_lag is None:
        return ii
    L = _sel(d.ss_lag, idx)
    recs = p.ss_rec[idx]

    def check(ii, L):
        ii = np.broadcast_to(np.asarray(ii, float), (len(recs),))
        L = np.broadcast_to(np.asarray(L, float), (len(recs),))
        bad = np.flatnonzero((L >= ii) & (ii > 0))
        if bad.size:
            q = int(bad[0])
            r = int(recs[q])
            raise DomainError(f"{who}: record {r + 1} (subject {ev.ids[ev.subject[r]]}): "
                              f"the lag time {L[q]:g} of compartment {int(ev.cmt[r])} must "
                              f"be smaller than ii = {ii[q]:g} for a steady-state dose")
        return True
    guarded(check, ii, L)
    return ii - L


def _kstar(psi, ii, dur):
    """Per item: the number of past infusions of the series still running at the
    record, #{k >= 0 : psi + k ii < dur}."""
    psi, ii, dur = (np.broadcast_to(np.asarray(x, float), np.broadcast(psi, ii, dur).shape)
                    for x in (psi, ii, dur))
    out = []
    for a, b, c in zip(psi.ravel(), ii.ravel(), dur.ravel()):
        k = max(0, math.ceil((c - a) / b)) if c > a else 0
        while k > 0 and a + (k - 1) * b >= c:
            k -= 1
        while a + k * b < c:
            k += 1
        out.append(k)
    return tuple(out)


def linear_steady_state(kern, ev, p, d, who):
    """The steady states of every ``ss > 0`` record of a linear model (closed form,
    module docstring). Returns :class:`SteadyStates`."""
    n = kern.n_cmt
    Q = len(p.ss_rec)
    eye = np.eye(n)
    rows_idx, rows_val = [], []
    ghosts = []
    inf_pos = np.full(Q, -1)
    inf_pos[d.ss_inf] = np.arange(len(d.ss_inf))
    for c in np.unique(p.ss_cmt):
        c = int(c)
        # boluses: x = Phi(psi) (I - Phi(ii))^-1 A e_c
        idx = np.flatnonzero((p.ss_cmt == c) & (p.ss_kind == BOLUS))
        if idx.size:
            ii = _sel(d.ss_ii, idx)
            s = p.ss_subj[idx]
            Phi = kern.period(ii, s)
            y = solve(eye - Phi, expand_dims(_unit(_sel(d.ss_amount, idx), c, n), -1))
            if d.ss_lag is None:
                x = matmul(Phi, y)[..., 0]
            else:
                x = kern.free(phase(ev, p, d, idx, who), y[..., 0], s)
            rows_idx.append(idx)
            rows_val.append(x)
        # infusions at rate R for dur, every ii
        idx = np.flatnonzero((p.ss_cmt == c) & (p.ss_kind == INFUSION))
        if idx.size:
            j = inf_pos[idx]
            R, dur = _sel(d.ss_rate, j), _sel(d.ss_dur, j)
            ii = _sel(d.ss_ii, idx)
            psi = phase(ev, p, d, idx, who)
            s = p.ss_subj[idx]
            kst = guarded(_kstar, psi, ii, dur) if _traced(psi, ii, dur) else \
                _kstar(psi, ii, dur)
            kst_a = np.array(kst)
            xd = expand_dims(R, -1) * kern.infuse(dur, c, s)
            y = solve(eye - kern.period(ii, s), expand_dims(xd, -1))[..., 0]
            x = kern.free(psi + kst_a * ii - dur, y, s)
            rows_idx.append(idx)
            rows_val.append(x)
            for k in range(int(kst_a.max(initial=0))):
                sub = np.flatnonzero(kst_a > k)
                uk = _sel(psi, sub) + k * _sel(ii, sub)
                rows_idx.append(idx[sub])
                rows_val.append(expand_dims(_sel(R, sub), -1) * kern.infuse(uk, c, s[sub]))
                for q in sub:
                    ghosts.append(Ghost(int(idx[q]), _sel(R, q),
                                        _sel(dur, q) - _sel(psi, q) - k * _sel(ii, q)))
        # constant infusions: x = R G(inf) e_c
        idx = np.flatnonzero((p.ss_cmt == c) & (p.ss_kind == CONSTANT))
        if idx.size:
            R = _sel(d.ss_rate, inf_pos[idx])
            rows_idx.append(idx)
            rows_val.append(expand_dims(R, -1) * kern.ginf(c, p.ss_subj[idx]))
    idx = np.concatenate(rows_idx)
    val = rows_val[0] if len(rows_val) == 1 else concatenate(rows_val, axis=0)
    if len(rows_val) == 1 and np.array_equal(idx, np.arange(Q)):
        state = val
    elif isinstance(val, Box):
        state = scatter_add(val, idx, (Q, n))
    else:
        state = np.zeros((Q, n))
        np.add.at(state, idx, np.asarray(val, dtype=float))
    return SteadyStates(state, ghosts)


# --------------------------------------------------------------------------------------
# general ODE models: the algebraic-solver super node
# --------------------------------------------------------------------------------------
def _rhs(f):
    """The right-hand side with the infusion rates: ``f(t, x, theta, *data) + rate``.

    One function per ``f`` (kept for the last few): the ODE solvers share a compiled
    right-hand side between solves of the same function (functor/ode_compiled.py), and
    a new closure at every evaluation of a model would be recorded again each time."""
    try:
        rhs = _RHS.get(f)
        shared = True
    except TypeError:                   # an unhashable callable: not shared
        rhs, shared = None, False
    if rhs is None:
        def rhs(t, x, theta, rate, *data):
            return f(t, x, theta, *data) + rate
        if shared:
            _RHS[f] = rhs
            if len(_RHS) > 32:
                _RHS.pop(next(iter(_RHS)))
    return rhs


_RHS = {}
#: bolus steady states: the period map and its Jacobians from one sensitivity solve
#: per evaluation (:meth:`OdeSystem.bolus_jacobians`), constant infusions: f and its
#: Jacobians from its compiled program (:meth:`OdeSystem.constant_jacobians`);
#: False: the residual through AD as before (the benchmarks time both routes)
PERIOD_JACOBIANS = True
# the plain period maps' ODE problems, per right-hand side and controls (the last few)
_PLAIN = {}
# the sensitivity systems and their unit directions, per problem and shapes
_DIRECTIONS = {}
# the last sensitivity plan per problem and directions (OdeSystem._sens_plan)
_PLANS = {}


def zeros(n):
    """A read-only vector of ``n`` zeros, the same object every time (no infusion
    running): the sensitivity plans are kept for the same argument objects."""
    z = _ZEROS.get(n)
    if z is None:
        z = _ZEROS[n] = np.zeros(n)
        z.flags.writeable = False
    return z


_ZEROS = {}


def _vec(x, n):
    """A state vector (plain float array or traced)."""
    if isinstance(x, Box):
        return x
    return np.asarray(x, dtype=np.float64).reshape(n)


@dataclass(eq=False)               # eq=False: a system is itself, hashed by identity
class OdeSystem:
    """An ODE model ``x' = f(t, x, theta, *data) + r`` with its solver controls: the
    evolution over a time span (:meth:`evolve`) and the steady states of dosing
    regimens (:meth:`steady_state`), for :mod:`.nonlinear`."""

    f: object                   # the right-hand side f(t, x, theta, *data)
    n: int
    solver: object              # functor.ode's ode_rk45 or ode_bdf
    rel_tol: float
    abs_tol: float
    max_num_steps: int
    data: tuple
    ss_rel_tol: float
    ss_f_tol: float
    ss_max_steps: int
    ss_guess: object
    who: str

    def __post_init__(self):
        n, who, ss_guess = self.n, self.who, self.ss_guess
        self.rhs = _rhs(self.f)
        # the integrations inside a steady-state residual, ten times tighter than the
        # solver's: the residual's noise (which grows with the accumulation ratio)
        # must stay below f_tol
        self.inner_tol = 0.1 * min(self.rel_tol, self.abs_tol)
        if ss_guess is None:
            self.guess = np.zeros(n)
        elif callable(ss_guess):
            self.guess = _guess_of_theta(ss_guess, n, who)
        else:
            self.guess = np.asarray(ss_guess, dtype=np.float64)
            if self.guess.shape != (n,):
                raise ValueError(f"{who}: ss_guess must be a vector of {n} amounts, got "
                                 f"shape {self.guess.shape}")

    def _span(self, ts, tol):
        """``(ts, rel_tol, abs_tol)`` of a solve: the times as one vector (traced if
        any is), both tolerances ``tol`` when it is given."""
        if any(isinstance(t, Box) for t in ts):
            ts = stack(list(ts))
        else:
            ts = np.array([float(t) for t in ts])
        if tol is not None:
            return ts, tol, tol
        return ts, self.rel_tol, self.abs_tol

    def evolve(self, x, t0, ts, theta, rate, tol=None):
        """States ``(len(ts), n)`` at the times ``ts`` from ``x`` at ``t0``."""
        ts, r, a = self._span(ts, tol)
        return self.solver(self.rhs, _vec(x, self.n), t0, ts, theta, rate, *self.data,
                           rel_tol=r, abs_tol=a, max_num_steps=self.max_num_steps)

    # -- the period maps (t = 0 at the dose: f must be autonomous) ---------------------
    def _after(self, x, u, theta, rate):
        return self.evolve(x, 0.0, [u], theta, rate, self.inner_tol)[0]

    # -- the period maps on plain floats, with their sensitivities ----------------------
    def _plain_problem(self, tols=None):
        """The ODE super node's problem for plain solves at the tolerances ``tols =
        (rel_tol, abs_tol)`` (default: the inner tolerance of the period maps), shared
        by every call with the same right-hand side and controls: its compiled tangent
        systems are kept between evaluations."""
        method = "bdf" if self.solver is ode_bdf else "rk45"
        rtol, atol = (self.inner_tol, self.inner_tol) if tols is None else tols
        key = (self.rhs, self.n, method, rtol, atol, self.max_num_steps)
        pb = _PLAIN.get(key)
        if pb is None:
            name = "ode_bdf" if method == "bdf" else "ode_rk45"
            pb = _OdeProblem(OdeRHS(self.rhs, self.n, name),
                             Control(name, method, rtol, atol, self.max_num_steps), None)
            _PLAIN[key] = pb
            if len(_PLAIN) > 32:
                _PLAIN.pop(next(iter(_PLAIN)))
        return pb

    def _sens_plan(self, theta, rate, wrt_theta, wrt_y0=True, tols=None):
        """What one sensitivity solve needs besides ``y0`` and the span: the
        sensitivity system (directions: ``y0``'s if ``wrt_y0``, then ``theta``'s if
        ``wrt_theta``), its arguments (one tuple, so that the compiled evaluator found
        for the first solve serves the next ones without a lookup) and the initial
        tangents. Kept for the same ``theta``, ``rate`` and data objects - the
        algebraic solver passes the same ones at every iteration of a solve, and a
        model's calls of ``pk.ode`` in one evaluation the same ``theta`` - shared by
        the systems of the same right-hand side and controls."""
        pb = self._plain_problem(tols)
        key = (pb, wrt_theta, wrt_y0)
        plan = _PLANS.get(key)
        if plan is not None and plan[0] is theta and plan[1] is rate and \
                len(plan[8]) == len(self.data) and \
                all(a is b for a, b in zip(plan[8], self.data)):
            # (another system's plan only for the same values too: the compiled
            # evaluator keeps the parameters it read from these argument objects)
            if plan[9] is self or (np.array_equal(plan[10], theta) and
                                   np.array_equal(plan[11], rate)):
                plan[9] = self
                return plan
        args = (theta, rate) + self.data
        dkey = (pb, wrt_theta, wrt_y0, np.shape(theta), np.shape(rate), len(self.data))
        got = _DIRECTIONS.get(dkey)
        if got is None:
            vals = (np.zeros(self.n), 0.0, None) + args
            pos = ((0,) if wrt_y0 else ()) + ((3,) if wrt_theta else ())
            V0, D, mask, _, K = _directions(pb, vals, pos)
            got = (pb.derived(K, mask, len(args), "sensitivities"), tuple(D),
                   np.ravel(V0), K)
            _DIRECTIONS[dkey] = got
            if len(_DIRECTIONS) > 64:
                _DIRECTIONS.pop(next(iter(_DIRECTIONS)))
        sub, D, V0, K = got
        plan = [theta, rate, pb, sub, args, args + D, V0, K, self.data, self,
                np.array(theta, dtype=np.float64), np.array(rate, dtype=np.float64)]
        _PLANS[key] = plan
        if len(_PLANS) > 64:
            _PLANS.pop(next(iter(_PLANS)))
        return plan

    def sens_solve(self, y0, t0, ts, theta, rate, wrt_y0, tols=None):
        """``(Y, S)`` on plain floats: the states ``Y[i]`` at ``ts[i]`` from ``y0`` at
        ``t0`` and their sensitivities ``S[i, k, j] = dY[i, j] / d(direction k)``,
        the directions ``y0`` (if ``wrt_y0``) then ``theta`` (flattened), by one solve
        of the forward-sensitivity system - the same system, tolerances (``tols =
        (rel_tol, abs_tol)``, default the inner ones), checks and failures as the ODE
        super node's with those inputs traced."""
        n = self.n
        _, _, pb, sub, args, allargs, V0, K = self._sens_plan(theta, rate, True, wrt_y0,
                                                              tols)[:8]
        z0 = np.concatenate([np.asarray(y0, dtype=np.float64), V0])
        _checked(sub.rhs.name, z0, t0, ts, args, n)         # (D: unit directions)
        Z = _native.solve(sub, z0, t0, ts, allargs)
        if Z is None:                   # not compiled (yet): the ODE node's own route
            Z = _solve(sub, (z0, t0, ts) + allargs)[0]
        return Z[:, :n], Z[:, n:].reshape(len(ts), K, n)

    def period_sens(self, y0, u, theta, rate, wrt_theta, wrt_u=True):
        """``(F_u(y0), dF/dy0, dF/dtheta or None, dF/du or None)`` on plain floats:
        one solve of the forward-sensitivity system (the error control covers the
        sensitivities, as in the ODE super node, and so do its checks, step budget
        and failures). ``dF/dtheta`` has shape ``(n,) + shape(theta)``; ``dF/du =
        f(u, F)`` (if ``wrt_u``)."""
        n = self.n
        _, _, pb, sub, args, allargs, V0, K = self._sens_plan(theta, rate, wrt_theta)[:8]
        z0 = np.concatenate([np.asarray(y0, dtype=np.float64), V0])
        ts = np.array([float(u)])
        _checked(sub.rhs.name, z0, 0.0, ts, args, n)        # (D: unit directions)
        Z = _native.solve(sub, z0, 0.0, ts, allargs)
        if Z is None:                   # not compiled (yet): the ODE node's own route
            Z = _solve(sub, (z0, 0.0, ts) + allargs)[0]
        Y = Z[0, :n].copy()
        S = Z[0, n:].reshape(K, n)      # S[k, i] = dY_i / d(direction k)
        St = S[n:].T.reshape((n,) + np.shape(theta)) if wrt_theta else None
        return Y, S[:n].T, St, pb.rhs.value(float(u), Y, args) if wrt_u else None

    def bolus_jacobians(self, c, sc):
        """``jacobians`` for the algebraic solver (:func:`algebra_solver`) of a bolus
        steady state: the residual ``(x - F_ii(x + A e_c)) / sc`` of ``(theta, A, ii)``
        with ``df/dx``, and at the root ``df/dtheta``, ``df/dA``, ``df/dii``, all
        from one sensitivity solve of the period (no recording of the residual, no
        nested sweep through it)."""
        n = self.n
        eye = np.eye(n)
        zero = zeros(n)

        def jacobians(x, theta, A, ii, wrt=()):
            Y, Sy, St, fY = self.period_sens(x + _unit_vec(A, c, n), ii, theta, zero,
                                             0 in wrt, 2 in wrt)
            F = (x - Y) / sc
            Jx = (eye - Sy) / sc
            if not wrt:
                return F, Jx
            parts = {0: lambda: -St / sc, 1: lambda: -Sy[:, c] / sc,
                     2: lambda: -fY / sc}
            return F, Jx, [parts[i]() for i in wrt]
        return jacobians

    def constant_jacobians(self, c, sc):
        """``jacobians`` of a constant infusion's steady state: the residual ``(f(0, x,
        theta) + R e_c) / sc`` of ``(theta, R)`` with its Jacobians from the right-hand
        side's compiled program (no recording of the residual per solve)."""
        n = self.n
        rhs = self._plain_problem().rhs
        e_c = _unit_vec(1.0, c, n) / sc

        def jacobians(x, theta, R, wrt=()):
            args = (theta, _unit_vec(R, c, n)) + self.data
            F, Jy, Jp = rhs.jacobians(0.0, x, args, [0] if 0 in wrt else [])
            F = np.asarray(F, dtype=np.float64) / sc
            if not wrt:
                return F, Jy / sc
            parts = {0: lambda: Jp[0].reshape((n,) + np.shape(theta)) / sc,
                     1: lambda: e_c}
            return F, Jy / sc, [parts[i]() for i in wrt]
        return jacobians

    def skip(self, x, u, t, theta, rate):
        """The evolution from ``t`` over a span ``u`` whose *value* is 0: two events
        that coincide, at a point where the amounts have a kink (an infusion ending
        exactly at a record, or its duration a multiple of ``ii``). The value is
        ``x``; the derivatives are those of the evolution over ``u`` (one midpoint
        step, exact to second order in ``u``), so that the gradient is the one of the
        piece where the events happen in the order processed - one one-sided
        derivative - rather than a mixture of both sides."""
        if not isinstance(u, Box):
            return x                    # plain data: no derivative to keep
        k1 = self.rhs(t, x, theta, rate, *self.data)
        h = 0.5 * u
        return x + u * self.rhs(t + h, x + h * k1, theta, rate, *self.data)

    def _period_bolus(self, x, theta, A, ii, c):
        return self._after(x + _unit_vec(A, c, self.n), ii, theta, np.zeros(self.n))

    def _period_infusion(self, x, theta, R, dur, ii, c, m, second):
        """From an infusion start: (m + 1) infusions run for dur - m ii, then m for
        the rest of the period, ii - (dur - m ii). That rest is 0 when ``dur`` is a
        multiple of ``ii`` (``second`` False), but it carries the derivatives in
        ``ii`` and ``dur``: without it the period would be ``dur - m ii``, and the
        gradient of the steady state neither one-sided derivative (issue 22)."""
        seg1 = dur - m * ii
        y = self._after(x, seg1, theta, _unit_vec(R * (m + 1), c, self.n))
        rest_rate = _unit_vec(R * m, c, self.n)
        if second:
            return self._after(y, ii - seg1, theta, rest_rate)
        return self.skip(y, ii - seg1, 0.0, theta, rest_rate)

    def _solve(self, resid, *args, where="", jacobians=None):
        try:
            return algebra_solver(resid, self.guess, *args, rel_tol=self.ss_rel_tol,
                                  f_tol=self.ss_f_tol, max_steps=self.ss_max_steps,
                                  jacobians=jacobians)
        except SolverError as e:
            raise SolverError(f"{self.who}: no steady state found{where}: {e}") from e

    def ghosts(self, ev, p, d, q):
        """The infusions of steady-state item ``q``'s series still running at its
        record: ``[(rate, remaining duration)]`` (see :func:`linear_steady_state`)."""
        k = int(np.flatnonzero(d.ss_inf == q)[0])
        R, dur = _sel(d.ss_rate, k), _sel(d.ss_dur, k)
        ii = _sel(d.ss_ii, q)
        psi = phase(ev, p, d, np.array([q]), self.who)
        psi = psi[0] if shape_of(psi) else psi
        kst = guarded(_kstar, psi, ii, dur) if _traced(psi, ii, dur) else \
            _kstar(psi, ii, dur)
        return [(R, dur - psi - j * ii) for j in range(kst[0])]

    def steady_state(self, ev, p, d, q, theta):
        """Amounts at steady-state record ``q`` (before its own dose), and the rate of
        a constant infusion (``None`` otherwise)."""
        n = self.n
        c = int(p.ss_cmt[q])
        kind = p.ss_kind[q]
        if kind == CONSTANT:
            R = _sel(d.ss_rate, int(np.flatnonzero(d.ss_inf == q)[0]))
            f = self.f
            data = self.data

            sc = _scale(R)

            def resid(x, theta, R):
                return (f(0.0, x, theta, *data) + _unit_vec(R, c, n)) / sc
            return self._solve(resid, theta, R, where=_where(ev, p, q),
                               jacobians=self.constant_jacobians(c, sc)
                               if PERIOD_JACOBIANS else None), R
        ii = _sel(d.ss_ii, q)
        lagged = d.ss_lag is not None
        psi = None
        if lagged:
            psi = phase(ev, p, d, np.array([q]), self.who)
            psi = psi[0] if shape_of(psi) else psi
        if kind == BOLUS:
            A = _sel(d.ss_amount, q)
            sc = _scale(A)

            def resid(x, theta, A, ii):
                return (x - self._period_bolus(x, theta, A, ii, c)) / sc
            x = self._solve(resid, theta, A, ii, where=_where(ev, p, q),
                            jacobians=self.bolus_jacobians(c, sc) if PERIOD_JACOBIANS
                            else None)
            if lagged:
                x = self._after(x + _unit_vec(A, c, n), psi, theta, np.zeros(n))
            return x, None
        k = int(np.flatnonzero(d.ss_inf == q)[0])
        R, dur = _sel(d.ss_rate, k), _sel(d.ss_dur, k)

        m, second = guarded(_overlap, dur, ii) if _traced(dur, ii) else _overlap(dur, ii)

        sc = _scale(R * dur)

        def resid(x, theta, R, dur, ii):
            return (x - self._period_infusion(x, theta, R, dur, ii, c, m, second)) / sc
        x = self._solve(resid, theta, R, dur, ii, where=_where(ev, p, q))
        if lagged:
            seg1 = dur - m * ii
            # where the record falls in the period: before the (m + 1)-th infusion
            # ends (psi < seg1), at its end, or after; at its end the same piece as
            # the ghosts (_kstar: that infusion has ended) and the closed forms
            first, at_end = guarded(_phase_in, psi, seg1) if _traced(psi, seg1) else \
                _phase_in(psi, seg1)
            rate1 = _unit_vec(R * (m + 1), c, n)
            if first:
                x = self._after(x, psi, theta, rate1)
            else:
                x = self._after(x, seg1, theta, rate1)
                rest = _unit_vec(R * m, c, n)
                if at_end:
                    x = self.skip(x, psi - seg1, 0.0, theta, rest)
                else:
                    x = self._after(x, psi - seg1, theta, rest)
        return x, None


def ode_steady_state(f, n_cmt, theta, amt, ii, cmt=1, rate=0.0, *, data=(),
                     method="rk45", rel_tol=1e-10, abs_tol=1e-10, max_num_steps=10**6,
                     f_tol=1e-6, max_steps=200, guess=None):
    """The steady-state trough of a dosing regimen of the ODE model ``x' = f(t, x,
    theta, *data)``: the amounts just before a dose of ``amt`` into ``cmt`` (1-based)
    given every ``ii`` forever, a bolus (``rate = 0``) or an infusion at ``rate``.

    The root of ``x - F_ii(x + amt e_c) = 0`` (``F_u`` the ODE's evolution over ``u``;
    for an infusion the evolution with the rate on while it runs) by the algebraic-
    solver super node (Powell's dogleg, ``max_steps``; ``f_tol`` relative to the dose:
    the residual is divided by it, rounded up to a power of two): derivatives in
    ``theta``, ``amt``, ``ii`` and ``rate`` by the implicit function theorem.

    Example: a linear one-compartment model at steady state, against the closed
    form of the gut trough ``D e^{-ka ii} / (1 - e^{-ka ii})``.

    >>> import numpy as np, stanlite as sl
    >>> f = lambda t, x, th: sl.stack([-th[0] * x[0], th[0] * x[0] - th[1] * x[1]])
    >>> x = sl.pk.ode_steady_state(f, 2, np.array([0.5, 0.2]), 1000.0, 1.0)
    >>> round(float(x[0]), 4), round(float(1000 * np.exp(-0.5) / (1 - np.exp(-0.5))), 4)
    (1541.4941, 1541.4941)
    """
    who = "pk.ode_steady_state"
    solver = {"rk45": ode_rk45, "bdf": ode_bdf}.get(method)
    if solver is None:
        raise ValueError(f"{who}: method must be 'rk45' or 'bdf', got {method!r}")
    sys_ = OdeSystem(f, n_cmt, solver, rel_tol, abs_tol, max_num_steps, tuple(data),
                     1e-10, f_tol, max_steps, guess, who)
    c = int(cmt) - 1
    if not 0 <= c < n_cmt:
        raise ValueError(f"{who}: cmt must be in 1..{n_cmt}, got {cmt}")

    def check(amt, ii, rate):
        if not (np.isfinite(amt) and amt >= 0 and np.isfinite(ii) and ii > 0
                and np.isfinite(rate) and rate >= 0):
            raise DomainError(f"{who}: need amt >= 0, ii > 0, rate >= 0 (finite), got "
                              f"amt = {amt}, ii = {ii}, rate = {rate}")
        return True
    guarded(check, amt, ii, rate)
    is_inf = guarded(lambda r: bool(r > 0), rate)
    sc = _scale(amt)
    if not is_inf:
        def resid(x, theta, A, ii):
            return (x - sys_._period_bolus(x, theta, A, ii, c)) / sc
        return sys_._solve(resid, theta, amt, ii, jacobians=sys_.bolus_jacobians(c, sc)
                           if PERIOD_JACOBIANS else None)
    dur = amt / rate
    m, second = guarded(_overlap, dur, ii)

    def resid(x, theta, R, dur, ii):
        return (x - sys_._period_infusion(x, theta, R, dur, ii, c, m, second)) / sc
    return sys_._solve(resid, theta, rate, dur, ii)


def _checked(name, z0, t0, ts, args, n):
    """The ODE super node's checks on a solve's values (:func:`..functor.ode.
    _check_values`: finite inputs, output times increasing after ``t0``), the usual
    case - all finite, times in order - by one sum per array; anything else by the
    full checks, which raise their errors (or pass: a sum that overflowed)."""
    s = float(z0.sum())
    for a in args:
        if type(a) is np.ndarray and a.dtype.kind == "f":
            s += float(a.sum())
        elif type(a) is float:
            s += a
    if math.isfinite(s + t0) and ts[0] > t0 and math.isfinite(ts[-1]) and \
            (ts.shape[0] == 1 or (ts[1:] >= ts[:-1]).all()):
        return
    _check_values(name, z0, t0, ts, args, n)


def _unit_vec(a, c, n):
    """``a e_c`` (a plain or traced scalar) as a vector of n."""
    if not isinstance(a, Box):
        v = np.zeros(n)
        v[c] = float(a)
        return v
    return stack([a if j == c else 0.0 for j in range(n)])



def _guess_of_theta(fn, n, who):
    """The algebraic solver's callable guess ``(theta, *rest) -> x0`` from the user's
    ``ss_guess(theta)`` (plain values; ``None``: zeros), called at every solve."""
    def guess(theta, *rest):
        g = fn(theta)
        if g is None:
            return np.zeros(n)
        g = np.asarray(g, dtype=np.float64)
        if g.shape != (n,):
            raise ValueError(f"{who}: ss_guess(theta) must return a vector of {n} "
                             f"amounts, got shape {g.shape}")
        return g
    return guess


def _where(ev, p, q):
    r = int(p.ss_rec[q])
    return f" for record {r + 1} (subject {ev.ids[ev.subject[r]]})"


def _scale(a):
    """The size of a dose (or rate) as a power of two >= 1: steady-state residuals are
    divided by it, so that the solver's ``f_tol`` is relative to the amounts dosed.
    (A power of two: a retaped gradient with a traced dose re-records only when the
    dose crosses one.)"""
    def fn(a):
        a = abs(float(np.asarray(a)))
        return math.ldexp(1.0, math.ceil(math.log2(a))) if a > 1 else 1.0
    return guarded(fn, a) if isinstance(a, Box) else fn(a)


def _phase_in(psi, seg1):
    """(psi < seg1, psi == seg1) on values."""
    a, b = float(np.asarray(psi)), float(np.asarray(seg1))
    return a < b, a == b


def _overlap(dur, ii):
    """For infusions of duration ``dur`` every ``ii``: the number ``m`` of earlier ones
    still running when one starts, and whether fewer (m) run for part of the period
    (False when ``dur`` is a multiple of ``ii``)."""
    dur, ii = float(np.asarray(dur)), float(np.asarray(ii))
    m = max(0, math.ceil(dur / ii) - 1)
    while m > 0 and dur - m * ii <= 0:
        m -= 1
    while dur - m * ii > ii:
        m += 1
    return m, bool(dur - m * ii < ii)
