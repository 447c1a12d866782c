"""ApproximateFit: draws from an approximation with the NUTS Fit's interface
(``fit[name]``, ``summary()``, ``to_arviz()``, ``save()``), and the Pareto k-hat of
the importance ratios in ``diagnose()``."""

import warnings

import numpy as np
import pytest

import stanlite as sl
from stanlite.approx_fit import ApproximateFit, pareto_k_threshold
from stanlite.fit import Fit
from stanlite.models import get


def _arviz():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz
    return arviz


class StdNormal(sl.Model):
    """x ~ N(0, I_2) on the unconstrained space; ``sigma = exp(x_2)``."""
    mu = sl.param.real()
    sigma = sl.param.real(lower=0)

    def log_prob(self, mu, sigma):
        # lognormal(sigma | 0, 1) times the Jacobian sigma = N(log sigma | 0, 1)
        return sl.normal_lpdf(mu, 0, 1) + sl.lognormal_lpdf(sigma, 0, 1)


def _gaussian_draws(scale, n, seed):
    """Draws from q = N(0, scale^2 I_2), their log q, and log p of StdNormal."""
    m = StdNormal()
    x = scale * np.random.default_rng(seed).standard_normal((n, 2))
    log_q = np.sum(-0.5 * (x / scale) ** 2 - np.log(scale * np.sqrt(2 * np.pi)), axis=1)
    log_p = np.array([m.log_density(xi) for xi in x])
    return m, x, log_p, log_q


@pytest.fixture(scope="module")
def schools_fit():
    m = get("eight_schools_noncentered")
    x = np.random.default_rng(3).normal(0, 0.5, (200, m.dim))
    log_p = np.array([m.log_density(xi) for xi in x])
    log_q = np.zeros(200)
    fit = ApproximateFit(m, x, "meanfield", log_p=log_p, log_q=log_q, seed=11,
                         extras={"mean": np.zeros(m.dim)}, notes=["A note."],
                         stats={"path": np.arange(200) % 4})
    return m, x, fit


# ---- the Fit interface ---------------------------------------------------------------------
def test_draws_by_name_match_the_model_output(schools_fit):
    m, x, fit = schools_fit
    assert isinstance(fit, Fit)
    assert fit.names == ["theta_trans", "mu", "tau", "theta", "y_rep", "log_lik"]
    assert fit["theta"].shape == (1, 200, 8) and fit["tau"].shape == (1, 200)
    assert fit.unconstrained_draws.shape == (1, 200, m.dim)
    for d in (0, 17, 199):
        c = m.constrain(x[d])
        np.testing.assert_allclose(fit["tau"][0, d], c["tau"], rtol=1e-15)
        np.testing.assert_allclose(fit["theta"][0, d],
                                   c["mu"] + c["tau"] * c["theta_trans"], rtol=1e-13)
    # per-draw statistics by name: lp is log_p (Jacobian included)
    np.testing.assert_array_equal(fit["lp__"][0], fit.log_p)
    np.testing.assert_array_equal(fit["log_p__"][0], fit.log_p)
    np.testing.assert_array_equal(fit["path"][0], np.arange(200) % 4)
    assert "log_q__" in fit and "nope" not in fit
    with pytest.raises(KeyError, match="nope"):
        fit["nope"]
    assert fit.extras["mean"].shape == (m.dim,) and fit.method == "meanfield"


def test_generated_quantities_reproducible_by_seed(schools_fit):
    m, x, fit = schools_fit
    again = ApproximateFit(m, x, "meanfield", seed=11)
    other = ApproximateFit(m, x, "meanfield", seed=12)
    np.testing.assert_array_equal(fit["y_rep"], again["y_rep"])
    assert not np.array_equal(fit["y_rep"], other["y_rep"])
    np.testing.assert_array_equal(fit["theta"], other["theta"])   # no randomness there


def test_summary_has_the_nuts_columns_and_no_rhat_for_one_sequence(schools_fit):
    _, x, fit = schools_fit
    s = fit.summary()
    assert list(s.columns) == ["mean", "sd", "5%", "50%", "95%", "mcse_mean",
                               "ess_bulk", "ess_tail", "r_hat"]
    assert list(s.index[:3]) == ["theta_trans[1]", "theta_trans[2]", "theta_trans[3]"]
    assert s["r_hat"].isna().all()
    np.testing.assert_allclose(s.loc["mu", "mean"], np.mean(x[:, 8]), rtol=1e-12)
    np.testing.assert_allclose(s.loc["mu", "sd"], np.std(x[:, 8], ddof=1), rtol=1e-12)
    # independent draws: the bulk ESS of 200 draws is near 200 (its sampling sd is
    # about 200 * sqrt(2 / 200) = 20 for the rank-normalised estimator; 4 sd allowed)
    assert np.all(np.abs(s.loc[["mu", "theta_trans[1]"], "ess_bulk"] - 200) < 80)


def test_to_arviz_groups_and_stats(schools_fit):
    m, _, fit = schools_fit
    idata = fit.to_arviz()
    assert set(idata.groups()) >= {"posterior", "sample_stats", "constant_data"}
    post = idata.posterior
    assert post.sizes["chain"] == 1 and post.sizes["draw"] == 200
    assert post["theta"].shape == (1, 200, 8)
    assert post.attrs["inference_method"] == "meanfield"
    ss = idata.sample_stats
    assert set(ss.data_vars) == {"lp", "log_p", "log_q", "path"}
    np.testing.assert_array_equal(ss["log_p"].values[0], fit.log_p)
    np.testing.assert_array_equal(idata.observed_data["y"].values, m.y)
    assert set(idata.groups()) >= {"posterior_predictive", "log_likelihood"}


def test_save_writes_arviz_netcdf_and_the_approximation(schools_fit, tmp_path):
    import xarray as xr
    _, x, fit = schools_fit
    path = fit.save(tmp_path / "approx.nc")
    idata = _arviz().from_netcdf(path)
    np.testing.assert_array_equal(idata.posterior["mu"].values, fit["mu"])
    with xr.open_dataset(path, group="stanlite_approximation", engine="h5netcdf") as ds:
        np.testing.assert_array_equal(ds["unconstrained_draws"].values, x)
        np.testing.assert_array_equal(ds["mean"].values, np.zeros(10))
        assert ds.attrs["method"] == "meanfield"


def test_no_chains_no_step_size(schools_fit):
    m, _, fit = schools_fit
    for attr in ("chain_states", "step_size", "inv_metric"):
        with pytest.raises(AttributeError, match="meanfield fit has no"):
            getattr(fit, attr)
    # an argument error (checked before anything runs) that says why
    with pytest.raises(sl.ArgumentError, match="resume_from.*no Markov chains to resume"):
        m.sample(resume_from=fit)


def test_repr_and_single_point():
    m, x, log_p, log_q = _gaussian_draws(1.0, 100, 0)
    fit = ApproximateFit(m, x, "fullrank", log_p=log_p, log_q=log_q)
    assert repr(fit).startswith("<ApproximateFit fullrank: 100 draws, 2 quantities, "
                                "pareto_k=")
    opt = ApproximateFit(m, np.array([0.5, 0.0]), "optimize", extras={"lp": -1.0})
    assert opt["mu"].shape == (1, 1) and opt["mu"][0, 0] == 0.5
    assert opt["sigma"][0, 0] == 1.0
    assert repr(opt) == "<ApproximateFit optimize: 1 draws, 2 quantities>"
    assert opt.pareto_k is None
    assert "point estimate" in opt.diagnose()
    assert np.isnan(opt.summary().loc["mu", "sd"])


def test_bad_input_is_named():
    m = StdNormal()
    with pytest.raises(ValueError, match=r"unconstrained_draws must be an array \(draws, 2\)"):
        ApproximateFit(m, np.zeros((10, 3)), "x")
    with pytest.raises(ValueError, match=r"log_p must have one value per draw \(10\)"):
        ApproximateFit(m, np.zeros((10, 2)), "x", log_p=np.zeros(9))
    with pytest.raises(ValueError, match="no log_p/log_q"):
        ApproximateFit(m, np.zeros((10, 2)), "x").psis()


# ---- Pareto k-hat ------------------------------------------------------------------------
def test_threshold():
    assert pareto_k_threshold(1000) == pytest.approx(1 - 1 / 3)
    assert pareto_k_threshold(10 ** 7) == 0.7
    assert pareto_k_threshold(5) == 0.0


def test_exact_approximation_has_small_k_and_uniform_weights():
    m, x, log_p, log_q = _gaussian_draws(1.0, 1000, 1)
    # q is the posterior: the ratios are constant (up to rounding)
    np.testing.assert_allclose(log_p - log_q, 0.0, atol=1e-12)
    fit = ApproximateFit(m, x, "fullrank", log_p=log_p, log_q=log_q)
    lw, k = fit.psis()
    np.testing.assert_allclose(np.exp(lw), 1e-3, rtol=1e-9)
    assert k < 0.5
    text = fit.diagnose()
    assert "< 0.5: the approximation is close to the posterior" in text
    assert "PSIS effective sample size: 1000 of 1000 draws" in text


def test_too_narrow_approximation_is_flagged_with_method_advice():
    # q = N(0, s^2 I_2), p = N(0, I_2): w = exp(|x|^2 (1/s^2 - 1) / 2) with |x|^2 / s^2
    # ~ chi2_2 = Exp(1/2), so P(w > t) = t^(-1/k) exactly: Pareto with k = 1 - s^2,
    # 0.96 for s = 0.2. k-hat is fitted to the M = 3 sqrt(S) = 190 largest of S = 4000
    # ratios, with sd about (1 + k) / sqrt(M) = 0.14: the threshold
    # min(1 - 1/log10(S), 0.7) = 0.7 is 1.8 sd below k.
    m, x, log_p, log_q = _gaussian_draws(0.2, 4000, 2)
    fit = ApproximateFit(m, x, "meanfield", log_p=log_p, log_q=log_q)
    assert fit.pareto_k > pareto_k_threshold(4000)
    text = fit.diagnose()
    assert "do not trust this approximation" in text and "method='fullrank'" in text
    lw, _ = fit.psis()
    np.testing.assert_allclose(np.sum(np.exp(lw)), 1.0, rtol=1e-12)
    # laplace and pathfinder get their own advice
    for method, words in (("laplace", "normal approximation at the mode"),
                          ("pathfinder", "more paths")):
        assert words in ApproximateFit(m, x, method, log_p=log_p, log_q=log_q).diagnose()


def test_moderately_wide_approximation_is_usable():
    # q = N(0, 1.5^2 I) over p = N(0, I): the weights are bounded (k <= 0; k-hat's sd
    # about 1 / sqrt(95) = 0.1 from 1000 draws): "close to the posterior"
    m, x, log_p, log_q = _gaussian_draws(1.5, 1000, 3)
    fit = ApproximateFit(m, x, "fullrank", log_p=log_p, log_q=log_q)
    assert fit.pareto_k < 0.5
    # and the PSIS-weighted variance of mu recovers the posterior's 1 from q's 2.25:
    # self-normalised IS with ESS ~ 1000 * 0.64: sd of the estimate ~ sqrt(2 / 640)
    w = np.exp(fit.psis()[0])
    var = np.sum(w * x[:, 0] ** 2)
    assert abs(var - 1.0) < 4 * np.sqrt(2 / 640)


def test_non_finite_log_density_is_reported():
    m, x, log_p, log_q = _gaussian_draws(1.0, 100, 4)
    log_p[:3] = -np.inf
    fit = ApproximateFit(m, x, "meanfield", log_p=log_p, log_q=log_q)
    assert "not finite at 3 of 100 draws" in fit.diagnose()
    lw, _ = fit.psis()
    assert np.all(lw[:3] == -np.inf) and np.isfinite(lw[3:]).all()


def test_notes_come_first_and_no_ratios_no_k():
    m, x, _, _ = _gaussian_draws(1.0, 50, 5)
    fit = ApproximateFit(m, x, "custom", notes=["Converged after 3 iterations."])
    assert fit.diagnose() == "Converged after 3 iterations."
    assert fit.pareto_k is None and repr(fit).endswith("2 quantities>")
