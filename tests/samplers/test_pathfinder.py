"""Pathfinder: its algebra (the Gilbert-Lemarechal diagonal, the compact inverse Hessian
against the BFGS recursion, the O(d m) normal against dense formulas), single-path draws
on Gaussians (PSIS-reweighted moments within Monte Carlo error), multi-path resampling on
a Gaussian and on a conjugate model with a constrained parameter, per-path diagnostics,
NUTS inits and metric, reproducibility (serial and processes), options and errors."""

import math
import warnings

import numpy as np
import pytest
import scipy.stats as st

import stanlite as sl
from stanlite.samplers import pathfinder as pf_mod
from stanlite.samplers.pathfinder import LbfgsNormal, lbfgs_normal, pathfinder, update_diagonal

QUIET = dict(progress=False)


@pytest.fixture
def small_sizes():
    """Tests with a few hundred draws: the Pareto k-hat of so few ratios is noisy, and
    its warning (tested in test_large_pareto_k_warns) is not what they are about."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "pathfinder: Pareto k-hat", RuntimeWarning)
        yield


def gaussian_model(d, seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(d, d))
    C = A @ A.T / d + np.diag(np.linspace(0.2, 2.0, d))
    m0 = rng.normal(size=d)
    P = np.linalg.inv(C)

    class Gaussian(sl.Model):
        x = sl.param.vector(d)

        def log_prob(self, x):
            r = x - m0
            return -0.5 * (r @ (P @ r))
    return Gaussian(), m0, C


class NormalInvGamma(sl.Model):
    """sigma2 ~ inv_gamma(a0, b0), mu ~ normal(mu0, sqrt(sigma2 / k0)), y ~ normal(mu,
    sqrt(sigma2)): the posterior is known in closed form."""
    N = sl.data.int(lower=0)
    y = sl.data.vector("N")
    mu = sl.param.real()
    sigma2 = sl.param.real(lower=0)
    a0, b0, mu0, k0 = 3.0, 2.0, 0.5, 2.0

    def log_prob(self, mu, sigma2):
        s = sl.sqrt(sigma2)
        return (sl.inv_gamma_lpdf(sigma2, self.a0, self.b0)
                + sl.normal_lpdf(mu, self.mu0, s / math.sqrt(self.k0))
                + sl.normal_lpdf(self.y, mu, s))

    def posterior(self):
        n, ybar = self.N, self.y.mean()
        kn = self.k0 + n
        mn = (self.k0 * self.mu0 + n * ybar) / kn
        an = self.a0 + n / 2
        bn = self.b0 + 0.5 * np.sum((self.y - ybar) ** 2) + \
            self.k0 * n * (ybar - self.mu0) ** 2 / (2 * kn)
        return dict(mu_mean=mn, mu_var=bn / (kn * (an - 1)), s2_mean=bn / (an - 1),
                    s2_var=bn ** 2 / ((an - 1) ** 2 * (an - 2)))


def nig_model():
    y = np.random.default_rng(4).normal(1.0, 1.5, size=25)
    return NormalInvGamma(N=25, y=y)


def random_pairs(rng, d, m):
    """Correction pairs of a convex quadratic (s'y > 0)."""
    A = rng.normal(size=(d, d))
    Hf = A @ A.T + d * np.eye(d)
    S = rng.normal(size=(m, d))
    return [(s, Hf @ s) for s in S]


# ---- the algebra ------------------------------------------------------------------------------
def test_diagonal_update_is_the_diagonal_of_the_bfgs_hessian_update(rng):
    d = 5
    alpha = rng.uniform(0.5, 2.0, d)
    (s, y), = random_pairs(rng, d, 1)
    a, b = y @ (alpha * y), y @ s
    B0 = (a / b) * np.diag(1 / alpha)
    B1 = B0 - np.outer(B0 @ s, B0 @ s) / (s @ B0 @ s) + np.outer(y, y) / b
    np.testing.assert_allclose(update_diagonal(alpha, s, y), 1 / np.diag(B1), rtol=1e-12)
    # not positive: unchanged
    assert update_diagonal(alpha, s, -y) is alpha


@pytest.mark.parametrize("d, m", [(12, 4), (6, 5), (3, 1)])
def test_compact_inverse_hessian_is_the_bfgs_recursion(d, m, rng):
    pairs = random_pairs(rng, d, m)
    alpha = rng.uniform(0.5, 2.0, d)
    H = np.diag(alpha)
    for s, y in pairs:
        rho = 1.0 / (y @ s)
        V = np.eye(d) - rho * np.outer(y, s)
        H = V.T @ H @ V + rho * np.outer(s, s)
    x = rng.normal(size=d)
    g = rng.normal(size=d)                          # grad log p at x
    q = lbfgs_normal(x, g, alpha, pairs)
    np.testing.assert_allclose(q.covariance(), H, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(q.mean, x + H @ g, rtol=1e-9, atol=1e-12)
    s, y = pairs[-1]
    np.testing.assert_allclose(q.covariance() @ y, s, rtol=1e-9, atol=1e-12)   # secant
    assert q.low_rank == (2 * m < d)


@pytest.mark.parametrize("d, m", [(12, 4), (6, 5)])
def test_normal_factor_inverse_and_density(d, m, rng):
    q = lbfgs_normal(rng.normal(size=d), rng.normal(size=d), rng.uniform(0.5, 2.0, d),
                     random_pairs(rng, d, m))
    Sigma = q.covariance()
    A = q._transform(np.eye(d)).T                    # columns: A e_i
    np.testing.assert_allclose(A @ A.T, Sigma, rtol=1e-9, atol=1e-12)
    z = rng.normal(size=(7, d))
    np.testing.assert_allclose(q._inverse(q._transform(z)), z, rtol=1e-9, atol=1e-12)
    assert q.log_det == pytest.approx(np.linalg.slogdet(Sigma)[1], rel=1e-10)
    x, lq = q.sample(np.random.default_rng(1), 50)
    ref = st.multivariate_normal(q.mean, Sigma).logpdf(x)
    np.testing.assert_allclose(lq, ref, rtol=1e-9)
    np.testing.assert_allclose(q.logpdf(x), ref, rtol=1e-9)


def test_normal_sample_moments(rng):
    d, n = 12, 20000
    q = lbfgs_normal(np.zeros(d), rng.normal(size=d), np.ones(d), random_pairs(rng, d, 3))
    x, _ = q.sample(np.random.default_rng(2), n)
    C = q.covariance()
    se_mean = np.sqrt(np.diag(C) / n)
    assert np.all(np.abs(x.mean(0) - q.mean) < 4 * se_mean)
    se_cov = np.sqrt((C ** 2 + np.outer(np.diag(C), np.diag(C))) / n)
    assert np.all(np.abs(np.cov(x.T) - C) < 4.5 * se_cov)


# ---- single path -----------------------------------------------------------------------------------
def weighted_moments(x, lw):
    w = np.exp(lw)
    m = w @ x
    c = ((x - m).T * w) @ (x - m)
    return m, c, 1.0 / np.sum(w * w)


@pytest.mark.parametrize("d, seed", [(3, 0), (8, 1)])
def test_single_path_on_a_gaussian(d, seed):
    model, m0, C = gaussian_model(d, seed)
    fit = pathfinder(model, seed=seed, num_paths=1, num_draws=3000, **QUIET)
    assert not fit.resampled and fit.num_draws == 3000 and len(fit.paths) == 1
    p = fit.paths[0]
    # the approximation sits at the mode (a Newton step from a near-optimum)
    assert np.all(np.abs(p.approximation.mean - m0) < 0.05 * np.sqrt(np.diag(C)))
    # log p and log q are right: PSIS-reweighted draws recover mean and covariance
    # within 4 Monte Carlo standard errors (from the PSIS effective sample size)
    lw, k = fit.psis()
    assert k < 0.7
    m, c, ess = weighted_moments(fit["x"][0], lw)
    assert np.all(np.abs(m - m0) < 4 * np.sqrt(np.diag(C) / ess))
    se_cov = np.sqrt((C ** 2 + np.outer(np.diag(C), np.diag(C))) / ess)
    assert np.all(np.abs(c - C) < 4.5 * se_cov)
    np.testing.assert_allclose(fit.log_p[:5], [model.log_density(x) for x in
                                               fit.unconstrained_draws[0, :5]])
    np.testing.assert_allclose(fit.log_q, p.approximation.logpdf(fit.unconstrained_draws[0]))


def test_two_dimensional_gaussian_is_exact_after_two_steps():
    # a quadratic in 2-d: two conjugate-enough BFGS steps give the exact inverse Hessian,
    # and then log p - log q is constant over the draws (the ELBO is log Z exactly)
    model, m0, C = gaussian_model(2, 0)
    fit = pathfinder(model, seed=0, num_paths=1, num_draws=200, **QUIET)
    q = fit.paths[0].approximation
    if np.allclose(q.covariance(), C, rtol=1e-8):
        r = fit.log_p - fit.log_q
        assert np.ptp(r) < 1e-8
        assert r[0] == pytest.approx(0.5 * np.linalg.slogdet(2 * np.pi * C)[1], abs=1e-8)
    assert fit.pareto_k < 0.5


def test_path_diagnostics(small_sizes):
    model, _, _ = gaussian_model(4, 2)
    fit = pathfinder(model, seed=3, num_paths=3, num_draws=300, num_single_draws=200,
                     **QUIET)
    assert len(fit.paths) == 3
    for p in fit.paths:
        assert p.failed is None and p.optimizer_converged
        assert p.elbo.shape == (p.iterations + 1,) and np.isnan(p.elbo[0])
        assert p.best_iteration == int(np.nanargmax(p.elbo))
        assert p.best_elbo == p.elbo[p.best_iteration]
        assert np.all(np.diff(p.lp) >= 0) and p.n_grad_evals >= p.iterations
        assert p.draws.shape == (200, 4) and np.isfinite(p.pareto_k)
        assert p.n_lp_evals >= 200 + 25
        assert "best ELBO" in repr(p)
    ex = fit.extras
    np.testing.assert_array_equal(ex["path_lbfgs_iterations"], [p.iterations for p in fit.paths])
    assert ex["n_grad_evals"] == sum(p.n_grad_evals for p in fit.paths)
    assert set(np.unique(fit["path"])) <= {1, 2, 3} and fit["path"].shape == (1, 300)
    assert fit.extras["pareto_k"] == fit.pareto_k


# ---- multi-path -------------------------------------------------------------------------------------
def test_multi_path_on_a_gaussian_recovers_mean_and_covariance():
    d, n = 5, 2000
    model, m0, C = gaussian_model(d, 5)
    fit = pathfinder(model, seed=11, num_paths=4, num_draws=n, **QUIET)
    assert fit.resampled and fit.num_draws == n
    x = fit["x"][0]
    # resampling with replacement: variance of the pooled importance estimate plus
    # that of the resampling (Monte Carlo error of a mean of n draws from it)
    lw_pool, k, n_pool = fit._pool
    ess_pool = 1.0 / np.sum(np.exp(2 * lw_pool))
    ess = 1.0 / (1.0 / ess_pool + 1.0 / n)
    assert k < 0.7 and n_pool == 4 * n
    assert np.all(np.abs(x.mean(0) - m0) < 4 * np.sqrt(np.diag(C) / ess))
    se_cov = np.sqrt((C ** 2 + np.outer(np.diag(C), np.diag(C))) / ess)
    assert np.all(np.abs(np.cov(x.T) - C) < 4.5 * se_cov)


def test_multi_path_on_a_conjugate_model_with_a_constrained_parameter():
    model = nig_model()
    post = model.posterior()
    n = 2000
    fit = pathfinder(model, seed=2, num_draws=n, **QUIET)
    lw_pool, k, _ = fit._pool
    ess = 1.0 / (np.sum(np.exp(2 * lw_pool)) + 1.0 / n)
    assert k < 0.7
    mu, s2 = fit["mu"][0], fit["sigma2"][0]
    assert np.all(s2 > 0)
    assert abs(mu.mean() - post["mu_mean"]) < 4 * math.sqrt(post["mu_var"] / ess)
    assert abs(s2.mean() - post["s2_mean"]) < 4 * math.sqrt(post["s2_var"] / ess)
    assert abs(mu.var() - post["mu_var"]) < 4 * post["mu_var"] * math.sqrt(2 / ess)
    text = fit.diagnose()
    assert "before resampling" in text and "k-hat of each path's own draws" in text
    assert repr(fit).startswith("<PathfinderFit: 2000 draws (PSIS-resampled) from 4 of 4")
    # the resampled draws are equally weighted; k-hat is that of the pool
    lw, kk = fit.psis()
    assert kk == k and np.allclose(np.exp(lw), 1 / n)
    s = fit.summary()
    assert list(s.index) == ["mu", "sigma2"] and abs(s.loc["mu", "mean"] - mu.mean()) < 1e-12
    idata = fit.to_arviz()
    assert idata.posterior["mu"].shape == (1, n) and "path" in idata.sample_stats


def test_no_resampling_and_no_lp(small_sizes):
    model = nig_model()
    fit = pathfinder(model, seed=1, num_paths=3, num_single_draws=100, psis_resample=False,
                     **QUIET)
    assert not fit.resampled and fit.num_draws == 300
    np.testing.assert_array_equal(fit["path"][0], np.repeat([1, 2, 3], 100))
    assert "Pareto k-hat" in fit.diagnose()
    fit = pathfinder(model, seed=1, num_paths=2, num_draws=50, psis_resample=False,
                     calculate_lp=False, **QUIET)
    assert fit.log_p is None and fit.num_draws == 100 and fit.pareto_k is None
    one = pathfinder(model, seed=1, num_paths=1, num_draws=70, **QUIET)
    assert one.num_draws == 70 and not one.resampled


def test_reproducible_by_seed_serial_and_in_processes(small_sizes):
    model = nig_model()
    kw = dict(num_paths=2, num_draws=100, **QUIET)
    a = pathfinder(model, seed=5, **kw)
    b = pathfinder(model, seed=5, **kw)
    c = pathfinder(model, seed=6, **kw)
    np.testing.assert_array_equal(a.unconstrained_draws, b.unconstrained_draws)
    assert not np.array_equal(a.unconstrained_draws, c.unconstrained_draws)
    par = pathfinder(model, seed=5, parallel=True, **kw)
    np.testing.assert_array_equal(a.unconstrained_draws, par.unconstrained_draws)
    for pa, pp in zip(a.paths, par.paths):
        np.testing.assert_array_equal(pa.elbo, pp.elbo)


# ---- NUTS from Pathfinder ------------------------------------------------------------------------------
def test_inits_start_nuts_where_they_say(small_sizes):
    model = nig_model()
    fit = pathfinder(model, seed=3, num_draws=400, **QUIET)
    inits = fit.inits(chains=3)
    assert len(inits) == 3 and all(sorted(i) == ["mu", "sigma2"] for i in inits)
    xs = [model.unconstrain(i) for i in inits]
    assert len({x.tobytes() for x in xs}) == 3                   # distinct draws
    assert fit.inits(3)[0] == inits[0] and fit.inits(3, seed=9) != inits
    # with no warmup and a tiny step, the first draw of each chain is its init
    nuts = model.sample(chains=3, warmup=0, draws=1, init=inits, stepsize=1e-12, seed=1,
                        progress=False, parallel=False)
    for c in range(3):
        np.testing.assert_allclose(nuts.unconstrained_draws[c, 0], xs[c], atol=1e-9)
    assert len(fit.inits(chains=1000)) == 1000                   # with replacement


def test_inv_metric_estimate_feeds_nuts():
    model, _, C = gaussian_model(3, 4)
    fit = pathfinder(model, seed=1, num_draws=1000, **QUIET)
    diag = fit.inv_metric_estimate()
    dense = fit.inv_metric_estimate("dense_e")
    assert diag.shape == (3,) and dense.shape == (3, 3)
    np.testing.assert_allclose(np.diag(dense), diag)
    nuts = model.sample(chains=1, warmup=0, draws=5, metric="dense_e", inv_metric=dense,
                        init=fit.inits(1), stepsize=0.5, seed=1, progress=False)
    np.testing.assert_allclose(nuts.inv_metric[0], dense)
    with pytest.raises(ValueError, match="metric must be 'diag_e' or 'dense_e'"):
        fit.inv_metric_estimate("unit")


# ---- failures, warnings, errors ---------------------------------------------------------------------
class Flat(sl.Model):
    a = sl.param.real()

    def log_prob(self, a):
        return 0.0 * a


class Cauchy2(sl.Model):
    x = sl.param.vector(2)

    def log_prob(self, x):
        return sl.cauchy_lpdf(x, 0.0, 1.0)


def test_every_path_failing_is_an_error():
    with pytest.raises(sl.ModelError, match="every path failed.*path 1: L-BFGS stopped at "
                       "its initial point.*gradient norm 0"):
        pathfinder(Flat(), seed=1, num_draws=50, **QUIET)


def test_some_paths_failing_is_a_warning(small_sizes):
    model = nig_model()
    good = model.unconstrain({"mu": 1.0, "sigma2": 2.0})

    class Half(NormalInvGamma):
        """Flat (gradient 0) left of mu = -50: a path started there stops at once."""
        compile = False     # value_of in log_prob: the eager tape (no retaping warning)

        def log_prob(self, mu, sigma2):
            lp = NormalInvGamma.log_prob(self, mu, sigma2)
            return lp if sl.value_of(mu) > -50 else 0.0 * mu
    half = Half(N=model.N, y=model.y)
    with pytest.warns(RuntimeWarning, match="1 of 2 paths failed.*path 2"):
        fit = pathfinder(half, seed=1, num_paths=2, num_draws=100,
                         init=[good, np.array([-60.0, 0.0])],
                         **QUIET)
    assert fit.paths[1].failed and not fit.paths[0].failed
    assert np.all(fit["path"] == 1) and "1 of 2 paths failed" in fit.diagnose()
    assert "failed" in repr(fit.paths[1])


def test_large_pareto_k_warns():
    with pytest.warns(RuntimeWarning, match="Pareto k-hat .* above 0.7"):
        fit = pathfinder(Cauchy2(), seed=1, num_draws=500, **QUIET)
    assert fit.pareto_k > 0.7 and "do not trust these draws" in fit.diagnose()


@pytest.mark.parametrize("kw, match", [
    (dict(num_paths=0), "num_paths must be an integer >= 1"),
    (dict(num_draws=1.5), "num_draws must be an integer"),
    (dict(num_elbo_draws=0), "num_elbo_draws"),
    (dict(history_size=0), "history_size"),
    (dict(max_lbfgs_iters=0), "max_lbfgs_iters"),
    (dict(init_radius=-1), "init_radius"),
    (dict(calculate_lp=False), "psis_resample needs the log density"),
    (dict(init=[None, None]), "one entry per path \\(4\\), got 2"),
    (dict(tol_rel_grad=-1), "tol_rel_grad"),
])
def test_bad_arguments_are_named(kw, match):
    with pytest.raises(ValueError, match=match):
        pathfinder(nig_model(), seed=1, **{**QUIET, **kw})


def test_bad_init_names_and_chains(small_sizes):
    with pytest.raises(sl.DataError, match="init gives 'sigma', which is not a parameter"):
        pathfinder(nig_model(), seed=1, init={"mu": 0.0, "sigma": 1.0}, **QUIET)
    fit = pathfinder(nig_model(), seed=1, num_paths=1, num_draws=20, **QUIET)
    with pytest.raises(ValueError, match="chains must be an integer >= 1"):
        fit.inits(0)


def test_model_method_and_module_names():
    model = nig_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = model.pathfinder(seed=1, num_paths=2, num_draws=50, progress=False)
    assert isinstance(fit, pf_mod.PathfinderFit) and fit.method == "pathfinder"
    assert isinstance(fit.paths[0].approximation, LbfgsNormal)
