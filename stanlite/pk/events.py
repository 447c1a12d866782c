"""NONMEM-style event schedules: the records a pharmacometric model is solved over.

An :class:`EventSchedule` is a validated table of records, one per row of a NONMEM
data set (Beal, Sheiner, Boeckmann & Bauer, "NONMEM Users Guides", Part V and VI;
Torsten's ``time, amt, rate, ii, evid, cmt, addl, ss`` arguments), possibly for many
subjects (an ``ID`` column):

=====  ==============================================================================
field  meaning
=====  ==============================================================================
time   time of the record (>= 0, non-decreasing within a subject)
evid   0 observation, 1 dose, 2 other (output only), 3 reset (amounts to 0, pending
       doses and running infusions cancelled), 4 reset then dose
amt    dose amount (>= 0); multiplied by the bioavailability F of its compartment
cmt    compartment of the dose, 1-based (Torsten: 1 gut, 2 central, 3 peripheral)
rate   0 bolus; > 0 infusion at this rate for F amt / rate time units; -1 the rate
       is a model parameter (``infusion_rate``); -2 the duration is one
       (``infusion_duration``)
ii     interdose interval of ``addl`` and of steady state
addl   number of additional doses, every ``ii`` after this one
ss     0 no steady state; 1 the amounts are reset to the steady state of this dose
       repeated every ``ii`` (this dose is the last of an infinite series); 2 the
       steady state is added to the current amounts (superposition);
       ``ss > 0, rate > 0, amt = 0, ii = 0``: steady state of a constant infusion
=====  ==============================================================================

The amounts a solver returns for a record are those *after* the record's own event
(a bolus at the record's time is included, as in NONMEM and Torsten). Doses derived
from a record (additional doses, lagged doses, infusion ends) that fall on the time
of a later record are applied before that record.

Validation happens here, once, on the data: every problem raises
:class:`~stanlite.errors.DataError` naming the record (1-based row), the subject and
the field. ``time``, ``amt``, ``rate`` and ``ii`` may be traced values (parameters:
a dose amount or a dosing time estimated from data); their values are checked with
:func:`~stanlite.autodiff.var.guarded` so that a retaped gradient re-checks them.
"""

import numpy as np

from ..autodiff.var import Box, guarded, shape_of
from ..errors import DataError
from ..math.structure import stack

__all__ = ["EventSchedule", "events"]

_REAL = ("time", "amt", "rate", "ii")
_INT = ("evid", "cmt", "addl", "ss")
_ALL = ("time", "evid", "amt", "cmt", "rate", "ii", "addl", "ss")


class EventSchedule:
    """A validated event schedule (build it with :func:`events`).

    Attributes (arrays over the ``n_records`` records, in data order):

    * ``time``, ``amt``, ``rate``, ``ii`` - float arrays, or traced values;
    * ``evid``, ``cmt``, ``addl``, ``ss`` - int arrays (``cmt`` is 1-based);
    * ``subject`` - 0-based subject index of each record; ``ids`` - the original
      ``ID`` of each subject (``n_subjects`` of them, in order of appearance);
    * ``dv`` - the dependent variable if the data had a ``DV`` column, else ``None``.

    Derived views: ``observed`` (indices of the observation records, evid 0),
    ``is_dose`` (evid 1 or 4), ``start`` / ``stop`` (each subject's record range).
    """

    def __init__(self, fields, subject, ids, dv=None):
        self._f = fields
        self.subject = subject
        self.ids = ids
        self.dv = dv
        self._cache = {}
        n = len(subject)
        starts = np.flatnonzero(np.r_[True, subject[1:] != subject[:-1]]) if n else \
            np.zeros(0, dtype=int)
        self.start = starts
        self.stop = np.r_[starts[1:], n].astype(int) if n else np.zeros(0, dtype=int)

    # -- fields ------------------------------------------------------------------------
    time = property(lambda self: self._f["time"])
    evid = property(lambda self: self._f["evid"])
    amt = property(lambda self: self._f["amt"])
    cmt = property(lambda self: self._f["cmt"])
    rate = property(lambda self: self._f["rate"])
    ii = property(lambda self: self._f["ii"])
    addl = property(lambda self: self._f["addl"])
    ss = property(lambda self: self._f["ss"])

    def _program_key_state(self):
        """What defines the schedule, for the key of a model holding it in the disk
        cache of lowered programs (autodiff/program_cache.py): its records, subjects,
        IDs and DV (``_cache`` is an analysis derived from them)."""
        return (self._f, self.subject, self.ids, self.dv)

    @property
    def n_records(self):
        return len(self.subject)

    def __len__(self):
        return self.n_records

    @property
    def n_subjects(self):
        return len(self.ids)

    @property
    def observed(self):
        """Indices of the observation records (evid 0)."""
        return np.flatnonzero(self.evid == 0)

    @property
    def is_dose(self):
        return (self.evid == 1) | (self.evid == 4)

    @property
    def traced(self):
        """Names of the fields that hold traced values (parameters)."""
        return tuple(k for k in _REAL if isinstance(self._f[k], Box))

    def __repr__(self):
        extra = f", traced: {', '.join(self.traced)}" if self.traced else ""
        return (f"EventSchedule({self.n_records} records, {self.n_subjects} subject"
                f"{'s' if self.n_subjects != 1 else ''}, {int(np.sum(self.is_dose))} "
                f"dose records{extra})")

    def replace(self, **fields):
        """A schedule with some of ``time``, ``amt``, ``rate``, ``ii`` replaced (plain
        or traced values of the same shape), re-validated; the structure (evid, cmt,
        addl, ss, subjects) and its cached analysis are kept.

        This is how a dose, a dosing time or an interval becomes a parameter inside
        a model: build the schedule once from the data, and
        ``events.replace(amt=dose)`` in ``log_prob``.

        >>> import stanlite as sl
        >>> ev = sl.pk.events(time=[0, 1, 2], evid=[1, 0, 0], amt=[100, 0, 0])
        >>> ev.replace(amt=[50.0, 0, 0]).amt
        array([50.,  0.,  0.])
        """
        bad = set(fields) - set(_REAL)
        if bad:
            raise DataError(f"EventSchedule.replace: only {', '.join(_REAL)} can be "
                            f"replaced (the structure is fixed), got {sorted(bad)}")
        new = dict(self._f)
        for k, v in fields.items():
            new[k] = _real_field(k, v, self.n_records)
        _check_values(new, self.subject, self.ids)
        out = EventSchedule(new, self.subject, self.ids, self.dv)
        out._cache = self._cache          # same structure: share the analysis
        return out

    def to_dataframe(self):
        """The schedule as a pandas DataFrame (plain values; ID, TIME, EVID, ... columns)."""
        import pandas as pd
        from ..autodiff.var import value_of
        cols = {"ID": np.asarray(self.ids)[self.subject]}
        for k in _ALL:
            cols[k.upper()] = np.asarray(value_of(self._f[k]))
        if self.dv is not None:
            cols["DV"] = self.dv
        return pd.DataFrame(cols)


# --------------------------------------------------------------------------------------
# construction
# --------------------------------------------------------------------------------------
def _lookup(data, name):
    """Column ``name`` of a dict or DataFrame, case-insensitively (NONMEM: TIME, AMT)."""
    if data is None:
        return None
    keys = list(data.keys()) if not hasattr(data, "columns") else list(data.columns)
    hits = [k for k in keys if isinstance(k, str) and k.lower() == name]
    if len(hits) > 1:
        raise DataError(f"events: the data have several columns named {name.upper()} "
                        f"(case-insensitively): {hits}")
    if not hits:
        return None
    col = data[hits[0]]
    return col.to_numpy() if hasattr(col, "to_numpy") else col


def _not_per_record(name, n, got):
    """The error for a field ``name`` that has not one value per record (``got``: what
    it has, e.g. ``"shape (3,)"``)."""
    return DataError(f"events: {name} must have one value per record ({n}), got {got}")


def _real_field(name, v, n):
    """A float field: a float64 array of length n, or a traced vector of length n."""
    if isinstance(v, Box):
        if shape_of(v) != (n,):
            raise _not_per_record(name, n, f"shape {shape_of(v)}")
        return v
    if isinstance(v, (list, tuple)) and any(isinstance(e, Box) for e in v):
        if len(v) != n:
            raise _not_per_record(name, n, len(v))
        return stack([e if isinstance(e, Box) else float(e) for e in v])
    return _plain_field(name, v, n, "numbers")


def _plain_field(name, v, n, kind):
    """A field of plain values as a float64 array of length n (a scalar is repeated);
    ``kind`` (``"numbers"``, ``"integers"``) words the error for non-numbers."""
    try:
        a = np.asarray(v, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(f"events: {name} must be {kind}, got {_short(v)}") from None
    if a.ndim == 0:
        a = np.full(n, float(a))
    if a.shape != (n,):
        raise _not_per_record(name, n, f"shape {a.shape}")
    return a


def _short(v):
    s = repr(v)
    return s if len(s) < 60 else s[:57] + "..."


def _int_field(name, v, n):
    if isinstance(v, Box) or (isinstance(v, (list, tuple)) and
                              any(isinstance(e, Box) for e in v)):
        raise DataError(f"events: {name} is an integer data field; it cannot be a traced "
                        "value (only time, amt, rate and ii can be parameters)")
    return _plain_field(name, v, n, "integers")


def _where_rec(i, subject, ids):
    return f"record {i + 1} (subject {ids[subject[i]]})"


def _fail(i, subject, ids, name, value, what):
    v = value
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        v = int(v)
    raise DataError(f"events: {_where_rec(i, subject, ids)}: {name} = {v}: {what}")


def events(data=None, *, time=None, amt=None, evid=None, cmt=None, rate=None, ii=None,
           addl=None, ss=None, id=None, dv=None):
    """Build and validate an :class:`EventSchedule` (NONMEM's records).

    ``data`` may be a pandas DataFrame, the records of a NONMEM file
    (:func:`~stanlite.pk.read_nonmem`; errors then name the file line) or a dict of
    arrays whose keys are the field names in any case (NONMEM's ``ID, TIME, EVID, AMT, CMT, RATE, II, ADDL, SS, DV,
    MDV``; other columns are ignored); keyword arrays give or override fields. Only
    ``time`` is required. Defaults, as NONMEM: ``evid`` is 1 where ``amt > 0``, else
    2 where ``MDV = 1``, else 0; ``cmt`` is 1; ``amt, rate, ii, addl, ss`` are 0;
    one subject. Missing values (NaN, NONMEM's ``.``) in ``amt, rate, ii, addl, ss,
    cmt`` mean 0. ``time``, ``amt``, ``rate``, ``ii`` may be traced values
    (parameters); the other fields are integer data.

    Every inconsistency raises :class:`~stanlite.errors.DataError` naming the record
    (1-based), its subject and the field: negative or non-finite times, records not
    sorted by time within a subject, a subject's records not contiguous, an unknown
    ``evid``, a dose into compartment < 1, a negative ``amt``, ``rate`` other than
    -2, -1 or >= 0, negative ``ii``, non-integer or negative ``addl``, ``addl``
    without ``ii``, ``ss`` not 0/1/2, steady state without ``ii`` (other than a
    constant infusion, ``amt = 0, rate > 0, ii = 0``), dosing fields on a non-dose
    record. (A compartment beyond the model's is reported by the solver, which
    knows the number of compartments.)

    Example: a 100 mg oral dose every 12 h, 3 doses, and four samples.

    >>> import stanlite as sl
    >>> ev = sl.pk.events(time=[0, 1, 6, 24, 30], evid=[1, 0, 0, 0, 0],
    ...                   amt=[100, 0, 0, 0, 0], ii=[12, 0, 0, 0, 0],
    ...                   addl=[2, 0, 0, 0, 0])
    >>> ev
    EventSchedule(5 records, 1 subject, 1 dose records)
    >>> ev.observed
    array([1, 2, 3, 4])
    >>> sl.pk.events(time=[0, 1], evid=[1, 0], amt=[-5, 0])
    Traceback (most recent call last):
    ...
    stanlite.errors.DataError: events: record 1 (subject 1): amt = -5: a dose amount must be >= 0
    """
    given = {"time": time, "amt": amt, "evid": evid, "cmt": cmt, "rate": rate, "ii": ii,
             "addl": addl, "ss": ss, "id": id, "dv": dv}
    labels = getattr(data, "record_labels", None)
    if labels is not None:
        # read from a file (read_nonmem): errors name the file line, not the record
        from .nonmem import relabel
        try:
            return events(dict(data), **given)
        except DataError as e:
            raise relabel(e, labels) from None
    cols, mdv, n = _columns(data, given)
    f = _fields(cols, mdv, n)
    subject, ids = _subjects(cols["id"], n)
    dvv = _observations(cols["dv"], n)
    _check_structure(f, subject, ids)
    for k in _INT:
        f[k] = f[k].astype(int)
    _check_values(f, subject, ids)
    return EventSchedule(f, subject, ids, dvv)


def _columns(data, given):
    """``(cols, mdv, n)``: each field's column (a keyword given, else the data's column
    of that name in any case, else None), NONMEM's MDV column and the number of
    records (from ``time``, the one required field)."""
    if data is not None and not (isinstance(data, dict) or hasattr(data, "columns")):
        raise DataError(f"events: data must be a pandas DataFrame or a dict of columns, "
                        f"got {type(data).__name__}")
    cols = {k: (v if v is not None else _lookup(data, k)) for k, v in given.items()}
    mdv = _lookup(data, "mdv")
    if cols["time"] is None:
        raise DataError("events: a TIME column (or time=...) is required")
    t = cols["time"]
    n = len(t) if not isinstance(t, Box) else (shape_of(t)[0] if shape_of(t) else 0)
    if isinstance(t, Box) and len(shape_of(t)) != 1:
        raise DataError(f"events: time must be a vector, got shape {shape_of(t)}")
    if n == 0:
        raise DataError("events: the schedule has no records")
    return cols, mdv, n


def _fields(cols, mdv, n):
    """The record fields with NONMEM's defaults: missing ``amt, rate, ii, addl, ss``
    are 0 and ``cmt`` 1 (NaN too), ``evid`` 1 where ``amt > 0``, else 2 where
    ``MDV = 1``, else 0."""
    f = {}
    f["time"] = _real_field("time", cols["time"], n)
    for k in ("amt", "rate", "ii"):
        v = cols[k]
        if v is None:
            f[k] = np.zeros(n)
        else:
            f[k] = _real_field(k, v, n)
            if not isinstance(f[k], Box):
                f[k] = np.where(np.isnan(f[k]), 0.0, f[k])
    for k in ("cmt", "addl", "ss"):
        v = cols[k]
        a = np.full(n, 1.0 if k == "cmt" else 0.0) if v is None else _int_field(k, v, n)
        f[k] = np.where(np.isnan(a), 0.0, a)
    if cols["evid"] is None:
        dosed = guarded(lambda a: np.asarray(a, dtype=float) > 0, f["amt"])
        ev = np.where(dosed, 1.0, 0.0)
        if mdv is not None:
            m = np.asarray(mdv, dtype=float)
            ev = np.where((ev == 0) & (np.nan_to_num(m) == 1), 2.0, ev)
        f["evid"] = ev
    else:
        f["evid"] = _int_field("evid", cols["evid"], n)
    return f


def _subjects(ids_col, n):
    """``(subject, ids)``: each record's subject index (in order of first appearance)
    and the subjects' IDs; each subject's records must be contiguous."""
    if ids_col is None:
        return np.zeros(n, dtype=int), np.array([1])
    raw = np.asarray(ids_col)
    if raw.shape != (n,):
        raise _not_per_record("id", n, f"shape {raw.shape}")
    change = np.r_[True, raw[1:] != raw[:-1]]
    ids = raw[change]
    subject = np.cumsum(change) - 1
    _, first = np.unique(ids, return_index=True)
    if len(first) != len(ids):
        seen = set()
        for i in np.flatnonzero(change):
            key = raw[i]
            if key in seen:
                raise DataError(f"events: record {i + 1}: ID = {key} appears again "
                                "after other subjects' records; each subject's "
                                "records must be contiguous (sort the data by ID, "
                                "then TIME)")
            seen.add(key)
    return subject, ids


def _observations(dv, n):
    """The DV column as floats (None if not given)."""
    if dv is None:
        return None
    try:
        dvv = np.asarray(dv, dtype=float)
    except (TypeError, ValueError):
        raise DataError("events: dv must be numbers (NaN where missing)") from None
    if dvv.shape != (n,):
        raise _not_per_record("dv", n, f"shape {dvv.shape}")
    return dvv


def _reject(mask, subject, ids, name, a, what):
    """The error for the first record where ``mask`` holds, if any (``a``: the field
    ``name``; ``what``: what is wrong with its value)."""
    bad = np.flatnonzero(mask)
    if bad.size:
        i = int(bad[0])
        _fail(i, subject, ids, name, a[i], what)


def _check_structure(f, subject, ids):
    """The integer fields: evid, cmt, addl, ss (plain data)."""
    evid, cmt, addl, ss = f["evid"], f["cmt"], f["addl"], f["ss"]
    for name, a in (("evid", evid), ("cmt", cmt), ("addl", addl), ("ss", ss)):
        _reject(~np.isfinite(a) | (a != np.round(a)), subject, ids, name, a,
                "must be an integer")
    _reject(~np.isin(evid, (0, 1, 2, 3, 4)), subject, ids, "evid", evid,
            "must be 0 (observation), 1 (dose), 2 (other), 3 (reset) or 4 (reset and dose)")
    dose = (evid == 1) | (evid == 4)
    _reject(dose & (cmt < 1), subject, ids, "cmt", cmt,
            "a dose needs a compartment >= 1 (compartments are numbered from 1)")
    _reject(cmt < 0, subject, ids, "cmt", cmt, "must be >= 0 (NONMEM's negative "
            "compartments, turning a compartment off, are not supported)")
    _reject(addl < 0, subject, ids, "addl", addl, "must be >= 0")
    _reject(~np.isin(ss, (0, 1, 2)), subject, ids, "ss", ss, "must be 0, 1 or 2")
    for name, a in (("addl", addl), ("ss", ss)):
        bad = np.flatnonzero(~dose & (a != 0))
        if bad.size:
            i = int(bad[0])
            _fail(i, subject, ids, name, a[i], f"only a dose record (evid 1 or 4) can "
                  f"have {name}; this record has evid = {int(evid[i])}")


def _check_values(f, subject, ids):
    """The float fields, on their (possibly traced) values, in one guarded call so
    that a retaped gradient re-checks them at every new point."""
    args = [f[k] for k in ("time", "amt", "rate", "ii")]
    ints = (f["evid"], f["addl"], f["ss"])

    def check(time, amt, rate, ii):
        _check_plain(np.asarray(time, float), np.asarray(amt, float),
                     np.asarray(rate, float), np.asarray(ii, float), *ints, subject, ids)
        return True

    guarded(check, *args)


def _check_plain(time, amt, rate, ii, evid, addl, ss, subject, ids):
    n = len(time)
    _reject(~np.isfinite(time), subject, ids, "time", time, "must be finite")
    _reject(time < 0, subject, ids, "time", time, "times must be >= 0")
    if n > 1:
        same = subject[1:] == subject[:-1]
        bad = np.flatnonzero(same & (time[1:] < time[:-1]))
        if bad.size:
            i = int(bad[0]) + 1
            raise DataError(f"events: {_where_rec(i, subject, ids)}: time = "
                            f"{time[i]:g}: the records are not sorted by time (record {i} "
                            f"has time = {time[i - 1]:g}); sort each subject's records "
                            "by time")
    dose = (evid == 1) | (evid == 4)
    for name, a in (("amt", amt), ("rate", rate), ("ii", ii)):
        _reject(~np.isfinite(a), subject, ids, name, a, "must be finite")
        bad = np.flatnonzero(~dose & (a != 0))
        if bad.size:
            i = int(bad[0])
            _fail(i, subject, ids, name, a[i], f"a record with evid = {int(evid[i])} "
                  "cannot carry dosing information (amt, rate, ii must be 0; use evid 1 "
                  "or 4 for a dose)")
    _reject(amt < 0, subject, ids, "amt", amt, "a dose amount must be >= 0")
    _reject((rate < 0) & (rate != -1) & (rate != -2), subject, ids, "rate", rate,
            "must be >= 0 (0: bolus, > 0: infusion), -1 (rate modelled) or -2 (duration "
            "modelled)")
    _reject(ii < 0, subject, ids, "ii", ii, "the interdose interval must be >= 0")
    _reject((addl > 0) & (ii <= 0), subject, ids, "addl", addl,
            "additional doses need an interdose interval ii > 0 (addl without ii)")
    const = (ss > 0) & (rate > 0) & (amt == 0)
    _reject(const & (ii != 0), subject, ids, "ii", ii,
            "a steady-state constant infusion (amt = 0, rate > 0) has ii = 0")
    _reject((ss > 0) & ~const & (ii <= 0), subject, ids, "ss", ss,
            "a steady-state dose needs an interdose interval ii > 0 (ss without ii; for a "
            "constant infusion at steady state give amt = 0, rate > 0, ii = 0)")
    _reject((ss > 0) & (rate == 0) & (amt == 0), subject, ids, "amt", amt,
            "a steady-state bolus needs amt > 0")
