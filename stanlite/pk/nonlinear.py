"""General (nonlinear) ODE models ``x' = f(t, x, theta) + r(t)``: the event-driven solver.

Torsten's ``pmx_solve_rk45`` / ``pmx_solve_bdf``. Without linearity there is no
superposition: each subject's events are processed in time order, and between two
events that change the system (a dose, the start or end of an infusion, a reset, a
steady state) the ODE is integrated by one call of the ODE super node
(:func:`stanlite.ode_rk45` or :func:`stanlite.ode_bdf`) with every record in between
as an output time. The infusion rates ``r`` active on the segment (a vector over
compartments) enter as an argument of the right-hand side, so a modelled rate is
differentiable like any parameter.

Order of events at equal times (the same rules as the linear solver, :mod:`.dosing`):
for a record ``j`` its reset, then its steady state, then its own doses, then its
output; an event derived from record ``j`` (additional, lagged dose) at a later
record's time comes before that record. The ends of infusions come after every
other event at their time: the amounts are the same either way, but this is the
piece whose derivatives the closed forms give (an infusion runs while ``u <=
dur``). Events that coincide in value but are different expressions (an infusion
ending exactly at a record, with a traced rate) are joined by a zero-length step
that keeps the derivatives of that piece (:meth:`.OdeSystem.skip`): without it the
gradient at such a kink was neither one-sided derivative. A reset cancels the
running infusions and pending doses of earlier records.

Steady states (``ss > 0``) come from the algebraic-solver super node
(:func:`.steady_state.ode_steady_state`): the trough ``x`` with ``x = F_ii(x + A e_c)``.
Everything - ``theta``, doses, times, ``ii``, ``F``, ``tlag``, rates - is
differentiable through the two super nodes, in reverse and forward mode.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..autodiff.var import Box, guarded, shape_of
from ..functor.ode import ode_bdf, ode_rk45
from ..math.structure import stack
from .dosing import BOLUS, CONSTANT, INFUSION, check_compartments, expand, plan
from .ode_plan import planned
from .per_record import PerRecordSystem, theta_per_record
from .steady_state import OdeSystem, _sel, _traced, _unit_vec as _unit

__all__ = ["ode", "events_of_subjects"]

_RESET, _SS, _DOSE, _OUT, _STOP = 0, 1, 2, 3, 4   # order of a record's parts at its time


@dataclass(eq=False, slots=True)      # (as before: events compare by identity)
class _Event:
    """One event of a subject's timeline: at ``time`` (maybe traced), part ``part``
    (_RESET...) of record ``rec``; ``kind`` what happens, in compartment ``cmt``, with
    ``value`` (an amount, a rate, a steady-state item) and ``key`` (the infusion it
    starts or stops)."""
    time: Any
    rec: int
    part: int
    kind: str
    cmt: Any = None
    value: Any = None
    key: Any = None


def _order(times, recs, parts):
    """The processing order (by time, then record, then part) and, per event, the rank
    of its time among the distinct times: all the solver decides from time values.
    (Guarded on traced times: it changes only when events swap or meet, so a retaped
    gradient re-records only then.)"""
    late = parts == _STOP               # infusion ends: after all else at their time

    def fn(*ts):
        tv = np.array([float(np.asarray(t)) for t in ts])
        order = np.lexsort((parts, recs, late, tv))
        rank = np.empty(len(tv), dtype=int)
        st = tv[order]
        rank[order] = np.cumsum(np.r_[0, st[1:] > st[:-1]]) if len(st) else []
        return tuple(order.tolist()), tuple(rank.tolist())
    if _traced(*times):
        return guarded(fn, *times)
    return fn(*times)


def ode(f, n_cmt, events, theta=None, *, data=(), F=None, tlag=None,
        infusion_rate=None, infusion_duration=None, method="rk45", rel_tol=1e-8,
        abs_tol=1e-8, max_num_steps=10**6, ss_rel_tol=1e-10, ss_f_tol=1e-6,
        ss_max_steps=200, ss_guess=None):
    """Amounts of a general ODE model ``x' = f(t, x, theta, *data)`` at every record.

    Torsten's ``pmx_solve_rk45`` / ``pmx_solve_bdf``: ``f`` returns the rates of
    change of the ``n_cmt`` compartment amounts, written with stanlite operations
    (``sl.stack``, ``sl.exp``...), *without* the doses: boluses and infusions are
    added by the solver (an infusion adds its rate to its compartment).

    Parameters
    ----------
    f : callable ``f(t, x, theta, *data) -> dx/dt`` (a vector of ``n_cmt``).
    n_cmt : the number of compartments (states).
    events : :class:`~stanlite.pk.EventSchedule`.
    theta : the parameters passed to ``f`` (any array, plain or traced); with several
        subjects, ``theta[s]`` is subject ``s``'s (a leading axis of ``n_subjects``).
        One row per record (a leading axis of ``n_records``; for one subject at least
        two axes): Torsten's 2-D theta, row ``i`` in force on the interval that ends
        at record ``i`` (:mod:`stanlite.pk.per_record`).
    data : extra plain arguments passed to ``f`` after ``theta``.
    F, tlag, infusion_rate, infusion_duration : per compartment, as in
        :func:`~stanlite.pk.onecpt` (scalar, ``n_cmt`` or subjects x ``n_cmt``).
    method : ``"rk45"`` (non-stiff) or ``"bdf"`` (stiff).
    rel_tol, abs_tol, max_num_steps : the ODE solver's controls.
    ss_rel_tol, ss_f_tol, ss_max_steps : the algebraic solver's controls for steady
        states (Powell's dogleg). The residual ``x - F_ii(x + A e_c)`` is divided by
        the dose (rounded up to a power of two), so ``ss_f_tol`` is relative to the
        amounts dosed; the integrations inside are ten times tighter than
        ``min(rel_tol, abs_tol)``.
    ss_guess : initial guess of the steady-state trough (a vector of ``n_cmt``), or
        a callable ``ss_guess(theta)`` of the plain parameter values returning one
        (or None: zeros), called at every steady-state solve, so that a replayed
        recording of a model gets a guess that follows its parameters; default zeros.

    Returns ``(n_records, n_cmt)`` amounts after each record's event. ``f`` should
    not depend on ``t`` when steady states are used (a steady state is the periodic
    solution of an autonomous system). Failures of the integrator or of the
    steady-state solve raise :class:`~stanlite.SolverError`.

    Example: Michaelis-Menten elimination after an oral dose (gut, central).

    >>> import numpy as np, stanlite as sl
    >>> def mm(t, x, theta):
    ...     ka, vmax, km = theta[0], theta[1], theta[2]
    ...     elim = vmax * x[1] / (km + x[1])
    ...     return sl.stack([-ka * x[0], ka * x[0] - elim])
    >>> ev = sl.pk.events(time=[0.0, 1.0, 6.0], evid=[1, 0, 0], amt=[100.0, 0, 0])
    >>> sl.pk.ode(mm, 2, ev, np.array([1.0, 10.0, 20.0])).round(3)
    array([[100.   ,   0.   ],
           [ 36.788,  57.377],
           [  0.248,  55.402]])
    """
    who = "pk.ode"
    rows = theta_per_record(theta, events)       # Torsten's 2-D theta (.per_record)
    # (rows: the other arguments checked with a stand-in theta of the accepted shape)
    n_cmt, th = check_call(who, f, n_cmt, method, events,
                           np.zeros((events.n_subjects, 0)) if rows else theta)
    if not rows:
        theta = th
    elif not isinstance(theta, Box):
        theta = np.asarray(theta, dtype=np.float64)
    S = events.n_subjects
    data = tuple(data)
    check_compartments(events, n_cmt, who)
    p = plan(events)
    solver = ode_rk45 if method == "rk45" else ode_bdf
    sys_ = OdeSystem(f, n_cmt, solver, rel_tol, abs_tol, max_num_steps, data,
                     ss_rel_tol, ss_f_tol, ss_max_steps, ss_guess, who)
    if not rows:                 # a plain schedule: its walk planned once (.ode_plan)
        out = planned(events, p, theta, sys_, (F, tlag, infusion_rate,
                                                infusion_duration))
        if out is not None:
            return out
    d = expand(events, p, n_cmt, who, F=F, tlag=tlag, infusion_rate=infusion_rate,
               infusion_duration=infusion_duration)
    if rows:
        sys_ = PerRecordSystem(sys_, events)
        theta = sys_.tables(theta)
    return events_of_subjects(events, p, d, theta, sys_)


def events_of_subjects(events, p, d, theta, sys_):
    """Amounts ``(n_records, sys_.n)`` of every subject of ``events`` (plan ``p``,
    doses ``d``) evolved by the system ``sys_`` (an :class:`.OdeSystem`, or the
    coupled system of :mod:`.coupled`); ``theta[s]`` is subject ``s``'s with several."""
    S = events.n_subjects
    rows = [None] * events.n_records
    for s in range(S):
        th = theta[s] if S > 1 else theta
        _subject(events, p, d, s, th, sys_, rows)
    return stack(rows, axis=0) if any(isinstance(r, Box) for r in rows) else \
        np.array(rows, dtype=float)


def _timeline(ev, p, d, s, sys_):
    """Subject ``s``'s events - outputs, resets, steady states, doses, infusion starts
    and ends - with their processing order and time ranks (:func:`_order`):
    ``(evs, order, rank, ghosts)``, ``ghosts[q]`` the infusions of steady-state item
    ``q``'s series still running at its record. (Also the plan of the population
    solver, :mod:`.population`.)"""
    a, b = int(ev.start[s]), int(ev.stop[s])
    t = ev.time
    evs = []
    for i in range(a, b):
        ti = _sel(t, i)
        evs.append(_Event(ti, i, _OUT, "out"))
        if p.reset[i]:
            evs.append(_Event(ti, i, _RESET, "reset"))
    # steady states (and the infusions of their series still running after them)
    ss_items = np.flatnonzero(p.ss_subj == s)
    ss_of = {}
    for q in ss_items:
        q = int(q)
        j = int(p.ss_rec[q])
        ss_of[j] = q
        evs.append(_Event(_sel(t, j), j, _SS, "ss", int(p.ss_cmt[q]), q))
    ghosts = {}
    for q in ss_items:
        q = int(q)
        if p.ss_kind[q] == INFUSION:
            for gi, (R, dur) in enumerate(sys_.ghosts(ev, p, d, q)):
                key = ("g", q, gi)
                ghosts[q] = ghosts.get(q, []) + [(key, R)]
                j = int(p.ss_rec[q])
                evs.append(_Event(_sel(t, j) + dur, j, _STOP, "stop", int(p.ss_cmt[q]),
                                  None, key))
    # doses
    inf_pos = {int(q): k for k, q in enumerate(d.inf)}
    for q in np.flatnonzero(p.subj == s):
        q = int(q)
        j, c = int(p.rec[q]), int(p.cmt[q])
        tau = _sel(d.tau, q)
        if p.kind[q] == BOLUS:
            evs.append(_Event(tau, j, _DOSE, "bolus", c, _sel(d.amount, q)))
        else:
            k = inf_pos[q]
            R, dur = _sel(d.inf_rate, k), _sel(d.inf_dur, k)
            evs.append(_Event(tau, j, _DOSE, "start", c, R, ("i", q)))
            evs.append(_Event(tau + dur, j, _STOP, "stop", c, None, ("i", q)))
    order, rank = _order([e.time for e in evs], np.array([e.rec for e in evs]),
                         np.array([e.part for e in evs]))
    return evs, order, rank, ghosts


def walk(evs, order, rank, epoch, running, pending, flush, act):
    """A subject's events ``evs`` in ``order`` as every interpreter of a timeline takes
    them (:func:`_subject` solving; :func:`.population._plan_subject` and
    :func:`.ode_plan._build` planning): an output waits in ``pending`` as ``(record,
    time, rank)``; a dose or infusion of a record before the last reset (the epoch,
    first the subject's first record) is cancelled; any other event first
    ``flush(time, rank)``es up to its time (the outputs waiting at that very time
    come first: they precede in the order), then ``act(event)`` does the
    interpreter's part, then the running infusions ``{key: (source record, cmt,
    rate)}`` are kept: started, stopped, those before a reset dropped. Last, the
    outputs still waiting are flushed."""
    for k in order:
        e = evs[k]
        if e.kind == "out":
            pending.append((e.rec, e.time, rank[k]))
            continue
        if e.kind in ("bolus", "start", "stop") and e.rec < epoch:
            continue                  # cancelled by a reset
        flush(e.time, rank[k])
        act(e)
        if e.kind == "reset":
            for key in [key for key, v in running.items() if v[0] < e.rec]:
                del running[key]      # (in place: the interpreter's rates() read it)
            epoch = e.rec
        elif e.kind == "start":
            running[e.key] = (e.rec, e.cmt, e.value)
        elif e.kind == "stop":
            running.pop(e.key, None)
    if pending:
        last = pending[-1]
        flush(last[1], last[2])


def check_call(who, f, n_cmt, method, events, theta):
    """The checks of :func:`ode`'s arguments (shared with the population solver):
    ``(n_cmt, theta)`` with ``theta`` a float array (or traced)."""
    if not callable(f):
        raise TypeError(f"{who}: f must be a function f(t, x, theta, *data), got "
                        f"{type(f).__name__}")
    if not (isinstance(n_cmt, (int, np.integer)) and n_cmt >= 1):
        raise ValueError(f"{who}: n_cmt must be a positive integer, got {n_cmt!r}")
    if method not in ("rk45", "bdf"):
        raise ValueError(f"{who}: method must be 'rk45' or 'bdf', got {method!r}")
    S = events.n_subjects
    if theta is None:
        theta = np.zeros(0)
    if not isinstance(theta, Box):
        theta = np.asarray(theta, dtype=np.float64)
    if S > 1 and (len(shape_of(theta)) == 0 or shape_of(theta)[0] != S):
        raise ValueError(f"{who}: with {S} subjects theta must have a leading axis of "
                         f"{S} (theta[s] for subject s), got shape {shape_of(theta)}")
    return int(n_cmt), theta


def _subject(ev, p, d, s, theta, sys_, rows):
    """Process subject ``s``'s events in order; fill ``rows`` with its amounts."""
    n = sys_.n
    a = int(ev.start[s])
    t = ev.time
    evs, order, rank, ghosts = _timeline(ev, p, d, s, sys_)
    # the state, the running infusions {key: (source record, cmt, rate)}
    x = np.zeros(n)
    t_cur = _sel(t, a)
    t_cur_v = rank[order[0]] if order else 0       # ranks of times stand for them
    running = {}
    pending = []                      # (record, time) waiting for the next integration

    def rates():
        if not running:
            return np.zeros(n)
        per = [[] for _ in range(n)]
        for src, c, R in running.values():
            per[c].append(R)
        if not any(_traced(*r) for r in per):
            return np.array([float(sum(r)) for r in per])
        return stack([sum(r[1:], r[0]) if r else 0.0 for r in per])

    def flush(t_to, t_to_v):
        nonlocal x, t_cur, t_cur_v
        later = [(i, ti) for i, ti, tiv in pending if tiv > t_cur_v]
        for i, ti, tiv in pending:
            if not tiv > t_cur_v:      # at the current time: a zero-length step
                rows[i] = sys_.skip(x, ti - t_cur, t_cur, theta, rates())
        pending.clear()
        if not t_to_v > t_cur_v:       # then no pending record is later either
            if _traced(t_to, t_cur):
                x = sys_.skip(x, t_to - t_cur, t_cur, theta, rates())
                t_cur = t_to
            return
        ts = [ti for _, ti in later] + [t_to]
        Y = sys_.evolve(x, t_cur, ts, theta, rates())
        for k, (i, _) in enumerate(later):
            rows[i] = Y[k]
        x = Y[len(later)]
        t_cur, t_cur_v = t_to, t_to_v

    def act(e):
        nonlocal x
        if e.kind == "reset":
            x = np.zeros(n)
        elif e.kind == "ss":
            q = e.value
            xs, const_rate = sys_.steady_state(ev, p, d, q, theta)
            x = xs if p.ss_type[q] == 1 else x + xs
            if p.ss_kind[q] == CONSTANT:
                running[("c", q)] = (e.rec, e.cmt, const_rate)
            for key, R in ghosts.get(q, []):
                running[key] = (e.rec, e.cmt, R)
        elif e.kind == "bolus":
            x = x + _unit(e.value, e.cmt, n)

    walk(evs, order, rank, a, running, pending, flush, act)
