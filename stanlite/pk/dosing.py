"""From records to doses: what each dose record puts into which compartment, and when.

Two stages, shared by every solver of :mod:`stanlite.pk`:

* :func:`plan` - the *structure* of a schedule, on its integer data only, computed
  once and cached on the schedule: the dose instances (a dose record and its
  ``addl`` additional doses), the steady-state records, the reset epochs, and which
  records each instance may reach (the candidate pairs of the superposition).
* :func:`expand` - the *values*, at every solve (they may be parameters): the time
  of each instance ``tau = time + k ii + tlag[cmt]``, its amount ``F[cmt] amt``, and
  for infusions the rate and duration (NONMEM's rules: ``rate > 0`` fixes the rate
  and ``F`` scales the duration ``F amt / rate``; ``rate = -1`` takes the rate from
  ``infusion_rate[cmt]``, ``rate = -2`` the duration from ``infusion_duration[cmt]``).

Resets. A reset record (evid 3, evid 4, or a dose with ``ss = 1``) at index ``r``
cancels everything coming from earlier records: their amounts, their running
infusions and their pending additional or lagged doses. So an instance of record
``j`` acts on record ``i`` iff ``j <= i``, no reset record lies in ``(j, i]``, and the
instance's time is ``<= time[i]`` (an event derived from an earlier record that falls
on a record's time is applied before it). Record ``j``'s own reset happens before
its own doses.
"""

import numpy as np

from ..autodiff.var import Box, as_numbers, guarded, shape_of
from ..errors import DataError, DomainError
from ..math.structure import where

__all__ = ["Plan", "plan", "Doses", "expand", "per_dose"]

BOLUS, INFUSION, CONSTANT = 0, 1, 2


class Plan:
    """Structure of a schedule (plain integers), see :func:`plan`.

    Instances ``q`` (dose records expanded by ``addl``): ``rec``, ``k`` (0 for the
    record's own dose), ``cmt`` (0-based), ``subj``, ``kind`` (BOLUS or INFUSION),
    ``flag`` (the record's rate flag: 1 rate given, -1 rate modelled, -2 duration
    modelled, 0 bolus). Steady-state items (one per ``ss > 0`` record): ``ss_rec``,
    ``ss_cmt``, ``ss_subj``, ``ss_kind`` (BOLUS, INFUSION or CONSTANT), ``ss_type``
    (1 reset, 2 add), ``ss_flag``. Candidate pairs ``(pair_rec, pair_inst)`` and
    ``(sspair_rec, sspair_item)``: record ``i`` may see instance / item (same
    subject, same reset epoch, not earlier).
    """


def _kinds(ev):
    """Per record: BOLUS / INFUSION / CONSTANT and the rate flag, from the rate and
    amount values (a guarded decision when they are traced; cached for plain fields,
    by the identity of the arrays, which the cache keeps alive)."""
    fields = (ev.rate, ev.amt, ev.ii)
    plain = not any(isinstance(x, Box) for x in fields)
    if plain:
        hit = ev._cache.get("kinds")
        if hit is not None and all(a is b for a, b in zip(hit[0], fields)):
            return hit[1]

    def fn(rate, amt, ii):
        rate = np.asarray(rate, float)
        amt = np.asarray(amt, float)
        ii = np.asarray(ii, float)
        flag = np.where(rate > 0, 1, np.where(rate == -1, -1, np.where(rate == -2, -2, 0)))
        kind = np.where(flag != 0, INFUSION, BOLUS)
        kind = np.where((ev.ss > 0) & (rate > 0) & (amt == 0) & (ii == 0), CONSTANT, kind)
        return tuple(kind.tolist()), tuple(flag.tolist())
    if plain:
        out = fn(*fields)
        ev._cache["kinds"] = (fields, out)
        return out
    return guarded(fn, *fields)


def plan(ev):
    """The structure of schedule ``ev`` (cached on it; see :class:`Plan`)."""
    kinds, flags = _kinds(ev)
    key = ("plan", kinds, flags)
    p = ev._cache.get(key)
    if p is not None:
        return p
    kind = np.array(kinds, dtype=int)
    flag = np.array(flags, dtype=int)
    n = ev.n_records
    evid, ss, addl = ev.evid, ev.ss, ev.addl
    dose = (evid == 1) | (evid == 4)
    reset = (evid == 3) | (evid == 4) | (dose & (ss == 1))
    # end of the epoch of record j: the first reset record after j (same subject)
    stop_of = ev.stop[ev.subject]
    epoch_end = np.empty(n, dtype=int)
    nxt = n
    for i in range(n - 1, -1, -1):
        if i + 1 < n and ev.subject[i + 1] != ev.subject[i]:
            nxt = stop_of[i]
        epoch_end[i] = nxt
        if reset[i]:
            nxt = i
    p = Plan()
    p.n = n
    p.reset = reset
    p.epoch_end = epoch_end
    # instances: every dose record but the constant infusions, times (addl + 1)
    drec = np.flatnonzero(dose & (kind != CONSTANT))
    reps = addl[drec] + 1
    p.rec = np.repeat(drec, reps)
    p.k = np.concatenate([np.arange(r) for r in reps]) if len(drec) else np.zeros(0, int)
    p.cmt = ev.cmt[p.rec] - 1
    p.subj = ev.subject[p.rec]
    p.kind = kind[p.rec]
    p.flag = flag[p.rec]
    # steady-state items
    srec = np.flatnonzero(dose & (ss > 0))
    p.ss_rec = srec
    p.ss_cmt = ev.cmt[srec] - 1
    p.ss_subj = ev.subject[srec]
    p.ss_kind = kind[srec]
    p.ss_type = ss[srec]
    p.ss_flag = flag[srec]
    p.pair_rec, p.pair_inst = _ranges(p.rec, epoch_end)
    p.sspair_rec, p.sspair_item = _ranges(srec, epoch_end)
    ev._cache[key] = p
    return p


def _ranges(recs, epoch_end):
    """Pairs (i, q) for i in [recs[q], epoch_end[recs[q]])."""
    if len(recs) == 0:
        z = np.zeros(0, dtype=int)
        return z, z
    lens = epoch_end[recs] - recs
    q = np.repeat(np.arange(len(recs)), lens)
    offs = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)
    return recs[q] + offs, q


def check_compartments(ev, n_cmt, who):
    """Every dose must go to a compartment of the model (DataError otherwise)."""
    key = ("cmt", n_cmt)
    if key in ev._cache:
        return
    dose = ev.is_dose
    bad = np.flatnonzero(dose & (ev.cmt > n_cmt))
    if bad.size:
        i = int(bad[0])
        raise DataError(f"{who}: record {i + 1} (subject {ev.ids[ev.subject[i]]}): cmt = "
                        f"{int(ev.cmt[i])}: unknown compartment (the model has {n_cmt}: "
                        f"1..{n_cmt})")
    ev._cache[key] = True


# --------------------------------------------------------------------------------------
# per-compartment parameters (F, tlag, infusion rate/duration)
# --------------------------------------------------------------------------------------
def per_dose(name, x, ev, n_cmt, who):
    """Normalise a per-compartment parameter: ``None``, a scalar (every compartment),
    a vector ``(n_cmt,)``, a matrix ``(n_subjects, n_cmt)`` or ``(n_records, n_cmt)``
    (Torsten's 2-D arrays: one row per record, the dose record's row applies to its
    dose and its additional doses; with one record per subject the two readings
    agree). Returns ``None`` or a function ``(subj, cmt, rec) -> values`` gathering it
    for doses."""
    if x is None:
        return None
    x = as_numbers(x, f"{who}: {name} must be numbers")
    s = shape_of(x)
    S = ev.n_subjects
    if s == ():
        return lambda subj, cmt, rec: x
    if s == (n_cmt,):
        return lambda subj, cmt, rec: x[cmt]
    if s == (S, n_cmt):
        return lambda subj, cmt, rec: x[subj, cmt]
    if s == (ev.n_records, n_cmt):
        return lambda subj, cmt, rec: x[rec, cmt]
    raise DataError(f"{who}: {name} must be a scalar, a vector of {n_cmt} (one per "
                    f"compartment), a {S} x {n_cmt} matrix (subjects x compartments) or "
                    f"a {ev.n_records} x {n_cmt} matrix (records x compartments), got "
                    f"shape {s}")


def value_check(who, name, strict=False):
    """The check of a parameter's values: finite and >= 0 (``strict``: > 0), else a
    DomainError naming the first bad value; -> True."""
    def fn(v):
        v = np.asarray(v, dtype=float)
        bad = ~np.isfinite(v) | ((v <= 0) if strict else (v < 0))
        if bad.any():
            raise DomainError(f"{who}: {name} must be {'positive' if strict else '>= 0'} "
                              f"and finite, got {v.ravel()[np.flatnonzero(bad.ravel())[0]]}")
        return True
    return fn


def _check_nonneg(who, name, x, strict=False):
    fn = value_check(who, name, strict)
    if isinstance(x, Box):
        guarded(fn, x)
    elif x is not None:
        fn(x)


class Doses:
    """Values of the dose instances and steady-state items (see :func:`expand`).

    Instances: ``tau`` (time) and ``amount`` (F amt); for the infusion instances,
    indices ``inf`` with ``inf_rate`` and ``inf_dur``. ``F``, ``L``, ``R``, ``D``: the
    gathering functions of the per-compartment parameters (see :func:`per_dose`).
    Steady-state items: ``ss_amount``, ``ss_ii``, ``ss_lag`` (None when no lag);
    for the infusion items (INFUSION and CONSTANT), indices ``ss_inf`` with
    ``ss_rate``, ``ss_dur``.
    """


def expand(ev, p, n_cmt, who, F=None, tlag=None, infusion_rate=None,
           infusion_duration=None):
    """The values of the doses of ``ev`` (plan ``p``) for these parameters."""
    Fg = per_dose("F", F, ev, n_cmt, who)
    Lg = per_dose("tlag", tlag, ev, n_cmt, who)
    Rg = per_dose("infusion_rate", infusion_rate, ev, n_cmt, who)
    Dg = per_dose("infusion_duration", infusion_duration, ev, n_cmt, who)
    _check_nonneg(who, "F", F)
    _check_nonneg(who, "tlag", tlag)
    _check_nonneg(who, "infusion_rate", infusion_rate, strict=True)
    _check_nonneg(who, "infusion_duration", infusion_duration, strict=True)
    for flag, g, name in ((-1, Rg, "infusion_rate"), (-2, Dg, "infusion_duration")):
        if g is None:
            recs = np.flatnonzero(ev.is_dose & (_rate_flags(p, ev) == flag))
            if recs.size:
                i = int(recs[0])
                raise DataError(f"{who}: record {i + 1} (subject "
                                f"{ev.ids[ev.subject[i]]}): rate = {flag}: the "
                                f"{'rate' if flag == -1 else 'duration'} of this infusion "
                                f"is a model parameter; give {name}=")
    d = Doses()
    d.F, d.L, d.R, d.D = Fg, Lg, Rg, Dg
    time, amt, ii, rate = ev.time, ev.amt, ev.ii, ev.rate
    rec, subj, cmt = p.rec, p.subj, p.cmt
    # instances
    tau = _take(time, rec)
    if p.k.any():
        tau = tau + p.k * _take(ii, rec)
    if Lg is not None:
        tau = tau + Lg(subj, cmt, rec)
    d.tau = tau
    a = _take(amt, rec)
    d.amount = a * Fg(subj, cmt, rec) if Fg is not None else a
    inf = np.flatnonzero(p.kind == INFUSION)
    d.inf = inf
    if inf.size:
        d.inf_rate, d.inf_dur = _rate_duration(p.flag[inf], _take(rate, rec[inf]),
                                               _take(d.amount, inf), subj[inf], cmt[inf],
                                               rec[inf], Rg, Dg)
    # steady-state items
    srec = p.ss_rec
    if srec.size:
        s_subj, s_cmt = p.ss_subj, p.ss_cmt
        d.ss_ii = _take(ii, srec)
        sa = _take(amt, srec)
        d.ss_amount = sa * Fg(s_subj, s_cmt, srec) if Fg is not None else sa
        d.ss_lag = Lg(s_subj, s_cmt, srec) if Lg is not None else None
        # infusion items (INFUSION and CONSTANT): rate and duration as for the record's
        # own dose (a constant infusion has amt = 0: duration 0, unused)
        d.ss_inf = np.flatnonzero(p.ss_kind != BOLUS)
        d.ss_rate = d.ss_dur = None
        if d.ss_inf.size:
            j = d.ss_inf
            d.ss_rate, d.ss_dur = _rate_duration(p.ss_flag[j], _take(rate, srec[j]),
                                                 _take(d.ss_amount, j), s_subj[j],
                                                 s_cmt[j], srec[j], Rg, Dg)
    return d


def _rate_flags(p, ev):
    flags = np.zeros(ev.n_records, dtype=int)
    flags[p.rec] = p.flag
    flags[p.ss_rec] = p.ss_flag
    return flags


def _rate_duration(flag, rate, amount, subj, cmt, rec, Rg, Dg):
    """Rate and duration of infusions: flag 1 the record's rate, duration F amt / rate;
    -1 the modelled rate; -2 the modelled duration, rate F amt / duration."""
    R = rate
    if (flag == -1).any():
        R = where(flag == -1, Rg(subj, cmt, rec), R)
    if (flag == -2).any():
        Dm = Dg(subj, cmt, rec)
        safe = where(flag == -2, Dm, 1.0)
        R = where(flag == -2, amount / safe, R)
    safeR = where(flag == -2, 1.0, R) if (flag == -2).any() else R
    dur = amount / safeR
    if (flag == -2).any():
        dur = where(flag == -2, Dg(subj, cmt, rec), dur)
    return R, dur


def _take(x, idx):
    """``x[idx]`` for a plain or traced vector (or a scalar, broadcast)."""
    if shape_of(x) == ():
        return x
    return x[idx]
