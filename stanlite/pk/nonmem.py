"""Reading NONMEM data files: :func:`read_nonmem` and the table it returns.

A NONMEM data set (Beal, Sheiner, Boeckmann & Bauer, *NONMEM Users Guides*, Part V
ch. 6 and Part VIII, ``$DATA`` / ``$INPUT``) is a text table, one record per row:
comma- or whitespace-separated, a header row naming the columns, ``.`` for a missing
value, comment rows marked by their first character (``IGNORE=#``, ``IGNORE=C``,
``IGNORE=@``), the event columns ``ID TIME AMT RATE II ADDL SS EVID CMT DV MDV`` and
any number of covariate columns. ``pandas.read_csv`` gets most of this wrong (``.``
is text, comment rows break the time order), so the reader applies NONMEM's
conventions itself and reports every problem with the *file line* and the *column*
(:class:`~stanlite.errors.DataError`, ``"theo.csv line 14, column AMT: expected a
number, got 'abc'"``). What it returns, a :class:`NonmemData`, is a dict of columns
that :func:`~stanlite.pk.events` takes as it is; errors that only the event
validation finds are named by file line as well.

Why a reader of its own rather than a pandas wrapper: the line numbers. Once comment
rows are dropped, a DataFrame's row index no longer says where in the file a record
was, and that is what a user editing the file needs.
"""

import csv
import math
import pathlib
import re

import numpy as np

from ..errors import DataError

__all__ = ["read_nonmem", "NonmemData"]

#: the event columns (NONMEM's reserved data items the event schedule uses)
EVENT_COLUMNS = ("ID", "TIME", "AMT", "RATE", "II", "ADDL", "SS", "EVID", "CMT", "DV",
                 "MDV")
_INTEGER = ("EVID", "CMT", "ADDL", "SS", "MDV")
_ZERO_DEFAULT = ("AMT", "RATE", "II", "ADDL", "SS")
_MISSING = (".", "")


class NonmemData(dict):
    """The records of a NONMEM data file: a dict of columns (upper-case names ->
    float arrays, NaN where the file had ``.``; ``ID`` integers when they are), in
    file order, comment rows left out. :func:`~stanlite.pk.events` accepts it as it is (``sl.pk.events(data)``, or
    :meth:`events`).

    The event columns are complete: ``EVID`` and ``MDV`` are derived when the file
    lacks them, ``AMT, RATE, II, ADDL, SS`` are 0 where missing, ``CMT`` is 1 when the
    file has no CMT column. Other attributes:

    * ``path`` - the file; ``line`` - the file line (1-based) of each record;
    * ``covariates`` - the names of the other columns, in file order;
    * ``time_data`` - the times as in the file; ``TIME`` differs from it only after a
      reset whose time goes back (see :func:`read_nonmem`).
    """

    def __init__(self, columns, *, path, line, covariates, time_data):
        super().__init__(columns)
        self.path = path
        self.line = line
        self.covariates = tuple(covariates)
        self.time_data = time_data

    @property
    def n_records(self):
        return len(self.line)

    @property
    def record_labels(self):
        """How errors name each record: ``"<file> line <n>"``."""
        name = pathlib.Path(self.path).name
        return [f"{name} line {n}" for n in self.line]

    def events(self):
        """The :class:`~stanlite.pk.EventSchedule` of the records (``DV`` included)."""
        from .events import events
        return events(self)

    def covariate(self, name, per="record"):
        """Covariate ``name`` (case-insensitive): one value per record
        (``per="record"``), or one per subject (``per="subject"``, in order of
        appearance; the subject's value must not change, missing values aside -
        :class:`~stanlite.errors.DataError` naming the line otherwise).

        Per record, missing values stay NaN; per subject, a subject whose column is
        all missing gets NaN.
        """
        key = name.upper()
        if key not in self.covariates:
            raise DataError(f"covariate: {self.path} has no covariate column {name!r}; "
                            f"it has {', '.join(self.covariates) or 'none'}")
        x = self[key]
        if per == "record":
            return x.copy()
        if per != "subject":
            raise DataError(f"covariate: per must be 'record' or 'subject', got {per!r}")
        subject = self.subject
        out = np.full(subject.max() + 1 if len(subject) else 0, np.nan)
        for i, (j, v) in enumerate(zip(subject, x)):
            if math.isnan(v):
                continue
            if math.isnan(out[j]):
                out[j] = v
            elif v != out[j]:
                raise DataError(f"{self.record_labels[i]}, column {key}: the covariate "
                                f"changes within ID {self['ID'][i]:g} ({out[j]:g} "
                                f"before, {v:g} here); read it with per='record'")
        return out

    @property
    def subject(self):
        """0-based subject index of each record (a new subject at every change of ID,
        as NONMEM reads the file)."""
        ids = self["ID"]
        change = np.r_[True, ids[1:] != ids[:-1]] if len(ids) else np.zeros(0, bool)
        return np.cumsum(change) - 1

    @property
    def observed(self):
        """Indices of the observation records (EVID 0)."""
        return np.flatnonzero(self["EVID"] == 0)

    def to_dataframe(self):
        """The records as a pandas DataFrame (plus a ``LINE`` column)."""
        import pandas as pd
        df = pd.DataFrame(dict(self))
        df["LINE"] = self.line
        return df

    def __repr__(self):
        n_id = int(self.subject.max()) + 1 if self.n_records else 0
        cov = f", covariates {', '.join(self.covariates)}" if self.covariates else ""
        return (f"NonmemData({self.path}: {self.n_records} records, {n_id} subjects, "
                f"{len(self.observed)} observations{cov})")


# --------------------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------------------
def read_nonmem(path, *, ignore="#C", sep=None, names=None, drop=("C",)):
    """Read a NONMEM-format data file into a :class:`NonmemData`.

    The format, as NONMEM reads it:

    * fields separated by commas (when the header has one) or by white space; or
      give ``sep`` (``","``, ``"\\t"``, or ``" "`` for any white space);
    * the header row names the columns (case-insensitive; a leading ``#`` is
      allowed): it is the first line naming a ``TIME`` column, and lines before it
      are comments. With ``names=[...]`` the file has no header;
    * ``.`` (or an empty CSV field) is a missing value;
    * comment rows: a row whose first non-blank character is in ``ignore`` is
      skipped (default ``"#C"``: NONMEM's ``IGNORE=#`` and ``IGNORE=C`` - the
      commented-out rows of the usual first ``C`` column); ``"@"`` in ``ignore``
      skips every row starting with a letter or ``@`` (``IGNORE=@``);
    * columns in ``drop`` (default the comment column ``C``; ``$INPUT C=DROP``) are
      not kept; every other column must hold numbers;
    * ``ID, TIME`` and optionally ``AMT, RATE, II, ADDL, SS, EVID, CMT, DV, MDV``;
      all other columns are covariates (``NonmemData.covariates``).

    Defaults, as NM-TRAN: ``AMT, RATE, II, ADDL, SS`` missing are 0; without an EVID
    column, ``EVID`` is 1 where ``AMT > 0`` (or a steady-state constant infusion,
    ``RATE > 0, SS > 0``), else 2 where ``MDV = 1``, else 0; an observation record
    (EVID 0) with ``MDV = 1`` (its DV missing or excluded) becomes EVID 2; ``MDV`` is
    derived from EVID when absent (0 for observations, else 1); without a CMT
    column doses go to compartment 1; without an ID column there is one subject.

    Time resets. NONMEM lets TIME go back at a reset record (EVID 3 or 4). The event
    schedule keeps time non-decreasing, so the reader shifts the times from such a
    record on by a constant, making the reset happen at the previous record's time;
    ``time_data`` keeps the file's times. Everything is cleared at a reset, so for a
    model whose right-hand side does not depend on absolute time nothing changes.

    Errors (:class:`~stanlite.errors.DataError`) name the file, the line and the
    column: a field that is not a number, an integer column with a fraction, a
    missing ID or TIME, a negative TIME, TIME going back within a subject (other than
    at a reset), an EVID other than 0-4, a dose without CMT, an observation without
    DV, a row with another number of fields than the header; then
    :func:`~stanlite.pk.events` validates the records, naming the line too.

    >>> import pathlib, tempfile, stanlite as sl
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "pk.csv"
    >>> _ = p.write_text("C,ID,TIME,AMT,DV,CMT,WT\\n"
    ...                  ".,1,0,320,.,1,79.6\\n"
    ...                  "C,1,0.1,.,99,2,79.6\\n"        # commented out
    ...                  ".,1,0.25,.,2.84,2,79.6\\n")
    >>> d = sl.pk.read_nonmem(p)
    >>> d
    NonmemData(...pk.csv: 2 records, 1 subjects, 1 observations, covariates WT)
    >>> d.line.tolist(), d["EVID"].tolist(), d.covariate("wt", per="subject").tolist()
    ([2, 4], [1.0, 0.0], [79.6])
    >>> sl.pk.events(d)
    EventSchedule(2 records, 1 subject, 1 dose records)
    """
    path = pathlib.Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as e:
        raise DataError(f"read_nonmem: cannot read {path}: {e.strerror}") from None
    where = _Where(path.name)
    lines = text.splitlines()
    header, rows = _split_rows(lines, where, ignore=ignore, sep=sep, names=names)
    columns, line = _columns(header, rows, where, drop=drop)
    return _complete(columns, line, path, where)


class _Where:
    """Error messages naming the file, the line and the column."""

    def __init__(self, name):
        self.name = name

    def __call__(self, lineno, column=None):
        s = f"{self.name} line {lineno}"
        return s if column is None else f"{s}, column {column}"

    def fail(self, lineno, column, what):
        raise DataError(f"{self(lineno, column)}: {what}")


def _is_comment(s, ignore):
    c = s.lstrip()[:1]
    if not c:
        return True                       # blank line
    if c in ignore:
        return True
    return "@" in ignore and (c.isalpha() or c == "@")


def _fields(s, sep):
    if sep == ",":
        return [f.strip() for f in next(csv.reader([s]))]
    if sep in (None, " "):
        return s.split()
    return [f.strip() for f in s.split(sep)]


def _split_rows(lines, where, *, ignore, sep, names):
    """(header names, [(line number, fields)]) of the data rows."""
    start = 0
    if names is None:
        for k, s in enumerate(lines):
            probe = _fields(s.lstrip().lstrip("#"), "," if "," in s else None)
            if any(f.strip().upper() == "TIME" for f in probe):
                start = k
                break
        else:
            raise DataError(f"read_nonmem: {where.name} has no header row naming a TIME "
                            "column (give the column names with names=[...] if the file "
                            "has no header)")
        head = lines[start].lstrip().lstrip("#")
        if sep is None:
            sep = "," if "," in head else " "
        header = [h.strip().strip('"').strip("'") for h in _fields(head, sep)]
        start += 1
    else:
        header = list(names)
        if sep is None:
            first = next((s for s in lines if not _is_comment(s, ignore)), "")
            sep = "," if "," in first else " "
    rows = []
    for k in range(start, len(lines)):
        s = lines[k]
        if _is_comment(s, ignore):
            continue
        f = _fields(s, sep)
        if len(f) != len(header):
            where.fail(k + 1, None, f"expected {len(header)} fields (as the header: "
                       f"{', '.join(header)}), got {len(f)}")
        rows.append((k + 1, f))
    return header, rows


def _columns(header, rows, where, *, drop):
    """{NAME: float array} with NaN for missing, and the line numbers."""
    upper = [h.upper() for h in header]
    dropped = {d.upper() for d in drop}
    seen = set()
    for h in upper:
        if h in seen:
            raise DataError(f"read_nonmem: {where.name}: the header names column {h} "
                            "twice (column names are case-insensitive)")
        seen.add(h)
    if "TIME" not in upper:
        raise DataError(f"read_nonmem: {where.name}: no TIME column (columns: "
                        f"{', '.join(header)})")
    line = np.array([r[0] for r in rows], dtype=int)
    cols = {}
    for c, name in enumerate(upper):
        if name in dropped:
            continue
        out = np.empty(len(rows))
        for i, (lineno, f) in enumerate(rows):
            out[i] = _number(f[c], lineno, name, where)
        cols[name] = out
    return cols, line


def _number(s, lineno, column, where):
    s = s.strip().strip('"')
    if s in _MISSING:
        return math.nan
    try:
        v = float(s)
    except ValueError:
        where.fail(lineno, column, f"expected a number, got {s!r}")
    if not math.isfinite(v):
        where.fail(lineno, column, f"expected a finite number, got {s!r}")
    return v


def _complete(cols, line, path, where):
    """Defaults, derived EVID/MDV, the checks that need the line numbers, resets."""
    n = len(line)
    if n == 0:
        raise DataError(f"read_nonmem: {where.name} has no data records")
    covariates = [k for k in cols if k not in EVENT_COLUMNS]
    for k in _INTEGER:
        if k in cols:
            bad = np.flatnonzero(~np.isnan(cols[k]) & (cols[k] != np.round(cols[k])))
            if bad.size:
                i = bad[0]
                where.fail(line[i], k, f"expected an integer, got {cols[k][i]:g}")
    for k in ("ID", "TIME"):
        if k in cols:
            bad = np.flatnonzero(np.isnan(cols[k]))
            if bad.size:
                where.fail(line[bad[0]], k, "missing ('.'); every record needs one")
    if "ID" not in cols:
        cols["ID"] = np.ones(n)
    if np.all(cols["ID"] == np.round(cols["ID"])):
        cols["ID"] = cols["ID"].astype(np.int64)      # as NONMEM's: "ID 3", not "3.0"
    for k in _ZERO_DEFAULT:
        cols[k] = np.nan_to_num(cols[k]) if k in cols else np.zeros(n)
    mdv = cols.get("MDV")
    _evid(cols, mdv, line, where)
    _cmt(cols, line, where)
    _dv(cols, line, where)
    cols["MDV"] = np.where(cols["EVID"] == 0, 0.0, 1.0)
    time_data = cols["TIME"].copy()
    cols["TIME"] = _times(cols, line, where)
    order = ["ID", "TIME", "EVID", "AMT", "CMT", "RATE", "II", "ADDL", "SS", "DV", "MDV"]
    out = {k: cols[k] for k in order if k in cols}
    out.update({k: cols[k] for k in covariates})
    return NonmemData(out, path=str(path), line=line, covariates=covariates,
                      time_data=time_data)


def _evid(cols, mdv, line, where):
    amt, rate, ss = cols["AMT"], cols["RATE"], cols["SS"]
    if "EVID" in cols:
        ev = cols["EVID"]
        bad = np.flatnonzero(np.isnan(ev))
        if bad.size:
            where.fail(line[bad[0]], "EVID", "missing ('.'); give 0 (observation), 1 "
                       "(dose), 2 (other), 3 (reset) or 4 (reset and dose)")
        bad = np.flatnonzero(~np.isin(ev, (0, 1, 2, 3, 4)))
        if bad.size:
            i = bad[0]
            hint = (" (EVID 101 is nlmixr's code for a dose into the depot: use 1 with "
                    "CMT 1)" if ev[i] > 4 else "")
            where.fail(line[i], "EVID", f"expected 0 (observation), 1 (dose), 2 (other),"
                       f" 3 (reset) or 4 (reset and dose), got {ev[i]:g}{hint}")
        ev = ev.copy()
    else:
        dosed = (amt > 0) | ((rate > 0) & (ss > 0))
        ev = np.where(dosed, 1.0, 0.0)
    if mdv is not None:
        m = np.nan_to_num(mdv)
        bad = np.flatnonzero((m != 0) & (m != 1))
        if bad.size:
            where.fail(line[bad[0]], "MDV", f"expected 0 or 1, got {m[bad[0]]:g}")
        ev = np.where((ev == 0) & (m == 1), 2.0, ev)
    cols["EVID"] = ev


def _cmt(cols, line, where):
    dose = np.isin(cols["EVID"], (1, 4))
    if "CMT" not in cols:
        cols["CMT"] = np.ones(len(line))
        return
    cmt = cols["CMT"]
    bad = np.flatnonzero(dose & np.isnan(cmt))
    if bad.size:
        i = bad[0]
        where.fail(line[i], "CMT", f"missing ('.'), but the record is a dose (EVID "
                   f"{cols['EVID'][i]:g}, AMT {cols['AMT'][i]:g}): give the compartment")
    cols["CMT"] = np.where(np.isnan(cmt), np.where(dose, 1.0, 0.0), cmt)
    # a non-dose record's compartment is not used by the solvers: keep it >= 0
    cols["CMT"] = np.where(~dose & (cols["CMT"] < 0), 0.0, cols["CMT"])


def _dv(cols, line, where):
    if "DV" not in cols:
        return
    bad = np.flatnonzero((cols["EVID"] == 0) & np.isnan(cols["DV"]))
    if bad.size:
        where.fail(line[bad[0]], "DV", "missing ('.') on an observation record (EVID 0, "
                   "MDV 0): give the value, or MDV = 1 to leave the record out")


def _times(cols, line, where):
    """Check the times and shift them at resets whose time goes back."""
    t, ids, ev = cols["TIME"], cols["ID"], cols["EVID"]
    bad = np.flatnonzero(t < 0)
    if bad.size:
        where.fail(line[bad[0]], "TIME", f"times must be >= 0, got {t[bad[0]]:g}")
    out = t.copy()
    offset = 0.0
    for i in range(1, len(t)):
        if ids[i] != ids[i - 1]:
            offset = 0.0
            continue
        if t[i] + offset >= out[i - 1]:
            out[i] = t[i] + offset
        elif ev[i] in (3, 4):
            offset = out[i - 1] - t[i]
            out[i] = out[i - 1]
        else:
            where.fail(line[i], "TIME", f"{t[i]:g} is before the time of the previous "
                       f"record of ID {ids[i]:g} ({t[i - 1]:g}, line {line[i - 1]}); "
                       "within a subject time may go back only at a reset (EVID 3 or "
                       "4); sort the records by ID, then TIME")
        # equal times keep the file's order
    return out


def relabel(error, labels):
    """``error`` (a DataError of :func:`~stanlite.pk.events`) with its ``record <k>``
    references replaced by ``labels[k - 1]`` (e.g. ``theo.csv line 14``)."""
    def sub(m):
        k = int(m.group(1))
        return labels[k - 1] if 1 <= k <= len(labels) else m.group(0)
    return DataError(re.sub(r"\brecord (\d+)", sub, str(error)))
