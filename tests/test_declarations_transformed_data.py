"""Transformed data (``Model.transformed_data``, ``sl.transformed_data.*``): run once
at build, values available as attributes, usable in sizes and bounds, validated
(numbers only, finite unless declared, declared types checked; errors name the
value) and read-only."""

import numpy as np
import pytest

import stanlite as sl


class Standardised(sl.Model):
    N = sl.data.int(lower=1)
    x = sl.data.vector("N")
    y = sl.data.vector("N")
    x_std = sl.transformed_data.vector("N")
    beta = sl.param.real()
    sigma = sl.param.real(lower=0, upper="y_range")
    calls = []

    def transformed_data(self):
        type(self).calls.append(1)
        return {"x_std": (self.x - self.x.mean()) / self.x.std(),
                "y_range": float(np.ptp(self.y)), "n_pos": int(np.sum(self.y > 0)),
                "idx": [[1, 2], [3, 4]]}

    def log_prob(self, beta, sigma):
        return sl.normal_lpdf(self.y, beta * self.x_std, sigma) + sl.normal_lpdf(beta, 0, 1)


DATA = dict(N=4, x=[1.0, 2.0, 3.0, 5.0], y=[0.5, -0.2, 1.4, 2.0])


def test_run_once_available_as_attributes_with_types():
    Standardised.calls.clear()
    m = Standardised(**DATA)
    assert Standardised.calls == [1]
    x = np.asarray(DATA["x"])
    np.testing.assert_allclose(m.x_std, (x - x.mean()) / x.std())
    assert m.y_range == pytest.approx(2.2) and type(m.y_range) is float
    assert m.n_pos == 3 and type(m.n_pos) is int
    assert m.idx.dtype == np.int64 and m.idx.shape == (2, 2)
    # a bound naming transformed data: sigma in (0, y_range)
    assert m.constrain(np.array([0.0, 0.0]))["sigma"] == pytest.approx(1.1)
    lp, g = m.log_density_gradient(np.array([0.3, -0.2]))
    assert np.isfinite(lp) and g.shape == (2,)
    assert m.data.keys() == {"N", "x", "y"}      # the data, not the transformed data
    Standardised.calls.clear()
    m.sample(chains=1, draws=20, warmup=20, seed=1, progress=False, parallel=False)
    assert Standardised.calls == []             # not re-run by a fit


def test_read_only():
    m = Standardised(**DATA)
    with pytest.raises(ValueError, match="read-only"):
        m.x_std[0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        m.idx[0, 0] = 1
    with pytest.raises(sl.ModelError, match=r"Standardised.x_std is transformed data, "
                                            r"fixed when the model is built"):
        m.x_std = np.zeros(4)
    with pytest.raises(sl.ModelError, match=r"Standardised.y is a data field"):
        m.y = np.zeros(4)
    m.compile = False                           # other attributes stay settable
    m.note = "ok"


def test_the_callers_array_is_not_frozen():
    src = np.arange(3.0)

    class Keep(sl.Model):
        mu = sl.param.real()

        def transformed_data(self):
            return {"a": src}

        def log_prob(self, mu):
            return sl.normal_lpdf(mu, 0, 1)

    m = Keep()
    src[0] = 7.0                                # still writable, and m.a is a copy
    assert m.a[0] == 0.0


def _model(ret, **decls):
    ns = {"N": sl.data.int(), "mu": sl.param.real(),
          "transformed_data": lambda self: ret(self),
          "log_prob": lambda self, mu: sl.normal_lpdf(mu, 0, 1), **decls}
    return type("TD", (sl.Model,), ns)


@pytest.mark.parametrize("ret,decls,error,message", [
    (lambda s: {"z": np.array([1.0, np.nan])}, {}, sl.DataError,
     r"transformed data 'z': expected finite values, element \[2\] is nan"),
    (lambda s: {"z": "abc"}, {}, sl.DataError, r"transformed data 'z'.*string"),
    (lambda s: {"z": [1.0, None]}, {}, sl.DataError, r"transformed data 'z'.*missing"),
    (lambda s: {"z": True}, {}, sl.DataError, r"transformed data 'z'.*boolean"),
    (lambda s: {"z": {"a": 1}}, {}, sl.DataError, r"transformed data 'z'.*dict"),
    (lambda s: {"z": np.zeros(3)}, {"z": sl.transformed_data.vector("N")}, sl.DataError,
     r"transformed data 'z': expected vector\[2\] \(shape \(2,\)\), got shape \(3,\)"),
    (lambda s: {"z": np.array([1.0, -1.0])},
     {"z": sl.transformed_data.vector("N", lower=0)}, sl.DataError,
     r"transformed data 'z'.*>= 0.*element \[2\] is -1"),
    (lambda s: {"z": 2.5}, {"z": sl.transformed_data.int()}, sl.DataError,
     r"transformed data 'z'.*whole number"),
    (lambda s: {}, {"z": sl.transformed_data.vector("N")}, sl.ModelError,
     r"declares 'z' \(sl.transformed_data\) but does not return it"),
    (lambda s: [1, 2], {}, sl.ModelError, r"must return a dict.*got list"),
    (lambda s: {"N": 3}, {}, sl.ModelError, r"returns 'N', which is already a data field"),
    (lambda s: {"mu": 3}, {}, sl.ModelError, r"returns 'mu', which is already a parameter"),
    (lambda s: {"dim": 3}, {}, sl.ModelError, r"'dim'.*attribute of TD"),
    (lambda s: {"log_prob": 3}, {}, sl.ModelError, r"'log_prob'.*attribute of TD"),
    (lambda s: {"a b": 3}, {}, sl.ModelError, r"names must be Python identifiers"),
    (lambda s: {"_slots": 3}, {}, sl.ModelError, r"not starting with '_'"),
])
def test_validation_errors(ret, decls, error, message):
    with pytest.raises(error, match=message):
        _model(ret, **decls)(N=2)


def test_nonfinite_allowed_when_declared_and_declared_sizes_from_transformed_data():
    cls = _model(lambda s: {"z": np.array([1.0, np.inf]), "K": s.N + 1},
                 z=sl.transformed_data.vector("N", allow_nonfinite=True),
                 theta=sl.param.simplex("K"))
    m = cls(N=2)
    assert np.isinf(m.z[1]) and m.param_shapes()["theta"] == (3,)


def test_none_is_no_transformed_data():
    m = _model(lambda s: None)(N=2)
    assert m.dim == 1
