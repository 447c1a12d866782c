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

import numpy as np

from ..autodiff.var import Box, guarded, shape_of
from ..errors import DomainError
from ..math.linalg import matmul, solve
from ..math.structure import concatenate, expand_dims, scatter_add, stack
from .dosing import BOLUS, CONSTANT, INFUSION

__all__ = ["linear_steady_state", "SteadyStates"]


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
