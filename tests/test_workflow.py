"""The work around a fit (issue 21): standalone generated quantities on the same or new
data, ``load_fit`` with other data, the prior and its predictive, ArviZ groups and
dims, draws by Stan's element names and as tables, integer generated quantities."""

import warnings

import numpy as np
import pytest

import stanlite as sl

from testkit import Regression, regression_data


def _arviz():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz
    return arviz


class Reg(Regression):
    """testkit's regression (observed y, its pointwise log-likelihood) with
    generated quantities: the mean, the replicate y_rep, a count."""

    def generated_quantities(self, rng, alpha, beta, sigma):
        mu = alpha + beta * self.x
        return {"mu": mu, "y_rep": rng.normal(mu, sigma),
                "n_pos": rng.poisson(3.0, size=self.N)}


@pytest.fixture(scope="module")
def reg_fit():
    return Reg(**regression_data()).sample(chains=2, draws=150, warmup=150, seed=1,
                                           progress=False, parallel=False)


# ---- 1. standalone generated quantities ---------------------------------------------------
def test_generate_quantities_new_data_equals_hand_computation(reg_fit):
    xn = np.linspace(-1.0, 1.0, 5)
    new = Reg(N=5, x=xn, y=np.zeros(5))
    g = new.generate_quantities(reg_fit, seed=3)
    a, b = reg_fit["alpha"][..., None], reg_fit["beta"][..., None]
    np.testing.assert_allclose(g["mu"], a + b * xn, rtol=1e-14)
    for k in ("alpha", "beta", "sigma"):             # the draws are the fit's, unchanged
        np.testing.assert_array_equal(g[k], reg_fit[k])
    assert g["y_rep"].shape == (2, 150, 5) and g.model is new
    # the replicates: y_rep = mu + sigma z, z standard normal
    z = (g["y_rep"] - g["mu"]) / reg_fit["sigma"][..., None]
    assert abs(z.mean()) < 0.05 and abs(z.std() - 1) < 0.05
    # the same seed, the same quantities; the fit itself is untouched
    np.testing.assert_array_equal(new.generate_quantities(reg_fit, seed=3)["y_rep"],
                                  g["y_rep"])
    assert reg_fit["mu"].shape == (2, 150, 20)
    # its ArviZ export carries the new data
    idata = g.to_arviz()
    np.testing.assert_array_equal(idata.constant_data["x"].values, xn)


def test_generate_quantities_same_data_same_seed_streams(reg_fit):
    g = reg_fit.model.generate_quantities(reg_fit, seed=11)
    np.testing.assert_array_equal(g["mu"], reg_fit["mu"])
    assert not np.array_equal(g["y_rep"], reg_fit["y_rep"])      # other streams


def test_generate_quantities_checks_parameters(reg_fit):
    class Other(sl.Model):
        N = sl.data.int(lower=0)
        x = sl.data.vector("N")
        y = sl.data.vector("N")
        alpha = sl.param.real()

        def log_prob(self, alpha):
            return sl.normal_lpdf(alpha, 0, 1)
    with pytest.raises(sl.ArgumentError, match="parameters"):
        Other(**regression_data()).generate_quantities(reg_fit)
    with pytest.raises(sl.ArgumentError, match="takes a fit"):
        reg_fit.model.generate_quantities({"alpha": 1.0})


def test_generate_quantities_fit_cannot_resume_on_new_data(reg_fit):
    new = Reg(**regression_data(8, seed=5))
    g = new.generate_quantities(reg_fit, seed=1)
    with pytest.raises(sl.DataError, match="other data"):
        new.sample(resume_from=g, draws=200, progress=False)


def test_generate_quantities_from_loaded_and_approximate_fits(reg_fit, tmp_path):
    path = reg_fit.save(tmp_path / "reg.nc")
    xn = np.array([0.0, 3.0])
    new = Reg(N=2, x=xn, y=np.zeros(2))
    g = new.generate_quantities(sl.load_fit(path), seed=2)
    np.testing.assert_allclose(g["mu"][..., 1], reg_fit["alpha"] + 3 * reg_fit["beta"],
                               rtol=1e-14)
    lap = reg_fit.model.laplace(draws=50, seed=1)
    gl = new.generate_quantities(lap, seed=2)
    np.testing.assert_allclose(gl["mu"][..., 1], lap["alpha"] + 3 * lap["beta"],
                               rtol=1e-14)


def test_load_fit_with_other_data_recomputes_quantities(reg_fit, tmp_path):
    path = reg_fit.save(tmp_path / "reg.nc")
    xn = np.linspace(0.0, 1.0, 4)
    new = Reg(N=4, x=xn, y=np.ones(4))
    with pytest.raises(sl.DataError, match="generate_quantities"):
        sl.load_fit(path, model=new)
    with pytest.warns(RuntimeWarning, match="recomputed with this model's data"):
        loaded = sl.load_fit(path, model=new, data_changed_ok=True)
    # never the saved quantities of the other data
    assert loaded["mu"].shape == (2, 150, 4)
    np.testing.assert_allclose(loaded["mu"], reg_fit["alpha"][..., None]
                               + reg_fit["beta"][..., None] * xn, rtol=1e-14)
    np.testing.assert_array_equal(loaded.to_arviz().constant_data["x"].values, xn)
    # with the fit's own data nothing is recomputed: the saved values
    same = sl.load_fit(path, model=reg_fit.model)
    np.testing.assert_array_equal(same["y_rep"], reg_fit["y_rep"])


# ---- 3. ArviZ groups that ArviZ's functions take as they are -------------------------------
def _quiet():
    ctx = warnings.catch_warnings()
    ctx.__enter__()
    warnings.simplefilter("ignore")        # PSIS's Pareto-k notices on a few draws
    return ctx


def _ppc_and_loo(idata):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    az = _arviz()
    ctx = _quiet()
    try:
        az.plot_ppc(idata, num_pp_samples=5)
        plt.close("all")
        return az.loo(idata)
    finally:
        ctx.__exit__(None, None, None)


def test_reg_groups_dims_and_arviz_functions(reg_fit):
    idata = reg_fit.to_arviz()
    assert {"posterior", "posterior_predictive", "log_likelihood", "sample_stats",
            "observed_data", "constant_data"} <= set(idata.groups())
    # y_rep is the replicate of y, under y's name; out of the posterior
    assert set(idata.posterior_predictive.data_vars) == {"y"}
    np.testing.assert_array_equal(idata.posterior_predictive["y"].values, reg_fit["y_rep"])
    assert "y_rep" not in idata.posterior.data_vars
    # dims named after the declared size N, shared by every vector of that length
    for g, k in (("posterior_predictive", "y"), ("log_likelihood", "y"),
                 ("observed_data", "y"), ("constant_data", "x"), ("posterior", "mu")):
        assert idata[g][k].dims[-1] == "N", (g, k)
    # the size N is the dimension's length: out of the variables, in the attrs
    assert "N" not in idata.constant_data.data_vars
    assert idata.constant_data.attrs["N"] == 20
    loo = _ppc_and_loo(idata)
    assert np.isfinite(loo.elpd_loo) and loo.n_data_points == 20


def test_coords_and_dims_arguments(reg_fit, tmp_path):
    labels = [f"obs{i}" for i in range(20)]
    idata = reg_fit.to_arviz(coords={"N": labels})
    for g in ("posterior", "posterior_predictive", "log_likelihood", "observed_data"):
        assert list(idata[g].coords["N"].values) == labels
    with pytest.raises(sl.ArgumentError, match="expected 20 labels"):
        reg_fit.to_arviz(coords={"N": labels[:3]})
    with pytest.raises(sl.ArgumentError, match="no group has"):
        reg_fit.to_arviz(coords={"school": labels})
    idata = reg_fit.to_arviz(dims={"mu": ["obs"]})
    assert idata.posterior["mu"].dims == ("chain", "draw", "obs")
    with pytest.raises(sl.ArgumentError, match="1 names for its 0 axes"):
        reg_fit.to_arviz(dims={"alpha": ["a"]})
    with pytest.raises(sl.ArgumentError, match="'nu', which is not a variable"):
        reg_fit.to_arviz(dims={"nu": ["a"]})
    # saved with the labels, read back with them (text coordinates keep their checksums)
    path = reg_fit.save(tmp_path / "labelled.nc", coords={"N": labels})
    loaded = sl.load_fit(path)
    assert list(loaded.to_arviz().posterior.coords["N"].values) == labels
    again = loaded.to_arviz(coords={"N": labels[::-1]})
    assert list(again.observed_data.coords["N"].values) == labels[::-1]


def test_eight_schools_dims_and_coords():
    import stanlite.models as zoo
    fit = zoo.get("eight_schools_noncentered").sample(chains=2, draws=60, warmup=60,
                                                      seed=2, progress=False,
                                                      parallel=False)
    schools = list("ABCDEFGH")
    idata = fit.to_arviz(coords={"J": schools})
    for g, k in (("posterior", "theta_trans"), ("posterior", "theta"),
                 ("posterior", "log_lik"), ("posterior_predictive", "y"),
                 ("log_likelihood", "y"), ("observed_data", "y"),
                 ("constant_data", "sigma")):
        assert idata[g][k].dims[-1] == "J", (g, k)
        assert list(idata[g][k].coords["J"].values) == schools
    assert idata.posterior["mu"].dims == ("chain", "draw")


def test_predictive_declarations_are_checked(reg_fit):
    class Bad(Reg):
        predictive = {"x": "y_rep"}

    class Missing(Reg):
        predictive = {"y": "nope"}
    for cls, msg in ((Bad, "'x', which is not an observed"), (Missing, "'nope'")):
        fit = cls(**regression_data()).generate_quantities(reg_fit, seed=1)
        with pytest.raises(sl.ModelError, match=msg):
            fit.to_arviz()


# the zoo models with observed data when the arviz test was written: they draw their
# points from one stream in this order (a new model in between would move them)
_ZOO_2026_11_25 = ("eight_schools_centered", "eight_schools_noncentered", "garch",
                   "gp_pois_regr", "linear_regression", "logistic_regression",
                   "mm_multidose_ss", "normal_mixture", "one_comp_mm_elim_abs",
                   "pk_steady_state", "radon", "theophylline", "ark")


def _zoo_with_observed():
    import stanlite.models as zoo
    return [n for n in zoo.names() if getattr(zoo.model_class(n), "observed", None)]


def _valid_point(m, rng):
    """A point where the log density and every pointwise log-likelihood are finite."""
    from stanlite.workflow import likelihood_sum
    for _ in range(50):
        x = rng.uniform(-1.0, 1.0, m.dim)
        try:
            with np.errstate(all="ignore"):
                params, _ = m._constrain(x, False)
                ll = likelihood_sum(m, {**params, **m._transformed(params)})
                if np.isfinite(m.log_density(x)) and np.isfinite(sl.value_of(ll)):
                    return x
        except (sl.DomainError, ArithmeticError):
            continue
    raise AssertionError("no valid point")


def _perturbed(v):
    v = np.asarray(v)
    return v + 1 if v.dtype.kind in "iu" and v.max() > 1 else \
        (1 - v if v.dtype.kind in "iu" else v * 1.1)


def test_every_zoo_model_with_observed_data_works_in_arviz():
    """plot_ppc and loo on each zoo model with observed data (draws near a valid point:
    the groups, not the posterior, are under test), and its declared log_likelihood is
    exactly the likelihood terms of log_prob: the prior (log_prob minus their sum) does
    not change when the observations do."""
    import zlib
    import stanlite.models as zoo
    from stanlite.approx_fit import ApproximateFit
    from stanlite.workflow import prior_model
    names = _zoo_with_observed()
    assert len(names) == 14 and "neal_funnel" not in names
    rng = np.random.default_rng(7)
    for name in names:
        m = zoo.get(name)
        # (models added later draw from their own stream: the others keep their points)
        r = rng if name in _ZOO_2026_11_25 else \
            np.random.default_rng(zlib.crc32(name.encode()))
        x = _valid_point(m, r)
        fit = ApproximateFit(m, x + 0.01 * r.normal(size=(8, m.dim)), "test", seed=1)
        idata = fit.to_arviz()
        obs = m.observed[0]
        assert obs in idata.posterior_predictive.data_vars, name
        assert idata.posterior_predictive[obs].shape[2:] == np.shape(m.data[obs])
        loo = _ppc_and_loo(idata)
        assert loo.n_data_points > 0, name
        if "log_lik" in fit:               # the zoo's own log_lik agrees
            # (one observed field: the group's variable is named after it; several:
            # "log_lik", the observations in the order of log_likelihood's array)
            ll = obs if len(m.observed) == 1 else "log_lik"
            np.testing.assert_allclose(idata.log_likelihood[ll].values, fit["log_lik"],
                                       rtol=1e-10, err_msg=name)
        other = zoo.get(name, **{obs: _perturbed(m.data[obs])})
        a, b = prior_model(m).log_density(x), prior_model(other).log_density(x)
        assert a == pytest.approx(b, rel=1e-9, abs=1e-9), name


def test_cli_file_works_in_arviz(tmp_path):
    import subprocess
    import sys
    az = _arviz()
    path = tmp_path / "es.nc"
    r = subprocess.run([sys.executable, "-m", "stanlite", "sample", "eight_schools",
                        "--chains", "2", "--draws", "100", "--warmup", "100", "--seed",
                        "1", "--no-progress", "--serial", "--output", str(path)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    idata = az.from_netcdf(path)
    loo = _ppc_and_loo(idata)
    assert loo.n_data_points == 8
    import stanlite.models as zoo
    centered = zoo.get("eight_schools_centered").sample(chains=2, draws=100, warmup=100,
                                                         seed=1, progress=False,
                                                         parallel=False)
    ctx = _quiet()
    try:
        cmp = az.compare({"noncentered": idata, "centered": centered.to_arviz()})
    finally:
        ctx.__exit__(None, None, None)
    assert set(cmp.index) == {"noncentered", "centered"}
    loaded = sl.load_fit(path)                  # stanlite reads it back whole
    assert loaded["y_rep"].shape == (2, 100, 8)


# ---- 2. the prior and its predictive --------------------------------------------------------
class Conjugate(sl.Model):
    """y_n ~ N(mu, sigma) with sigma known, mu ~ N(m0, s0): the prior predictive of
    each y_n is N(m0, sqrt(s0^2 + sigma^2))."""
    N = sl.data.int(lower=0)
    y = sl.data.vector("N")
    sigma = sl.data.real(lower=0)
    mu = sl.param.real()
    observed = ("y",)
    m0, s0 = 1.5, 2.0

    def log_prob(self, mu):
        return sl.normal_lpdf(mu, self.m0, self.s0) + sl.normal_lpdf(self.y, mu, self.sigma)

    def log_likelihood(self, mu):
        z = (self.y - mu) / self.sigma
        return -0.5 * z * z - np.log(self.sigma) - 0.5 * np.log(2 * np.pi)

    def generated_quantities(self, rng, mu):
        return {"y_rep": rng.normal(mu, self.sigma, self.N)}


class ConjugateWithPrior(Conjugate):
    """The same prior, stated by log_prior (no log_likelihood needed)."""
    log_likelihood = None

    def log_prior(self, mu):
        return sl.normal_lpdf(mu, self.m0, self.s0)


@pytest.fixture(scope="module")
def prior_fit():
    m = Conjugate(N=3, y=[10.0, 11.0, 12.0], sigma=1.5)   # data far from the prior
    return m.sample_prior_predictive(draws=1000, chains=4, seed=5, progress=False,
                                     parallel=False)


def test_prior_predictive_of_a_conjugate_model(prior_fit):
    az = _arviz()
    assert prior_fit.kind == "prior"
    m0, s0, sigma = Conjugate.m0, Conjugate.s0, 1.5
    s = prior_fit.summary()
    # the prior of mu: its mean within 4 Monte Carlo standard errors, not the posterior's
    assert abs(s.loc["mu", "mean"] - m0) < 4 * s.loc["mu", "mcse_mean"]
    # the prior predictive: mean m0, variance s0^2 + sigma^2 (for every y_n)
    var = s0 ** 2 + sigma ** 2
    for j in range(3):
        yj = prior_fit["y_rep"][..., j]
        assert abs(yj.mean() - m0) < 4 * s.loc[f"y_rep[{j + 1}]", "mcse_mean"]
        dev2 = (yj - m0) ** 2                     # E = var; its own MCSE from its ESS
        ess = float(np.asarray(az.ess(dev2, method="mean")).reshape(-1)[0])
        se = dev2.std() / np.sqrt(ess)
        assert abs(dev2.mean() - var) < 4 * se, (j, dev2.mean(), var, se)
    # two observations share mu: covariance s0^2
    y = prior_fit["y_rep"]
    cov = np.mean((y[..., 0] - m0) * (y[..., 1] - m0))
    assert abs(cov - s0 ** 2) < 0.2 * s0 ** 2


def test_prior_fit_arviz_groups_and_file(prior_fit, tmp_path):
    idata = prior_fit.to_arviz()
    assert {"prior", "prior_predictive", "sample_stats_prior", "observed_data"} <= \
        set(idata.groups())
    assert "posterior" not in idata.groups() and "log_likelihood" not in idata.groups()
    assert idata.prior_predictive["y"].dims == ("chain", "draw", "N")
    np.testing.assert_array_equal(idata.prior["mu"].values, prior_fit["mu"])
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    _arviz().plot_ppc(idata, group="prior", num_pp_samples=5)     # prior predictive check
    plt.close("all")
    # joined to a posterior's InferenceData: ArviZ's prior predictive check
    post = prior_fit.model.sample(chains=2, draws=100, warmup=100, seed=1, progress=False,
                                  parallel=False)
    both = post.to_arviz()
    both.extend(idata)
    assert {"posterior", "prior", "prior_predictive"} <= set(both.groups())
    loaded = sl.load_fit(prior_fit.save(tmp_path / "prior.nc"))
    assert loaded.kind == "prior"
    np.testing.assert_array_equal(loaded["y_rep"], prior_fit["y_rep"])
    with pytest.raises(sl.ArgumentError, match="prior"):
        prior_fit.model.sample(resume_from=loaded, progress=False)
    with pytest.raises(sl.ArgumentError, match="prior"):
        Conjugate(N=3, y=[10.0, 11.0, 12.0], sigma=1.5).sample(resume_from=prior_fit,
                                                               progress=False)


def test_log_prior_gives_the_same_prior():
    from stanlite.workflow import prior_model
    data = dict(N=3, y=[10.0, 11.0, 12.0], sigma=1.5)
    a, b = prior_model(Conjugate(**data)), prior_model(ConjugateWithPrior(**data))
    for x in (-3.0, 0.0, 2.5):
        la, ga = a.log_density_gradient(np.array([x]))
        lb, gb = b.log_density_gradient(np.array([x]))
        assert la == pytest.approx(lb, rel=1e-12) and ga == pytest.approx(gb, rel=1e-12)
    fit = ConjugateWithPrior(**data).sample_prior_predictive(
        draws=400, chains=2, seed=5, progress=False, parallel=False)
    s = fit.summary()
    assert abs(s.loc["mu", "mean"] - Conjugate.m0) < 4 * s.loc["mu", "mcse_mean"]


def test_prior_with_a_cancelling_likelihood_runs_quietly():
    """log_prob - sum(log_likelihood) with terms ~1e9 and a prior ~1: the retaped
    replays cannot match the tape to 1e-12 of the difference; the prior falls back to
    the eager tape without a warning (warnings are errors here) and is right."""
    m = Conjugate(N=2000, y=np.full(2000, 100.0), sigma=0.1)
    fit = m.sample_prior_predictive(draws=300, chains=2, seed=1, progress=False,
                                    parallel=False)
    s = fit.summary()
    assert abs(s.loc["mu", "mean"] - Conjugate.m0) < 4 * s.loc["mu", "mcse_mean"]
    assert 1.6 < s.loc["mu", "sd"] < 2.4


def test_improper_or_undeclared_priors_are_errors():
    import stanlite.models as zoo
    # the kidiq regression has a flat prior on beta
    with pytest.raises(sl.ModelError, match=r"improper.*beta\[1\]"):
        zoo.get("linear_regression").sample_prior_predictive(draws=10, progress=False)

    class NoPrior(sl.Model):                       # sigma without a prior
        N = sl.data.int(lower=0)
        y = sl.data.vector("N")
        mu = sl.param.real()
        sigma = sl.param.real(lower=0)

        def log_prob(self, mu, sigma):
            return sl.normal_lpdf(mu, 0, 1) + sl.normal_lpdf(self.y, mu, sigma)

        def log_likelihood(self, mu, sigma):
            z = (self.y - mu) / sigma
            return -0.5 * z * z - sl.log(sigma) - 0.5 * np.log(2 * np.pi)

        def generated_quantities(self, rng, mu, sigma):
            return {}
    m = NoPrior(N=2, y=[0.0, 1.0])
    with pytest.raises(sl.ModelError, match="improper.*sigma"):
        m.sample_prior_predictive(draws=10, progress=False)

    class Undeclared(sl.Model):
        mu = sl.param.real()

        def log_prob(self, mu):
            return sl.normal_lpdf(mu, 0, 1)
    with pytest.raises(sl.ModelError, match="declares no likelihood"):
        Undeclared().sample_prior_predictive(draws=10, progress=False)

    class AsksForGq(Conjugate):
        def log_likelihood(self, y_rep):
            return np.zeros(3)
    with pytest.raises(sl.ModelError, match="asks for y_rep"):
        AsksForGq(N=3, y=[1.0, 2.0, 3.0], sigma=1.0).sample_prior_predictive(
            draws=10, progress=False, parallel=False, chains=1)


def test_zoo_prior_predictive_eight_schools():
    import stanlite.models as zoo
    fit = zoo.get("eight_schools_noncentered").sample_prior_predictive(
        draws=300, chains=2, seed=3, progress=False, parallel=False)
    s = fit.summary()
    # mu ~ N(0, 5): its prior, not the posterior (whose mean is ~4.4)
    assert abs(s.loc["mu", "mean"]) < 4 * s.loc["mu", "mcse_mean"] + 0.5
    assert 3.5 < s.loc["mu", "sd"] < 6.5
    assert set(fit.to_arviz().prior_predictive.data_vars) == {"y"}


def test_centred_hierarchies_have_proper_priors():
    # alpha_j ~ N(mu, tau), tau half-normal: proper, but at the origin (alpha_j = mu)
    # the log density grows as log(tau) -> -inf (the funnel's neck); the improperness
    # probe took that for an improper prior and refused eight schools (centred), radon
    import stanlite.models as zoo
    from stanlite.workflow import check_proper_prior, prior_model
    for name in ("eight_schools_centered", "radon"):
        check_proper_prior(prior_model(zoo.get(name)))
    fit = zoo.get("eight_schools_centered").sample_prior_predictive(
        draws=50, warmup=50, chains=1, seed=3, progress=False, parallel=False)
    assert fit.kind == "prior" and fit["tau"].shape == (1, 50)


# ---- 5. draws by Stan's element names and as tables; integer quantities ---------------------
def test_element_names_index_draws(reg_fit):
    np.testing.assert_array_equal(reg_fit["mu[3]"], reg_fit["mu"][:, :, 2])
    assert reg_fit["alpha"].shape == (2, 150) and "mu[20]" in reg_fit
    assert "mu[21]" not in reg_fit and "mu[0]" not in reg_fit
    with pytest.raises(KeyError, match=r"indexed from 1.*mu\[20\]"):
        reg_fit["mu[21]"]
    with pytest.raises(KeyError, match="not a parameter"):
        reg_fit["nope[1]"]
    # a scalar has no elements (was "its elements run from alpha[] to alpha[]")
    with pytest.raises(KeyError, match=r"'alpha' is a scalar, it has no elements"):
        reg_fit["alpha[1]"]
    # the same names as summary()'s rows

    class M(sl.Model):
        L = sl.param.cholesky_factor_corr(3)

        def log_prob(self, L):
            return sl.lkj_corr_cholesky_lpdf(L, 2.0)
    fit = M().sample(chains=1, draws=20, warmup=20, seed=1, progress=False)
    for name in fit.summary().index:
        assert fit[name].shape == (1, 20)
    np.testing.assert_array_equal(fit["L[3,2]"], fit["L"][:, :, 2, 1])


def test_draws_pd_columns_and_rows(reg_fit):
    df = reg_fit.draws_pd()
    stats = ["lp__", "accept_stat__", "stepsize__", "treedepth__", "n_leapfrog__",
             "divergent__", "energy__"]
    assert list(df.columns[:3]) == ["chain__", "iter__", "draw__"]
    assert all(c in df.columns[3:12] for c in stats)
    names = reg_fit.model.param_names(include_tp=True, include_gq=True)
    assert list(df.columns[-len(names):]) == names
    assert df.shape == (300, 3 + len(reg_fit.sampler_stats) + len(names))
    assert df["chain__"].tolist() == [1] * 150 + [2] * 150
    assert df["iter__"].tolist() == list(range(1, 151)) * 2
    assert df["draw__"].tolist() == list(range(1, 301))
    np.testing.assert_array_equal(df["mu[2]"].values, reg_fit["mu"][:, :, 1].ravel())
    np.testing.assert_array_equal(df["lp__"].values, reg_fit["lp__"].ravel())
    assert df["n_pos[1]"].dtype == np.int64 and df["mu[1]"].dtype == np.float64
    sub = reg_fit.draws_pd(vars=["beta", "mu[2]", "lp__"])
    assert list(sub.columns) == ["chain__", "iter__", "draw__", "lp__", "beta", "mu[2]"]
    with pytest.raises(KeyError, match="'gamma' is not"):
        reg_fit.draws_pd(vars="gamma")


def test_draws_pd_and_xr_with_warmup():
    fit = Reg(**regression_data()).sample(chains=2, draws=30, warmup=20, seed=4, progress=False,
                                    parallel=False, save_warmup=True)
    df = fit.draws_pd(inc_warmup=True)
    assert df.shape[0] == 2 * 50 and df["iter__"].tolist()[:3] == [1, 2, 3]
    np.testing.assert_array_equal(df["alpha"].values[:20], fit.warmup("alpha")[0])
    np.testing.assert_array_equal(df["alpha"].values[20:50], fit["alpha"][0])
    ds = fit.draws_xr(inc_warmup=True)
    assert ds["mu"].dims == ("chain", "draw", "N") and ds["mu"].shape == (2, 50, 20)
    ds = fit.draws_xr(vars=["alpha", "n_pos"])
    assert set(ds.data_vars) == {"alpha", "n_pos"} and list(ds["chain"].values) == [1, 2]
    assert ds["n_pos"].dtype == np.int64


def test_integer_quantities_keep_their_dtype(reg_fit, tmp_path):
    assert reg_fit["n_pos"].dtype == np.int64 and reg_fit["y_rep"].dtype == np.float64
    assert reg_fit.draws(chain=0)["n_pos"].dtype == np.int64
    assert reg_fit.to_arviz().posterior["n_pos"].dtype == np.int64
    path = reg_fit.save(tmp_path / "ints.nc")
    loaded = sl.load_fit(path)
    assert loaded["n_pos"].dtype == np.int64
    np.testing.assert_array_equal(loaded["n_pos"], reg_fit["n_pos"])
    assert _arviz().from_netcdf(path).posterior["n_pos"].dtype == np.int64
    import stanlite.models as zoo
    m = zoo.get("logistic_regression")
    fit = m.sample(chains=1, draws=10, warmup=20, seed=1, progress=False)
    assert fit["y_rep"].dtype == np.int64
    assert fit.to_arviz().posterior_predictive["y"].dtype == np.int64


def test_an_integer_quantity_with_a_failed_draw_is_real(reg_fit):
    class Sometimes(Reg):
        def generated_quantities(self, rng, alpha, beta, sigma):
            if rng.random() < 0.2:
                raise ValueError("sometimes")
            return {"count": rng.poisson(2.0)}
    with pytest.warns(RuntimeWarning, match="failed at"):
        fit = Sometimes(**regression_data()).generate_quantities(reg_fit, seed=1)
    c = fit["count"]
    assert c.dtype == np.float64 and np.isnan(c).any()
    ok = c[~np.isnan(c)]
    np.testing.assert_array_equal(ok, np.round(ok))


# ---- 11. the command line ---------------------------------------------------------------------
def _cli(argv, capsys):
    from stanlite.cli import main
    code = main(argv)
    return code, capsys.readouterr()


def test_cli_version_sampler_save_warmup_init(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        _cli(["--version"], capsys)
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"stanlite {sl.__version__}"
    init = tmp_path / "init.json"
    init.write_text('{"mu": 1.0, "tau": 2.0}')
    path = tmp_path / "hmc.nc"
    code, io = _cli(["sample", "eight_schools", "--chains", "1", "--draws", "20",
                     "--warmup", "15", "--seed", "1", "--no-progress", "--sampler", "hmc",
                     "--save-warmup", "--init", str(init), "-o", str(path)], capsys)
    assert code == 0, io.err
    fit = sl.load_fit(path)
    assert fit.method == "hmc" and fit.num_warmup_draws == 15
    assert "warmup_posterior" in _arviz().from_netcdf(path).groups()
    assert fit.chain_states[0].sampler == "hmc"
    with pytest.raises(SystemExit):
        _cli(["sample", "eight_schools", "--sampler", "gibbs"], capsys)


def test_cli_optimize_prints_the_parameters(capsys):
    code, io = _cli(["optimize", "eight_schools", "--seed", "1"], capsys)
    assert code == 0
    rows = [line.split()[0] for line in io.out.splitlines()[4:] if line.strip()]
    assert rows[:3] == ["lp__", "theta_trans[1]", "theta_trans[2]"]
    assert "tau" in rows and "theta[1]" not in rows and "y_rep[1]" not in rows
    assert "24 values of transformed parameters and generated quantities not shown" \
        in io.out
    code, io = _cli(["optimize", "eight_schools", "--seed", "1", "--all"], capsys)
    assert code == 0 and "y_rep[8]" in io.out and "not shown" not in io.out
