"""The work around a fit (issue 21): standalone generated quantities on the same or new
data, ``load_fit`` with other data, the prior and its predictive, ArviZ groups and
dims, draws by Stan's element names and as tables, integer generated quantities."""

import warnings

import numpy as np
import pytest

import stanlite as sl


def _arviz():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz
    return arviz


class Reg(sl.Model):
    """y ~ N(alpha + beta x, sigma); observed y, its replicate y_rep, a count."""
    N = sl.data.int(lower=0)
    x = sl.data.vector("N")
    y = sl.data.vector("N")
    alpha = sl.param.real()
    beta = sl.param.real()
    sigma = sl.param.real(lower=0)
    observed = ("y",)

    def log_prob(self, alpha, beta, sigma):
        lp = sl.normal_lpdf(alpha, 0, 5) + sl.normal_lpdf(beta, 0, 5)
        lp = lp + sl.normal_lpdf(sigma, 0, 2)
        return lp + sl.normal_lpdf(self.y, alpha + beta * self.x, sigma)

    def log_likelihood(self, alpha, beta, sigma):
        z = (self.y - (alpha + beta * self.x)) / sigma
        return -0.5 * z * z - sl.log(sigma) - 0.5 * np.log(2 * np.pi)

    def generated_quantities(self, rng, alpha, beta, sigma):
        mu = alpha + beta * self.x
        return {"mu": mu, "y_rep": rng.normal(mu, sigma),
                "n_pos": rng.poisson(3.0, size=self.N)}


def _reg_data(n=20, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return dict(N=n, x=x, y=1.0 + 2.0 * x + 0.5 * rng.normal(size=n))


@pytest.fixture(scope="module")
def reg_fit():
    return Reg(**_reg_data()).sample(chains=2, draws=150, warmup=150, seed=1,
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
        Other(**_reg_data()).generate_quantities(reg_fit)
    with pytest.raises(sl.ArgumentError, match="takes a fit"):
        reg_fit.model.generate_quantities({"alpha": 1.0})


def test_generate_quantities_fit_cannot_resume_on_new_data(reg_fit):
    new = Reg(**_reg_data(8, seed=5))
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
