"""Fits on disk and in ArviZ: ``fit.save`` / ``sl.load_fit`` (netCDF) round trips,
bit-identical resumption from a loaded file (finished and interrupted runs), the
exact plain-data codec of the chain states, ``observed_data`` / ``constant_data``,
and a model's pointwise ``log_likelihood`` feeding ``arviz.loo`` / ``arviz.compare``."""

import warnings

import numpy as np
import pandas as pd
import pytest

import stanlite as sl
from stanlite import fit as fitmod

from testkit import Interrupts, Regression, regression_data


def _arviz():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz
    return arviz


def _same_fit(a, b):
    assert a.names == b.names
    for k in a.names:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    assert a.sampler_stats.keys() == b.sampler_stats.keys()
    for k, v in a.sampler_stats.items():
        np.testing.assert_array_equal(v, b[k], err_msg=k)


# ---- models (and testkit's Regression) ---------------------------------------------------
class InterceptOnly(sl.Model):
    """y ~ N(alpha, sigma); ``log_likelihood(**params)`` returning a dict."""
    N = sl.data.int(lower=0)
    x = sl.data.vector("N")
    y = sl.data.vector("N")
    alpha = sl.param.real()
    sigma = sl.param.real(lower=0)
    observed = "y"

    def log_prob(self, alpha, sigma):
        return (sl.normal_lpdf(self.y, alpha, sigma) + sl.normal_lpdf(alpha, 0, 5)
                + sl.normal_lpdf(sigma, 0, 2))

    def log_likelihood(self, **params):
        r = (self.y - params["alpha"]) / params["sigma"]
        return {"y": -0.5 * r * r - np.log(params["sigma"]) - 0.5 * np.log(2 * np.pi)}


@pytest.fixture(scope="module")
def eight_schools():
    from stanlite.models import get
    return get("eight_schools_noncentered")


@pytest.fixture(scope="module")
def short_fit(eight_schools):
    return eight_schools.sample(chains=2, draws=40, warmup=60, seed=3, progress=False,
                                parallel=False)


# ---- save / load ------------------------------------------------------------------------------
def test_save_load_round_trip(short_fit, tmp_path):
    path = tmp_path / "fit.nc"
    assert short_fit.save(path) == str(path)
    loaded = sl.load_fit(path)                        # no model needed
    assert loaded.model is None
    _same_fit(short_fit, loaded)
    pd.testing.assert_frame_equal(loaded.summary(), short_fit.summary())
    assert loaded.diagnose() == short_fit.diagnose()
    np.testing.assert_array_equal(loaded.step_size, short_fit.step_size)
    np.testing.assert_array_equal(loaded.inv_metric, short_fit.inv_metric)
    np.testing.assert_array_equal(loaded.unconstrained_draws, short_fit.unconstrained_draws)
    assert (loaded.num_chains, loaded.num_draws) == (2, 40)
    assert loaded.method == "nuts" and loaded.interrupted is False
    idata = loaded.to_arviz()
    assert {"posterior", "sample_stats", "constant_data"} <= set(idata.groups())
    assert fitmod.STATE_GROUP not in idata.groups()
    np.testing.assert_array_equal(idata.posterior["theta"].values, short_fit["theta"])
    np.testing.assert_array_equal(idata.sample_stats["diverging"].values,
                                  short_fit["divergent__"].astype(bool))
    # an ordinary ArviZ netCDF file: ArviZ reads it without stanlite
    az = _arviz()
    other = az.from_netcdf(str(path))
    np.testing.assert_array_equal(other.posterior["mu"].values, short_fit["mu"])
    # a loaded fit saves again, identically
    again = sl.load_fit(loaded.save(tmp_path / "again.nc"))
    _same_fit(short_fit, again)


def test_resume_from_loaded_file_is_bit_identical(eight_schools, short_fit, tmp_path):
    full = eight_schools.sample(chains=2, draws=70, warmup=60, seed=3, progress=False,
                                parallel=False)
    path = short_fit.save(tmp_path / "short.nc")
    loaded = sl.load_fit(path, model=eight_schools)
    assert loaded.model is eight_schools
    resumed = eight_schools.sample(resume_from=loaded, draws=70, progress=False,
                                   parallel=False)
    _same_fit(full, resumed)
    np.testing.assert_array_equal(resumed.step_size, full.step_size)
    np.testing.assert_array_equal(resumed.inv_metric, full.inv_metric)


class Interrupting(Interrupts, sl.Model):
    """Raises KeyboardInterrupt (a Ctrl-C) after ``limit`` log-density evaluations."""
    y = sl.data.real()
    mu = sl.param.real()
    s = sl.param.real(lower=0)
    calls = [0]
    limit = [None]

    def density(self, mu, s):
        return (sl.normal_lpdf(self.y, mu, s) + sl.normal_lpdf(mu, 0.0, 1.0)
                + sl.lognormal_lpdf(s, 0.0, 1.0))

    def generated_quantities(self, rng, mu, s):
        return {"y_rep": rng.normal(mu, s)}


@pytest.mark.parametrize("in_warmup", [True, False])
def test_resume_an_interrupted_run_from_file(tmp_path, in_warmup):
    m = Interrupting(y=0.7)
    kw = dict(chains=1, draws=80, warmup=80, seed=12, progress=False, parallel=False)
    Interrupting.limit[0] = None
    Interrupting.calls[0] = 0
    full = m.sample(**kw)
    # the evaluation to interrupt at, from this run (how many a phase takes depends on
    # the random stream): the middle of warmup or of sampling, where every evaluation
    # is a leapfrog step
    n_sampling = int(full["n_leapfrog__"].sum())
    n_warmup = Interrupting.calls[0] - n_sampling
    limit = n_warmup // 2 if in_warmup else n_warmup + n_sampling // 2
    Interrupting.calls[0] = 0
    Interrupting.limit[0] = limit
    try:
        with pytest.warns(RuntimeWarning, match="interrupted"):
            part = m.sample(**kw)
    finally:
        Interrupting.limit[0] = None
    assert part.interrupted and 0 < part.chain_states[0].iteration < 160
    assert (part.chain_states[0].iteration < 80) == in_warmup
    loaded = sl.load_fit(part.save(tmp_path / "part.nc"), model=m)
    assert loaded.interrupted
    assert loaded.chain_states[0].iteration == part.chain_states[0].iteration
    resumed = m.sample(resume_from=loaded, draws=80, progress=False, parallel=False)
    _same_fit(full, resumed)                       # y_rep too: the gq seeds were saved


def test_load_errors(short_fit, eight_schools, tmp_path):
    with pytest.raises(FileNotFoundError, match="no fit file"):
        sl.load_fit(tmp_path / "missing.nc")
    plain = tmp_path / "plain.nc"
    short_fit.to_arviz().to_netcdf(str(plain))
    with pytest.raises(sl.FitFileError, match="plain.nc.*has no 'stanlite_state' group"):
        sl.load_fit(plain)
    junk = tmp_path / "junk.nc"
    junk.write_text("not netCDF")
    with pytest.raises(sl.FitFileError, match="junk.nc.*is not a netCDF-4 .HDF5. file"):
        sl.load_fit(junk)
    path = short_fit.save(tmp_path / "es.nc")
    with pytest.raises(sl.ModelError, match=r"is of model EightSchools\w* with "
                       r"parameters \[theta_trans, mu, tau\]"):
        sl.load_fit(path, model=Interrupting(y=0.0))
    assert sl.load_fit(path, model=eight_schools).num_draws == 40


def test_state_codec_is_exact():
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(2 ** 100 + 7)))
    rng.normal(size=3)
    state = {"rng": rng.bit_generator.state, "i": np.int64(3), "f": np.float64(0.1),
             "b": np.bool_(True), "none": None, "s": "diag_e", "nan": float("nan"),
             "inf": -np.inf, "arr": np.array([[1.0, 2.0], [3.0, np.nextafter(1, 2)]]),
             "ints": np.arange(3), "draws": [np.array([0.1, 0.2]), np.array([0.3, 1e-300])],
             "empty": [], "stats": {"lp__": [-1.5, np.float64(2.25), 3], "td": [1, 2, 3]},
             "mixed": [1, "a", None], "big": [2 ** 70, 1],
             # per-reason counts (a chain's rejections): dicts with string keys
             "rejected": {"DomainError": 3, "non-finite log density": np.int64(1)},
             "one": {"x": 2}, "no_keys": {}}
    arrays = {}
    packed = fitmod._pack(state, arrays)
    import json
    back = fitmod._unpack(json.loads(json.dumps(packed)), arrays)
    assert back["rng"] == state["rng"]
    r2 = np.random.Generator(np.random.PCG64())
    r2.bit_generator.state = back["rng"]
    np.testing.assert_array_equal(r2.normal(size=5), rng.normal(size=5))
    assert back["i"] == 3 and back["f"] == 0.1 and back["b"] is True and back["none"] is None
    assert np.isnan(back["nan"]) and back["inf"] == -np.inf and back["s"] == "diag_e"
    np.testing.assert_array_equal(back["arr"], state["arr"])
    assert back["ints"].dtype == np.int64
    assert isinstance(back["draws"], list) and len(back["draws"]) == 2
    np.testing.assert_array_equal(back["draws"][1], state["draws"][1])
    assert back["empty"] == [] and back["mixed"] == [1, "a", None]
    assert back["stats"] == {"lp__": [-1.5, 2.25, 3.0], "td": [1, 2, 3]}
    assert back["big"] == [2 ** 70, 1]
    assert back["rejected"] == {"DomainError": 3, "non-finite log density": 1}
    assert type(back["rejected"]["non-finite log density"]) is int
    assert back["one"] == {"x": 2} and back["no_keys"] == {}
    ss = np.random.SeedSequence(None).spawn(3)[2]
    ss2 = fitmod._seed_from_json(json.loads(json.dumps(fitmod._seed_to_json(ss))))
    np.testing.assert_array_equal(ss2.generate_state(4), ss.generate_state(4))
    assert ss2.spawn_key == ss.spawn_key
    with pytest.raises(TypeError, match="cannot save"):
        fitmod._pack({"x": object()}, {})


# ---- ArviZ groups: observed/constant data, log-likelihood ----------------------------------
@pytest.fixture(scope="module")
def reg_fits():
    data = regression_data()
    kw = dict(chains=2, draws=250, warmup=200, seed=3, progress=False, parallel=False)
    return Regression(**data).sample(**kw), InterceptOnly(**data).sample(**kw)


def test_observed_and_constant_data(reg_fits, short_fit):
    idata = reg_fits[0].to_arviz()
    data = regression_data()
    np.testing.assert_array_equal(idata.observed_data["y"].values, data["y"])
    assert set(idata.observed_data.data_vars) == {"y"}
    # the size N names the dimension of x: its length, kept in the attrs (a variable
    # and a dimension of one name cannot share a group)
    assert set(idata.constant_data.data_vars) == {"x"}
    assert idata.constant_data["x"].dims == ("N",) and idata.constant_data.attrs["N"] == 20
    # without `observed`, every data field is constant data
    class NoObserved(type(short_fit.model)):
        observed = ()
    plain = NoObserved(**short_fit.model.data).generate_quantities(short_fit,
                                                                   seed=1).to_arviz()
    assert "observed_data" not in plain.groups()
    assert set(plain.constant_data.data_vars) == {"y", "sigma"}
    assert plain.constant_data.attrs["J"] == 8

    class Bad(InterceptOnly):
        observed = ("y", "z")
    fit = Bad(**data).sample(chains=1, draws=5, warmup=5, seed=1, progress=False)
    with pytest.raises(sl.ModelError, match="'z', which is not a data field"):
        fit.to_arviz()


def test_log_likelihood_group_and_loo(reg_fits, tmp_path):
    az = _arviz()
    lin, const = reg_fits
    idata = lin.to_arviz()
    ll = idata.log_likelihood["y"]                   # named after the one observed field
    assert ll.shape == (2, 250, 20)
    assert ll.dims[2] == idata.observed_data["y"].dims[0]
    # the values are the pointwise log densities at each draw
    a, b, s = lin["alpha"][1, 7], lin["beta"][1, 7], lin["sigma"][1, 7]
    from scipy.stats import norm
    data = regression_data()
    np.testing.assert_allclose(ll.values[1, 7], norm.logpdf(data["y"], a + b * data["x"], s))
    # **params signature, dict result
    assert set(const.to_arviz().log_likelihood.data_vars) == {"y"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")              # Pareto-k and pandas notices
        loo = az.loo(idata)
        cmp = az.compare({"linear": idata, "intercept": const.to_arviz()})
        loaded = az.loo(sl.load_fit(lin.save(tmp_path / "lin.nc")).to_arviz())
    assert np.isfinite(loo.elpd_loo) and loo.n_data_points == 20
    assert cmp.index[0] == "linear" and cmp.loc["intercept", "elpd_diff"] > 10
    assert loaded.elpd_loo == loo.elpd_loo


def test_log_likelihood_errors_are_named():
    class Asks(InterceptOnly):
        def log_likelihood(self, alpha, nope):
            return np.zeros(1)

    class Fails(InterceptOnly):
        def log_likelihood(self, alpha):
            raise ZeroDivisionError("boom")
    data = regression_data(5)
    for cls, msg in ((Asks, "asks for nope"), (Fails, "chain 1, draw 1: ZeroDivisionError")):
        fit = cls(**data).sample(chains=1, draws=5, warmup=5, seed=1, progress=False)
        with pytest.raises(sl.ModelError, match=msg):
            fit.to_arviz()


def test_summary_values_are_floats(short_fit):
    s = short_fit.summary()
    assert s.dtypes.eq(float).all() and np.isfinite(s.loc["mu"].values).all()


def test_save_warmup_keeps_the_warmup_iterations(eight_schools, short_fit, tmp_path):
    # cmdstanpy's save_warmup: the warmup iterations are kept (fit.warmup, ArviZ's
    # warmup groups, the file), and nothing after warmup changes
    fit = eight_schools.sample(chains=2, draws=40, warmup=60, seed=3, progress=False,
                               parallel=False, save_warmup=True)
    _same_fit(fit, short_fit)
    assert fit.warmup("theta").shape == (2, 60, 8)
    steps = fit.warmup("n_leapfrog__")
    assert steps.shape == (2, 60) and (steps >= 1).all()
    # the warmup's step sizes are the adaptation's: not all equal to the final one
    assert len(np.unique(fit.warmup("stepsize__"))) > 2
    idata = fit.to_arviz()
    assert {"warmup_posterior", "warmup_sample_stats"} <= set(idata.groups())
    np.testing.assert_array_equal(idata.warmup_sample_stats["n_steps"].values, steps)
    loaded = sl.load_fit(fit.save(tmp_path / "w.nc"))
    np.testing.assert_array_equal(loaded.warmup("theta"), fit.warmup("theta"))
    with pytest.raises(KeyError, match="save_warmup=True"):
        short_fit.warmup("theta")


# ---- the data a fit was made with --------------------------------------------------------------
def test_load_for_resume_refuses_other_data(short_fit, tmp_path):
    from stanlite.models import get
    path = short_fit.save(tmp_path / "es.nc")
    es = get("eight_schools_noncentered")
    other = type(es)(**{**es.data, "y": np.asarray(es.data["y"]) + 1.0})
    with pytest.raises(sl.DataError, match=r"es.nc.* was made with other data .*\(y "
                       r"differ\).*mix two posteriors.*data_changed_ok=True"):
        sl.load_fit(path, model=other)
    with pytest.warns(RuntimeWarning, match="other data"):
        loaded = sl.load_fit(path, model=other, data_changed_ok=True)
    assert loaded.model is other
    # the same data in a new instance is fine; a loaded fit without a model keeps the
    # fingerprint (it saves it again, and resume_from compares against it)
    assert sl.load_fit(path, model=type(es)(**es.data)).num_draws == 40
    bare = sl.load_fit(path)
    again = sl.load_fit(bare.save(tmp_path / "again.nc"))
    with pytest.raises(sl.ModelError, match=r"is of model EightSchools\w* with "
                       r"parameters \[theta_trans, mu, tau\]"):
        sl.load_fit(again.save(tmp_path / "third.nc"), model=Interrupting(y=0.0))
    with pytest.raises(sl.DataError, match="y differ"):
        other.sample(resume_from=again, draws=41, progress=False, parallel=False)


def test_resume_from_a_fit_on_other_data_refuses():
    data = regression_data()
    kw = dict(chains=1, draws=20, warmup=20, seed=1, progress=False, parallel=False)
    fit = Regression(**data).sample(**kw)
    changed = Regression(**{**data, "x": data["x"] * 2, "y": data["y"][::-1]})
    with pytest.raises(sl.DataError, match=r"resume_from .* other data .*\(x, y differ\)"):
        changed.sample(resume_from=fit, draws=25, progress=False, parallel=False)
    with pytest.warns(RuntimeWarning, match="other data"):
        more = changed.sample(resume_from=fit, draws=25, progress=False, parallel=False,
                              data_changed_ok=True)
    assert more.num_draws == 25
    # another instance with equal data resumes quietly
    same = Regression(**{k: np.array(v, copy=True) for k, v in data.items()})
    assert same.sample(resume_from=fit, draws=25, progress=False,
                       parallel=False).num_draws == 25


def _v1_layout(fit):
    """The fit's InferenceData as format 1 wrote it: every quantity in the posterior
    (the replicate y_rep too), sizes as variables of constant_data."""
    import xarray as xr
    idata = fit.to_arviz().copy()
    rep = idata.posterior_predictive["y"].rename({"J": "y_rep_dim_0"})
    idata.posterior = idata.posterior.assign(y_rep=rep)
    del idata.posterior_predictive
    const = xr.merge([idata.constant_data, idata.observed_data]).rename({"J": "dim"})
    idata.constant_data = const.assign(J=xr.DataArray(8))
    del idata.observed_data
    return idata


def test_version_1_file_is_checked_against_its_data_groups(short_fit, tmp_path):
    # a file as stanlite wrote it before fingerprints and checksums (format 1)
    import json
    import xarray as xr
    path = str(tmp_path / "v1.nc")
    meta = {"format": "stanlite-fit", "version": 1, "method": short_fit.method,
            "max_treedepth": 10, "interrupted": False, "names": short_fit.names,
            "model": "x.EightSchools", "unconstrained_names":
                fitmod._unconstrained_names(short_fit.model),
            "gq_seeds": [fitmod._seed_to_json(s) for s in short_fit.gq_seeds],
            "chain_states": [s.to_dict() for s in short_fit.chain_states]}
    arrays = {}
    text = json.dumps(fitmod._pack(meta, arrays)).encode()
    ds = xr.Dataset({k: ([f"{k}_dim_{i}" for i in range(v.ndim)], v)
                     for k, v in arrays.items()})
    ds["state_json"] = (("state_json_bytes",), np.frombuffer(text, dtype=np.uint8))
    _v1_layout(short_fit).to_netcdf(path)
    ds.to_netcdf(path, mode="a", group=fitmod.STATE_GROUP, engine="h5netcdf")
    es = short_fit.model
    _same_fit(short_fit, sl.load_fit(path, model=type(es)(**es.data)))
    other = type(es)(**{**es.data, "sigma": np.asarray(es.data["sigma"]) * 2})
    with pytest.raises(sl.DataError, match="sigma differ"):
        sl.load_fit(path, model=other)
    # no checksums in format 1: a posterior of the wrong shape is found by its shape
    cut = str(tmp_path / "v1_cut.nc")
    idata = _v1_layout(short_fit)
    idata.posterior = idata.posterior.isel(chain=[0])
    idata.to_netcdf(cut)
    ds.to_netcdf(cut, mode="a", group=fitmod.STATE_GROUP, engine="h5netcdf")
    with pytest.raises(sl.FitFileError, match=r"v1_cut.nc.*its posterior '\w+' has 1 "
                       r"chains x 40 draws; the chain states have 2 x 40"):
        sl.load_fit(cut)
