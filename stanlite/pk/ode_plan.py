r"""``pk.ode``'s planned route: a plain schedule walked once, each gradient on floats.

Most models hand :func:`stanlite.pk.ode` a schedule whose times, amounts and
intervals are data and whose parameters are ``theta`` alone (``mm_multidose_ss``:
bolus doses at steady state, observations after them). Then every decision of the
event walk of :mod:`.nonlinear` - the processing order, which records are output
by which integration, where the state is reset, which steady states are solved -
is the same at every evaluation. This module makes those decisions once per
schedule (a *plan*: a short list of operations, cached on the schedule) and runs
one gradient as plain floats, carrying the state ``x`` and its sensitivities
``S = dx/dtheta`` through the operations:

* an integration from ``t0`` to the output times ``t_1..t_T``: one solve of the
  forward-sensitivity system (:meth:`.OdeSystem.sens_solve`) gives ``Y_i`` with
  ``dY_i/dx0`` and ``partial Y_i/partial theta``, and ``dY_i/dtheta = dY_i/dx0 S +
  partial Y_i/partial theta`` (chain rule). While the state does not depend on
  ``theta`` (before the first steady state), only ``theta``'s directions are
  integrated - the very system the ODE super node integrates for those inputs, so
  values agree with the general route bit for bit;
* a bolus ``A e_c``: ``x + A e_c`` (``S`` unchanged); a reset: ``x = 0``, ``S = 0``;
* a bolus steady state: the root ``x = F_ii(x + A e_c)`` by the same algebraic
  solver iterations as the general route (Powell's dogleg, the period map and its
  Jacobians from one sensitivity solve per evaluation,
  :meth:`.OdeSystem.bolus_jacobians`), and by the implicit function theorem
  ``dx/dtheta = -J_x^{-1} J_theta`` at the root (its LU factors reused).

The amounts at every record and their Jacobian ``(n_records, n, P)`` come out
together; one tape node holds them, and its reverse rule is one contraction. Where
the route does not apply (traced times, doses or ``ii``; infusions; ``F``,
``tlag``, per-record ``theta``; several subjects; nested or forward-mode
differentiation; plain ``theta``; ``steady_state.PERIOD_JACOBIANS`` off)
:func:`planned` returns None and
:mod:`.nonlinear` walks the events as before. Error control is the ODE super
node's (same tolerances, step budget, checks; a failed solve raises
``SolverError``, so a sampler rejects the proposal); a steady state that is not
found raises the same ``SolverError`` as the general route.
"""

import numpy as np

from ..autodiff.extend import Primitive, _bp_generic
from ..autodiff.var import Box, Var, make_node
from ..errors import SolverError
from ..functor.algebra_solver import _Problem as _RootProblem, _lu_solve
from ..functor.ode import _Stash
from .dosing import BOLUS, expand
from . import steady_state as _ss
from .steady_state import OdeSystem, _scale, _where

__all__ = ["planned", "ENABLED", "STATS"]

#: use the planned route where it applies (False: always the general event walk)
ENABLED = True
#: gradients taken by the planned route
STATS = {"planned": 0}

_STASH = _Stash()


def _applies(events, p, theta, sys_, extras):
    """Whether the planned route serves this call (the cheap checks, every call)."""
    if type(sys_) is not OdeSystem or any(x is not None for x in extras) or \
            not _ss.PERIOD_JACOBIANS:   # (False: steady states through AD, as before)
        return False
    if type(theta) is not Var or type(theta.value) is not np.ndarray:
        return False                    # plain, nested or forward-mode: general route
    if events.n_subjects != 1 or p.kind.size and (p.kind != BOLUS).any():
        return False
    if p.ss_kind.size and (p.ss_kind != BOLUS).any():
        return False
    return not any(isinstance(x, Box) for x in (events.time, events.amt, events.ii,
                                                events.rate))


def _build(events, p, sys_):
    """The plan of a one-subject bolus schedule: the operations of the event walk of
    :func:`.nonlinear._subject` on plain times, in its order."""
    from .nonlinear import _timeline, walk
    d = expand(events, p, sys_.n, sys_.who)
    evs, order, rank, _ = _timeline(events, p, d, 0, sys_)
    ops = []
    t_cur = float(events.time[0])
    cur_v = rank[order[0]] if order else 0
    pending = []

    def flush(t_to, to_v):
        nonlocal t_cur, cur_v
        later = [(i, float(ti)) for i, ti, tiv in pending if tiv > cur_v]
        now = [i for i, _, tiv in pending if not tiv > cur_v]
        pending.clear()
        if now:
            ops.append(("now", np.array(now)))
        if not to_v > cur_v:
            return
        ts = np.array([ti for _, ti in later] + [float(t_to)])
        ops.append(("evolve", t_cur, ts, np.array([i for i, _ in later], dtype=int)))
        t_cur, cur_v = float(t_to), to_v

    def act(e):
        if e.kind == "reset":
            ops.append(("reset",))
        elif e.kind == "ss":
            q = e.value
            A = float(d.ss_amount if np.ndim(d.ss_amount) == 0 else d.ss_amount[q])
            ii = float(d.ss_ii if np.ndim(d.ss_ii) == 0 else d.ss_ii[q])
            ops.append(("ss", int(p.ss_cmt[q]), A, ii, int(p.ss_type[q]),
                        _where(events, p, q)))
        else:                           # a bolus (no infusions here: _applies)
            ops.append(("bolus", e.cmt, float(e.value)))

    walk(evs, order, rank, 0, {}, pending, flush, act)
    return ops


def _steady(sys_, th, c, A, ii, where):
    """A bolus steady state and its Jacobian in theta ``(n, P)``: the iterations of
    :meth:`.OdeSystem.steady_state` (same residual scaling, guess, options and
    Jacobians), the derivative by the implicit function theorem."""
    sc = _scale(A)
    jac = sys_.bolus_jacobians(c, sc)

    def resid(x, theta, A, ii):         # (the solver's f: only the jacobians serve)
        return (x - sys_._period_bolus(x, theta, A, ii, c)) / sc
    prob = _RootProblem("algebra_solver", resid, sys_.guess, (th, A, ii), "powell",
                        sys_.ss_rel_tol, sys_.ss_f_tol, sys_.ss_max_steps, None, jac)
    prob.pos = (0,)                     # theta is the parameter (traced by the caller)
    prob.args[0] = None
    try:
        x = prob.solve((th,))
    except SolverError as e:
        raise SolverError(f"{sys_.who}: no steady state found{where}: {e}") from e
    lu, piv = prob.lu
    Jt = prob.jargs[0].reshape(sys_.n, -1)
    return x, -_lu_solve(lu, piv, np.ascontiguousarray(Jt))


def _run(th, ops, sys_, n_records):
    """Amounts ``(n_records, n)`` and their Jacobian ``(n_records, n, P)`` in ``th``."""
    n = sys_.n
    P = th.size
    tols = (sys_.rel_tol, sys_.abs_tol)
    rate = _ss.zeros(n)
    rows = np.zeros((n_records, n))
    jac = np.zeros((n_records, n, P))
    x = np.zeros(n)
    S = None                            # dx/dtheta; None while x does not depend on it
    for op in ops:
        kind = op[0]
        if kind == "evolve":
            _, t0, ts, recs = op
            Y, Sk = sys_.sens_solve(x, t0, ts, th, rate, S is not None, tols)
            # Sk[i, k, j] = dY[i, j] / d(direction k): y0's n directions first, if any
            dY = np.swapaxes(Sk, 1, 2)
            if S is not None:
                dY = dY[:, :, :n] @ S + dY[:, :, n:]
            rows[recs] = Y[:-1]
            jac[recs] = dY[:-1]
            x, S = Y[-1].copy(), dY[-1]
        elif kind == "now":
            rows[op[1]] = x
            if S is not None:
                jac[op[1]] = S
        elif kind == "bolus":
            x = x.copy()
            x[op[1]] += op[2]
        elif kind == "ss":
            _, c, A, ii, ss_type, where = op
            xs, Ss = _steady(sys_, th, c, A, ii, where)
            if ss_type == 1 or S is None:
                x, S = (xs if ss_type == 1 else x + xs), Ss
            else:
                x, S = x + xs, S + Ss
        else:                           # a reset
            x, S = np.zeros(n), None
    return rows, jac


def _fun(th, *, ops, sys_, n_records):
    rows, jac = _run(th, ops, sys_, n_records)
    _STASH.put(rows, jac)
    return rows


def _vjp_all(g, ans, th, *, ops, sys_, n_records):
    jac = _STASH.get(ans)
    if jac is None:                     # a replay lost it: recompute
        jac = _run(th, ops, sys_, n_records)[1]
    shape = np.shape(th)
    if type(g) is float:
        g = np.full(ans.shape, g)
    if type(g) is np.ndarray:
        return (np.einsum("rn,rnp->p", g, jac).reshape(shape),)
    from ..math.reductions import sum as _sum      # a traced adjoint: recorded
    from ..math.structure import expand_dims, reshape
    return (reshape(_sum(expand_dims(g, -1) * jac, axis=(0, 1)), shape),)


_SPEC = Primitive("pk.ode (planned)", _fun)
_SPEC.vjp_all = _vjp_all


def planned(events, p, theta, sys_, extras):
    """The amounts ``(n_records, n)`` of :func:`stanlite.pk.ode` by the planned route
    (one tape node on ``theta``'s tape), or None where it does not apply (module
    docstring). ``extras``: ``(F, tlag, infusion_rate, infusion_duration)``.

    Example (the route is taken inside a gradient; the value is the general route's):

    >>> import numpy as np, stanlite as sl
    >>> f = lambda t, x, th: -th[0] * x
    >>> ev = sl.pk.events(time=[0.0, 0.0, 6.0], evid=[1, 0, 0], amt=[100.0, 0, 0],
    ...                   ii=[12.0, 0, 0], ss=[1, 0, 0])
    >>> g = sl.grad(lambda th: sl.pk.ode(f, 1, ev, th)[2, 0])(np.array([0.1]))
    >>> k = 0.1; exact = -100 * 6 * np.exp(-6 * k) / (1 - np.exp(-12 * k)) \\
    ...     - 100 * np.exp(-6 * k) * 12 * np.exp(-12 * k) / (1 - np.exp(-12 * k)) ** 2
    >>> bool(abs(g[0] - exact) < 1e-4 * abs(exact))
    True
    """
    if not ENABLED or not _applies(events, p, theta, sys_, extras):
        return None
    key = ("ode_plan", sys_.n)
    ops = events._cache.get(key)
    if ops is None:
        ops = events._cache[key] = _build(events, p, sys_)
    kw = {"ops": ops, "sys_": sys_, "n_records": events.n_records}
    th = theta.value
    rows = _fun(th, **kw)
    STATS["planned"] += 1
    return make_node(rows, theta.tape, _bp_generic, (_SPEC, [th], kw, [(0, theta)]),
                     None)
