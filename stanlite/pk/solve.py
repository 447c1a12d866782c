"""The linear-model solver: amounts at every record by superposition of doses.

For a linear time-invariant model ``x' = K x + r(t)`` the amounts are a sum over
doses. With ``Phi(u) = e^{K u}`` (the response to a bolus) and ``G(u) = int_0^u
e^{K s} ds`` (the response to a unit-rate infusion), a record at time ``t`` receives
from each dose that reaches it (same subject, same reset epoch, not later; see
:mod:`.dosing`), with ``u = t - tau`` the time since the dose:

* a bolus of amount ``A`` into compartment ``c``:      ``A Phi(u) e_c``;
* an infusion of rate ``R`` for a duration ``d``:  ``R G(u) e_c`` while ``u <= d``,
  then ``Phi(u - d) x_d`` with ``x_d = R G(d) e_c`` the amount infused by its end
  (not the difference ``R (G(u) - G(u - d))``, which cancels long after the end);
* a steady-state record: its steady state ``x_ss`` at the record's time
  (:mod:`.steady_state`) evolving freely, ``Phi(u) x_ss`` - or, for a constant
  infusion at steady state, the constant ``x_ss``;
* plus its own dose, an ordinary bolus or infusion.

A model is a :class:`LinearKernel`: it provides ``Phi`` and ``G`` columns for a
batch of times. The closed forms (:mod:`.analytic`) and the matrix exponential
(:mod:`.linear`) are two kernels; this module knows nothing of either. All pairs of
all subjects go through one kernel call per kind of dose and compartment, and the
contributions are summed into the ``(n_records, n_cmt)`` result by one scatter-add:
the number of nodes does not grow with the number of subjects or records.

Value-dependent choices (which doses have happened by a record's time, which
infusions are still running) are made with :func:`~stanlite.autodiff.var.guarded`
when times or durations are traced, so a retaped gradient re-checks them.
"""

import numpy as np

from ..autodiff.var import Box, guarded, shape_of
from ..math.structure import concatenate, expand_dims, scatter_add, stack
from .dosing import BOLUS, CONSTANT, INFUSION, check_compartments, expand, plan

__all__ = ["LinearKernel", "solve_linear"]


class LinearKernel:
    """A linear compartment model ``x' = K x + r`` as the solver sees it.

    Subclasses set ``n_cmt`` and implement ``bolus`` and ``infuse`` (and ``ginf``
    for constant infusions at steady state); ``free`` and ``period`` have generic
    versions built on ``bolus``. Batches: ``u`` a vector of times ``(P,)``, ``s``
    the subject of each entry (parameters may differ by subject), ``c`` a 0-based
    compartment.
    """

    n_cmt = None

    def bolus(self, u, c, s):
        """``Phi(u) e_c``, shape ``(P, n_cmt)``."""
        raise NotImplementedError

    def infuse(self, u, c, s):
        """``G(u) e_c = int_0^u Phi(v) e_c dv``, shape ``(P, n_cmt)``."""
        raise NotImplementedError

    def ginf(self, c, s):
        """``G(inf) e_c = -K^-1 e_c``, the steady state of a unit-rate infusion."""
        raise NotImplementedError

    def free(self, u, V, s):
        """``Phi(u) V[p]`` for each row of ``V`` ``(P, n_cmt)``: free evolution."""
        out = None
        for c in range(self.n_cmt):
            term = V[:, c:c + 1] * self.bolus(u, c, s)
            out = term if out is None else out + term
        return out

    def period(self, u, s):
        """``Phi(u)`` as matrices ``(P, n_cmt, n_cmt)``."""
        return stack([self.bolus(u, c, s) for c in range(self.n_cmt)], axis=-1)


def _sel(x, idx):
    """``x[idx]`` for a vector (plain or traced); a scalar stays a scalar."""
    if shape_of(x) == ():
        return x
    return x[idx]


def _mask(fn, *xs):
    """A boolean mask computed on values: guarded when any input is traced."""
    if any(isinstance(x, Box) for x in xs):
        return guarded(fn, *xs)
    return fn(*xs)


def _nonneg(u):
    return np.asarray(u) >= 0


def _within(u, d):
    return np.asarray(u) <= np.asarray(d)


class _Sum:
    """Contributions ``(record indices, (P, n) amounts)`` collected for one scatter-add."""

    def __init__(self, n_records, n_cmt):
        self.shape = (n_records, n_cmt)
        self.idx = []
        self.val = []

    def add(self, idx, val):
        if len(idx):
            self.idx.append(np.asarray(idx))
            self.val.append(val)

    def total(self):
        if not self.val:
            return np.zeros(self.shape)
        idx = np.concatenate(self.idx)
        val = self.val[0] if len(self.val) == 1 else concatenate(self.val, axis=0)
        if not isinstance(val, Box):
            out = np.zeros(self.shape)
            np.add.at(out, idx, np.asarray(val, dtype=float))
            return out
        return scatter_add(val, idx, self.shape)


def _infusions(kern, acc, rec, u, c, R, dur, s):
    """Infusion terms for pairs: running (``u <= dur``) or ended (free evolution of
    the infused amount from the end)."""
    run = _mask(_within, u, dur)
    if run.all():
        acc.add(rec, expand_dims(R, -1) * kern.infuse(u, c, s))
        return
    if run.any():
        i = np.flatnonzero(run)
        acc.add(rec[i], expand_dims(_sel(R, i), -1) * kern.infuse(_sel(u, i), c, s[i]))
    i = np.flatnonzero(~run)
    Ri, di, si = _sel(R, i), _sel(dur, i), s[i]
    xd = expand_dims(Ri, -1) * kern.infuse(di, c, si)
    acc.add(rec[i], kern.free(_sel(u, i) - di, xd, si))


def solve_linear(ev, kern, who, F=None, tlag=None, infusion_rate=None,
                 infusion_duration=None):
    """Amounts ``(n_records, n_cmt)`` of the linear model ``kern`` over schedule ``ev``
    (see the module docstring)."""
    from .steady_state import linear_steady_state

    n = kern.n_cmt
    check_compartments(ev, n, who)
    p = plan(ev)
    d = expand(ev, p, n, who, F=F, tlag=tlag, infusion_rate=infusion_rate,
               infusion_duration=infusion_duration)
    t = ev.time
    acc = _Sum(ev.n_records, n)

    # regular doses (each dose record and its additional doses)
    if len(p.pair_rec):
        pr, pq = p.pair_rec, p.pair_inst
        u = _sel(t, pr) - _sel(d.tau, pq)
        ok = _mask(_nonneg, u)
        if not ok.all():
            keep = np.flatnonzero(ok)
            pr, pq, u = pr[keep], pq[keep], _sel(u, keep)
        kind = p.kind[pq]
        cmt = p.cmt[pq]
        subj = p.subj[pq]
        inf_pos = np.full(len(p.rec), -1)
        inf_pos[d.inf] = np.arange(len(d.inf))
        for c in np.unique(cmt):
            sel = np.flatnonzero((cmt == c) & (kind == BOLUS))
            if sel.size:
                A = _sel(d.amount, pq[sel])
                acc.add(pr[sel], expand_dims(A, -1) * kern.bolus(_sel(u, sel), int(c),
                                                                 subj[sel]))
            sel = np.flatnonzero((cmt == c) & (kind == INFUSION))
            if sel.size:
                j = inf_pos[pq[sel]]
                _infusions(kern, acc, pr[sel], _sel(u, sel), int(c), _sel(d.inf_rate, j),
                           _sel(d.inf_dur, j), subj[sel])

    # steady states: the state at the record, evolving freely; constant infusions
    if len(p.ss_rec):
        ss = linear_steady_state(kern, ev, p, d, who)
        pr, pi = p.sspair_rec, p.sspair_item
        if len(pr):
            kind = p.ss_kind[pi]
            const = np.flatnonzero(kind == CONSTANT)
            if const.size:
                acc.add(pr[const], ss.state[pi[const]])
            dyn = np.flatnonzero(kind != CONSTANT)
            if dyn.size:
                i = pi[dyn]
                u = _sel(t, pr[dyn]) - _sel(t, p.ss_rec[i])
                acc.add(pr[dyn], kern.free(u, ss.state[i], p.ss_subj[i]))
            # infusions that started before the record and still run after it
            for g in ss.ghosts:
                sel = np.flatnonzero(pi == g.item)
                if sel.size == 0:
                    continue
                rec = pr[sel]
                u = _sel(t, rec) - _sel(t, p.ss_rec[g.item])
                s = np.full(len(rec), p.ss_subj[g.item])
                R = g.rate * np.ones(len(rec)) if isinstance(g.rate, Box) else \
                    np.full(len(rec), float(g.rate))
                dur = g.dur * np.ones(len(rec)) if isinstance(g.dur, Box) else \
                    np.full(len(rec), float(g.dur))
                _infusions(kern, acc, rec, u, int(p.ss_cmt[g.item]), R, dur, s)
    return acc.total()
