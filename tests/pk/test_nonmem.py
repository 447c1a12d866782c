"""sl.pk.read_nonmem: the Theophylline data written out as NONMEM files (comma and white
space, with and without EVID/MDV, comment rows) read back into the same event schedule
and the same amounts as the zoo model's own schedule; NONMEM's defaults; resets whose
time goes back; covariates per record and per subject; and one bad file per error,
each message naming the file line and the column."""

import numpy as np
import pytest

import stanlite as sl
import stanlite.models as zoo
from stanlite.errors import DataError
from stanlite.models import theophylline as th


@pytest.fixture(scope="module")
def theo():
    return zoo.default_data("theophylline")


def theo_rows(d, evid=True):
    """One dose row (mg/kg into the gut) then the sorted observations per subject;
    every third subject's first observation is preceded by a commented-out row."""
    s, t, c = np.asarray(d["subject"]), np.asarray(d["time"]), np.asarray(d["conc"])
    rows = []
    for j in range(1, d["J"] + 1):
        wt, dose = d["weight"][j - 1], d["dose"][j - 1]
        rows.append((".", j, 0.0, dose, ".", 1, 1, 1, wt))
        for k, i in enumerate(np.flatnonzero(s == j)[np.argsort(t[s == j])]):
            if k == 1 and j % 3 == 0:
                rows.append(("C", j, -1.0, ".", 99.0, 2, 0, 0, wt))   # commented out
            rows.append((".", j, t[i], ".", c[i], 2, 0, 0, wt))
    head = ["C", "ID", "TIME", "AMT", "DV", "CMT", "EVID", "MDV", "WT"]
    if not evid:
        head = head[:6] + head[8:]
        rows = [r[:6] + r[8:] for r in rows]
    return head, rows


def write(path, head, rows, sep=","):
    lines = [sep.join(head)] + [sep.join(str(v) for v in r) for r in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_theophylline_round_trip_through_events_and_onecpt(tmp_path, theo):
    head, rows = theo_rows(theo)
    d = sl.pk.read_nonmem(write(tmp_path / "theo.csv", head, rows))
    assert d.n_records == 12 + 132 and d.covariates == ("WT",)
    ev = sl.pk.events(d)
    ref, rec = th.Theophylline.schedule(theo["subject"], theo["time"], theo["dose"])
    for k in ("time", "evid", "amt", "cmt", "rate", "ii", "addl", "ss", "subject"):
        np.testing.assert_array_equal(getattr(ev, k), getattr(ref, k), err_msg=k)
    np.testing.assert_array_equal(ev.ids, ref.ids)
    np.testing.assert_array_equal(ev.dv[rec], theo["conc"])       # DV picked up
    np.testing.assert_array_equal(d.observed, ref.observed)
    cl, ka, ke = np.linspace(0.03, 0.05, 12), np.linspace(1, 2, 12), 0.09
    np.testing.assert_array_equal(sl.pk.onecpt(ev, CL=cl, V=cl / ke, ka=ka),
                                  sl.pk.onecpt(ref, CL=cl, V=cl / ke, ka=ka))
    np.testing.assert_array_equal(d.covariate("wt", per="subject"), theo["weight"])
    assert d.covariate("WT").shape == (144,)
    # file lines: the header is line 1, a commented row is skipped
    assert d.line[0] == 2 and d.line[-1] == 2 + 144 + 4 - 1
    assert d.events().n_records == 144
    assert list(d.to_dataframe().columns)[-1] == "LINE"


def test_whitespace_file_without_evid_mdv_gets_nonmem_defaults(tmp_path, theo):
    head, rows = theo_rows(theo, evid=False)
    p = write(tmp_path / "theo.dat", ["#" + head[0]] + head[1:], rows, sep="  ")
    text = "; a comment line before the header\n" + p.read_text()
    p.write_text(text.replace("\n.", "\n   ."))       # indented rows
    d = sl.pk.read_nonmem(p, ignore="#C;")
    ref, _ = th.Theophylline.schedule(theo["subject"], theo["time"], theo["dose"])
    np.testing.assert_array_equal(d["EVID"], ref.evid)      # 1 where AMT > 0
    np.testing.assert_array_equal(d["MDV"], ref.evid != 0)
    np.testing.assert_array_equal(sl.pk.events(d).time, ref.time)


def test_defaults_mdv_missing_values_and_no_header(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("ID,TIME,AMT,RATE,DV,MDV\n"
                 "1,0,100,.,.,1\n"
                 "1,1,.,.,5.5,0\n"
                 "1,2,.,.,.,1\n"             # MDV 1, no AMT: other-type (EVID 2)
                 "2,0,0,10,.,1\n")           # no AMT, RATE: EVID 2 (no SS)
    d = sl.pk.read_nonmem(p)
    np.testing.assert_array_equal(d["EVID"], [1, 0, 2, 2])
    np.testing.assert_array_equal(d["AMT"], [100, 0, 0, 0])
    np.testing.assert_array_equal(d["CMT"], [1, 1, 1, 1])        # no CMT column
    assert np.isnan(d["DV"][0]) and d["DV"][1] == 5.5
    # an observation record flagged MDV = 1 is not observed
    p.write_text("ID TIME EVID DV MDV\n1 0 0 3.0 1\n1 1 0 4.0 0\n")
    np.testing.assert_array_equal(sl.pk.read_nonmem(p)["EVID"], [2, 0])
    # no header: the names are given
    p.write_text("1,0,100\n1,2,.\n")
    d = sl.pk.read_nonmem(p, names=["id", "time", "amt"])
    np.testing.assert_array_equal(d["EVID"], [1, 0])
    # IGNORE=@: every row starting with a letter
    p.write_text("ID TIME AMT\nX 1 0 100\n1 0 100\nabc 1 1 .\n1 2 .\n")
    assert sl.pk.read_nonmem(p, ignore="@").line.tolist() == [3, 5]


def test_a_reset_may_send_time_back(tmp_path):
    p = tmp_path / "reset.csv"
    p.write_text("ID,TIME,AMT,EVID,CMT,DV\n"
                 "1,0,100,1,1,.\n1,4,.,0,2,3\n"
                 "1,0,100,4,1,.\n"              # reset and dose, the clock restarts
                 "1,2,.,0,2,5\n")
    d = sl.pk.read_nonmem(p)
    np.testing.assert_array_equal(d.time_data, [0, 4, 0, 2])
    np.testing.assert_array_equal(d["TIME"], [0, 4, 4, 6])
    A = sl.pk.onecpt(sl.pk.events(d), CL=5.0, V=50.0, ka=1.2)
    # after the reset, the same as a fresh dose 2 h earlier
    ev = sl.pk.events(time=[0.0, 2.0], amt=[100.0, 0.0], cmt=[1, 2])
    np.testing.assert_allclose(A[3], sl.pk.onecpt(ev, CL=5.0, V=50.0, ka=1.2)[1],
                               rtol=1e-13)


HEAD = "ID,TIME,AMT,EVID,CMT,DV,WT\n"


@pytest.mark.parametrize("body, message", [
    ("1,0,abc,1,1,.,70\n", r"bad.csv line 2, column AMT: expected a number, got 'abc'"),
    ("1,0,100,1,1,.,70\n1,-1,.,0,2,3,70\n",
     r"line 3, column TIME: times must be >= 0, got -1"),
    ("1,0,100,1,1,.,70\n1,4,.,0,2,3,70\n1,2,.,0,2,3,70\n",
     r"line 4, column TIME: 2 is before the time of the previous record of ID 1 \(4, "
     r"line 3\)"),
    ("1,0,100,1,.,.,70\n", r"line 2, column CMT: missing \('.'\), but the record is a "
     "dose"),
    ("1,0,100,1,1,.,70\n1,1,.,0,2,.,70\n", r"line 3, column DV: missing \('.'\) on an "
     "observation record"),
    ("1,0,100,101,1,.,70\n", r"line 2, column EVID: expected 0 .* got 101 \(EVID 101 "
     "is nlmixr"),
    ("1,0,100,1,1.5,.,70\n", r"line 2, column CMT: expected an integer, got 1.5"),
    ("1,.,100,1,1,.,70\n", r"line 2, column TIME: missing"),
    ("1,0,100,1,1,.\n", r"line 2: expected 7 fields \(as the header: ID, TIME, AMT, EVID,"
     r" CMT, DV, WT\), got 6"),
    ("1,0,100,1,1,.,M\n", r"line 2, column WT: expected a number, got 'M'"),
    # found by the event validation, still named by line
    ("1,0,100,1,1,.,70\n1,1,-5,1,1,.,70\n", r"events: bad.csv line 3 \(subject 1\): amt "
     "= -5: a dose amount must be >= 0"),
    ("1,0,100,1,1,.,70\n2,0,100,1,1,.,70\n1,1,.,0,2,3,70\n",
     r"events: bad.csv line 4: ID = 1 appears again"),
    ("1,0,100,1,1,.,70\n1,1,.,0,2,3,70\n1,2,5,0,2,3,70\n",
     r"bad.csv line 4 \(subject 1\): amt = 5: a record with evid = 0 cannot carry"),
])
def test_errors_name_the_line_and_the_column(tmp_path, body, message):
    p = tmp_path / "bad.csv"
    p.write_text(HEAD + body)
    with pytest.raises(DataError, match=message):
        sl.pk.events(sl.pk.read_nonmem(p))


def test_file_level_errors(tmp_path):
    p = tmp_path / "f.csv"
    p.write_text("ID,AMT\n1,100\n")
    with pytest.raises(DataError, match="no header row naming a TIME column"):
        sl.pk.read_nonmem(p)
    p.write_text("ID,TIME,time\n1,0,0\n")
    with pytest.raises(DataError, match="names column TIME twice"):
        sl.pk.read_nonmem(p)
    p.write_text("ID,TIME\n# nothing\n")
    with pytest.raises(DataError, match="has no data records"):
        sl.pk.read_nonmem(p)
    with pytest.raises(DataError, match="cannot read"):
        sl.pk.read_nonmem(tmp_path / "missing.csv")
    p.write_text("ID,TIME,WT\n1,0,70\n1,1,72\n")
    d = sl.pk.read_nonmem(p)
    with pytest.raises(DataError, match=r"f.csv line 3, column WT: the covariate changes"
                       " within ID 1"):
        d.covariate("WT", per="subject")
    with pytest.raises(DataError, match="no covariate column 'AGE'; it has WT"):
        d.covariate("AGE")
