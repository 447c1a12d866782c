"""The bad-input corpus of issue 19: generated tables of bad data and bad arguments.

Every case feeds one bad input to one of six models - (a) vectors (eight schools),
(b) a matrix (regression), (c) int arrays (Poisson counts in groups), (d) simplex and
Cholesky-correlation parameters sized by data, (e) data bounds, (f) a 2-D int array,
a size computed from data and a parameter bounded by another:

* a data field mutated: wrong shape, wrong type, a boolean, a masked array, a
  missing value (None, pd.NA, pd.NaT), NaN/inf, out of bounds, a float for an int,
  an int beyond int64, a bad, bool or huge size, a missing or misspelt field,
  inverted data bounds; also through Stan JSON text (``Model.from_json``);
* one bad argument of ``sample``/``variational``/``optimize``/``laplace``/
  ``pathfinder``, an unknown keyword argument, or an init outside the support, of
  the wrong shape or with an unknown name;

and asserts a *clear* error: a ``StanliteError`` (or, for an unknown keyword
argument, Python's ``TypeError``) whose message names the field or argument, raised
(for arguments) before the model is evaluated. A bad input must never be accepted
silently (a wrapped int64, a masked value read as data), crash or hang. Inputs that
are fine (``2.0`` for an int, numpy ints for ``draws``, a pandas Series) are in the
accepted table, which checks that the model or the fit got exactly what was meant;
a few inputs may be either refused clearly or read exactly (``_either``).

The tables are plain lists built at import (deterministic, no random generation),
so every case has a readable id ``class-model-field-mutation`` and the corpus can be
counted. Run as a script (``python tests/test_bad_input_corpus.py [out.md
[notes.md]]``) it classifies every case (clear / accepted / unclear / late / silent /
wrong / rejected / broken / crash) and writes a summary and the failures grouped by
who fixes them.
"""

import collections
import inspect
import json
import math
import re
import signal
import sys
import time
import warnings
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import stanlite as sl

# --------------------------------------------------------------------------------------
# the models
# --------------------------------------------------------------------------------------
EightSchools = sl.models.model_class("eight_schools_noncentered")   # (a) vectors


class Regression(sl.Model):
    """(b) A matrix: y ~ normal(alpha + X beta, sigma)."""

    N = sl.data.int(lower=0)
    K = sl.data.int(lower=1)
    X = sl.data.matrix("N", "K")
    y = sl.data.vector("N")

    alpha = sl.param.real()
    beta = sl.param.vector("K")
    sigma = sl.param.real(lower=0)

    def log_prob(self, alpha, beta, sigma):
        lp = sl.normal_lpdf(alpha, 0, 5) + sl.normal_lpdf(beta, 0, 5)
        lp = lp + sl.normal_lpdf(sigma, 0, 2)
        return lp + sl.normal_lpdf(self.y, alpha + self.X @ beta, sigma)


class PoissonGroups(sl.Model):
    """(c) Int arrays: counts ``y`` in groups ``g`` (1-based), a covariate ``period``."""

    N = sl.data.int(lower=0)
    J = sl.data.int(lower=1)
    y = sl.data.array("N", dtype="int", lower=0)
    g = sl.data.array("N", dtype="int", lower=1, upper="J")
    period = sl.data.array("N", dtype="int")            # unbounded: no check hides a wrap

    mu = sl.param.real()
    sigma_g = sl.param.real(lower=0)
    eta = sl.param.vector("J")

    def log_prob(self, mu, sigma_g, eta):
        lp = sl.normal_lpdf(mu, 0, 3) + sl.normal_lpdf(sigma_g, 0, 1)
        lp = lp + sl.normal_lpdf(eta, 0, 1)
        rate = mu + sigma_g * eta[self.g - 1] + 0.01 * self.period
        return lp + sl.poisson_log_lpmf(self.y, rate)


class MixtureCorr(sl.Model):
    """(d) A K-component mixture (simplex weights) and a D-variate normal with a
    Cholesky-factored correlation; K and D are data."""

    N = sl.data.int(lower=0)
    K = sl.data.int(lower=1)
    D = sl.data.int(lower=1)
    y = sl.data.vector("N")
    z = sl.data.matrix("N", "D")

    weights = sl.param.simplex("K")
    locs = sl.param.ordered("K")
    scale = sl.param.real(lower=0)
    L_corr = sl.param.cholesky_factor_corr("D")
    tau = sl.param.vector("D", lower=0)

    def log_prob(self, weights, locs, scale, L_corr, tau):
        lp = sl.normal_lpdf(locs, 0, 5) + sl.normal_lpdf(scale, 0, 2)
        lp = lp + sl.normal_lpdf(tau, 0, 2) + sl.lkj_corr_cholesky_lpdf(L_corr, 2.0)
        log_w = sl.log(weights)
        for n in range(self.N):
            u = (self.y[n] - locs) / scale
            lp = lp + sl.log_sum_exp(log_w - 0.5 * u * u - sl.log(scale))
        L = tau[:, None] * L_corr
        for n in range(self.N):
            lp = lp + sl.multi_normal_cholesky_lpdf(self.z[n], np.zeros(self.D), L)
        return lp


class Bounded(sl.Model):
    """(e) Data bounds: ``y`` and ``mu`` in [L, U]; ``theta`` above the data vector
    ``lo`` (whose length M must equal J)."""

    N = sl.data.int(lower=0)
    L = sl.data.real()
    U = sl.data.real()
    y = sl.data.vector("N", lower="L", upper="U")
    J = sl.data.int(lower=1)
    M = sl.data.int(lower=1)
    lo = sl.data.vector("M")

    mu = sl.param.real(lower="L", upper="U")
    sigma = sl.param.real(lower=0)
    theta = sl.param.vector("J", lower="lo")

    def log_prob(self, mu, sigma, theta):
        lp = sl.normal_lpdf(sigma, 0, 2) + sl.normal_lpdf(theta, 0, 5)
        return lp + sl.normal_lpdf(self.y, mu, sigma)


class Misc(sl.Model):
    """(f) A 2-D int array, a bounded real and a bounded int, a size computed by a
    function of data (``N - 1``), a parameter bounded by another (``share``)."""

    N = sl.data.int(lower=1)
    counts = sl.data.array("N", 2, dtype="int", lower=0)
    p = sl.data.real(lower=0, upper=1)
    cut = sl.data.int(lower=0, upper="N")
    diffs = sl.data.vector(lambda N: N - 1)

    lam = sl.param.real(lower=0)
    nu = sl.param.vector(lambda N: N - 1)
    share = sl.param.real(lower=0, upper=lambda lam: 1 + lam)

    def log_prob(self, lam, nu, share):
        lp = sl.normal_lpdf(nu, self.diffs, 1) + sl.exponential_lpdf(lam, 1)
        lp = lp + sl.normal_lpdf(share, 0.5, 1)
        return lp + sl.poisson_lpmf(self.counts, lam)


def _good_eight():
    return {"J": 8, "y": np.array([28., 8, -3, 7, -1, 1, 18, 12]),
            "sigma": np.array([15., 10, 16, 11, 9, 11, 10, 18])}


def _good_reg():
    X = np.array([[0.5, -1.2], [1.1, 0.3], [-0.7, 0.8], [0.2, 1.5], [1.9, -0.4],
                  [-1.3, -0.9]])
    return {"N": 6, "K": 2, "X": X, "y": 1.0 + X @ np.array([0.7, -0.3])
            + np.array([0.1, -0.2, 0.05, 0.3, -0.1, 0.2])}


def _good_pois():
    return {"N": 6, "J": 3, "y": np.array([0, 3, 1, 4, 2, 5]),
            "g": np.array([1, 2, 3, 1, 2, 3]), "period": np.array([1, 2, 3, 4, 5, 6])}


def _good_mix():
    z = np.array([[0.3, -0.2, 0.5], [1.0, 0.4, 0.9], [-0.6, -0.8, -0.1],
                  [0.2, 0.1, -0.3], [-1.1, -0.5, -0.9]])
    return {"N": 5, "K": 2, "D": 3, "y": np.array([-1.2, -0.8, 1.1, 1.4, 0.9]), "z": z}


def _good_bounds():
    return {"N": 4, "L": 0.0, "U": 10.0, "y": np.array([1.5, 2.0, 7.5, 9.0]), "J": 3,
            "M": 3, "lo": np.array([0.0, 1.0, -2.0])}


def _good_misc():
    return {"N": 4, "counts": np.array([[0, 1], [2, 3], [4, 5], [1, 1]]), "p": 0.25,
            "cut": 2, "diffs": np.array([0.5, -0.5, 1.5])}


@dataclass(frozen=True)
class Spec:
    cls: type
    good: object            # () -> a fresh dict of good data
    fields: dict            # field -> kind: size, int, real, vector, matrix, ints
    bounds: dict            # field -> (lower, upper) numbers (data bounds resolved)


MODELS = {
    "eight": Spec(EightSchools, _good_eight,
                  {"J": "size", "y": "vector", "sigma": "vector"},
                  {"J": (0, None), "sigma": (0, None)}),
    "reg": Spec(Regression, _good_reg,
                {"N": "size", "K": "size", "X": "matrix", "y": "vector"},
                {"N": (0, None), "K": (1, None)}),
    "pois": Spec(PoissonGroups, _good_pois,
                 {"N": "size", "J": "size", "y": "ints", "g": "ints", "period": "ints"},
                 {"N": (0, None), "J": (1, None), "y": (0, None), "g": (1, 3)}),
    "mix": Spec(MixtureCorr, _good_mix,
                {"N": "size", "K": "size", "D": "size", "y": "vector", "z": "matrix"},
                {"N": (0, None), "K": (1, None), "D": (1, None)}),
    "bounds": Spec(Bounded, _good_bounds,
                   {"N": "size", "L": "real", "U": "real", "y": "vector", "J": "size",
                    "M": "size", "lo": "vector"},
                   {"N": (0, None), "y": (0.0, 10.0), "J": (1, None), "M": (1, None)}),
    "misc": Spec(Misc, _good_misc,
                 {"N": "size", "counts": "ints", "p": "real", "cut": "int",
                  "diffs": "vector"},
                 {"N": (1, None), "counts": (0, None), "p": (0, 1), "cut": (0, 4)}),
}

_BUILT = {}


def built(name):
    """The model with its good data, built once (its compiled gradient is reused)."""
    if name not in _BUILT:
        spec = MODELS[name]
        _BUILT[name] = spec.cls(**spec.good())
    return _BUILT[name]


# --------------------------------------------------------------------------------------
# cases and their classification
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    id: str
    group: str              # who fixes it: "DATA", "ARGUMENTS/INIT" or "OTHER"
    mclass: str             # the mutation class (shape, type, bool, ...)
    model: str
    names: tuple            # the error must name one of these
    run: object             # () -> result; the call under test
    check: object = None    # result -> None (asserts); a bad case may instead be
    #                         accepted if this passes (an alias, say); an accepted case
    #                         must pass it
    typeerror_ok: bool = False   # an unknown keyword argument: Python's TypeError
    forbid: tuple = ()      # substrings the message must not contain (a wrapped value)
    evaluated: object = None  # () -> did the model's log density run? (an argument
    #                           error must come before anything runs)

    def __repr__(self):
        return self.id


class _Hang(BaseException):
    """A case ran past its time limit (BaseException: no ``except Exception`` eats it)."""


CASE_SECONDS = 20.0


def _on_alarm(signum, frame):
    raise _Hang(f"no result after {CASE_SECONDS:g} s")


def _run(case):
    """``(result, exception)`` of the case under a time limit, warnings ignored."""
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                return case.run(), None
            except BaseException as e:      # noqa: BLE001 - classified by the caller
                if isinstance(e, KeyboardInterrupt):
                    raise
                return None, e
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def names_in(message, names):
    """Does ``message`` name one of ``names``? A name of one or two characters must be
    quoted or followed by ``=``/``:`` (``'J'``, ``J=True``); a longer one must appear
    as a word."""
    for n in names:
        e = re.escape(n)
        if len(n) <= 2:
            pat = rf"(['\"`]){e}\1|(?<![\w.]){e}\s*[=:]|(?<![\w.]){e}\s+\("
        else:
            pat = rf"(?<![\w]){e}(?![\w])"
        if re.search(pat, message):
            return True
    return False


def classify(case, expect_error):
    """``(outcome, detail)``; outcome is one of ``clear`` (the expected clear error),
    ``accepted`` (worked and checked), ``unclear`` (an error that is not a stanlite
    error or does not name the field/argument), ``silent`` (a bad input accepted),
    ``wrong`` (a good input gave a wrong result), ``rejected`` (a good input refused),
    ``late`` (a clear argument error, but raised after the model was evaluated),
    ``broken`` (accepted, but using the result raised), ``crash`` (a hang, MemoryError,
    RecursionError or other non-error exception)."""
    result, exc = _run(case)
    if exc is None:
        if case.check is None:
            return "silent", f"no error (accepted silently): {_short(result)}"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                case.check(result)
        except AssertionError as e:
            return ("wrong" if not expect_error else "silent",
                    f"no error, and the result is wrong: {e}"[:300])
        except Exception as e:                  # noqa: BLE001 - reported as it is
            return "broken", (f"the result cannot be used: {type(e).__name__}: {e}")[:300]
        return "accepted", "accepted and checked"
    msg = str(exc)
    desc = f"{type(exc).__name__}: {msg}"
    if isinstance(exc, (_Hang, MemoryError, RecursionError, SystemError)) or \
            not isinstance(exc, Exception):
        return "crash", desc
    if not expect_error:
        return "rejected", desc
    ok_type = isinstance(exc, sl.errors.StanliteError) or (
        case.typeerror_ok and isinstance(exc, TypeError))
    if not ok_type:
        return "unclear", "not a stanlite error: " + desc
    if not names_in(msg, case.names):
        return "unclear", f"does not name {' or '.join(case.names)}: " + desc
    for f in case.forbid:
        if f in msg:
            return "unclear", f"shows the wrapped value {f}: " + desc
    if case.evaluated is not None and case.evaluated():
        return "late", "the model was evaluated before the error: " + desc
    return "clear", desc


def _short(v):
    return repr(v)[:100]


# --------------------------------------------------------------------------------------
# data mutations
# --------------------------------------------------------------------------------------
_MISSING = object()


def _masked(v):
    a = np.asarray(v)
    mask = np.zeros(a.shape, dtype=bool)
    mask.flat[0] = True
    return np.ma.masked_array(a, mask=mask)


def _put(v, value, where=0, dtype=object):
    """A copy of ``v`` as a (nested) list with ``value`` at flat position ``where``."""
    a = np.array(v, dtype=dtype)
    a.flat[where] = value
    return a.tolist()


def _array_mutations(v, kind, low, high):
    """(mclass, mutation, value) for a vector, a matrix or an int array ``v``."""
    v = np.asarray(v)
    n = len(v)
    out = [
        ("shape", "too_short", v[:-1]),
        ("shape", "too_long", np.concatenate([v, v[:1]])),
        ("shape", "extra_dim", v[..., None]),
        ("shape", "scalar", v.flat[0]),
        ("shape", "empty", []),
        ("type", "string", "1, 2, 3"),
        ("type", "string_list", [str(x) for x in v.ravel()[:n]]),
        ("type", "bytes", b"\x00\x01"),
        ("type", "dict", {"value": v.tolist()}),
        ("type", "set", set(v.ravel().tolist())),
        ("type", "none", None),
        ("type", "complex", v + 1j),
        ("type", "generator", (x for x in v.ravel())),
        ("type", "ragged", [v.tolist()[0], v.tolist()[1:]] if v.ndim == 1
         else [v[0].tolist(), v[1].tolist()[:-1]] + v[2:].tolist()),
        ("type", "datetime", np.array(["2020-01-01"] * n, dtype="datetime64[D]")),
        ("type", "timedelta", np.arange(v.size).reshape(v.shape).astype("timedelta64[s]")),
        ("type", "dict_values", {i: x for i, x in enumerate(v.ravel().tolist())}.values()),
        ("type", "bytearray", bytearray(b"\x01\x02")),
        ("type", "structured", np.array([(1.0, 2.0)] * n, dtype=[("a", "f8"), ("b", "f8")])),
        ("bool", "pd_boolean", pd.array([True] * n, dtype="boolean")),
        ("bool", "object_bools", np.array([True] * n, dtype=object)),
        ("missing_value", "np_ma_masked_element", _put(v, np.ma.masked)),
        ("missing_value", "pd_nat_element", _put(v, pd.NaT)),
        ("missing_value", "nan_object_series", pd.Series([None] + v.ravel().tolist()[1:])
         if v.ndim == 1 else _put(v, None, where=v.size - 1)),
        ("bool", "true", True),
        ("bool", "bool_array", np.ones(v.shape, dtype=bool)),
        ("bool", "bool_list", np.ones(v.shape, dtype=bool).tolist()),
        ("bool", "one_bool_among_numbers", _put(v, True)),
        ("bool", "np_bool_among_numbers", _put(v, np.True_, where=v.size - 1)),
        ("masked", "masked_first", _masked(v)),
        ("missing_value", "none_in_list", _put(v, None)),
        ("missing_value", "pd_na_in_list", _put(v, pd.NA, where=v.size - 1)),
    ]
    if v.ndim == 1:
        dtype = "Int64" if kind == "ints" else "Float64"
        out.append(("missing_value", "pd_nullable_na",
                    pd.array([None] + v.tolist()[1:], dtype=dtype)))
    if v.ndim == 2:
        out += [("shape", "transposed", v.T), ("shape", "flat", v.ravel()),
                ("shape", "missing_col", v[:, :-1])]
    out += [("nonfinite", "nan_first", _put(v, math.nan, dtype=float)),
            ("nonfinite", "inf_last", _put(v, math.inf, where=v.size - 1, dtype=float)),
            ("nonfinite", "neg_inf", _put(v, -math.inf, where=1, dtype=float))]
    if kind == "ints":
        out += [("nonint", "half", _put(v, 1.5)),
                ("nonint", "almost_integer", _put(v, 3.0000000000000004, dtype=float)),
                ("bigint", "float_1e20", _put(v, 1e20, dtype=float)),
                ("bigint", "float_2**63", _put(v, 2.0 ** 63, dtype=float)),
                ("bigint", "float_-1e19", _put(v, -1e19, dtype=float)),
                ("nonint", "float_array", v + 0.5),
                ("bigint", "2**63", _put(v, 2 ** 63)),
                ("bigint", "2**64", _put(v, 2 ** 64)),
                ("bigint", "-2**63-1", _put(v, -2 ** 63 - 1)),
                ("bigint", "1e30_int", _put(v, 10 ** 30)),
                ("bigint", "uint64_wrap", np.full(v.shape, 2 ** 63 + 5, dtype=np.uint64))]
    else:
        out += [("bigint", "10**400", _put(v, 10 ** 400))]
    if low is not None:
        out.append(("bounds", "below_lower", _put(v, low - 1, dtype=v.dtype)))
    if high is not None:
        out.append(("bounds", "above_upper", _put(v, high + 1, dtype=v.dtype)))
    return out


def _scalar_mutations(v, kind, low, high):
    """(mclass, mutation, value) for an int (a size) or a real scalar ``v``."""
    out = [
        ("bool", "true", True),
        ("bool", "np_true", np.True_),
        ("bool", "np_bool_0d", np.array(True)),
        ("type", "string", str(v)),
        ("type", "none", None),
        ("type", "dict", {"value": v}),
        ("type", "set", {v}),
        ("type", "complex", complex(v, 1)),
        ("type", "object_array", np.array([v], dtype=object)),
        ("shape", "vector", [v, v]),
        ("shape", "matrix", [[v]]),
        ("masked", "masked", np.ma.masked_array(v, mask=True)),
        ("masked", "np_ma_masked", np.ma.masked),
        ("type", "np_str", np.str_(v)),
        ("type", "np_complex", np.complex128(v)),
        ("type", "bytes", str(v).encode()),
        ("missing_value", "pd_na", pd.NA),
        ("nonfinite", "nan", math.nan),
        ("nonfinite", "inf", math.inf),
    ]
    if kind == "size":
        out += [("bool", "false", False),
                ("shape", "length1_list", [v]),
                ("nonint", "half", v + 0.5),
                ("nonint", "np_half", np.float64(v + 0.5)),
                ("nonint", "almost_integer", v + 4e-16 * v),
                ("size", "negative", -1),
                ("size", "very_negative", -(10 ** 6)),
                ("bigint", "2**63", 2 ** 63),
                ("bigint", "2**64", 2 ** 64),
                ("bigint", "-2**63-1", -2 ** 63 - 1),
                ("bigint", "uint64_2**63", np.uint64(2 ** 63)),
                ("bigint", "float_1e20", 1e20),
                ("bigint", "longdouble_1e20", np.longdouble(1e20)),
                ("nonint", "fraction_half", Fraction(2 * v + 1, 2)),
                ("nonint", "decimal_half", Decimal(v) + Decimal("0.5")),
                ("bigint", "float_2**64", 2.0 ** 64)]
    else:
        out += [("bigint", "10**400", 10 ** 400)]
    if low is not None and kind != "size":
        out.append(("bounds", "below_lower", low - 1))
    if high is not None:
        out.append(("bounds", "above_upper", high + 1))
    if kind == "int":
        out += [("nonint", "half", v + 0.5), ("bigint", "2**63", 2 ** 63),
                ("bigint", "float_1e20", 1e20)]
    return out


def _typo(field):
    return field + "s" if len(field) > 1 else field.lower() if field.isupper() else \
        field.upper()


def _data_case(model, field, mclass, mutation, value, names=None, forbid=(), **overrides):
    spec = MODELS[model]

    def run():
        d = spec.good()
        d.update(overrides)
        if value is _MISSING:
            del d[field]
        else:
            d[field] = value
        return spec.cls(**d)
    return Case(f"{mclass}-{model}-{field}-{mutation}", "DATA", mclass, model,
                names or (field,), run, forbid=forbid)


def _wrapped(mutation):
    """The value a wrap to int64 would show (must not appear in the message)."""
    return {"2**63": (str(-2 ** 63),), "uint64_2**63": (str(-2 ** 63),),
            "float_2**63": (str(-2 ** 63),), "float_1e20": (str(-2 ** 63),),
            "float_2**64": (str(-2 ** 63), " 0)"),
            "uint64_wrap": (str(2 ** 63 + 5 - 2 ** 64),),
            "2**64": ("-1 ", "-1)", "0)")}.get(mutation, ())


def data_cases():
    cases = []
    for model, spec in MODELS.items():
        good = spec.good()
        for field, kind in spec.fields.items():
            low, high = spec.bounds.get(field, (None, None))
            muts = (_scalar_mutations(good[field], kind, low, high)
                    if kind in ("size", "int", "real")
                    else _array_mutations(good[field], kind, low, high))
            for mclass, mutation, value in muts:
                cases.append(_data_case(model, field, mclass, mutation, value,
                                        forbid=_wrapped(mutation) if mclass == "bigint"
                                        else ()))
            cases.append(_data_case(model, field, "missing_field", "absent", _MISSING))
            typo = _typo(field)

            def run(spec=spec, field=field, typo=typo):
                d = spec.good()
                d[typo] = d.pop(field)
                return spec.cls(**d)
            cases.append(Case(f"missing_field-{model}-{field}-typo_{typo}", "DATA",
                              "missing_field", model, (field, typo), run))
    cases += _special_data_cases()
    return cases


def _special_data_cases():
    """Sizes that only parameters use (huge ones must fail before allocating), sizes
    that disagree with their data, and data bounds."""
    big = 10 ** 12
    c = [
        # huge sizes: the data they size are given empty or need none
        _data_case("pois", "J", "size", "huge", big, names=("J", "eta")),
        _data_case("pois", "J", "size", "2**40", 2 ** 40, names=("J", "eta")),
        _data_case("mix", "K", "size", "huge", big, names=("K", "weights", "locs")),
        _data_case("mix", "D", "size", "huge_1e6", 10 ** 6, names=("D", "L_corr"),
                   N=0, y=np.zeros(0), z=np.zeros((0, 10 ** 6))),
        _data_case("mix", "D", "size", "overflow_2**32", 2 ** 32 + 1,
                   names=("D", "L_corr", "tau"), N=0, y=np.zeros(0),
                   z=np.zeros((0, 2 ** 32 + 1))),
        _data_case("mix", "D", "size", "overflow_2**40", 2 ** 40,
                   names=("D", "L_corr", "tau"), N=0, y=np.zeros(0),
                   z=np.zeros((0, 2 ** 40))),
        _data_case("reg", "K", "size", "huge_empty_X", big, names=("K", "beta"),
                   N=0, X=np.zeros((0, big)), y=np.zeros(0)),
        _data_case("bounds", "J", "size", "huge", big, names=("J", "theta", "lo", "M")),
        # sizes that disagree with the data they size
        _data_case("eight", "J", "size", "huge_vs_data", big, names=("J", "y")),
        _data_case("eight", "J", "size", "smaller_than_data", 7, names=("J", "y")),
        _data_case("reg", "K", "size", "huge_vs_data", big, names=("K", "X")),
        _data_case("mix", "N", "size", "huge_vs_data", big, names=("N", "y")),
        _data_case("pois", "J", "bounds", "g_above_J", 2, names=("g", "J")),
        # data bounds: inverted, equal, not finite; a vector bound of the wrong length
        _data_case("bounds", "L", "data_bounds", "inverted_empty_y", 5.0,
                   names=("L", "U", "mu"), U=1.0, N=0, y=np.zeros(0)),
        _data_case("bounds", "L", "data_bounds", "inverted", 12.0,
                   names=("L", "U", "y", "mu")),
        _data_case("bounds", "U", "data_bounds", "inverted_empty_y", -3.0,
                   names=("L", "U", "mu"), N=0, y=np.zeros(0)),
        _data_case("bounds", "L", "data_bounds", "equal_empty_y", 1.0,
                   names=("L", "U", "mu"), U=1.0, N=0, y=np.zeros(0)),
        _data_case("bounds", "M", "data_bounds", "bound_too_short", 2,
                   names=("lo", "theta", "M", "J"), lo=np.zeros(2)),
        _data_case("bounds", "M", "data_bounds", "bound_too_long", 4,
                   names=("lo", "theta", "M", "J"), lo=np.zeros(4)),
        _data_case("bounds", "J", "data_bounds", "theta_longer_than_bound", 5,
                   names=("lo", "theta", "M", "J")),
    ]
    # a size computed by a function of data that comes out negative (N - 1 at N = 0
    # is blocked by N's lower bound; give N its bound and a data field it sizes)
    c += [
        _data_case("misc", "N", "size", "function_size_negative", 0,
                   names=("N", "diffs", "nu", "counts"), counts=np.zeros((0, 2), dtype=int),
                   cut=0, diffs=np.zeros(0)),
        _data_case("misc", "cut", "bounds", "above_data_bound_N", 5, names=("cut", "N")),
        _data_case("misc", "diffs", "shape", "size_of_N_not_N_minus_1", np.zeros(4)),
        _data_case("eight", "y", "shape", "np_matrix_row", np.matrix(_good_eight()["y"])),
        _data_case("reg", "y", "shape", "dataframe_column",
                   pd.DataFrame({"y": _good_reg()["y"]})),
        _data_case("reg", "X", "shape", "empty_rows_wrong_cols", np.zeros((0, 3)),
                   N=0, y=np.zeros(0)),
    ]
    # unknown extra fields with a field missing: the error names the missing one
    for model, spec in MODELS.items():
        first = next(iter(spec.fields))
        c.append(_data_case(model, first, "missing_field", "absent_with_extra",
                            _MISSING, names=(first, "extra_field_zz"), extra_field_zz=1))
    return c


# ---- data as Stan JSON text (Model.from_json) ----------------------------------------
_JSON_SCALAR = [("true", "true"), ("null", "null"), ("text", '"eight"'),
                ("2**64", str(2 ** 64)), ("1e400", "1e400"), ("list_of_true", "[true]"),
                ("object", '{"a": 1}'), ("NaN_string", '"NaN"'), ("Inf_string", '"-Inf"')]
_JSON_ARRAY = [("true", "true"), ("null", "null"), ("text", '"1 2 3"'),
               ("null_element", None), ("true_element", None), ("text_element", None),
               ("2**64_element", None), ("1e400_element", None), ("nested_extra", None),
               ("NaN_string_element", None)]


def _json_text(d, field, raw):
    """``d`` as JSON text with ``field``'s value replaced by the raw JSON ``raw``."""
    plain = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in d.items()}
    plain[field] = "@@RAW@@"
    return json.dumps(plain).replace('"@@RAW@@"', raw)


def _json_element(v, what):
    items = [json.dumps(x) for x in np.asarray(v).tolist()]
    lit = {"null_element": "null", "true_element": "true", "text_element": '"1"',
           "2**64_element": str(2 ** 64), "1e400_element": "1e400",
           "NaN_string_element": '"NaN"'}.get(what)
    if what == "nested_extra":
        return "[" + ", ".join(f"[{x}]" for x in items) + "]"
    items[0] = lit
    return "[" + ", ".join(items) + "]"


def json_cases():
    """Each field given a bad value in Stan JSON text: ``true`` is not ``1``,
    ``null`` is missing, ``2**64`` does not fit int64, ``1e400`` is not finite."""
    cases = []
    for model, spec in MODELS.items():
        good = spec.good()
        for field, kind in spec.fields.items():
            scalar = kind in ("size", "int", "real")
            for mutation, raw in (_JSON_SCALAR if scalar else _JSON_ARRAY):
                if "2**64" in mutation and kind not in ("size", "int", "ints"):
                    continue                # a real 1.8e19 is a fine real
                if raw is None:
                    raw = _json_element(good[field], mutation)
                text = _json_text(good, field, raw)
                cases.append(Case(f"json-{model}-{field}-{mutation}", "DATA", "json",
                                  model, (field,),
                                  lambda spec=spec, text=text: spec.cls.from_json(text),
                                  forbid=(str(-2 ** 63),)))
    return cases


# ---- the data's container: positional, a JSON source that is not one ----------------
def container_cases(tmp_dir="/nonexistent-stanlite-corpus"):
    """The whole data given wrongly: a dict passed positionally (either refused with
    a message that says how to pass data, or read as meant), JSON sources that are
    missing, not JSON, or not an object."""
    cases = []
    for model, spec in MODELS.items():
        field = next(iter(spec.fields))

        def positional(spec=spec):
            return spec.cls(spec.good())

        def check(m, spec=spec, field=field):
            assert np.array_equal(getattr(m, field), spec.good()[field])
        cases.append(Case(f"container-{model}-data-positional_dict", "DATA", "container",
                          model, ("data", "keyword"), positional, check=check,
                          typeerror_ok=True))
    cls = MODELS["eight"].cls
    missing = f"{tmp_dir}/eight.json"
    rows = [
        ("missing_file", missing, (missing,)),
        ("directory", "/", ("'/'",)),
        ("broken_json", '{"J": 8, "y": [1, 2', ("JSON",)),
        ("json_list", "[8, 1, 2]", ("JSON", "object", "dict")),
        ("int_source", 123, ("source", "from_json", "JSON")),
        ("none_source", None, ("source", "from_json", "JSON")),
        ("bytes_source", b'{"J": 8}', ("source", "from_json", "JSON")),
    ]
    for mutation, src, names in rows:
        cases.append(Case(f"container-eight-from_json-{mutation}", "DATA", "container",
                          "eight", names, lambda src=src: cls.from_json(src)))
    return cases


# ---- accepted data ---------------------------------------------------------------------
def _accept_data(model, field, mutation, value, expect, **overrides):
    """A good input in an unusual form: the model builds and holds exactly ``expect``."""
    spec = MODELS[model]

    def run():
        d = spec.good()
        d.update(overrides)
        d[field] = value
        return spec.cls(**d)

    def check(m):
        got = getattr(m, field)
        want = np.asarray(expect)
        assert np.shape(got) == want.shape, f"{field}: shape {np.shape(got)}"
        if want.dtype.kind in "iub":
            assert np.asarray(got).dtype.kind == "i" or isinstance(got, int), \
                f"{field}: {got!r} is not an int"
        assert np.array_equal(np.asarray(got, dtype=float), want.astype(float)), \
            f"{field}: {got!r} != {expect!r}"
    return Case(f"accepted-{model}-{field}-{mutation}", "DATA", "accepted", model,
                (field,), run, check=check)


def _accept_after_change(model, field):
    spec = MODELS[model]
    want = np.array(spec.good()[field])

    def run():
        d = spec.good()
        m = spec.cls(**d)
        d[field][...] = 99               # the caller reuses its array
        return m

    def check(m):
        assert np.array_equal(getattr(m, field), want), \
            f"{field} changed with the caller's array: {getattr(m, field)!r}"
    return Case(f"accepted-{model}-{field}-caller_changes_array_after", "DATA", "accepted",
                model, (field,), run, check=check)


def accepted_data_cases():
    e, r, p, x, b = (MODELS[k].good() for k in ("eight", "reg", "pois", "mix", "bounds"))
    c = [
        _accept_data("eight", "J", "float_integral", 8.0, 8),
        _accept_data("eight", "J", "np_float_integral", np.float64(8.0), 8),
        _accept_data("eight", "J", "np_int64", np.int64(8), 8),
        _accept_data("eight", "J", "np_int32_0d", np.array(8, dtype=np.int32), 8),
        _accept_data("eight", "J", "np_uint8", np.uint8(8), 8),
        _accept_data("eight", "y", "list_of_ints", [28, 8, -3, 7, -1, 1, 18, 12], e["y"]),
        _accept_data("eight", "y", "tuple", tuple(e["y"]), e["y"]),
        _accept_data("eight", "y", "float32", e["y"].astype(np.float32), e["y"]),
        _accept_data("eight", "y", "pd_series", pd.Series(e["y"]), e["y"]),
        _accept_data("eight", "sigma", "pd_series_index",
                     pd.Series(e["sigma"], index=list("abcdefgh")), e["sigma"]),
        _accept_data("eight", "y", "int64_array", e["y"].astype(np.int64), e["y"]),
        _accept_data("reg", "X", "dataframe", pd.DataFrame(r["X"], columns=["a", "b"]),
                     r["X"]),
        _accept_data("reg", "X", "list_of_lists", r["X"].tolist(), r["X"]),
        _accept_data("reg", "X", "fortran_order", np.asfortranarray(r["X"]), r["X"]),
        _accept_data("reg", "X", "float32", r["X"].astype(np.float32),
                     r["X"].astype(np.float32)),
        _accept_data("reg", "K", "np_int64", np.int64(2), 2),
        _accept_data("reg", "y", "pd_series", pd.Series(r["y"]), r["y"]),
        _accept_data("reg", "y", "pd_nullable_no_na", pd.array(r["y"], dtype="Float64"),
                     r["y"]),
        _accept_data("pois", "y", "int32", p["y"].astype(np.int32), p["y"]),
        _accept_data("pois", "y", "uint8", p["y"].astype(np.uint8), p["y"]),
        _accept_data("pois", "y", "floats_integral", p["y"].astype(float), p["y"]),
        _accept_data("pois", "y", "list_of_np_int64", [np.int64(v) for v in p["y"]],
                     p["y"]),
        _accept_data("pois", "g", "tuple", tuple(p["g"].tolist()), p["g"]),
        _accept_data("pois", "g", "pd_series", pd.Series(p["g"]), p["g"]),
        _accept_data("pois", "g", "pd_nullable_no_na", pd.array(p["g"], dtype="Int64"),
                     p["g"]),
        _accept_data("pois", "period", "near_int64_max",
                     np.array([2 ** 62, 2 ** 63 - 1, -2 ** 63, 0, 1, 2], dtype=np.int64),
                     np.array([2 ** 62, 2 ** 63 - 1, -2 ** 63, 0, 1, 2], dtype=np.int64)),
        _accept_data("pois", "period", "python_ints_near_max",
                     [2 ** 63 - 1, 0, 1, 2, 3, 4],
                     np.array([2 ** 63 - 1, 0, 1, 2, 3, 4], dtype=np.int64)),
        _accept_data("pois", "J", "float_integral", 3.0, 3),
        _accept_data("mix", "N", "empty", 0, 0, y=np.zeros(0), z=np.zeros((0, 3))),
        _accept_data("mix", "y", "pd_series", pd.Series(x["y"]), x["y"]),
        _accept_data("mix", "z", "dataframe", pd.DataFrame(x["z"]), x["z"]),
        _accept_data("mix", "K", "one_component", 1, 1),
        _accept_data("bounds", "y", "at_the_bounds", [0.0, 10.0, 5.0, 0.0],
                     [0.0, 10.0, 5.0, 0.0]),
        _accept_data("bounds", "L", "int_for_real", 0, 0.0),
        _accept_data("bounds", "U", "np_float32", np.float32(10.0), 10.0),
        _accept_data("bounds", "lo", "list", b["lo"].tolist(), b["lo"]),
        _accept_data("eight", "y", "strided_view", np.repeat(e["y"], 2)[::2], e["y"]),
        _accept_data("eight", "y", "big_endian", e["y"].astype(">f8"), e["y"]),
        _accept_data("pois", "y", "big_endian_ints", p["y"].astype(">i8"), p["y"]),
        _accept_data("reg", "X", "reversed_columns_view", r["X"][:, ::-1][:, ::-1], r["X"]),
        _accept_data("misc", "counts", "transposed_view_of_transpose",
                     np.ascontiguousarray(_good_misc()["counts"].T).T,
                     _good_misc()["counts"]),
    ]
    # the model keeps its own copy: changing the caller's array afterwards changes
    # nothing (else a later draw would use other data than the validated ones)
    for model, field in (("eight", "y"), ("pois", "y"), ("reg", "X")):
        c.append(_accept_after_change(model, field))
    return c


def either_data_cases():
    """Inputs a library may accept (read exactly as meant) or refuse (with an error
    naming them): both are right, a wrong reading is not."""
    c = []
    for model, spec in MODELS.items():
        # an unknown extra field (every field present): CmdStan ignores it
        field = next(iter(spec.fields))
        good = spec.good()[field]
        case = _accept_data(model, field, "unknown_extra_field", good, good,
                            extra_field_zz=1)
        c.append(_either(case, "extra_field", ("extra_field_zz",)))
    for model, spec in MODELS.items():
        good = spec.good()
        for field, kind in spec.fields.items():
            if kind in ("vector", "matrix", "ints"):
                v = np.asarray(good[field])
                case = _accept_data(model, field, "object_array_of_numbers",
                                    np.array(v, dtype=object), v)
                c.append(_either(case, "type", (field,)))
    e = MODELS["eight"].good()
    for label, conv in (("fractions", Fraction), ("decimals", Decimal)):
        case = _accept_data("eight", "y", label, [conv(int(x)) for x in e["y"]], e["y"])
        c.append(_either(case, "type", ("y",)))
        case = _accept_data("eight", "J", label.rstrip("s"), conv(8), 8)
        c.append(_either(case, "type", ("J",)))
    case = _accept_data("reg", "X", "empty_list_for_0_rows", [], np.zeros((0, 2)), N=0,
                        y=np.zeros(0))
    c.append(_either(case, "shape", ("X",)))
    y = MODELS["eight"].good()["y"]
    case = _accept_data("eight", "y", "masked_nothing_masked",
                        np.ma.masked_array(y, mask=False), y)
    c.append(_either(case, "masked", ("y",)))
    return c


def _either(case, mclass, names):
    """An accepted-table case turned into a bad-table case whose acceptance (checked)
    also passes."""
    return Case(case.id.replace("accepted-", f"{mclass}-", 1), case.group, mclass,
                case.model, names, case.run, check=case.check)


# --------------------------------------------------------------------------------------
# argument mutations
# --------------------------------------------------------------------------------------
NAN, INF = math.nan, math.inf
SAMPLE_BASE = dict(chains=1, draws=10, warmup=10, seed=1, parallel=False, progress=False,
                   max_treedepth=4)
VARIATIONAL_BASE = dict(iter=100, output_samples=10, eval_elbo=50, adapt_iter=10,
                        progress=False, seed=1)
OPTIMIZE_BASE = dict(iter=200, seed=1)
LAPLACE_BASE = dict(draws=10, seed=1, iter=200)
PATHFINDER_BASE = dict(num_paths=1, num_draws=10, max_lbfgs_iters=50, num_elbo_draws=5,
                       progress=False, seed=1)

# method -> (model it runs on, base keyword arguments)
METHODS = {
    "sample": ("eight", SAMPLE_BASE),
    "variational": ("eight", VARIATIONAL_BASE),
    "optimize": ("reg", OPTIMIZE_BASE),
    "laplace": ("reg", LAPLACE_BASE),
    "pathfinder": ("reg", PATHFINDER_BASE),
}

COUNT_BAD = [2.5, -1, True, "10", None]       # an iteration/draw count
POSITIVE_BAD = [0, -1, NAN, INF, "0.1", None]     # a positive finite number
TOL_BAD = [-1, NAN, "x"]                      # a tolerance (>= 0)
SEED_BAD = [-1, 2.5, "x", True, [1, "a"]]

# method -> argument -> bad values
ARG_TABLE = {
    "sample": {
        "stepsize": POSITIVE_BAD + [-INF, True, 1j],
        "draws": [2.5, -1, True, "10", np.float64(10.5), 10.0],
        "warmup": COUNT_BAD,
        "chains": COUNT_BAD + [0],
        "thin": COUNT_BAD + [0],
        "adapt_delta": [0, 1, 1.5, -0.1, NAN, INF, "0.8", None, True],
        "metric": ["diag", "dense", 3, "diagonal", "dense_ee", None, ["diag_e"]],
        "max_treedepth": [0, 2.5, 31, -1, True, "10", None],
        "seed": SEED_BAD,
        "init": [-1, NAN, "random", np.zeros(3), np.zeros((10, 2)), np.full(10, NAN)],
        "sampler": ["nut", 3, None],
        "inv_metric": [np.ones(11), -np.ones(10), np.full(10, NAN), "unit", np.ones((10, 3)),
                       np.zeros(10)],
        "sampler_options": [{"alpha": 1.0}],
        "save_warmup": ["no", 2],
        "parallel": ["no"],
        "executor": ["processes", 3],
        "resume_from": [3, "fit"],
    },
    "variational": {
        "method": ["meanfeld", 3, None],
        "iter": COUNT_BAD + [0],
        "grad_samples": [0, 2.5, -1, True],
        "elbo_samples": [0, 2.5, -1],
        "eval_elbo": [0, 2.5, -1],
        "eta": [0, -1, NAN, INF, "1"],
        "adapt_iter": [0, 2.5, -1],
        "tol_rel_obj": TOL_BAD,
        "output_samples": [-1, 2.5, True, "10"],
        "seed": SEED_BAD,
        "init": [-1, NAN, "random", np.zeros(3)],
        "adapt_engaged": ["no"],
    },
    "optimize": {
        "method": ["lbgfs", 3, "newtn"],
        "iter": COUNT_BAD + [0],
        "tol_obj": TOL_BAD,
        "tol_rel_obj": TOL_BAD,
        "tol_grad": TOL_BAD,
        "tol_rel_grad": TOL_BAD,
        "tol_param": TOL_BAD,
        "history_size": [0, -1, 2.5, True],
        "init_radius": [-1, NAN, INF, "2"],
        "jacobian": ["False", "no", 2, None],
        "seed": SEED_BAD,
        "init": [-1, NAN, "random", np.zeros(2), [{"sigma": 1.0}]],
    },
    "laplace": {
        "draws": [-1, 2.5, True, "10", None],
        "jacobian": ["no", 2],
        "mode": [np.zeros(2), "x", {"betas": [0.0, 0.0]}, {"sigma": -1.0}],
        "seed": SEED_BAD,
        "method": ["lbgfs"],
        "iter": [2.5, -1],
    },
    "pathfinder": {
        "num_paths": COUNT_BAD + [0],
        "num_draws": [-1, 2.5, True, "10"],
        "num_single_draws": [-1, 2.5],
        "max_lbfgs_iters": [0, -1, 2.5],
        "num_elbo_draws": [0, -1, 2.5],
        "history_size": [0, -1, 2.5],
        "init_radius": [-1, NAN],
        "tol_obj": TOL_BAD[:2],
        "tol_grad": TOL_BAD[:2],
        "seed": SEED_BAD,
        "init": [-1, NAN, np.zeros(2)],
        "psis_resample": ["no"],
        "calculate_lp": ["no"],
    },
}

# method -> misspelt / foreign keyword arguments (cmdstanpy's and CmdStan's names, typos)
TYPO_TABLE = {
    "sample": ["draw", "num_samples", "iter_warmup", "iter_sampling", "step_size",
               "max_tree_depth", "chain", "seeds", "adapt_delta_", "inits"],
    "variational": ["iters", "draws", "num_samples", "elbo_sample", "stepsize", "algorithm"],
    "optimize": ["iters", "algorithm", "tol_objective", "jacobians", "draws"],
    "laplace": ["num_draws", "draw", "mode_", "jacobians"],
    "pathfinder": ["draws", "num_path", "iters", "max_lbfgs_iter"],
}


def _label(v):
    if isinstance(v, np.ndarray):
        return f"array{'x'.join(map(str, v.shape))}" + (
            "_nan" if v.dtype.kind == "f" and np.isnan(v).any() else
            "_neg" if v.dtype.kind == "f" and (v < 0).any() else "")
    if isinstance(v, dict):
        return "dict_" + "_".join(v)
    if isinstance(v, list):
        return "list"
    if isinstance(v, str):
        return f"str_{v}"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, np.floating):
        return f"np_{float(v)}"
    return str(v).replace(" ", "")


def _call(method, over):
    """The method called on the shared model with ``over`` replacing its base
    arguments (a value ``_DROP`` leaves that base argument out)."""
    model, base = METHODS[method]
    kw = {k: v for k, v in {**base, **over}.items() if v is not _DROP}
    return lambda: getattr(built(model), method)(**kw)


_DROP = object()


def _counting(cls):
    """A subclass of ``cls`` that counts its log_prob calls (eager tape, so every
    evaluation is a call)."""
    def log_prob(self, *args, **kwargs):
        self.log_prob_calls += 1
        return cls.log_prob(self, *args, **kwargs)
    log_prob.__signature__ = inspect.signature(cls.log_prob)
    return type(f"Counting{cls.__name__}", (cls,),
                {"log_prob": log_prob, "compile": False, "log_prob_calls": 0})


_COUNTING = {name: _counting(spec.cls) for name, spec in MODELS.items()}


def _checked_call(method, over):
    """``(run, evaluated)``: the call on a fresh counting model, and whether that
    model's log density ran (an argument error must come before it does)."""
    model, base = METHODS[method]
    box = []

    def run():
        m = _COUNTING[model](**MODELS[model].good())
        box[:] = [m]
        return getattr(m, method)(**{**base, **dict(over)})
    return run, lambda: bool(box) and box[0].log_prob_calls > 0


def argument_cases():
    cases = []
    for method, table in ARG_TABLE.items():
        model = METHODS[method][0]
        for arg, values in table.items():
            for v in values:
                check = _ALIASES.get((method, arg, _label(v)))
                run, evaluated = _checked_call(method, {arg: v})
                cases.append(Case(f"argument-{method}-{arg}-{_label(v)}", "ARGUMENTS/INIT",
                                  "argument", model, (arg,), run, check=check,
                                  evaluated=evaluated))
    for method, typos in TYPO_TABLE.items():
        for t in typos:
            run, evaluated = _checked_call(method, {t: 10})
            cases.append(Case(f"unknown_kwarg-{method}-{t}-typo", "ARGUMENTS/INIT",
                              "unknown_kwarg", METHODS[method][0], (t,), run,
                              typeerror_ok=True, evaluated=evaluated))
    cases += _special_argument_cases()
    # one init per chain: a list of the wrong length
    run, evaluated = _checked_call("sample", {"chains": 2, "init": [{"tau": 1.0}]})
    cases.append(Case("argument-sample-init-list_shorter_than_chains", "ARGUMENTS/INIT",
                      "argument", "eight", ("init",), run, evaluated=evaluated))
    return cases


def _special_argument_cases():
    """Arguments that are bad only together with another, or in parallel runs."""
    eye = np.eye(10)
    asym = eye.copy()
    asym[0, 1] = 0.5
    rows = [
        ("sample", "inv_metric", "dense_negative_definite",
         {"metric": "dense_e", "inv_metric": -eye}),
        ("sample", "inv_metric", "dense_not_symmetric",
         {"metric": "dense_e", "inv_metric": asym}),
        ("sample", "inv_metric", "dense_for_diag", {"metric": "diag_e", "inv_metric": eye}),
        ("sample", "inv_metric", "dense_nan",
         {"metric": "dense_e", "inv_metric": np.full((10, 10), NAN)}),
        ("sample", "init", "per_chain_list_bad_entry",
         {"chains": 2, "init": [{"tau": 1.0}, {"tau": -1.0}]}),
        ("sample", "sampler_options", "rhmc_unknown_option",
         {"sampler": "rhmc", "sampler_options": {"alpha_": 1.0}}),
        ("sample", "sampler_options", "rhmc_bad_alpha",
         {"sampler": "rhmc", "sampler_options": {"alpha": -1.0}}),
        ("pathfinder", "num_single_draws", "zero_with_one_path", {"num_single_draws": 0}),
        ("sample", "stepsize", "zero_in_parallel", {"chains": 2, "parallel": True,
                                                    "stepsize": 0}),
        ("sample", "init", "bad_second_chain_in_parallel",
         {"chains": 2, "parallel": True, "init": [{"tau": 1.0}, {"tau": -1.0}]}),
    ]
    cases = []
    for method, arg, label, over in rows:
        run, evaluated = _checked_call(method, over)
        cases.append(Case(f"argument-{method}-{arg}-{label}", "ARGUMENTS/INIT", "argument",
                          METHODS[method][0], (arg,), run, evaluated=evaluated))

    def mode_with_other_jacobian():
        m = built("reg")
        opt = m.optimize(jacobian=False, **OPTIMIZE_BASE)
        return m.laplace(mode=opt, jacobian=True, draws=10, seed=1)
    cases.append(Case("argument-laplace-mode-optimum_with_other_jacobian",
                      "ARGUMENTS/INIT", "argument", "reg", ("mode", "jacobian"),
                      mode_with_other_jacobian))
    return cases


def _check_sample(chains, draws):
    def check(fit):
        got = np.shape(fit["mu"])
        assert got == (chains, draws), f"fit['mu'] has shape {got}, not {(chains, draws)}"
        assert np.all(np.isfinite(fit["mu"])), "draws are not finite"
    return check


def _check_metric(shape):
    def check(fit):
        _check_sample(1, 10)(fit)
        got = np.shape(fit.inv_metric)
        assert got == shape, f"inverse metric of shape {got}, not {shape}"
    return check


# (method, arg, label) -> check: an input a library may read as an alias (as cmdstanpy
# reads metric "diag" as "diag_e") instead of rejecting it; it must then mean that
_ALIASES = {
    ("sample", "metric", "str_diag"): _check_metric((1, 10)),
    ("sample", "metric", "str_dense"): _check_metric((1, 10, 10)),
    ("sample", "draws", "10.0"): lambda fit: _check_sample(1, 10)(fit),
    # CmdStan wants iter > 0; a result that says it did not converge is also honest
    ("optimize", "iter", "0"): lambda opt: _assert(not opt.converged,
                                                   "converged after 0 iterations"),
}


def _assert(ok, why):
    assert ok, why


def _check_approx(n, name="sigma"):
    def check(fit):
        got = np.shape(fit[name])
        assert got in ((n,), (1, n)), f"fit[{name!r}] has shape {got}: not {n} draws"
        assert np.all(np.isfinite(fit[name])), "draws are not finite"
        assert np.all(fit[name] > 0), f"{name} must be positive"
    return check


def _check_opt(opt):
    assert np.isfinite(opt["sigma"]) and opt["sigma"] > 0, f"sigma {opt['sigma']}"


def accepted_argument_cases():
    rows = [
        ("sample", {"draws": np.int64(10)}, _check_sample(1, 10)),
        ("sample", {"warmup": np.int32(10)}, _check_sample(1, 10)),
        ("sample", {"chains": np.int64(2)}, _check_sample(2, 10)),
        ("sample", {"thin": np.int64(2)}, _check_sample(1, 5)),
        ("sample", {"stepsize": np.float64(0.5)}, _check_sample(1, 10)),
        ("sample", {"stepsize": 1e-3}, _check_sample(1, 10)),
        ("sample", {"adapt_delta": 0.95}, _check_sample(1, 10)),
        ("sample", {"adapt_delta": np.float32(0.9)}, _check_sample(1, 10)),
        ("sample", {"seed": np.int64(3)}, _check_sample(1, 10)),
        ("sample", {"seed": None}, _check_sample(1, 10)),
        ("sample", {"metric": "dense_e"}, _check_sample(1, 10)),
        ("sample", {"metric": "unit_e"}, _check_sample(1, 10)),
        ("sample", {"max_treedepth": np.int64(3)}, _check_sample(1, 10)),
        ("sample", {"warmup": 0}, _check_sample(1, 10)),
        ("sample", {"init": 0}, _check_sample(1, 10)),
        ("sample", {"init": 0.5}, _check_sample(1, 10)),
        ("sample", {"init": {"theta_trans": np.zeros(8), "mu": 1.0, "tau": 2.0}},
         _check_sample(1, 10)),
        ("sample", {"init": {"tau": 2.0}}, _check_sample(1, 10)),           # partial
        ("sample", {"init": {}}, _check_sample(1, 10)),
        ("sample", {"init": np.zeros(10)}, _check_sample(1, 10)),          # unconstrained
        ("sample", {"inv_metric": [1.0] * 10}, _check_sample(1, 10)),
        ("sample", {"save_warmup": np.True_}, _check_sample(1, 10)),
        ("sample", {"sampler": "hmc"}, _check_sample(1, 10)),
        ("sample", {"init": [{"tau": 2.0}]}, _check_sample(1, 10)),
        ("sample", {"chains": 2, "init": [{"tau": 2.0}, {"mu": 0.0}]}, _check_sample(2, 10)),
        ("variational", {"iter": np.int64(100)}, _check_approx(10, "tau")),
        ("variational", {"output_samples": np.int64(10)}, _check_approx(10, "tau")),
        ("variational", {"eta": 0.1}, _check_approx(10, "tau")),
        ("variational", {"init": {"tau": 2.0}}, _check_approx(10, "tau")),         # partial
        ("variational", {"method": "fullrank"}, _check_approx(10, "tau")),
        ("optimize", {"iter": np.int64(200)}, _check_opt),
        ("optimize", {"method": "bfgs"}, _check_opt),
        ("optimize", {"method": "newton"}, _check_opt),
        ("optimize", {"init": {"sigma": 1.0}}, _check_opt),                 # partial
        ("optimize", {"seed": np.int64(5)}, _check_opt),
        ("optimize", {"jacobian": np.bool_(True)}, _check_opt),
        ("optimize", {"init": np.zeros(4)}, _check_opt),
        ("laplace", {"draws": np.int64(10)}, _check_approx(10)),
        ("laplace", {"seed": None}, _check_approx(10)),
        ("laplace", {"mode": {"alpha": 1.0, "beta": [0.7, -0.3], "sigma": 0.2},
                     "iter": _DROP}, _check_approx(10)),
        ("pathfinder", {"num_paths": np.int64(1)}, _check_approx(10)),
        ("pathfinder", {"num_draws": np.int64(10)}, _check_approx(10)),
        ("pathfinder", {"init": {"sigma": 1.0}}, _check_approx(10)),        # partial
        ("laplace", {"init": {"sigma": 1.0}}, _check_approx(10)),           # partial
    ]
    cases = []
    for method, over, check in rows:
        label = "-".join(f"{k}_{_label(v)}" for k, v in over.items() if v is not _DROP)
        cases.append(Case(f"accepted-{method}-{label}", "ARGUMENTS/INIT", "accepted",
                          METHODS[method][0], tuple(over), _call(method, over),
                          check=check))
    # a numpy number means what the Python number means: the same draws
    same = [("sample", "seed", np.int64(1), 1, "mu"),
            ("sample", "stepsize", np.float32(0.5), 0.5, "mu"),
            ("sample", "draws", np.uint16(10), 10, "mu"),
            ("variational", "iter", np.int64(100), 100, "tau"),
            ("pathfinder", "num_paths", np.int8(1), 1, "sigma"),
            ("laplace", "draws", np.int32(10), 10, "sigma")]
    for method, arg, numpy_value, value, name in same:
        cases.append(Case(f"accepted-{method}-{arg}-{type(numpy_value).__name__}_same_draws",
                          "ARGUMENTS/INIT", "accepted", METHODS[method][0], (arg,),
                          _call(method, {arg: numpy_value}),
                          check=_same_draws(method, {arg: value}, name)))
    return cases


def _same_draws(method, over, name):
    def check(fit):
        want = _call(method, over)()[name]
        assert np.array_equal(fit[name], want), f"{name} differs from the run with {over}"
    return check


# --------------------------------------------------------------------------------------
# inits outside the support, of the wrong shape, with unknown names
# --------------------------------------------------------------------------------------
# model -> (parameter named, mutation, init dict)
_L_NOT_LOWER = np.eye(3)
_L_NOT_LOWER[0, 2] = 0.5
_L_ROWS_NOT_UNIT = np.array([[1.0, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.9]])
INIT_TABLE = {
    "eight": [
        ("tau", "negative", {"tau": -1.0}),
        ("tau", "zero_at_bound", {"tau": 0.0}),
        ("tau", "nan", {"tau": NAN}),
        ("mu", "inf", {"mu": INF}),
        ("mu", "string", {"mu": "one"}),
        ("theta_trans", "too_short", {"theta_trans": np.zeros(7)}),
        ("theta_trans", "matrix", {"theta_trans": np.zeros((8, 2))}),
        ("tau_", "unknown_name", {"tau_": 1.0}),
        ("tau", "bool", {"tau": True}),
        ("theta_trans", "strings", {"theta_trans": ["0"] * 8}),
        ("theta_trans", "ragged", {"theta_trans": [[0.0] * 4, [0.0] * 3]}),
        ("theta_trans", "masked_element",
         {"theta_trans": np.ma.masked_array(np.zeros(8), mask=[True] + [False] * 7)}),
        ("tau", "python_int_2**1100", {"tau": 2 ** 1100}),
        ("mu", "none", {"mu": None}),
    ],
    "reg": [
        ("sigma", "negative", {"sigma": -1.0}),
        ("sigma", "zero_at_bound", {"sigma": 0.0}),
        ("beta", "too_long", {"beta": np.zeros(3)}),
        ("beta", "nan", {"beta": [NAN, 0.0]}),
        ("beta", "masked_element", {"beta": np.ma.masked_array([0.0, 1.0], mask=[0, 1])}),
        ("betas", "unknown_name", {"betas": [0.0, 0.0]}),
    ],
    "pois": [
        ("sigma_g", "negative", {"sigma_g": -1.0}),
        ("eta", "wrong_shape", {"eta": np.zeros(4)}),
        ("mu", "inf", {"mu": INF}),
        ("sigma_G", "unknown_name", {"sigma_G": 1.0}),
    ],
    "mix": [
        ("weights", "not_sum_to_one", {"weights": [0.3, 0.3]}),
        ("weights", "negative", {"weights": [-0.5, 1.5]}),
        ("weights", "wrong_length", {"weights": [0.2, 0.3, 0.5]}),
        ("locs", "not_ordered", {"locs": [1.0, 0.0]}),
        ("locs", "tied", {"locs": [0.5, 0.5]}),
        ("weights", "nan", {"weights": [NAN, 0.5]}),
        ("L_corr", "nan", {"L_corr": np.full((3, 3), NAN)}),
        ("L_corr", "not_lower_triangular", {"L_corr": _L_NOT_LOWER}),
        ("L_corr", "rows_not_unit", {"L_corr": _L_ROWS_NOT_UNIT}),
        ("L_corr", "wrong_shape", {"L_corr": np.eye(2)}),
        ("tau", "negative", {"tau": [1.0, -1.0, 1.0]}),
        ("Lcorr", "unknown_name", {"Lcorr": np.eye(3)}),
    ],
    "bounds": [
        ("mu", "above_data_upper", {"mu": 11.0}),
        ("mu", "below_data_lower", {"mu": -0.5}),
        ("theta", "below_data_vector_bound", {"theta": [1.0, 0.5, 0.0]}),
        ("sigma", "negative", {"sigma": -2.0}),
    ],
    "misc": [
        ("share", "above_a_bound_set_by_lam", {"lam": 1.0, "share": 3.0}),
        ("share", "negative", {"share": -0.5}),
        ("nu", "wrong_shape_for_N_minus_1", {"nu": np.zeros(4)}),
        ("lam", "negative", {"lam": -1.0}),
    ],
}

def _foreign_result_init_cases():
    """An optimum of *another* model as the init (or laplace's mode): its point has
    the other model's dimension; the error must say it is the init (or mode)."""
    def foreign(jacobian=False):
        return built("reg").optimize(jacobian=jacobian, **OPTIMIZE_BASE)
    cases = []
    for method, base in INIT_METHODS.items():
        def run(method=method, base=base):
            return getattr(built("eight"), method)(**{**base, "init": foreign()})
        cases.append(Case(f"init-{method}-eight-init-optimum_of_another_model",
                          "ARGUMENTS/INIT", "init", "eight", ("init",), run))
    cases.append(Case("init-laplace-eight-mode-optimum_of_another_model", "ARGUMENTS/INIT",
                      "init", "eight", ("mode",),
                      lambda: built("eight").laplace(mode=foreign(True), draws=10)))
    return cases


# method -> base keyword arguments for an init case (runs on every model)
INIT_METHODS = {
    "sample": SAMPLE_BASE,
    "variational": VARIATIONAL_BASE,
    "optimize": OPTIMIZE_BASE,
    "pathfinder": PATHFINDER_BASE,
    "laplace": LAPLACE_BASE,
}


def init_cases():
    cases = _foreign_result_init_cases()
    for model, rows in INIT_TABLE.items():
        for name, mutation, init in rows:
            for method, base in INIT_METHODS.items():
                def run(model=model, method=method, base=base, init=init):
                    return getattr(built(model), method)(**{**base, "init": init})
                cases.append(Case(f"init-{method}-{model}-{name}-{mutation}",
                                  "ARGUMENTS/INIT", "init", model, (name,), run))
    return cases


# --------------------------------------------------------------------------------------
# the tables
# --------------------------------------------------------------------------------------
BAD = (data_cases() + either_data_cases() + json_cases() + container_cases()
       + argument_cases() + init_cases())
ACCEPTED = accepted_data_cases() + accepted_argument_cases()


def test_the_corpus_is_large_and_covers_the_models():
    assert len(BAD) >= 500
    assert len({c.id for c in BAD + ACCEPTED}) == len(BAD) + len(ACCEPTED), "ids repeat"
    per_model = collections.Counter(c.model for c in BAD)
    assert len(per_model) >= 4 and min(per_model.values()) >= 30, per_model


@pytest.mark.parametrize("case", BAD, ids=[c.id for c in BAD])
def test_bad_input_gives_a_clear_error(case):
    outcome, detail = classify(case, expect_error=True)
    assert outcome in ("clear", "accepted"), f"{outcome}: {detail}"


@pytest.mark.parametrize("case", ACCEPTED, ids=[c.id for c in ACCEPTED])
def test_good_input_is_accepted_as_meant(case):
    outcome, detail = classify(case, expect_error=False)
    assert outcome == "accepted", f"{outcome}: {detail}"


# --------------------------------------------------------------------------------------
# the report (python tests/test_bad_input_corpus.py [out.md])
# --------------------------------------------------------------------------------------
_OUTCOMES = ("clear", "accepted", "unclear", "late", "silent", "wrong", "rejected",
             "broken", "crash")


def _tally_line(t):
    return " ".join(f"{k}={t[k]}" for k in _OUTCOMES if t[k])


def _report(path, notes=None):
    """Classify every case; write the summary and the failures grouped by who fixes
    them (a result that cannot be used goes to OTHER)."""
    rows = []
    t0 = time.perf_counter()
    for case in BAD:
        rows.append((case, True) + classify(case, True))
    for case in ACCEPTED:
        rows.append((case, False) + classify(case, False))
    took = time.perf_counter() - t0
    tally = collections.Counter(o for _, _, o, _ in rows)
    per_class = collections.defaultdict(collections.Counter)
    per_model = collections.defaultdict(collections.Counter)
    for case, bad, o, _ in rows:
        per_class[case.mclass][o] += 1
        per_model[case.model][o] += 1
    lines = [
        "# Bad-input corpus (issue 19): current failures",
        "",
        f"Generated {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by "
        f"`python tests/test_bad_input_corpus.py /work/notes/corpus_failures.md` "
        f"({took:.0f} s; the pytest run is `python -m pytest "
        "tests/test_bad_input_corpus.py -q -p no:cacheprovider`).",
        "",
        f"- total cases: {len(rows)} ({len(BAD)} bad inputs, {len(ACCEPTED)} good inputs)",
        f"- clear errors: {tally['clear']}",
        f"- accepted correctly: {tally['accepted']}",
        f"- unclear errors (not a stanlite error, or not naming the field/argument): "
        f"{tally['unclear']}",
        f"- late argument errors (raised after the model was evaluated): {tally['late']}",
        f"- silently wrong (bad input accepted, or good input giving a wrong result): "
        f"{tally['silent'] + tally['wrong']}",
        f"- good inputs wrongly rejected: {tally['rejected']}",
        f"- results that cannot be used (an exception using the fit): {tally['broken']}",
        f"- crashes (hang > {CASE_SECONDS:g} s, MemoryError, RecursionError): "
        f"{tally['crash']}",
        "",
        "Per class: " + "; ".join(f"**{k}** {_tally_line(t)}"
                                  for k, t in sorted(per_class.items())),
        "",
        "Per model: " + "; ".join(f"**{k}** {_tally_line(t)}"
                                  for k, t in sorted(per_model.items())),
        "",
    ]
    if notes:
        lines += [notes.rstrip(), ""]
    for group in ("DATA", "ARGUMENTS/INIT", "OTHER"):
        bad_rows = [r for r in rows if r[2] not in ("clear", "accepted") and
                    (r[0].group if r[2] != "broken" else "OTHER") == group]
        lines += [f"## {group} ({len(bad_rows)} failing)", ""]
        for case, bad, o, detail in bad_rows:
            d = detail.replace("\n", " ")[:150]
            lines.append(f"- `{case.id}` [{case.model}] **{o}**: {d}")
        lines.append("")
    text = "\n".join(lines) + "\n"
    if path:
        with open(path, "w") as f:
            f.write(text)
    return text


if __name__ == "__main__":
    # python tests/test_bad_input_corpus.py [report.md [notes.md]]
    _notes = open(sys.argv[2]).read() if len(sys.argv) > 2 else None
    print(_report(sys.argv[1] if len(sys.argv) > 1 else None, _notes)[:4000])
