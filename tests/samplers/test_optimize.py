"""optimize and laplace: known optima (least squares and its sigma, conjugate MAPs, the
two modes with and without the Jacobian), the three methods, Stan's convergence tests,
the non-finite guard, the result object, initialisation and its errors; the Laplace
covariance against the inverse negative Hessian and a Gaussian's true covariance, its
draws and densities, and its errors."""

import io
import sys
import warnings
from contextlib import redirect_stdout

import numpy as np
import pytest
import scipy.stats as st

import stanlite as sl
from stanlite.samplers import optimize as opt_mod
from stanlite.samplers.optimize import OptimizationResult

TIGHT = dict(tol_rel_grad=1.0, tol_rel_obj=1.0, tol_obj=0.0, tol_param=0.0, tol_grad=1e-10)


# ---- models --------------------------------------------------------------------------------
class Regression(sl.Model):
    """Normal linear regression with flat priors (the MLE is least squares)."""
    N = sl.data.int(lower=0)
    K = sl.data.int(lower=1)
    X = sl.data.matrix("N", "K")
    y = sl.data.vector("N")
    beta = sl.param.vector("K")
    sigma = sl.param.real(lower=0)

    def transformed_parameters(self, sigma):
        return {"log_sigma": np.log(sigma) if isinstance(sigma, float) else sl.log(sigma)}

    def log_prob(self, beta, sigma):
        return sl.normal_lpdf(self.y, self.X @ beta, sigma)

    def generated_quantities(self, rng, beta, sigma):
        return {"y_rep": rng.normal(self.X @ beta, sigma)}


def regression_data(rng, N=60, K=3):
    X = np.column_stack([np.ones(N), rng.normal(size=(N, K - 1)) * [3.0, 0.5][:K - 1]
                         + [10.0, -2.0][:K - 1]])
    y = X @ np.array([1.5, -0.7, 2.0])[:K] + rng.normal(0, 1.3, N)
    return dict(N=N, K=K, X=X, y=y)


def least_squares(d):
    beta, rss, *_ = np.linalg.lstsq(d["X"], d["y"], rcond=None)
    return beta, np.sqrt(float(rss[0]) / d["N"])


class BetaBinomial(sl.Model):
    """theta ~ beta(a, b), k ~ binomial(n, theta)."""
    theta = sl.param.real(lower=0, upper=1)

    def __init__(self, a=3.0, b=4.0, n=20, k=7):
        super().__init__()
        self.a, self.b, self.n, self.k = a, b, n, k

    def log_prob(self, theta):
        return ((self.a + self.k - 1) * sl.log(theta)
                + (self.b + self.n - self.k - 1) * sl.log1m(theta))


class LogNormal(sl.Model):
    """sigma ~ lognormal(mu, s): mode exp(mu - s^2); the mode of log(sigma) is mu."""
    sigma = sl.param.real(lower=0)

    def log_prob(self, sigma):
        return sl.lognormal_lpdf(sigma, 0.7, 0.6)


class NormalKnownScale(sl.Model):
    """mu ~ normal(m0, s0), y_n ~ normal(mu, s): conjugate, the MAP is the posterior mean."""
    N = sl.data.int(lower=0)
    y = sl.data.vector("N")
    mu = sl.param.real()

    def log_prob(self, mu):
        return sl.normal_lpdf(mu, 2.0, 1.5) + sl.normal_lpdf(self.y, mu, 0.8)


P_GAUSS = np.array([[2.0, 0.9, 0.1], [0.9, 1.0, -0.3], [0.1, -0.3, 0.6]])
M_GAUSS = np.array([1.0, -2.0, 0.5])


class Gaussian(sl.Model):
    """x ~ N(M, P^-1) on R^3 (correlated)."""
    x = sl.param.vector(3)

    def log_prob(self, x):
        d = x - M_GAUSS
        return -0.5 * (d @ (P_GAUSS @ d))


class Positive(sl.Model):
    """log(a) - 1000 a on an undeclared domain a > 0: the first L-BFGS step from 0.5
    jumps to a < 0, where the log density is not finite."""
    a = sl.param.real()

    def log_prob(self, a):
        return sl.log(a) - 1000.0 * a


class Saddle(sl.Model):
    a = sl.param.real()
    b = sl.param.real()

    def log_prob(self, a, b):
        return -0.5 * a * a + 0.5 * b * b


class Flat(sl.Model):
    a = sl.param.real()
    b = sl.param.real()

    def log_prob(self, a, b):
        return -0.5 * a * a + 0.0 * b


# ---- known optima ----------------------------------------------------------------------------
@pytest.mark.parametrize("method, kw", [("lbfgs", TIGHT), ("bfgs", TIGHT), ("newton", {})])
def test_regression_mle_is_least_squares(method, kw, rng):
    d = regression_data(rng)
    beta, sigma = least_squares(d)
    opt = Regression(**d).optimize(method=method, seed=1, **kw)
    assert opt.converged, opt.message
    np.testing.assert_allclose(opt["beta"], beta, rtol=0, atol=1e-6)
    assert abs(opt["sigma"] - sigma) < 1e-6
    # the maximised log-likelihood: -N/2 (log(2 pi sigma^2) + 1)
    assert abs(opt.lp + d["N"] / 2 * (np.log(2 * np.pi * sigma ** 2) + 1)) < 1e-8


def test_regression_defaults_stop_where_stans_tests_say(rng):
    # Stan's default relative tolerances stop when the remaining improvement of lp is
    # ~1e-8 relative: the estimate is then within a few 1e-4 standard errors
    d = regression_data(rng)
    beta, sigma = least_squares(d)
    opt = Regression(**d).optimize(seed=3)
    assert opt.converged and opt.criterion in ("tol_rel_grad", "tol_rel_obj", "tol_grad")
    se = sigma * np.sqrt(np.diag(np.linalg.inv(d["X"].T @ d["X"])))
    assert np.all(np.abs(opt["beta"] - beta) < 1e-2 * se)


def test_conjugate_maps():
    m = BetaBinomial()
    a, b, n, k = m.a, m.b, m.n, m.k
    opt = m.optimize(seed=1, **TIGHT)
    assert abs(opt["theta"] - (a + k - 1) / (a + b + n - 2)) < 1e-8
    y = np.array([1.2, 2.9, 2.2, 0.4, 3.3])
    opt = NormalKnownScale(N=5, y=y).optimize(seed=1, **TIGHT)
    prec = 1 / 1.5 ** 2 + 5 / 0.8 ** 2
    post_mean = (2.0 / 1.5 ** 2 + y.sum() / 0.8 ** 2) / prec
    assert abs(opt["mu"] - post_mean) < 1e-8


def test_jacobian_changes_the_mode():
    m = LogNormal()
    no_j = m.optimize(seed=4, **TIGHT)
    with_j = m.optimize(jacobian=True, seed=4, **TIGHT)
    assert abs(no_j["sigma"] - np.exp(0.7 - 0.36)) < 1e-8     # mode of sigma's density
    assert abs(with_j["sigma"] - np.exp(0.7)) < 1e-8          # mode of log(sigma)'s
    assert not no_j.jacobian and with_j.jacobian
    # lp is the density optimised: with the log-Jacobian log(sigma) in the second case
    assert abs(no_j.lp - st.lognorm.logpdf(no_j["sigma"], 0.6, scale=np.exp(0.7))) < 1e-10
    assert abs(with_j.lp - st.lognorm.logpdf(with_j["sigma"], 0.6, scale=np.exp(0.7))
               - np.log(with_j["sigma"])) < 1e-10
    m2 = BetaBinomial()
    o = m2.optimize(jacobian=True, seed=1, **TIGHT)        # mode of logit(theta)'s density
    assert abs(o["theta"] - (m2.a + m2.k) / (m2.a + m2.b + m2.n)) < 1e-8


@pytest.mark.parametrize("method", ["lbfgs", "bfgs", "newton"])
def test_methods_agree_on_a_correlated_gaussian(method):
    opt = Gaussian().optimize(method=method, seed=5, **TIGHT)
    np.testing.assert_allclose(opt["x"], M_GAUSS, atol=1e-8)
    assert opt.method == method
    if method == "newton":
        assert opt.iterations <= 2 and opt.n_hessians >= 1     # quadratic: one step


def test_line_search_steps_back_from_non_finite_points():
    for method in ("lbfgs", "bfgs"):
        opt = Positive().optimize(method=method, init={"a": 0.5}, **TIGHT)
        assert opt.converged, opt.message
        assert abs(opt["a"] - 1e-3) < 1e-9
    obj = opt_mod.Objective(Positive(), False)
    obj(np.array([0.5]))
    f, g = obj(np.array([-0.5]))
    assert obj.n_failed == 1 and f > obj.best[0] + 1e3 and g[0] < 0   # a wall at a < 0


# ---- convergence reporting ----------------------------------------------------------------------
def test_each_stan_criterion_can_end_the_run(rng):
    d = regression_data(rng)
    m = Regression(**d)
    off = dict(tol_obj=0, tol_rel_obj=0, tol_grad=0, tol_rel_grad=0, tol_param=0)
    for crit, value in [("tol_obj", 1e-3), ("tol_rel_obj", 1e9), ("tol_grad", 1e-2),
                        ("tol_rel_grad", 1e10), ("tol_param", 1e-3)]:
        opt = m.optimize(seed=2, **{**off, crit: value})
        assert opt.converged and opt.criterion == crit, (crit, opt.message)
        assert crit in opt.message


def test_not_converged_warns_and_says_so(rng):
    m = Regression(**regression_data(rng))
    with pytest.warns(RuntimeWarning, match="did not converge.*iter = 3"):
        opt = m.optimize(seed=1, iter=3)
    assert not opt.converged and opt.criterion == "max_iter" and opt.iterations == 3
    assert opt.message.startswith("not converged") and "NOT converged" in repr(opt)
    with pytest.warns(RuntimeWarning):
        assert m.optimize(seed=1, iter=2, method="newton").criterion == "max_iter"


def test_history_and_counts(rng):
    opt = Regression(**regression_data(rng)).optimize(seed=1)
    h = opt.history
    n = opt.iterations + 1
    assert all(len(v) == n for v in h.values())
    assert np.all(np.diff(h["lp"]) >= 0)                    # monotone ascent
    assert h["lp"][-1] == opt.lp and np.isnan(h["step_norm"][0])
    assert opt.n_evals == h["evals"][-1] >= opt.iterations
    np.testing.assert_allclose(h["grad_norm"][-1], np.linalg.norm(opt.grad))


def test_verbose_prints_iterations(rng):
    buf = io.StringIO()
    with redirect_stdout(buf):
        opt = Regression(**regression_data(rng)).optimize(seed=1, verbose=True, refresh=1)
    lines = buf.getvalue().splitlines()
    assert lines[0].split()[:3] == ["Iter", "log", "prob"]
    assert len(lines) == opt.iterations + 1
    assert float(lines[-1].split()[1]) == pytest.approx(opt.lp, rel=1e-5)


# ---- the result ------------------------------------------------------------------------------------
def test_result_interface(rng):
    d = regression_data(rng)
    opt = Regression(**d).optimize(seed=7)
    assert isinstance(opt, OptimizationResult)
    assert opt.names == ["beta", "sigma", "log_sigma", "y_rep"]
    assert opt["beta"].shape == (3,) and np.ndim(opt["sigma"]) == 0
    assert opt["y_rep"].shape == (d["N"],)
    assert opt["log_sigma"] == pytest.approx(np.log(opt["sigma"]))
    assert "beta" in opt and "nope" not in opt and opt["lp__"] == opt.lp
    with pytest.raises(KeyError, match="'nope' is not a parameter.*beta, sigma"):
        opt["nope"]
    b = opt["beta"]
    b[0] = 1e9                                          # a copy: the result is unchanged
    assert opt["beta"][0] != 1e9
    m = Regression(**d)
    np.testing.assert_allclose(opt.unconstrained, m.unconstrain(
        {"beta": opt["beta"], "sigma": opt["sigma"]}), rtol=1e-14)
    s = opt.summary()
    assert list(s.columns) == ["estimate"] and s.index[0] == "lp__"
    assert s.loc["beta[2]", "estimate"] == opt["beta"][1]
    assert s.loc["y_rep[60]", "estimate"] == opt["y_rep"][-1]
    f = opt.to_frame()
    assert f.shape == (1, 1 + 3 + 1 + 1 + d["N"]) and f["sigma"][0] == opt["sigma"]
    dd = opt.to_dict()
    assert list(dd) == opt.names
    assert repr(opt).startswith("<OptimizationResult lbfgs (jacobian=False): converged")


def test_reproducible_by_seed(rng):
    m = Regression(**regression_data(rng))
    a, b, c = m.optimize(seed=11), m.optimize(seed=11), m.optimize(seed=12)
    np.testing.assert_array_equal(a.unconstrained, b.unconstrained)
    np.testing.assert_array_equal(a["y_rep"], b["y_rep"])
    assert a.history["lp"][0] != c.history["lp"][0]            # another initial point
    assert not np.array_equal(a["y_rep"], c["y_rep"])


# ---- initialisation ---------------------------------------------------------------------------------
def test_inits(rng):
    d = regression_data(rng)
    m = Regression(**d)
    start = {"beta": [1.0, 0.0, 0.0], "sigma": 2.0}
    opt = m.optimize(init=start)
    # (the gradient's lp may come from retaped code: equal to 1e-12 relative)
    assert opt.history["lp"][0] == pytest.approx(
        m.log_density(m.unconstrain(start), jacobian=False), rel=1e-12)
    # a partial dict: the missing parameters are random
    a = m.optimize(init={"sigma": 2.0}, seed=1)
    b = m.optimize(init={"sigma": 2.0}, seed=2)
    assert a.history["lp"][0] != b.history["lp"][0] and a.converged
    # a vector, a radius, an earlier result
    x0 = np.zeros(4)
    lp0 = pytest.approx(m.log_density(x0, jacobian=False), rel=1e-12)
    assert m.optimize(init=x0).history["lp"][0] == lp0
    assert m.optimize(init=0).history["lp"][0] == lp0
    again = m.optimize(init=opt)
    assert again.iterations <= 2


@pytest.mark.parametrize("kw, err, match", [
    (dict(method="sgd"), ValueError, "method must be one of 'lbfgs', 'bfgs', 'newton'"),
    (dict(init={"beta": [0.0, 0.0, 0.0], "sigmaa": 1.0}), sl.DataError,
     "init gives 'sigmaa', which is not a parameter of Regression.*beta, sigma"),
    (dict(init={"sigma": -1.0}), sl.DataError, "sigma"),
    (dict(init={"beta": [0.0, 0.0], "sigma": 1.0}), sl.DataError, "beta.*shape"),
    (dict(init=np.zeros(3)), sl.DataError, "unconstrained vector of length 4"),
    (dict(init="zero"), sl.DataError, "init must be"),
    (dict(init=-1.0), ValueError, "radius"),
    (dict(iter=-1), ValueError, "iter must be an integer"),
    (dict(history_size=0), ValueError, "history_size"),
    (dict(tol_rel_grad=-1), ValueError, "tol_rel_grad must be a finite number >= 0"),
])
def test_bad_arguments_are_named(kw, err, match, rng):
    m = Regression(**regression_data(rng))
    with pytest.raises(err, match=match):
        m.optimize(**kw)


def test_model_that_cannot_be_initialised():
    class Never(sl.Model):
        a = sl.param.real()

        def log_prob(self, a):
            return sl.normal_lpdf(a, 0.0, -1.0)
    with pytest.raises(sl.ModelError, match="could not initialise the optimizer.*100 "
                       "random initial points.*DomainError"):
        Never().optimize(seed=1)


# ---- laplace -----------------------------------------------------------------------------------------
def test_laplace_covariance_is_the_inverse_negative_hessian(rng):
    d = regression_data(rng)
    m = Regression(**d)
    fit = m.laplace(draws=50, seed=3)
    x = fit.extras["mode_unconstrained"]
    _, g, H = m.log_density_hessian(x)                 # jacobian=True, as laplace's mode
    assert np.sqrt(g @ np.linalg.solve(-H, g)) < 1e-2   # within 1% of an sd of the mode
    np.testing.assert_allclose(fit.extras["covariance"], np.linalg.inv(-H), rtol=1e-10,
                               atol=1e-14)
    R = fit.extras["cholesky_precision"]
    np.testing.assert_allclose(R @ R.T, -H, rtol=1e-12, atol=1e-12)
    assert fit.extras["jacobian"] and fit.extras["optimization"].jacobian
    assert fit.method == "laplace" and fit.num_draws == 50


def test_laplace_on_a_gaussian_is_exact():
    n = 4000
    fit = Gaussian().laplace(draws=n, seed=5, **TIGHT)
    cov = np.linalg.inv(P_GAUSS)
    np.testing.assert_allclose(fit.extras["covariance"], cov, rtol=1e-9)
    np.testing.assert_allclose(fit.extras["mode_unconstrained"], M_GAUSS, atol=1e-9)
    x = fit["x"][0]
    # sample mean within 4 MC standard errors; sample covariance within 4 standard
    # errors of a Wishart entry: var(S_ij) = (C_ij^2 + C_ii C_jj) / n
    se_mean = np.sqrt(np.diag(cov) / n)
    assert np.all(np.abs(x.mean(0) - M_GAUSS) < 4 * se_mean)
    se_cov = np.sqrt((cov ** 2 + np.outer(np.diag(cov), np.diag(cov))) / n)
    assert np.all(np.abs(np.cov(x.T) - cov) < 4 * se_cov)
    # log q is the normal density; log p the model's; here they differ by a constant
    ref = st.multivariate_normal(fit.extras["mode_unconstrained"], cov).logpdf(x)
    np.testing.assert_allclose(fit.log_q, ref, rtol=1e-10)
    np.testing.assert_allclose(fit.log_p, [Gaussian().log_density(xi) for xi in x])
    c = fit.log_p - fit.log_q
    assert np.ptp(c) < 1e-9
    assert fit.pareto_k < 0.5


def test_laplace_draws_are_constrained_and_densities_per_draw(rng):
    m = Regression(**regression_data(rng))
    fit = m.laplace(draws=300, seed=1)
    assert np.all(fit["sigma"] > 0) and fit["y_rep"].shape == (1, 300, 60)
    xs = fit.unconstrained_draws[0]
    np.testing.assert_allclose(fit.log_p[:5], [m.log_density(x) for x in xs[:5]])
    no_j = m.laplace(draws=10, seed=1, jacobian=False)
    np.testing.assert_allclose(
        no_j.log_p, [m.log_density(x, jacobian=False) for x in no_j.unconstrained_draws[0]])
    assert no_j.extras["mode"]["sigma"] < fit.extras["mode"]["sigma"]


def test_laplace_mode_given_and_reproducible(rng):
    m = Regression(**regression_data(rng))
    opt = m.optimize(jacobian=True, seed=1, **TIGHT)
    a = m.laplace(mode=opt, draws=20, seed=9)
    b = m.laplace(mode=opt.to_dict() and {k: opt[k] for k in ("beta", "sigma")},
                  draws=20, seed=9)
    c = m.laplace(mode=opt.unconstrained, draws=20, seed=9)
    for other in (b, c):
        np.testing.assert_allclose(other.unconstrained_draws, a.unconstrained_draws,
                                   rtol=1e-9)
    d = m.laplace(mode=opt, draws=20, seed=10)
    assert not np.allclose(d.unconstrained_draws, a.unconstrained_draws)
    e = m.laplace(mode=opt, draws=20, seed=9)
    np.testing.assert_array_equal(e["y_rep"], a["y_rep"])


def test_laplace_errors(rng):
    m = Regression(**regression_data(rng))
    mle = m.optimize(seed=1)
    with pytest.raises(ValueError, match="jacobian=False but laplace was asked for "
                       "jacobian=True"):
        m.laplace(mode=mle)
    with pytest.raises(sl.DataError, match="unconstrained vector of length 4"):
        m.laplace(mode=np.zeros(2))
    with pytest.raises(ValueError, match="draws must be"):
        m.laplace(draws=-1)
    with pytest.raises(TypeError, match="used only to find the mode"):
        m.laplace(mode=mle.unconstrained, iter=10)
    with pytest.raises(sl.ModelError, match="not negative definite.*saddle.*b"):
        Saddle().laplace(mode={"a": 0.0, "b": 0.0})
    with pytest.raises(sl.ModelError, match="flat.*b"):
        Flat().laplace(mode={"a": 0.0, "b": 0.0})


def test_laplace_notes_a_mode_that_is_not_one():
    fit = Gaussian().laplace(mode={"x": M_GAUSS + 1.0}, draws=20, seed=1)
    assert "gradient at the given mode is not zero" in fit.diagnose()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ok = Gaussian().laplace(draws=20, seed=1)
    assert "not zero" not in ok.diagnose()


def test_progress_bars_show_on_a_terminal_and_change_nothing(capsys, monkeypatch):
    """optimize / laplace (progress=True) and ADVI draw a tqdm bar when stderr is a
    terminal, and the results are those of a silent run with the same seed."""
    m = LogNormal()
    quiet = m.optimize(seed=5)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    loud = m.optimize(seed=5, progress=True)
    err = capsys.readouterr().err
    assert "optimize (lbfgs)" in err and "lp=" in err
    assert loud.lp == quiet.lp and np.array_equal(loud.unconstrained, quiet.unconstrained)
    m.optimize(seed=5, method="newton", progress=True)
    assert "optimize (newton)" in capsys.readouterr().err
    lap = m.laplace(draws=10, seed=5, progress=True)
    assert "optimize (lbfgs)" in capsys.readouterr().err and lap["sigma"].shape == (1, 10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m.variational(seed=5, iter=300, output_samples=10)
    assert "ADVI meanfield" in capsys.readouterr().err
