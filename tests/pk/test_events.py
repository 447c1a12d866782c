"""Event schedules: construction from arrays, dicts and DataFrames (case-insensitive
NONMEM columns, defaults, missing values), traced fields, and every validation error
with its message naming the record and the field."""

import numpy as np
import pandas as pd
import pytest

import stanlite as sl
from stanlite.errors import DataError


def base(**over):
    d = dict(time=[0.0, 1.0, 2.0, 12.0], evid=[1, 0, 0, 1], amt=[100.0, 0, 0, 50.0],
             cmt=[1, 2, 2, 1], rate=[0.0, 0, 0, 0], ii=[12.0, 0, 0, 0],
             addl=[1, 0, 0, 0], ss=[0, 0, 0, 0])
    d.update(over)
    return d


def test_from_arrays_and_fields():
    ev = sl.pk.events(**base())
    assert len(ev) == ev.n_records == 4 and ev.n_subjects == 1
    np.testing.assert_array_equal(ev.observed, [1, 2])
    np.testing.assert_array_equal(ev.is_dose, [True, False, False, True])
    assert ev.evid.dtype.kind == "i" and ev.cmt.dtype.kind == "i"
    assert ev.time.dtype == np.float64
    assert repr(ev) == "EventSchedule(4 records, 1 subject, 2 dose records)"


def test_from_dataframe_case_insensitive_with_ids_and_dv():
    df = pd.DataFrame({"ID": [7, 7, 7, 3, 3], "Time": [0, 1, 4, 0, 2],
                       "AMT": [100, 0, 0, 80, 0], "Cmt": [1, 2, 2, 1, 2],
                       "dv": [np.nan, 5.0, 3.0, np.nan, 4.0], "WT": [70] * 5})
    ev = sl.pk.events(df)
    np.testing.assert_array_equal(ev.evid, [1, 0, 0, 1, 0])       # from AMT > 0
    np.testing.assert_array_equal(ev.subject, [0, 0, 0, 1, 1])
    np.testing.assert_array_equal(ev.ids, [7, 3])
    np.testing.assert_array_equal(ev.start, [0, 3])
    np.testing.assert_array_equal(ev.stop, [3, 5])
    np.testing.assert_allclose(ev.dv[1:3], [5.0, 3.0])
    out = ev.to_dataframe()
    assert list(out.columns)[:3] == ["ID", "TIME", "EVID"]
    np.testing.assert_array_equal(out["AMT"], [100, 0, 0, 80, 0])


def test_from_dict_defaults_mdv_and_missing_values():
    ev = sl.pk.events({"TIME": [0, 1, 2], "AMT": [10, np.nan, 0], "MDV": [1, 1, 0],
                       "RATE": [np.nan, np.nan, np.nan]})
    np.testing.assert_array_equal(ev.evid, [1, 2, 0])            # MDV = 1: other
    np.testing.assert_array_equal(ev.cmt, [1, 1, 1])              # default cmt
    np.testing.assert_array_equal(ev.amt, [10, 0, 0])             # '.' is 0
    np.testing.assert_array_equal(ev.rate, [0, 0, 0])
    # keywords override the data
    ev = sl.pk.events({"time": [0, 1]}, amt=[5, 0])
    np.testing.assert_array_equal(ev.evid, [1, 0])


def test_traced_fields_and_replace():
    ev = sl.pk.events(**base())

    def f(x):
        e = ev.replace(amt=sl.stack([x[0], 0.0, 0.0, 50.0]),
                       time=[0.0, x[1], 2.0, 12.0])
        assert e.traced == ("time", "amt")
        return sl.sum(e.amt) + sl.sum(e.time)
    np.testing.assert_allclose(sl.grad(f)(np.array([100.0, 1.0])), [1.0, 1.0])
    assert ev.replace(ii=[6.0, 0, 0, 0]).ii[0] == 6.0
    with pytest.raises(DataError, match="only time, amt, rate, ii can be replaced"):
        ev.replace(cmt=[1, 1, 1, 1])
    with pytest.raises(DataError, match="one value per record"):
        ev.replace(amt=[1.0, 2.0])
    # a replaced value is validated like the data
    with pytest.raises(DataError, match=r"record 1 \(subject 1\): amt = -1"):
        ev.replace(amt=[-1.0, 0, 0, 50.0])
    with pytest.raises(DataError, match="integer data field"):
        sl.pk.events(time=[0.0], evid=sl.Var(np.array([1.0])))


@pytest.mark.parametrize("over, message", [
    (dict(time=[0.0, -1.0, 2.0, 12.0]), r"record 2 \(subject 1\): time = -1: times must be >= 0"),
    (dict(time=[0.0, 3.0, 2.0, 12.0]), r"record 3 \(subject 1\): time = 2: the records are not sorted by time"),
    (dict(time=[0.0, np.inf, 2.0, 12.0]), r"record 2 .*time = inf: must be finite"),
    (dict(evid=[1, 0, 5, 1]), r"record 3 .*evid = 5: must be 0 \(observation\)"),
    (dict(evid=[1, 0, 0.5, 1]), r"record 3 .*evid = 0.5: must be an integer"),
    (dict(cmt=[0, 2, 2, 1]), r"record 1 .*cmt = 0: a dose needs a compartment >= 1"),
    (dict(cmt=[1, -2, 2, 1]), r"record 2 .*cmt = -2: must be >= 0"),
    (dict(amt=[-5.0, 0, 0, 50]), r"record 1 .*amt = -5: a dose amount must be >= 0"),
    (dict(rate=[-3.0, 0, 0, 0]), r"record 1 .*rate = -3: must be >= 0"),
    (dict(ii=[-12.0, 0, 0, 0]), r"record 1 .*ii = -12: the interdose interval must be >= 0"),
    (dict(addl=[-1, 0, 0, 0]), r"record 1 .*addl = -1: must be >= 0"),
    (dict(addl=[0, 0, 0, 3]), r"record 4 .*addl = 3: additional doses need an interdose interval ii > 0 \(addl without ii\)"),
    (dict(ss=[3, 0, 0, 0]), r"record 1 .*ss = 3: must be 0, 1 or 2"),
    (dict(ss=[0, 0, 0, 1]), r"record 4 .*ss = 1: a steady-state dose needs an interdose interval ii > 0 \(ss without ii"),
    (dict(ss=[0, 1, 0, 0]), r"record 2 .*ss = 1: only a dose record \(evid 1 or 4\) can have ss"),
    (dict(addl=[1, 2, 0, 0]), r"record 2 .*addl = 2: only a dose record"),
    (dict(amt=[100.0, 3.0, 0, 50]), r"record 2 .*amt = 3: a record with evid = 0 cannot carry dosing information"),
    (dict(rate=[5.0, 0, 0, 0], amt=[0.0, 0, 0, 50], ss=[1, 0, 0, 0]), r"record 1 .*ii = 12: a steady-state constant infusion"),
    (dict(amt=[0.0, 0, 0, 50], ss=[1, 0, 0, 0]), r"record 1 .*amt = 0: a steady-state bolus needs amt > 0"),
])
def test_validation_errors(over, message):
    with pytest.raises(DataError, match=message):
        sl.pk.events(**base(**over))


def test_subject_errors_and_shapes():
    with pytest.raises(DataError, match=r"record 4: ID = 1 appears again"):
        sl.pk.events(time=[0, 1, 0, 2], id=[1, 1, 2, 1])
    # times restart per subject: not an error
    ev = sl.pk.events(time=[0, 5, 0, 2], id=[1, 1, 2, 2])
    assert ev.n_subjects == 2
    with pytest.raises(DataError, match=r"record 4 \(subject b\): time = 1: the records are not sorted by time \(record 3 has time = 3\)"):
        sl.pk.events(time=[0, 1, 3, 1], id=["a", "b", "b", "b"])
    with pytest.raises(DataError, match="a TIME column"):
        sl.pk.events({"amt": [1]})
    with pytest.raises(DataError, match="one value per record"):
        sl.pk.events(time=[0, 1], amt=[1, 2, 3])
    with pytest.raises(DataError, match="no records"):
        sl.pk.events(time=[])
    with pytest.raises(DataError, match="DataFrame or a dict"):
        sl.pk.events([1, 2])
    with pytest.raises(DataError, match="several columns named TIME"):
        sl.pk.events({"time": [0], "TIME": [0]})


def test_unknown_compartment_is_reported_by_the_solver():
    ev = sl.pk.events(time=[0.0, 1.0], evid=[1, 0], amt=[10.0, 0], cmt=[3, 2])
    with pytest.raises(DataError, match=r"onecpt: record 1 \(subject 1\): cmt = 3: unknown "
                                        r"compartment \(the model has 2: 1..2\)"):
        sl.pk.onecpt(ev, 1.0, 10.0, 1.0)
    assert sl.pk.twocpt(ev, 1.0, 1.0, 10.0, 10.0, 1.0).shape == (2, 3)
