"""Bad data give a DataError (or a ModelError for a bad declaration) naming the field.

Issue 19, point 8: the checks of :mod:`stanlite.declarations` (``DataDecl.validate``
and its helpers, ``ParamDecl.free_size``/``check_bounds``) and of ``Model.__init__`` /
``Model.from_json``, over four models - a vector model (eight schools), a matrix
model (a regression with a data matrix and data-valued offset/multiplier and bounds),
an int-array model (Poisson counts with a group index and a callable bound) and a
model whose simplex and Cholesky-factor sizes come from data. The cases are tables:
each row is a data mutation, the error class and a pattern the message must match
(always the field's name). Cases that must be *accepted* are tables too.
"""

import json
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest

import stanlite as sl
import stanlite.models as zoo
from stanlite import cli

# --------------------------------------------------------------------------------------
# the four models
# --------------------------------------------------------------------------------------
EightSchools = zoo.model_class("eight_schools_noncentered")
SCHOOLS = zoo.default_data("eight_schools_noncentered")


class Regression(sl.Model):
    """A regression with a data matrix; ``N`` has no lower bound (a negative ``N``
    reaches the size check); ``beta``'s multiplier and ``sigma``'s bounds are data."""

    N = sl.data.int()
    K = sl.data.int(lower=0)
    X = sl.data.matrix("N", "K")
    y = sl.data.vector("N")
    S = sl.data.int(lower=0)
    scale = sl.data.vector("S")
    s_lo = sl.data.real()
    s_hi = sl.data.real()

    beta = sl.param.vector("K", offset=0, multiplier="scale")
    sigma = sl.param.real(lower="s_lo", upper="s_hi")

    def log_prob(self, beta, sigma):
        return sl.normal_lpdf(self.y, self.X @ beta, sigma) + sl.normal_lpdf(beta, 0, 5)


REG = {"N": 4, "K": 3, "X": [[1.0, 0.5, 2.0], [1.0, -0.3, 1.0], [1.0, 1.2, 0.0],
                          [1.0, 0.1, -1.0]],
       "y": [0.3, -0.2, 1.1, 0.4], "S": 3, "scale": [2.0, 3.0, 1.0], "s_lo": 0.0,
       "s_hi": 10.0}


class Counts(sl.Model):
    """Poisson counts with a group index; ``alpha``'s bounds are callables of data."""

    N = sl.data.int(lower=0)
    J = sl.data.int(lower=1)
    y = sl.data.array("N", dtype="int", lower=0)
    g = sl.data.array("N", dtype="int", lower=1, upper="J")
    a_lo = sl.data.real()
    width = sl.data.real()

    mu = sl.param.vector("J")
    alpha = sl.param.real(lower=lambda a_lo: a_lo, upper=lambda a_lo, width: a_lo + width)

    def log_prob(self, mu, alpha):
        idx = np.asarray(self.g) - 1
        return (sl.poisson_log_lpmf(self.y, mu[idx] + alpha) + sl.normal_lpdf(mu, 0, 2))


COUNTS = {"N": 6, "J": 3, "y": [0, 3, 1, 4, 2, 7], "g": [1, 1, 2, 2, 3, 3],
          "a_lo": -1.0, "width": 2.0}


class Structured(sl.Model):
    """Simplex and Cholesky-factor sizes from data, and a vector of size K - 1."""

    K = sl.data.int()
    D = sl.data.int(lower=0)
    theta = sl.param.simplex("K")
    L = sl.param.cholesky_factor_corr("D")
    z = sl.param.vector(lambda K: K - 1)

    def log_prob(self, theta, L, z):
        return sl.normal_lpdf(z, 0, 1) + sl.sum(sl.log(theta))


STRUCT = {"K": 3, "D": 2}

MODELS = {"schools": (EightSchools, SCHOOLS), "regression": (Regression, REG),
          "counts": (Counts, COUNTS), "structured": (Structured, STRUCT)}


def build(model, **change):
    cls, data = MODELS[model]
    return cls(**{**data, **change})


# --------------------------------------------------------------------------------------
# helpers building bad values
# --------------------------------------------------------------------------------------
def masked(values, at):
    mask = np.zeros(np.shape(values), bool)
    mask[at] = True
    return np.ma.masked_array(values, mask=mask)


def with_item(values, value, at=0):
    out = list(values)
    out[at] = value
    return out


class Row:
    """One case: a data change to a model, the error and a message pattern."""

    def __init__(self, model, change, error, pattern, id):
        self.model, self.change, self.error, self.pattern, self.id = \
            model, change, error, pattern, id


def bad_scalar_int(model, field, valid):
    """Mutations of an int scalar field that must be rejected, naming the field."""
    f = f"'{field}'"
    return [
        Row(model, {field: True}, sl.DataError, f"{f}.*boolean", f"{field}=True"),
        Row(model, {field: False}, sl.DataError, f"{f}.*boolean", f"{field}=False"),
        Row(model, {field: np.bool_(True)}, sl.DataError, f"{f}.*boolean",
            f"{field}=np.bool_"),
        Row(model, {field: valid + 0.5}, sl.DataError, rf"{f}.*whole number",
            f"{field}=x.5"),
        Row(model, {field: float("nan")}, sl.DataError, rf"{f}.*NaN.*int.*missing",
            f"{field}=nan"),
        Row(model, {field: float("inf")}, sl.DataError, rf"{f}.*whole number.*inf",
            f"{field}=inf"),
        Row(model, {field: 2 ** 70}, sl.DataError, rf"{f}.*too large", f"{field}=2**70"),
        Row(model, {field: -2 ** 70}, sl.DataError, rf"{f}.*too large",
            f"{field}=-2**70"),
        Row(model, {field: 2 ** 63}, sl.DataError, rf"{f}.*too large", f"{field}=2**63"),
        Row(model, {field: np.uint64(2 ** 63)}, sl.DataError, rf"{f}.*too large",
            f"{field}=np.uint64"),
        Row(model, {field: 1e20}, sl.DataError, rf"{f}.*too large", f"{field}=1e20"),
        Row(model, {field: str(valid)}, sl.DataError, rf"{f}.*string", f"{field}=str"),
        Row(model, {field: None}, sl.DataError, rf"{f}.*missing", f"{field}=None"),
        Row(model, {field: np.ma.masked}, sl.DataError, rf"{f}.*missing",
            f"{field}=masked"),
        Row(model, {field: complex(valid, 1)}, sl.DataError, rf"{f}.*complex",
            f"{field}=complex"),
        Row(model, {field: [valid]}, sl.DataError, rf"{f}.*shape \(1,\)",
            f"{field}=[n]"),
        Row(model, {field: np.array([valid, valid])}, sl.DataError,
            rf"{f}.*shape \(2,\)", f"{field}=array"),
        Row(model, {field: {"value": valid}}, sl.DataError, rf"{f}.*dict",
            f"{field}=dict"),
        Row(model, {field: {valid}}, sl.DataError, rf"{f}.*set", f"{field}=set"),
        Row(model, {field: object()}, sl.DataError, rf"{f}.*object", f"{field}=object"),
        Row(model, {field: Decimal(valid) + Decimal("0.5")}, sl.DataError,
            rf"{f}.*whole number", f"{field}=Decimal x.5"),
    ]


def bad_vector(model, field, values, is_int=False, pos=2):
    """Mutations of a 1-d field (vector or array) that must be rejected."""
    f = f"'{field}'"
    at = rf"\[{pos + 1}\]"
    n = len(values)
    rows = [
        Row(model, {field: [True] * n}, sl.DataError, f"{f}.*boolean", f"{field}=bools"),
        Row(model, {field: with_item(values, True, pos)}, sl.DataError,
            f"{f}.*boolean.*{at}", f"{field}=one bool"),
        Row(model, {field: np.ones(n, bool)}, sl.DataError, f"{f}.*boolean",
            f"{field}=bool array"),
        Row(model, {field: with_item(values, np.array(True), pos)}, sl.DataError,
            f"{f}.*boolean.*{at}", f"{field}=0-d bool array"),
        Row(model, {field: masked(values, pos)}, sl.DataError,
            f"{f}.*missing values are not supported.*1 masked element.*{at}",
            f"{field}=masked"),
        Row(model, {field: masked(values, [pos, pos + 1])}, sl.DataError,
            f"{f}.*missing.*2 masked elements.*{at}", f"{field}=masked2"),
        Row(model, {field: with_item(values, None, pos)}, sl.DataError,
            f"{f}.*missing.*{at}", f"{field}=None inside"),
        Row(model, {field: None}, sl.DataError, f"{f}.*missing", f"{field}=None"),
        Row(model, {field: with_item(values, "1", pos)}, sl.DataError,
            f"{f}.*string.*{at}", f"{field}=str inside"),
        Row(model, {field: ",".join(map(str, values))}, sl.DataError, f"{f}.*string",
            f"{field}=str"),
        Row(model, {field: [complex(v, 1) for v in values]}, sl.DataError,
            f"{f}.*complex", f"{field}=complex"),
        Row(model, {field: np.asarray(values, dtype=complex)}, sl.DataError,
            f"{f}.*complex", f"{field}=complex array"),
        Row(model, {field: np.array([*values[:-1], "x"], dtype=object)}, sl.DataError,
            rf"{f}.*string.*\[{n}\]", f"{field}=object array"),
        Row(model, {field: [values[:2], values[2:3]]}, sl.DataError,
            f"{f}.*ragged", f"{field}=ragged"),
        Row(model, {field: [[v] for v in values[:-1]] + [values[-1]]}, sl.DataError,
            f"{f}", f"{field}=ragged mixed"),
        Row(model, {field: dict(enumerate(values))}, sl.DataError, f"{f}.*dict",
            f"{field}=dict"),
        Row(model, {field: set(range(n))}, sl.DataError, f"{f}.*set", f"{field}=set"),
        Row(model, {field: bytearray(n)}, sl.DataError, f"{f}.*bytearray",
            f"{field}=bytearray"),
        Row(model, {field: memoryview(bytes(n))}, sl.DataError, f"{f}.*memoryview",
            f"{field}=memoryview"),
        Row(model, {field: iter(values)}, sl.DataError, f"{f}.*iterator",
            f"{field}=iterator"),
        Row(model, {field: values[:-1]}, sl.DataError, rf"{f}.*shape \({n - 1},\)",
            f"{field}=short"),
        Row(model, {field: [values]}, sl.DataError, rf"{f}.*shape \(1, {n}\)",
            f"{field}=nested"),
        Row(model, {field: np.datetime64("2026-01-01")}, sl.DataError,
            f"{f}.*dates", f"{field}=date"),
        Row(model, {field: with_item(values, 2 ** 70 if is_int else 10 ** 400, pos)},
            sl.DataError, f"{f}.*{at}.*too large", f"{field}=too large"),
    ]
    if is_int:
        rows += [
            Row(model, {field: with_item(values, 2.5, pos)}, sl.DataError,
                f"{f}.*whole number.*{at}.*2.5", f"{field}=2.5"),
            Row(model, {field: np.asarray(values, float) + 0.25}, sl.DataError,
                rf"{f}.*whole number.*\[1\]", f"{field}=float array"),
            Row(model, {field: np.asarray(values, np.uint64) + np.uint64(2 ** 63)},
                sl.DataError, f"{f}.*too large", f"{field}=uint64"),
            Row(model, {field: with_item(values, float("nan"), pos)}, sl.DataError,
                f"{f}.*{at} is NaN.*int.*missing values", f"{field}=nan"),
            Row(model, {field: with_item(values, -2 ** 64, pos)}, sl.DataError,
                f"{f}.*{at}.*too large", f"{field}=-2**64"),
        ]
    else:
        rows += [
            Row(model, {field: with_item(values, float("nan"), pos)}, sl.DataError,
                f"{f}.*finite.*{at}.*nan", f"{field}=nan"),
            Row(model, {field: with_item(values, float("-inf"), pos)}, sl.DataError,
                f"{f}.*finite.*{at}.*inf", f"{field}=-inf"),
        ]
    return rows


def bad_sizes(model, field, first_sized, valid):
    """A size field given badly is blamed itself; a size too large for memory names
    the field it sizes and the size."""
    f = f"'{field}'"
    return [
        Row(model, {field: True}, sl.DataError, f"^data field {f}.*boolean",
            f"size {field}=True"),
        Row(model, {field: valid + 0.5}, sl.DataError, f"^data field {f}.*whole",
            f"size {field}=x.5"),
        Row(model, {field: [valid]}, sl.DataError, rf"^data field {f}.*shape \(1,\)",
            f"size {field}=[n]"),
        Row(model, {field: np.arange(valid)}, sl.DataError, f"^data field {f}.*shape",
            f"size {field}=vector"),
        Row(model, {field: 10 ** 12}, sl.DataError,
            rf"'{first_sized}'.*more than this machine's memory.*{field} = 10+\b",
            f"size {field}=1e12"),
    ]


SCHOOLS_ROWS = (bad_scalar_int("schools", "J", 8)
                + bad_sizes("schools", "J", "y", 8)
                + bad_vector("schools", "y", SCHOOLS["y"])
                + bad_vector("schools", "sigma", SCHOOLS["sigma"])
                + [Row("schools", {"J": -1}, sl.DataError, r"'J'.*>= 0.*-1", "J=-1"),
                   Row("schools", {"J": 0}, sl.DataError,
                       r"'y'.*vector\[0\].*shape \(8,\).*size comes from the data: "
                       r"J = 0", "J=0"),
                   Row("schools", {"J": 9}, sl.DataError, r"'y'.*shape \(8,\).*J = 9",
                       "J=9"),
                   Row("schools", {"sigma": with_item(SCHOOLS["sigma"], -1.0, 3)},
                       sl.DataError, r"'sigma'.*>= 0.*\[4\].*-1", "sigma<0")])

REG_X = REG["X"]
REG_ROWS = (bad_scalar_int("regression", "K", 3)
            + bad_sizes("regression", "N", "X", 4)
            + bad_vector("regression", "y", REG["y"])
            + bad_vector("regression", "scale", REG["scale"], pos=0)
            + [
                Row("regression", {"N": -1}, sl.DataError,
                    r"data field 'X'.*size 'N' is negative", "N=-1"),
                Row("regression", {"N": 10 ** 7, "K": 10 ** 7}, sl.DataError,
                    r"'X'.*matrix\[10000000, 10000000\].*memory.*N = 10000000, "
                    r"K = 10000000", "N=K=1e7"),
                Row("regression", {"X": masked(REG_X, (2, 1))}, sl.DataError,
                    r"'X'.*missing.*\[3, 2\]", "X masked"),
                Row("regression", {"X": [np.asarray(REG_X[0]), masked(REG_X[1], 2),
                                         *REG_X[2:]]},
                    sl.DataError, r"'X'.*missing.*row 2 is a masked array.*\[2, 3\]",
                    "X masked row"),
                Row("regression", {"X": [REG_X[0], REG_X[1][:1], *REG_X[2:]]},
                    sl.DataError, r"'X'.*ragged.*\[1\] is a sequence of length 3 "
                    r"but element \[2\] "
                    r"is a sequence of length 1", "X ragged"),
                Row("regression", {"X": [*REG_X[:3], [1.0, True, 0.0]]}, sl.DataError,
                    r"'X'.*boolean.*\[4, 2\]", "X bool"),
                Row("regression", {"X": [*REG_X[:3], [1.0, None, 0.0]]}, sl.DataError,
                    r"'X'.*missing.*\[4, 2\]", "X None"),
                Row("regression", {"X": [*REG_X[:3], [1.0, np.ma.masked, 0.0]]},
                    sl.DataError, r"'X'.*missing.*masked value.*\[4, 2\]",
                    "X np.ma.masked element"),
                Row("regression", {"X": [*REG_X[:3], np.ma.masked]},
                    sl.DataError, r"'X'.*missing.*row 4", "X masked as row"),
                Row("regression", {"X": [*REG_X[:3], [1.0, np.nan, 0.0]]}, sl.DataError,
                    r"'X'.*finite.*\[4, 2\].*nan", "X nan"),
                Row("regression", {"X": np.asarray(REG_X).T}, sl.DataError,
                    r"'X'.*matrix\[4, 3\].*shape \(3, 4\)", "X transposed"),
                Row("regression", {"X": np.asarray(REG_X) > 0}, sl.DataError,
                    r"'X'.*boolean", "X bool array"),
                Row("regression", {"X": REG["y"]}, sl.DataError, r"'X'.*shape \(4,\)",
                    "X vector"),
                # data bounds and multipliers: checked when the model is built
                Row("regression", {"s_lo": 5.0, "s_hi": 1.0}, sl.DataError,
                    r"parameter 'sigma'.*lower='s_lo' = 5.0.*upper='s_hi' = 1.0.*less than",
                    "sigma bounds inverted"),
                Row("regression", {"s_lo": 1.0, "s_hi": 1.0}, sl.DataError,
                    r"parameter 'sigma'.*less than", "sigma bounds equal"),
                Row("regression", {"S": 2, "scale": [1.0, 2.0]}, sl.DataError,
                    r"parameter 'beta'.*multiplier='scale'.*shape \(2,\).*\(3,\)",
                    "multiplier shape"),
                Row("regression", {"scale": [1.0, -2.0, 1.0]}, sl.DataError,
                    r"parameter 'beta'.*multiplier='scale'.*positive", "multiplier<0"),
                Row("regression", {"scale": [1.0, 0.0, 1.0]}, sl.DataError,
                    r"parameter 'beta'.*multiplier.*positive", "multiplier=0"),
            ])

COUNTS_ROWS = (bad_scalar_int("counts", "N", 6)
               + bad_sizes("counts", "J", "mu", 3)
               + bad_vector("counts", "y", COUNTS["y"], is_int=True)
               + bad_vector("counts", "g", COUNTS["g"], is_int=True)
               + [
                   Row("counts", {"y": with_item(COUNTS["y"], -1, 4)}, sl.DataError,
                       r"'y'.*>= 0.*\[5\].*-1", "y<0"),
                   Row("counts", {"g": with_item(COUNTS["g"], 4, 5)}, sl.DataError,
                       r"'g'.*<= 3.*\[6\].*4", "g>J"),
                   Row("counts", {"g": with_item(COUNTS["g"], 0, 0)}, sl.DataError,
                       r"'g'.*>= 1.*\[1\].*0", "g=0"),
                   Row("counts", {"width": -1.0}, sl.DataError,
                       r"parameter 'alpha'.*lower=<function of a_lo> = -1.0.*"
                       r"upper=<function of a_lo, width> = -2.0.*less than",
                       "alpha callable bounds inverted"),
                   Row("counts", {"width": float("nan")}, sl.DataError,
                       r"'width'.*finite", "width nan"),
               ])

STRUCT_ROWS = (bad_scalar_int("structured", "K", 3)
               + [
                   Row("structured", {"K": 0}, sl.DataError,
                       r"parameter 'theta'.*simplex.*at least 1.*K = 0", "simplex K=0"),
                   Row("structured", {"K": -2}, sl.DataError,
                       r"parameter 'theta'.*size 'K' is negative", "simplex K<0"),
                   Row("structured", {"D": -1}, sl.DataError, r"'D'.*>= 0", "D<0"),
                   Row("structured", {"K": 10 ** 12}, sl.DataError,
                       r"parameter 'theta'.*simplex\[1000000000000\].*memory.*K = ",
                       "simplex K=1e12"),
                   Row("structured", {"D": 10 ** 6}, sl.DataError,
                       r"parameter 'L'.*cholesky_factor_corr.*memory.*D = 1000000",
                       "cholesky D=1e6"),
               ])

# names: missing fields, unknown fields (typos), parameters given as data
NAME_ROWS = [
    Row("schools", {"sigmma": SCHOOLS["sigma"]}, sl.DataError,
        r"unknown data field 'sigmma' \(did you mean 'sigma'\?\)", "typo sigmma"),
    Row("regression", {"XX": REG_X}, sl.DataError,
        r"unknown data field 'XX' \(did you mean 'X'\?\)", "typo XX"),
    Row("counts", {"n": 6}, sl.DataError, r"unknown data field 'n' \(did you mean 'N'",
        "typo n"),
    Row("structured", {"theta": [0.2, 0.3, 0.5]}, sl.DataError,
        r"'theta' is a parameter of Structured, not a data field", "param as data"),
    Row("schools", {"mu": 1.0}, sl.DataError, r"'mu' is a parameter", "mu as data"),
    Row("counts", {"zzz": 1, "qqq": 2}, sl.DataError,
        r"unknown data field 'zzz'.*declares N, J.*unknown too: 'qqq'", "two unknown"),
]

ROWS = SCHOOLS_ROWS + REG_ROWS + COUNTS_ROWS + STRUCT_ROWS + NAME_ROWS


def test_corpus_size():
    assert len(ROWS) >= 150


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.model}:{r.id}" for r in ROWS])
def test_bad_data_is_named(row):
    with pytest.raises(row.error, match=row.pattern):
        build(row.model, **row.change)


@pytest.mark.parametrize("model, field", [
    ("schools", "sigma"), ("regression", "X"), ("counts", "g"), ("structured", "D")])
def test_missing_field_is_named(model, field):
    cls, data = MODELS[model]
    d = {k: v for k, v in data.items() if k != field}
    with pytest.raises(sl.DataError, match=rf"missing data field '{field}'"):
        cls(**d)


# --------------------------------------------------------------------------------------
# what is accepted
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("model, change, check", [
    ("schools", {"J": 8.0}, lambda m: m.J == 8 and type(m.J) is int),
    ("schools", {"J": np.int32(8)}, lambda m: m.J == 8),
    ("schools", {"y": np.asarray(SCHOOLS["y"], np.float32)}, lambda m: m.y.dtype == float),
    ("schools", {"y": tuple(SCHOOLS["y"])}, lambda m: m.y.shape == (8,)),
    ("schools", {"y": masked(SCHOOLS["y"], [])}, lambda m: m.y[0] == SCHOOLS["y"][0]),
    ("schools", {"y": with_item(SCHOOLS["y"], 2 ** 70, 0)},     # a real: no wrapping
     lambda m: m.y[0] == float(2 ** 70)),
    ("counts", {"y": [0.0, 3.0, 1.0, 4.0, 2.0, 7.0]}, lambda m: m.y.dtype == np.int64),
    ("counts", {"y": [Decimal(v) for v in COUNTS["y"]], "a_lo": Decimal("-1.5")},
     lambda m: m.y.tolist() == COUNTS["y"] and m.a_lo == -1.5),
    ("schools", {"y": [Fraction(v, 2) for v in SCHOOLS["y"]]}, lambda m: m.y[0] == 14.0),
    ("counts", {"y": np.asarray(COUNTS["y"], np.uint8)}, lambda m: m.y[5] == 7),
    ("counts", {"y": with_item(COUNTS["y"], 2 ** 62, 0)}, lambda m: m.y[0] == 2 ** 62),
    # the int64 boundary is exact for Python ints (not compared through a float)
    ("counts", {"y": with_item(COUNTS["y"], 2 ** 63 - 1, 0)},
     lambda m: m.y[0] == 2 ** 63 - 1),
    ("counts", {"a_lo": -2 ** 63, "width": 2 ** 64}, lambda m: m.a_lo == -2.0 ** 63),
    ("regression", {"X": np.asarray(REG_X)}, lambda m: m.X.shape == (4, 3)),
    ("regression", {"X": [[np.array(v) for v in row] for row in REG_X]},   # 0-d arrays
     lambda m: m.X.tolist() == REG_X),
    ("regression", {"N": 0, "X": np.zeros((0, 3)), "y": []}, lambda m: m.y.shape == (0,)),
    ("regression", {"K": 0, "X": np.zeros((4, 0)), "S": 0, "scale": []},
     lambda m: m.dim == 1),                     # a vector parameter of size 0
    ("structured", {"K": 1}, lambda m: m.param_shapes()["theta"] == (1,)),
    ("structured", {"D": 0}, lambda m: m.param_shapes()["L"] == (0, 0)),
    ("structured", {"D": 1}, lambda m: m.param_shapes()["L"] == (1, 1)),
])
def test_accepted(model, change, check):
    assert check(build(model, **change))


def test_data_as_one_positional_dict():
    # cmdstanpy's habit: Model(data) reads the dict; keywords given too replace fields
    m = EightSchools(SCHOOLS)
    assert m.J == 8
    assert EightSchools(SCHOOLS, y=[0.0] * 8).y[0] == 0.0
    with pytest.raises(sl.DataError, match=r"keyword arguments.*one dict.*from_json"):
        EightSchools(SCHOOLS, SCHOOLS)
    with pytest.raises(sl.DataError, match=r"keyword arguments.*got 1 positional.*list"):
        EightSchools([8])
    with pytest.raises(sl.DataError, match=r"unknown data field 'sigmma'"):
        EightSchools({**SCHOOLS, "sigmma": 1})


@pytest.mark.parametrize("name", ["radon", "ark", "theophylline", "pk_steady_state",
                                  "mm_multidose_ss", "one_comp_mm_elim_abs"])
def test_zoo_models_with_their_own_init_take_one_dict(name):
    # zoo models that define __init__ pass a positional dict on; their solver options
    # are keyword-only (a dict given positionally used to become rel_tol)
    cls = zoo.model_class(name)
    data = {k: v for k, v in zoo.default_data(name).items() if k in cls._data_decls}
    assert cls(data).dim == zoo.get(name).dim


def test_int64_boundary_and_beyond():
    with pytest.raises(sl.DataError, match=r"'y'.*\[1\] is too large"):
        build("counts", y=with_item(COUNTS["y"], 2 ** 63, 0))
    with pytest.raises(sl.DataError, match=r"'y'.*\[2\] is too large"):
        build("counts", y=with_item(COUNTS["y"], float(2 ** 63), 1))

    class Ints(sl.Model):
        n = sl.data.array(2, dtype="int")
        a = sl.param.real()

        def log_prob(self, a):
            return -a * a

    assert Ints(n=[-2 ** 63, 2 ** 63 - 1]).n.tolist() == [-2 ** 63, 2 ** 63 - 1]
    with pytest.raises(sl.DataError, match=r"'n'.*\[1\] is too large.*-2\*\*63 <= n"):
        Ints(n=[-2 ** 63 - 1, 0])


def test_counts_model_evaluates():
    m = build("counts")
    lp, g = m.log_density_gradient(np.zeros(m.dim))
    assert np.isfinite(lp) and g.shape == (m.dim,)


def test_data_fields_are_read_only_float_or_int():
    m = build("counts")
    assert m.y.dtype == np.int64 and not m.y.flags.writeable
    m = build("regression")
    assert m.X.dtype == np.float64 and not m.X.flags.writeable


# --------------------------------------------------------------------------------------
# pandas: a Series/DataFrame of numbers is accepted; pd.NA is a missing value
# --------------------------------------------------------------------------------------
def test_pandas_accepted():
    pd = pytest.importorskip("pandas")
    m = build("schools", y=pd.Series(SCHOOLS["y"]), sigma=pd.Series(SCHOOLS["sigma"]))
    assert m.y.tolist() == [float(v) for v in SCHOOLS["y"]]
    m = build("regression", X=pd.DataFrame(REG_X, columns=["a", "b", "c"]),
              y=pd.Series(REG["y"], index=list("abcd")))
    assert m.X.shape == (4, 3)
    m = build("counts", y=pd.Series(COUNTS["y"], dtype="Int64"))
    assert m.y.tolist() == COUNTS["y"]


@pytest.mark.parametrize("case", ["pd.NA", "NA in list", "Float64 NA", "Int64 NA",
                                  "boolean", "strings", "NaN in Series", "DataFrame NA",
                                  "one-column frame", "NaT"])
def test_pandas_rejected(case):
    pd = pytest.importorskip("pandas")
    y = list(SCHOOLS["y"])
    counts = list(COUNTS["y"])
    model, change, pattern = {
        "pd.NA": ("schools", {"J": pd.NA}, r"'J'.*missing values"),
        "NA in list": ("schools", {"y": with_item(y, pd.NA, 3)},
                       r"'y'.*missing values.*\[4\]"),
        "Float64 NA": ("schools", {"y": pd.array(with_item(y, None, 3), dtype="Float64")},
                       r"'y'.*missing values.*\[4\]"),
        "Int64 NA": ("counts", {"y": pd.array(with_item(counts, None, 1), dtype="Int64")},
                     r"'y'.*missing values.*\[2\]"),
        "boolean": ("counts", {"y": pd.Series([True] * 6)}, r"'y'.*boolean"),
        "strings": ("schools", {"y": pd.Series([str(v) for v in y])}, r"'y'.*string"),
        "NaN in Series": ("schools", {"y": pd.Series(with_item(y, np.nan, 2))},
                          r"'y'.*finite.*\[3\].*nan"),
        "DataFrame NA": ("regression",
                         {"X": pd.DataFrame(REG_X).astype("Float64").mask(
                             np.eye(4, 3, dtype=bool))},
                         r"'X'.*missing values.*\[1, 1\]"),
        "one-column frame": ("schools", {"y": pd.DataFrame({"y": y})},
                             r"'y'.*shape \(8, 1\)"),
        "NaT": ("schools", {"J": pd.NaT}, r"'J'.*missing"),
    }[case]
    with pytest.raises(sl.DataError, match=pattern):
        build(model, **change)


# --------------------------------------------------------------------------------------
# declarations: literal sizes and bounds are the model's fault (ModelError)
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("decl, pattern", [
    (lambda: sl.param.simplex(0), r"parameter 'p'.*simplex.*at least 1"),
    (lambda: sl.param.unit_vector(0), r"parameter 'p'.*unit_vector.*at least 1"),
    (lambda: sl.param.cholesky_factor_cov(2, 3), r"parameter 'p'.*rows >= columns"),
    (lambda: sl.param.vector(-1), r"parameter 'p'.*size -1 is negative"),
    (lambda: sl.param.vector(2.5), r"parameter 'p'.*size 2.5 must be a single int"),
    (lambda: sl.param.vector(True), r"parameter 'p'.*size True must be a single int"),
    (lambda: sl.param.real(lower=1, upper=0),
     r"parameter 'p'.*lower bound 1.*less than upper bound 0"),
    (lambda: sl.param.vector(2, lower=np.zeros(3)), r"parameter 'p'.*shape \(3,\)"),
    (lambda: sl.param.real(multiplier=-1.0), r"parameter 'p'.*multiplier.*positive"),
    (lambda: sl.param.vector(10 ** 13), r"parameter 'p'.*memory"),
])
def test_bad_declarations_are_model_errors(decl, pattern):
    M = type("M", (sl.Model,), {"p": decl(), "log_prob": lambda self, p: sl.sum(p) * 0.0})
    with pytest.raises(sl.ModelError, match=pattern):
        M()


def test_failing_data_bound_is_named():
    class M(sl.Model):
        x = sl.data.vector(0)
        a = sl.param.real(lower=lambda x: float(np.max(x)))

        def log_prob(self, a):
            return -a

    with pytest.raises(sl.ModelError, match=r"parameter 'a'.*lower bound.*failed on the "
                                            r"data.*ValueError"):
        M(x=[])


def test_bound_of_earlier_parameter_still_checked_per_point():
    # a bound that is a parameter cannot be checked at build; the model builds
    class M(sl.Model):
        a = sl.param.real()
        b = sl.param.real(lower="a")

        def log_prob(self, a, b):
            return -a * a - b

    assert M().dim == 2


def test_data_bound_that_is_nan_on_data_field():
    class M(sl.Model):
        lo = sl.data.real(allow_nonfinite=True)
        y = sl.data.vector(2, lower="lo")
        mu = sl.param.real()

        def log_prob(self, mu):
            return -mu * mu

    with pytest.raises(sl.DataError, match=r"data field 'y'.*lower bound 'lo' is NaN"):
        M(lo=float("nan"), y=[1.0, 2.0])


def test_callable_size_that_is_not_an_int():
    class M(sl.Model):
        N = sl.data.int(lower=0)
        x = sl.data.vector(lambda N: N / 2)
        mu = sl.param.real()

        def log_prob(self, mu):
            return -mu * mu

    with pytest.raises(sl.DataError, match=r"data field 'x'.*size <function of N>.*"
                                           r"single int.*float 1.5"):
        M(N=3, x=[1.0])


def test_data_bound_that_is_a_vector_names_its_element():
    class M(sl.Model):
        lo = sl.data.vector(3)
        y = sl.data.vector(3, lower="lo", upper=lambda lo: "high")
        mu = sl.param.real()

        def log_prob(self, mu):
            return -mu * mu

    with pytest.raises(sl.DataError, match=r"data field 'y'.*>= its lower bound 'lo' "
                                           r"there, 2.5, element \[2\] is 2.0"):
        M(lo=[0.0, 2.5, 0.0], y=[1.0, 2.0, 3.0])
    with pytest.raises(sl.DataError, match=r"data field 'y'.*upper bound <function of "
                                           r"lo> is not a number.*'high'"):
        M(lo=[0.0, 0.0, 0.0], y=[1.0, 2.0, 3.0])


def test_data_bound_of_wrong_shape_on_data_field():
    class M(sl.Model):
        N = sl.data.int(lower=0)
        lo = sl.data.vector(3)
        y = sl.data.vector("N", lower="lo")
        mu = sl.param.real()

        def log_prob(self, mu):
            return -mu * mu

    with pytest.raises(sl.DataError, match=r"data field 'y'.*lower bound 'lo'.*shape "
                                           r"\(3,\).*\(2,\)"):
        M(N=2, lo=[0, 0, 0], y=[1.0, 2.0])


# --------------------------------------------------------------------------------------
# JSON: from_json and the CLI's --data
# --------------------------------------------------------------------------------------
SCHOOLS_JSON = json.dumps(SCHOOLS)


def schools_json(**replace):
    text = SCHOOLS_JSON
    for k, v in replace.items():
        text = text.replace(f'"{k}": {json.dumps(SCHOOLS[k])}', f'"{k}": {v}')
    assert text != SCHOOLS_JSON or not replace
    return text


@pytest.mark.parametrize("text, pattern", [
    (schools_json(J="true"), r"'J'.*boolean"),
    (schools_json(J="null"), r"'J'.*missing"),
    (schools_json(J=str(2 ** 70)), r"'J'.*too large"),
    (schools_json(J="8.5"), r"'J'.*whole number"),
    (schools_json(J='"8"'), r"'J'.*string"),
    (schools_json(J="[8]"), r"'J'.*shape"),
    (schools_json(y='{"a": 1}'), r"'y'.*dict"),
    (schools_json(y="[28, 8, -3, 7, -1, 1, 18, null]"), r"'y'.*missing.*\[8\]"),
    (schools_json(y="[28, 8, -3, 7, -1, 1, 18, false]"), r"'y'.*boolean.*\[8\]"),
    (schools_json(y="[28, 8, -3, 7, -1, 1, 18, \"NaN\"]"), r"'y'.*finite.*\[8\].*nan"),
    (schools_json(y="[28, 8, -3, 7, -1, 1, 18, \"x\"]"), r"'y'.*string.*\[8\]"),
    (schools_json(y="[[28, 8], [-3]]"), r"'y'.*ragged"),
    (schools_json(y="[28, 8, -3, 7, -1, 1, 18, 1e999]"), r"'y'.*finite.*\[8\].*inf"),
    (schools_json(sigma="[15, 10, 16, 11, 9, 11, 10, " + "9" * 400 + "]"),
     r"'sigma'.*\[8\].*too large"),
    ('{"J": 8, "J": 9}', r"field 'J' appears more than once"),
    ('{"J": 8, "y": ' + "[" * 950 + "]" * 950 + "}", r"nests? too deeply"),
    ("[1, 2]", r"JSON object"),
    ('{"J": 8, ', r"not valid JSON"),
    (SCHOOLS_JSON.replace('"sigma"', '"sigmma"'),
     r"missing data field 'sigma'.*'sigmma'.*typo"),
])
def test_from_json_text(text, pattern):
    with pytest.raises(sl.DataError, match=pattern):
        EightSchools.from_json(text)


def test_from_json_accepts_stan_conventions_and_ignores_extras():
    d = dict(SCHOOLS, y=["NaN", *SCHOOLS["y"][1:]], unrelated=[1, 2])

    class Loose(EightSchools):
        y = sl.data.vector("J", allow_nonfinite=True)

    m = Loose.from_json(json.dumps(d))
    assert np.isnan(m.y[0]) and not hasattr(m, "unrelated")


def test_from_json_overrides_must_be_declared():
    with pytest.raises(sl.DataError, match=r"unknown data field 'sigmma'"):
        EightSchools.from_json(SCHOOLS_JSON, sigmma=SCHOOLS["sigma"])
    assert EightSchools.from_json(SCHOOLS_JSON, J=8).J == 8


@pytest.mark.parametrize("make, pattern", [
    (lambda p: p / "absent.json", r"data file .*absent.json.* does not exist"),
    (lambda p: p, r"data file .* is a directory"),
    (lambda p: _write(p / "latin1.json", b'{"J": "\xe9"}'), r"not UTF-8"),
    (lambda p: _write(p / "empty.json", b""), r"empty.json.* not valid JSON"),
    (lambda p: _write(p / "list.json", b"[8]"), r"list.json.* JSON object"),
    (lambda p: _write(p / "deep.json", b"[" * 100000 + b"]" * 100000),
     r"deep.json"),
])
def test_from_json_files(tmp_path, make, pattern):
    with pytest.raises(sl.DataError, match=pattern):
        EightSchools.from_json(make(tmp_path))


def test_from_json_reads_a_file_with_a_bom(tmp_path):
    path = _write(tmp_path / "bom.json", b"\xef\xbb\xbf" + SCHOOLS_JSON.encode())
    assert EightSchools.from_json(path).J == 8


def test_from_json_rejects_other_sources():
    with pytest.raises(sl.DataError, match=r"from_json takes a path.*got int"):
        EightSchools.from_json(3)          # not a file descriptor


def _write(path, content):
    path.write_bytes(content)
    return path


@pytest.mark.parametrize("content, pattern", [
    (schools_json(J="true"), r"data field 'J'.*boolean"),
    (schools_json(y="[28, 8, -3, 7, -1, 1, 18, null]"), r"data field 'y'.*missing"),
    (schools_json(J=str(2 ** 64)), r"data field 'J'.*too large"),
    (schools_json(J=str(10 ** 12)), r"data field 'y'.*memory.*J = 10+"),
    ('{"J": 8, "J": 8}', r"'J' appears more than once"),
])
def test_cli_data_errors(tmp_path, capsys, content, pattern):
    path = tmp_path / "data.json"
    path.write_text(content)
    code = cli.main(["optimize", "eight_schools", "--data", str(path)])
    err = capsys.readouterr().err
    assert code == 1
    assert "Traceback" not in err
    assert err.startswith("stanlite: error: ")
    assert __import__("re").search(pattern, err), err
