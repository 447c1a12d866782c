"""Stan names Python cannot spell (``name=``): a parameter or data field declared as
``lambda_ = sl.param.real(lower=0, name="lambda")`` is ``lambda`` in every output
(names, summaries, fit indexing, ArviZ, saved files), init dicts and JSON data, while
the blocks receive it under its Python name."""

import json

import numpy as np
import pytest

import stanlite as sl


class Poisson(sl.Model):
    N = sl.data.int(lower=0)
    y = sl.data.array("N", dtype="int", lower=0)
    lambda_prior = sl.data.real(lower=0, name="lambda")     # a data field named lambda
    lambda_ = sl.param.real(lower=0, name="lambda_rate")
    in_ = sl.param.real(lower=0, upper=lambda lambda_: lambda_ + 1.0, name="in")

    def transformed_parameters(self, lambda_):
        return {"log_lambda": sl.log(lambda_)}

    def log_prob(self, lambda_, in_, log_lambda):
        lp = sl.exponential_lpdf(lambda_, self.lambda_prior) + sl.poisson_log_lpmf(
            self.y, log_lambda)
        return lp + sl.beta_lpdf(in_ / (lambda_ + 1.0), 2.0, 2.0)

    def generated_quantities(self, rng, lambda_):
        return {"y_rep": rng.poisson(lambda_, self.N)}


DATA = {"N": 5, "y": [3, 1, 4, 1, 5], "lambda": 0.5}


def test_names_in_the_model():
    m = Poisson(**DATA)
    assert m.lambda_prior == 0.5
    assert list(m.data) == ["N", "y", "lambda"] and m.data["lambda"] == 0.5
    assert m.param_names() == ["lambda_rate", "in"]
    assert list(m.param_shapes()) == ["lambda_rate", "in"]
    x = m.unconstrain({"lambda_rate": 2.0, "in": 1.5})
    c = m.constrain(x)
    assert c["lambda_rate"] == pytest.approx(2.0) and c["in"] == pytest.approx(1.5)
    assert set(m.output(x, rng=1)) == {"lambda_rate", "in", "log_lambda", "y_rep"}
    lp, g = m.log_density_gradient(x)
    assert np.isfinite(lp) and g.shape == (2,)


def test_data_by_python_name_and_json():
    a = Poisson(N=5, y=DATA["y"], lambda_prior=0.5)        # the Python name works too
    b = Poisson.from_json(json.dumps(DATA))
    assert a.data.keys() == b.data.keys() == {"N", "y", "lambda"}
    assert a.data["lambda"] == b.data["lambda"] == 0.5
    with pytest.raises(sl.DataError, match=r"data field 'lambda' is given twice"):
        Poisson(N=5, y=DATA["y"], lambda_prior=0.5, **{"lambda": 0.5})
    with pytest.raises(sl.DataError, match=r"missing data field 'lambda'"):
        Poisson(N=5, y=DATA["y"])


def test_duplicate_stan_names_are_a_model_error():
    with pytest.raises(sl.ModelError, match=r"'b' and 'a' are both named 'a'"):
        type("Dup", (sl.Model,), {"a": sl.param.real(),
                                  "b": sl.param.real(name="a"),
                                  "log_prob": lambda self, a, b: 0.0})


def test_sample_summary_arviz_save_load_init(tmp_path):
    m = Poisson(**DATA)
    fit = m.sample(chains=2, draws=150, warmup=150, seed=3, progress=False,
                   init={"lambda_rate": 2.5, "in": 1.0})
    assert fit["lambda_rate"].shape == (2, 150)
    assert fit["y_rep"].shape == (2, 150, 5)
    s = fit.summary()
    assert {"lambda_rate", "in", "log_lambda"} <= set(s.index)
    # the posterior of lambda (gamma(1 + sum y, 0.5 + N) from the conjugate pair)
    post_mean = (1 + sum(DATA["y"])) / (0.5 + DATA["N"])
    assert abs(fit["lambda_rate"].mean() - post_mean) < 0.5
    idata = fit.to_arviz()
    assert {"lambda_rate", "in"} <= set(idata.posterior.data_vars)
    path = tmp_path / "fit.nc"
    fit.save(path)
    back = sl.load_fit(path, model=m)
    np.testing.assert_array_equal(back["lambda_rate"], fit["lambda_rate"])
    np.testing.assert_array_equal(back["in"], fit["in"])
    with pytest.raises(sl.ArgumentError, match="lambda_"):
        m.sample(chains=1, draws=5, warmup=5, init={"lambda_": 2.0}, progress=False)


def test_sizes_and_bounds_may_name_a_renamed_field_either_way():
    class Sized(sl.Model):
        in_ = sl.data.int(lower=1, name="in")           # Stan's reserved word, as data
        hi = sl.data.real(name="lambda")
        a = sl.param.vector("in", upper="lambda")        # by Stan names
        b = sl.param.vector("in_", upper="hi")           # by Python names
        c = sl.param.real(lower=lambda in_: in_)         # a callable: Python names

        def log_prob(self, a, b, c):
            return sl.normal_lpdf(a, 0, 1) + sl.normal_lpdf(b, 0, 1) + sl.normal_lpdf(
                c, 0, 1)

    m = Sized(**{"in": 3, "lambda": 2.0})
    assert m.param_shapes() == {"a": (3,), "b": (3,), "c": ()}
    y = m.constrain(np.zeros(m.dim))
    np.testing.assert_allclose(y["a"], 1.0)
    np.testing.assert_allclose(y["b"], 1.0)
    assert y["c"] == pytest.approx(4.0)
    with pytest.raises(sl.DataError, match=r"'lambda_' is a parameter of Poisson"):
        Poisson(**DATA, lambda_=1.0)


class PoissonLik(sl.Model):
    """A log_likelihood asking for a renamed parameter by its Python name."""
    N = sl.data.int(lower=0)
    y = sl.data.array("N", dtype="int", lower=0)
    lambda_ = sl.param.real(lower=0, name="lambda")
    observed = ("y",)

    def log_prob(self, lambda_):
        return sl.exponential_lpdf(lambda_, 1.0) + sl.poisson_lpmf(self.y, lambda_)

    def log_likelihood(self, lambda_):
        return sl.poisson_lpmf(self.y, lambda_, reduce=False)


def test_log_likelihood_takes_a_renamed_parameter_by_its_python_name():
    m = PoissonLik(N=5, y=DATA["y"])
    fit = m.sample(chains=1, draws=20, warmup=20, seed=3)
    ll = fit.to_arviz().log_likelihood["y"].values
    lam = fit["lambda"]
    y = np.array(DATA["y"])
    from scipy import stats
    assert ll.shape == (1, 20, 5)
    np.testing.assert_allclose(ll, stats.poisson.logpmf(y, lam[..., None]), rtol=1e-12)
    # the prior (log_prob minus the log-likelihood) reads it the same way
    prior = m.sample_prior_predictive(draws=20, chains=1, warmup=20, seed=3)
    assert prior["lambda"].shape == (1, 20)
