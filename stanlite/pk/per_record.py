r"""Parameters that change from record to record (Torsten's 2-D ``theta``).

NONMEM's piecewise-constant covariates - a weight or a creatinine clearance measured
at visits, inter-occasion variability, a dose-dependent bioavailability - make the
model parameters a function of time. Torsten takes them as 2-D arrays, one row per
event record; so does :mod:`stanlite.pk`:

* model parameters (``CL, V, ka`` of :func:`~stanlite.pk.onecpt`, ... and the
  ``theta`` of :func:`~stanlite.pk.ode`) with a leading axis of ``n_records``: row
  ``i`` holds on the interval ``(t_{i-1}, t_i]`` that ends at record ``i`` (NONMEM's
  convention: a record's parameters advance the system *to* it), within its subject.
  An event between two records (an additional or lagged dose, the end of an
  infusion) is reached with the row of the next record at or after it; a steady
  state is that of its record's row;
* ``F``, ``tlag``, ``infusion_rate``, ``infusion_duration`` as ``n_records x n_cmt``
  matrices: the dose record's row applies to its dose and its additional doses
  (:func:`.dosing.per_dose`).

Superposition of doses no longer holds once the system changes in time, so the
closed forms with per-record parameters are solved event by event, like an ODE model
(:mod:`.nonlinear`), with each segment's evolution ``x(t0 + u) = e^{K u} x(t0) +
G(u) r`` from the closed-form kernels of :mod:`.analytic` (exact, divided
differences). Their steady states come from the algebraic solver on that evolution
(:meth:`.OdeSystem.steady_state`: accurate to its ``f_tol = 1e-6`` relative to the
dose, not to rounding as the closed forms of :mod:`.steady_state`).

Reading of the shapes: with one record per subject, per record and per subject
agree; a single subject's ``theta`` for :func:`~stanlite.pk.ode` is per record when
it has at least two axes and its first is ``n_records`` (``> 1``).

Example: the clearance doubles from the record at 6 h on (a new occasion); before
it, the amounts are those of a constant clearance.

>>> import numpy as np, stanlite as sl
>>> ev = sl.pk.events(time=[0.0, 2.0, 6.0, 10.0], evid=[1, 0, 0, 0],
...                   amt=[100.0, 0, 0, 0])
>>> CL = np.array([5.0, 5.0, 5.0, 10.0])        # row i: the interval ending at record i
>>> A = sl.pk.onecpt(ev, CL=CL, V=50.0, ka=1.2)
>>> B = sl.pk.onecpt(ev, CL=5.0, V=50.0, ka=1.2)
>>> bool(np.allclose(A[:3], B[:3])), bool(A[3, 1] < B[3, 1])
(True, True)
"""

import numpy as np

from ..autodiff.var import Box, guarded, shape_of, value_of
from ..math.linalg import matmul
from ..math.structure import stack
from .steady_state import OdeSystem

__all__ = ["PerRecordSystem", "LinearSystem", "theta_per_record", "solve_per_record"]


def theta_per_record(theta, events):
    """Whether ``theta`` (for :func:`~stanlite.pk.ode`) holds one row per record."""
    if theta is None:
        return False
    if not isinstance(theta, Box):
        try:
            theta = np.asarray(theta, dtype=np.float64)
        except (TypeError, ValueError):
            return False                    # the caller's checks report it
    s = shape_of(theta)
    R, S = events.n_records, events.n_subjects
    if not s or s[0] != R or R == S:
        return False
    return S > 1 or len(s) >= 2


class _Rows:
    """One subject's per-record table: records ``a..b-1`` of ``table``."""

    __slots__ = ("table", "a", "b")

    def __init__(self, table, a, b):
        self.table, self.a, self.b = table, a, b


class PerRecordSystem:
    """A system (an :class:`.OdeSystem` or :class:`LinearSystem`) whose parameters
    change at the records: each evolution is cut at the record times and every piece
    is evolved with the row of the record that ends it (module docstring). The event
    loop's ``theta`` for a subject is a :class:`_Rows` (:meth:`tables`)."""

    def __init__(self, inner, events):
        self.inner = inner
        self.n = inner.n
        self.events = events

    def __getattr__(self, name):             # ghosts, controls: the inner system's
        return getattr(self.inner, name)

    def tables(self, table):
        ev = self.events
        rows = [_Rows(table, int(ev.start[s]), int(ev.stop[s]))
                for s in range(ev.n_subjects)]
        return rows if ev.n_subjects > 1 else rows[0]

    def _row(self, rows, t):
        """The row in force on the interval ending at time ``t``: the subject's first
        record at or after ``t`` (its last after every record)."""
        time = self.events.time

        def pick(t, *ts):
            tv = float(np.asarray(t))
            for k, tk in enumerate(ts):
                if float(np.asarray(tk)) >= tv:
                    return k
            return len(ts) - 1
        ts = [time[i] for i in range(rows.a, rows.b)]
        if isinstance(t, Box) or isinstance(time, Box):
            k = guarded(pick, t, *ts)
        else:
            k = pick(t, *ts)
        return rows.table[rows.a + k]

    def evolve(self, x, t0, ts, rows, rate, tol=None):
        out = []
        t = t0
        for tk in ts:
            theta = self._row(rows, tk)
            if float(np.asarray(value_of(tk))) > float(np.asarray(value_of(t))):
                x = self.inner.evolve(x, t, [tk], theta, rate, tol)[0]
            else:                            # records at one time: nothing happens
                x = self.inner.skip(x, tk - t, t, theta, rate)
            out.append(x)
            t = tk
        if any(isinstance(v, Box) for v in out):
            return stack(out)
        return np.array(out, dtype=float)

    def skip(self, x, u, t, rows, rate):
        return self.inner.skip(x, u, t, self._row(rows, t), rate)

    def steady_state(self, ev, p, d, q, rows):
        return self.inner.steady_state(ev, p, d, q, rows.table[int(p.ss_rec[q])])


class LinearSystem(OdeSystem):
    """A linear compartment model (``model`` of :mod:`.coupled`: ``setup``,
    ``matrix``; ``kernel`` its closed-form :class:`~.solve.LinearKernel` class) as a
    system of the event loop: the evolution over a segment in closed form, the
    parameters a vector ``theta`` (``model.names``) per segment."""

    def __init__(self, model, kernel, who):
        def f(t, x, theta):                 # x' = K x: for steady states
            return matmul(model.matrix(model.setup(theta)[1]), x)
        super().__init__(f, model.n, None, 1e-10, 1e-10, 10**6, (), 1e-10, 1e-6, 200,
                         None, who)
        self.kernel = kernel

    def evolve(self, x, t0, ts, theta, rate, tol=None):
        kern = self.kernel(*(theta[i] for i in range(shape_of(theta)[0])))
        if any(isinstance(t, Box) for t in ts):
            u = stack(list(ts)) - t0
        else:
            u = np.array([float(t) for t in ts]) - t0
        T = len(ts)
        s = np.zeros(T, dtype=int)
        X0 = x * np.ones((T, 1)) if isinstance(x, Box) else np.tile(np.asarray(x, float),
                                                                     (T, 1))
        out = kern.free(u, X0, s)
        for c in range(self.n):
            r = rate[c]
            if isinstance(r, Box) or float(r) != 0.0:
                out = out + r * kern.infuse(u, c, s)
        return out


def solve_per_record(events, model, kernel, params, who, F=None, tlag=None,
                     infusion_rate=None, infusion_duration=None):
    """Amounts ``(n_records, n_cmt)`` of a closed-form model whose parameters
    ``params`` (in ``model.names`` order: scalars, one per subject or one per record)
    change at the records, event by event (module docstring)."""
    from .dosing import check_compartments, expand, plan
    from .nonlinear import events_of_subjects

    R = events.n_records
    cols = []
    for x in params:
        sx = shape_of(x)
        if sx == (R,):
            cols.append(x)
        elif sx == ():
            cols.append(x * np.ones(R) if isinstance(x, Box) else np.full(R, float(x)))
        else:                                   # one per subject
            cols.append(x[events.subject])
    table = stack(cols, axis=1) if any(isinstance(c, Box) for c in cols) else \
        np.stack([np.asarray(c, dtype=float) for c in cols], axis=1)
    check_compartments(events, model.n, who)
    p = plan(events)
    d = expand(events, p, model.n, who, F=F, tlag=tlag, infusion_rate=infusion_rate,
               infusion_duration=infusion_duration)
    sys_ = PerRecordSystem(LinearSystem(model, kernel, who), events)
    return events_of_subjects(events, p, d, sys_.tables(table), sys_)
