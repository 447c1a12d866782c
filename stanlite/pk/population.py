"""Population ODE solves: all subjects in one call, one node (Torsten's group solvers).

:func:`ode_group` is :func:`~stanlite.pk.ode` for a population - Torsten's
``pmx_solve_group_rk45`` / ``pmx_solve_group_bdf``, whose events of all subjects are
concatenated with a vector of per-subject lengths (here the schedule's ``ID``
column, or ``lengths=``). :func:`~stanlite.pk.ode` walks each subject's events in
Python and records one ODE super node per dosing interval: ~80 nodes, each with its
Python set-up, for 20 subjects dosed four times. Here the events are planned once
per schedule (:func:`_plan`: a short program per subject, see
:mod:`.group_kernel`), and each evaluation is one node over the per-subject
parameters ``theta`` ``(n_subjects, ...)``: its forward pass runs every subject's
timeline in one compiled call - the integrator's steps, the doses, the resets, the
rate changes - carrying the forward sensitivities ``dx/dtheta_s`` through the whole
timeline (boluses of plain amounts do not move them), and its reverse pass
contracts them with the output adjoint. ``threads=2`` splits the subjects between
threads (the compiled steppers release the GIL); the numbers do not depend on the
split (tested bit for bit).

Scope of the fast route: a plain schedule (no traced ``time, amt, rate, ii``),
plain ``F``, ``tlag``, modelled rates and durations, no steady-state records,
``theta`` plain or traced at the outermost level (a first-order gradient), a right-
hand side that compiles (:mod:`stanlite.functor.ode_compiled`). Anything else -
parameters in the dosing, steady states, Hessians, forward mode - is handed to
:func:`~stanlite.pk.ode` (same semantics, subject by subject), so ``ode_group``
accepts every model ``ode`` does. Population parameters enter through ``theta``
(``theta[s] = g(population, eta_s)`` in the model): their gradients come from the
tape around the node.

The same plan also runs without numba (or when a subject's solve meets a guard or
a domain error the compiled program cannot take): segment by segment through the
ODE super node's plain solve, :func:`stanlite.functor.ode._solve`, which re-records,
falls back to scipy's stepper or raises exactly as ``ode_rk45`` does.
"""

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..autodiff.extend import Primitive, _bp_generic
from ..autodiff.var import Box, Var, make_node
from ..errors import DataError, DifferentiationError
from ..functor import ode_native as _native
from ..functor.ode import _Problem, _Stash, _solve
from ..functor.ode_integrate import Control
from ..functor.ode_rhs import OdeRHS
from .dosing import check_compartments, expand, plan
from .events import EventSchedule, _check_values
from .nonlinear import _timeline, check_call, ode, walk
from .steady_state import _rhs

__all__ = ["ode_group"]

_WHO = "pk.ode_group"
SOLVE, OUT, RESET, BOLUS, RATE = 0, 1, 2, 3, 4      # group_kernel's operations


def ode_group(f, n_cmt, events, theta=None, *, lengths=None, data=(), F=None, tlag=None,
              infusion_rate=None, infusion_duration=None, method="rk45", rel_tol=1e-8,
              abs_tol=1e-8, max_num_steps=10**6, threads=None, ss_rel_tol=1e-10,
              ss_f_tol=1e-6, ss_max_steps=200, ss_guess=None):
    """Amounts of an ODE model for every record of every subject, in one solve.

    The arguments and the result are :func:`~stanlite.pk.ode`'s (see there), plus:

    lengths : Torsten's ``len``: the number of records of each subject, in order
        (the schedule is then the subjects' records concatenated; its ``ID`` column
        is ignored). Default: the schedule's subjects.
    threads : the number of threads the subjects are split between (``None`` or 1:
        the calling thread). The results are the same bits whatever the number.

    ``theta`` has a leading axis of ``n_subjects`` (``theta[s]`` is subject ``s``'s
    parameters; with one subject it may omit it). Returns ``(n_records, n_cmt)``.
    Models outside the fast route's scope (see the module docstring) are solved by
    :func:`~stanlite.pk.ode`, subject by subject.

    Example: three subjects with their own absorption and elimination rates.

    >>> import numpy as np, stanlite as sl
    >>> def oral(t, x, th):
    ...     return sl.stack([-th[0] * x[0], th[0] * x[0] - th[1] * x[1]])
    >>> ev = sl.pk.events(id=[1, 1, 2, 2, 3, 3], time=[0, 2.0] * 3,
    ...                   amt=[100.0, 0] * 3)
    >>> theta = np.array([[1.0, 0.1], [1.5, 0.2], [0.8, 0.1]])
    >>> A = sl.pk.ode_group(oral, 2, ev, theta, threads=2)
    >>> bool(np.allclose(A, sl.pk.ode(oral, 2, ev, theta), rtol=1e-6))
    True
    """
    n_cmt, theta = check_call(_WHO, f, n_cmt, method, events, theta)
    if lengths is not None:
        events = _regroup(events, lengths)
    threads = _check_threads(threads)
    data = tuple(data)
    kw = dict(data=data, F=F, tlag=tlag, infusion_rate=infusion_rate,
              infusion_duration=infusion_duration, method=method, rel_tol=rel_tol,
              abs_tol=abs_tol, max_num_steps=max_num_steps)
    general = dict(kw, ss_rel_tol=ss_rel_tol, ss_f_tol=ss_f_tol,
                   ss_max_steps=ss_max_steps, ss_guess=ss_guess)
    if not _first_order(theta) or any(isinstance(a, Box) for a in data):
        return ode(f, n_cmt, events, theta, **general)
    pl = _plan(events, n_cmt, F, tlag, infusion_rate, infusion_duration)
    if pl is None:
        return ode(f, n_cmt, events, theta, **general)
    ctl = Control(_WHO, method, float(rel_tol), float(abs_tol), int(max_num_steps))
    ctx = _Context(f, n_cmt, pl, data, ctl, threads)
    if isinstance(theta, Box):
        return make_node(_GROUP.fun(theta.value, ctx=ctx), theta.tape, _bp_generic,
                         (_GROUP, [theta.value], {"ctx": ctx}, [(0, theta)]), None)
    return ctx.solve(theta, sensitivities=False)[0]


def _first_order(theta):
    """Plain, or traced once at the outermost level (the node's rules are first
    order; Hessians and forward mode go to :func:`ode`)."""
    return not isinstance(theta, Box) or (type(theta) is Var and
                                          not isinstance(theta.value, Box))


def _check_threads(threads):
    if threads is None:
        return 1
    if not isinstance(threads, (int, np.integer)) or isinstance(threads, bool) or \
            threads < 1:
        raise ValueError(f"{_WHO}: threads must be a positive integer or None, got "
                         f"{threads!r}")
    return int(threads)


def _regroup(events, lengths):
    """The schedule with subjects given by Torsten's ``len`` vector."""
    lengths = np.asarray(lengths)
    if lengths.ndim != 1 or lengths.size == 0 or lengths.dtype.kind not in "iu" or \
            (lengths < 1).any():
        raise DataError(f"{_WHO}: lengths must be a vector of positive integers (records "
                        f"per subject), got {lengths!r}")
    if int(lengths.sum()) != events.n_records:
        raise DataError(f"{_WHO}: lengths add up to {int(lengths.sum())} records, the "
                        f"schedule has {events.n_records}")
    subject = np.repeat(np.arange(len(lengths)), lengths)
    ids = np.arange(1, len(lengths) + 1)
    fields = {k: getattr(events, k) for k in ("time", "evid", "amt", "cmt", "rate",
                                               "ii", "addl", "ss")}
    _check_values(fields, subject, ids)        # times sorted within the new subjects
    return EventSchedule(fields, subject, ids, events.dv)


# --------------------------------------------------------------------------------------
# the plan: each subject's events as operations of the compiled loop
# --------------------------------------------------------------------------------------
class _Plan:
    """Every subject's operations, concatenated (:mod:`.group_kernel`'s arrays), and
    the rate vectors of its ``RATE`` rows (``rates[r]``, subject ``row_subject[r]``)."""

    def __init__(self, subject, n_subjects):
        self.subject = subject          # each record's subject
        self.n_records = len(subject)
        self.n_subjects = n_subjects
        self.ops = []                   # (kind, a, b, amount)
        self.op_ptr = [0]
        self.ts = []
        self.rec = []
        self.rates = []
        self.row_subject = []
        self.t_start = []

    def done(self):
        k = np.array([o[0] for o in self.ops], dtype=np.int64)
        self.kind = k
        self.arg_a = np.array([o[1] for o in self.ops], dtype=np.int64)
        self.arg_b = np.array([o[2] for o in self.ops], dtype=np.int64)
        self.amount = np.array([o[3] for o in self.ops], dtype=np.float64)
        self.op_ptr = np.array(self.op_ptr, dtype=np.int64)
        self.ts = np.array(self.ts, dtype=np.float64)
        self.rec = np.array(self.rec, dtype=np.int64)
        self.rates = np.array(self.rates, dtype=np.float64)
        self.row_subject = np.array(self.row_subject, dtype=np.int64)
        self.t_start = np.array(self.t_start, dtype=np.float64)
        # the work of each subject (its output and segment count), to split threads
        nseg = np.add.reduceat(k == SOLVE, self.op_ptr[:-1]) if len(k) else \
            np.zeros(self.n_subjects)
        self.work = np.asarray(nseg, dtype=float) + 1.0
        return self


def _plan(ev, n, F, tlag, infusion_rate, infusion_duration):
    """The plan of schedule ``ev`` (cached on it), or None when the fast route does not
    apply (traced dosing, steady states)."""
    dosing = (F, tlag, infusion_rate, infusion_duration)
    if ev.traced or any(isinstance(x, Box) for x in dosing):
        return None
    # (keyed by the values too: EventSchedule.replace shares the cache between
    # schedules of one structure whose times or amounts differ)
    key = ("group plan", n) + tuple(
        None if x is None else np.asarray(x, dtype=float).tobytes() +
        str(np.shape(x)).encode() for x in dosing + (ev.time, ev.amt, ev.rate, ev.ii))
    got = ev._cache.get(key)
    if got is not None:
        return got if got != "no" else None
    check_compartments(ev, n, _WHO)
    p = plan(ev)
    if len(p.ss_rec):
        ev._cache[key] = "no"
        return None
    d = expand(ev, p, n, _WHO, F=F, tlag=tlag, infusion_rate=infusion_rate,
               infusion_duration=infusion_duration)
    pl = _Plan(np.asarray(ev.subject, dtype=np.int64), ev.n_subjects)
    for s in range(ev.n_subjects):
        _plan_subject(pl, ev, p, d, s, n)
    ev._cache[key] = pl.done()
    return pl


def _plan_subject(pl, ev, p, d, s, n):
    """Subject ``s``'s operations: :func:`.nonlinear._subject`'s walk on plain times
    (there every record is an output; the pending outputs at the current time take
    the current state, later ones are dense outputs of the next integration)."""
    evs, order, rank, _ = _timeline(ev, p, d, s, None)
    a = int(ev.start[s])
    ops = pl.ops
    t_cur = float(ev.time[a])
    t_cur_v = rank[order[0]] if order else 0
    pl.t_start.append(t_cur)
    running = {}
    pending = []
    shown = [None]                      # the rate vector of the last RATE row

    def rates():
        per = [[] for _ in range(n)]
        for _, c, R in running.values():
            per[c].append(float(R))
        return np.array([float(sum(r)) for r in per])

    def flush(t_to, t_to_v):
        nonlocal t_cur, t_cur_v
        later = [(i, ti) for i, ti, tiv in pending if tiv > t_cur_v]
        for i, _, tiv in pending:
            if not tiv > t_cur_v:
                ops.append((OUT, i, 0, 0.0))
        pending.clear()
        if not t_to_v > t_cur_v:
            return
        r = rates()
        if shown[0] is None or not np.array_equal(r, shown[0]):
            ops.append((RATE, len(pl.rates), 0, 0.0))
            pl.rates.append(r)
            pl.row_subject.append(s)
            shown[0] = r
        start = len(pl.ts)
        for i, ti in later:
            pl.ts.append(float(ti))
            pl.rec.append(i)
        pl.ts.append(float(t_to))
        pl.rec.append(-1)
        ops.append((SOLVE, start, len(pl.ts), 0.0))
        t_cur, t_cur_v = float(t_to), t_to_v

    def act(e):
        if e.kind == "reset":
            ops.append((RESET, 0, 0, 0.0))
        elif e.kind == "bolus":
            ops.append((BOLUS, e.cmt, 0, float(e.value)))

    walk(evs, order, rank, a, running, pending, flush, act)
    pl.op_ptr.append(len(ops))


# --------------------------------------------------------------------------------------
# one evaluation
# --------------------------------------------------------------------------------------
class _Context:
    """A population solve's fixed parts: the plan, the right-hand side, the controls."""

    def __init__(self, f, n, pl, data, ctl, threads):
        self.rhs = OdeRHS(_rhs(f), n, _WHO)
        self.n = n
        self.plan = pl
        self.data = data
        self.ctl = ctl
        self.threads = threads

    def args(self, th, r):
        return (th, r) + self.data

    def solve(self, theta, sensitivities):
        """``(Y, S)``: amounts ``(n_records, n)`` and, if asked, their sensitivities
        ``(n_records, k, n)`` to each subject's own ``theta[s]`` (``k`` its size)."""
        pl, n = self.plan, self.n
        theta = np.asarray(theta, dtype=np.float64)
        S = pl.n_subjects
        rows = theta.reshape(S, -1) if S > 1 else theta.reshape(1, -1)
        shape = theta.shape[1:] if S > 1 else theta.shape
        k = rows.shape[1] if sensitivities else 0
        Z = np.zeros((pl.n_records, n * (1 + k)))
        todo = np.arange(S)
        if len(pl.rates) and pl.t_start.size:
            todo = self._compiled(rows, shape, k, Z)
        for s in todo:
            self._subject(int(s), rows[s].reshape(shape), shape, k, Z)
        Y = Z[:, :n].copy()
        return Y, (Z[:, n:].reshape(len(Z), k, n) if k else None)

    # -- the compiled route ------------------------------------------------------------
    def _compiled(self, rows, shape, k, Z):
        """Run the plan in compiled code; -> the subjects left to the plain route."""
        pl, n = self.plan, self.n
        S = pl.n_subjects
        everyone = np.arange(S)
        if not _native.ENABLED:
            return everyone
        th0 = rows[0].reshape(shape)
        z0 = np.zeros(n)
        t0 = float(pl.t_start[0])
        args0 = self.args(th0, pl.rates[0])
        with np.errstate(all="ignore"):
            cp = self.rhs._compiled(t0, z0, args0)
        if cp is None:
            return everyone
        c = cp[0]
        if not c.pos or c.pos[0] != 0 or c.sizes[0] != rows.shape[1]:
            return everyone             # theta is not the program's first input
        if k:
            D = c.directions([0], [np.eye(k).reshape((k,) + shape)], k)
            if D is None or not c.tangent_pays(D):
                return everyone
            ptr, idx, val = D.ptr, D.idx, D.val
        else:
            ptr, idx, val = _native._NO_DIRECTIONS
        # parameter rows: each RATE row's theta (its subject's) and rates, then data
        base = np.array([c.params(self.args(th0, r)) for r in pl.rates[:1]])
        prow = np.repeat(base, len(pl.rates), axis=0)
        prow[:, :rows.shape[1]] = rows[pl.row_subject]
        off = c.offsets[1] if len(c.pos) > 1 and c.pos[1] == 1 else None
        if off is None:
            return everyone             # (the rates are always a float input)
        prow[:, off:off + n] = pl.rates
        with np.errstate(all="ignore"):
            progs = _native._programs(c, t0, z0, prow[0])
        if progs is None:
            return everyone
        from . import group_kernel as gk
        m = n * (1 + k)
        atol = self.ctl.atol_for(m)
        atol = np.full(m, atol) if type(atol) is float else np.ascontiguousarray(atol)
        status = np.zeros(S, dtype=np.int64)
        info = np.zeros((S, gk._dp.INFO_SIZE))
        nfev = np.zeros(S)
        at = np.zeros(S, dtype=np.int64)
        bdf = self.ctl.method == "bdf"

        shared = _native._bundle(c, progs, n)

        def work(subjects):
            if shared is None:
                status[subjects] = 1        # (plain route)
                return
            gk.run(*_native.private(shared), c.dim, n, k, ptr, idx, val, subjects,
                   pl.op_ptr, pl.kind, pl.arg_a, pl.arg_b, pl.amount, pl.t_start, prow,
                   pl.ts, pl.rec, bdf, self.ctl.rtol, atol, self.ctl.max_num_steps,
                   _native._stiff_after(), Z, status, info, nfev, at)
        parts = _split(pl.work, self.threads)
        if len(parts) == 1:
            work(parts[0])
        else:
            list(_pool(len(parts)).map(work, parts))
        with np.errstate(all="ignore"):
            kept = c.kernel_replays(int(nfev.sum()), c._x(t0, z0, prow[0]), (c.dim,))
        if not kept:
            _native.STATS["redone"] += 1
            return everyone             # the spot check disagreed: the eager tape now
        dp = gk._dp
        for s in np.flatnonzero(status < -1):
            st = int(status[s])
            if st != dp.BAD_START:
                o = at[s]               # the failed solve: its output times
                ts = pl.ts[pl.arg_a[o]:pl.arg_b[o]]
                raise _native._failure(dp, st, self.ctl, ts, np.zeros(m), info[s])
        return np.flatnonzero(status != 0)

    # -- the plain route: segment by segment through the ODE super node's solve --------
    def _subject(self, s, th, shape, k, Z):
        pl, n = self.plan, self.n
        pb = _Problem(self.rhs, self.ctl, None)
        D = (np.eye(k).reshape((k,) + shape),) if k else ()
        sub = pb.derived(k, [0], 2 + len(self.data), "sensitivities") if k else pb
        z = np.zeros(n * (1 + k))
        t = float(pl.t_start[s])
        r = np.zeros(n)
        for o in range(pl.op_ptr[s], pl.op_ptr[s + 1]):
            op, a, b, amount = pl.kind[o], pl.arg_a[o], pl.arg_b[o], pl.amount[o]
            if op == SOLVE:
                ts = pl.ts[a:b]
                Y = _solve(sub, (z, t, ts) + self.args(th, r) + D)[0]
                got = pl.rec[a:b] >= 0
                Z[pl.rec[a:b][got]] = Y[got]
                z, t = Y[-1].copy(), float(ts[-1])
            elif op == OUT:
                Z[a] = z
            elif op == RESET:
                z = np.zeros_like(z)
            elif op == BOLUS:
                z = z.copy()
                z[a] += amount
            else:
                r = pl.rates[a]


def _split(work, threads):
    """Subjects split into at most ``threads`` contiguous parts of similar work."""
    S = len(work)
    parts = min(threads, S)
    if parts <= 1:
        return [np.arange(S, dtype=np.int64)]
    cum = np.cumsum(work)
    cut = np.searchsorted(cum, cum[-1] * np.arange(1, parts) / parts)
    return [p.astype(np.int64) for p in np.split(np.arange(S), cut) if len(p)]


_POOLS = {}
_POOL_LOCK = threading.Lock()


def _pool(n):
    with _POOL_LOCK:
        p = _POOLS.get(n)
        if p is None:
            p = _POOLS[n] = ThreadPoolExecutor(n, thread_name_prefix="pk.ode_group")
        return p


# --------------------------------------------------------------------------------------
# the node
# --------------------------------------------------------------------------------------
# the sensitivities of the last values returned, kept beside them (by identity) for
# the VJP: the ODE node's stash (functor/ode.py), as pk/ode_plan.py's
_STASH = _Stash()


def _group_fun(theta, *, ctx):
    Y, S = ctx.solve(theta, sensitivities=True)
    _STASH.put(Y, S)
    return Y


def _group_vjp(g, ans, theta, *, ctx):
    """``theta_bar[s] = sum over subject s's records i of g_i . S_i``."""
    S = _STASH.get(ans)
    if S is None:
        S = ctx.solve(theta, sensitivities=True)[1]
    if isinstance(g, Box):
        raise DifferentiationError(f"{_WHO}: a traced output adjoint (reverse over "
                                   "reverse) is not supported here; use pk.ode")
    if type(g) is not np.ndarray:
        g = np.broadcast_to(np.asarray(g, dtype=float), ans.shape)
    per_record = np.einsum("rkn,rn->rk", S, g)
    theta = np.asarray(theta)
    out = np.zeros((ctx.plan.n_subjects, per_record.shape[1]))
    np.add.at(out, ctx.plan.subject, per_record)
    return (out.reshape(theta.shape),)


_GROUP = Primitive("pk.ode_group (forward sensitivities)", _group_fun)
_GROUP.vjp_all = _group_vjp
