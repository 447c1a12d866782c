"""ADVI (samplers/advi.py): what it converges to, checked against closed forms.

The optimum of the ELBO is known in closed form for the models below, so the test
is "the fitted variational parameters are the optimum", with a tolerance that is
derived, not chosen: at the end of a run the parameters fluctuate around the
optimum because every step uses a Monte Carlo gradient. Linearising the update
``theta += Gamma g`` (``Gamma`` = diag of the final per-parameter steps
``eta / sqrt(k) / (1 + sqrt(s))``, reported by the fit) around the optimum, where
``E g = -H (theta - theta*)`` (``H`` the Hessian of the negative ELBO) and ``g``'s
noise has covariance ``V / grad_samples``, the error follows
``e' = (I - Gamma H) e + Gamma xi``, whose stationary covariance solves the discrete
Lyapunov equation ``C = A C A^T + Gamma V Gamma / M``, ``A = I - Gamma H``. ``H`` and
``V`` are computed in closed form (Gaussian targets: moments of ``z z^T``) or by
Gauss-Hermite quadrature (the Poisson-gamma model). Every parameter must then lie
within 4.5 of its stationary sds (a two-sided 7e-6 tail each).
"""

import math
import warnings

import numpy as np
import pytest
from scipy.linalg import solve_discrete_lyapunov

import stanlite as sl
from stanlite.approx_fit import ApproximateFit
from stanlite.samplers.advi import ETA_SEQUENCE, ConvergenceWarning, variational

Z_TOL = 4.5


def _stationary_sd(H, V, gamma, m=1):
    """sd of each variational parameter around the optimum (module docstring)."""
    G = np.diag(gamma)
    A = np.eye(len(gamma)) - G @ H
    assert np.max(np.abs(np.linalg.eigvals(A))) < 1, "the linearised SGD is unstable"
    C = solve_discrete_lyapunov(A, G @ V @ G / m)
    return np.sqrt(np.diag(C))


# ---- a correlated 3-d Gaussian posterior ----------------------------------------------------
S = np.array([[1.0, 0.8, 0.3],
              [0.8, 2.0, -0.5],
              [0.3, -0.5, 0.7]])          # the likelihood's covariance
N_OBS = 20
Y = np.random.default_rng(0).multivariate_normal([1.0, -2.0, 0.5], S, size=N_OBS)
PRIOR_SD = 10.0


class Gauss3(sl.Model):
    """x ~ N(0, 10^2 I), y_n ~ N(x, S), n = 1..20: the posterior is N(m, Lambda^-1),
    Lambda = 20 S^-1 + I/100, m = Lambda^-1 S^-1 sum_n y_n (the log evidence is about
    -80: the ELBO is far from 0, so relative ELBO changes are meaningful)."""
    N = sl.data.int(lower=1)
    y = sl.data.matrix("N", 3)
    S = sl.data.matrix(3, 3)
    x = sl.param.vector(3)
    observed = ("y",)

    def log_prob(self, x):
        return sl.normal_lpdf(x, 0, PRIOR_SD) + sl.multi_normal_lpdf(self.y, x, self.S)


LAM = N_OBS * np.linalg.inv(S) + np.eye(3) / PRIOR_SD ** 2
SIGMA = np.linalg.inv(LAM)
MEAN = SIGMA @ np.linalg.solve(S, Y.sum(0))
_LOWER = [(i, j) for i in range(3) for j in range(i + 1)]

# The recovery tests run a fixed budget at a fixed eta: Stan's default stopping rule
# (a 1% relative ELBO change, here about 0.8 nats) ends the run long before the
# iterate settles at the optimum, and a transient is not Monte Carlo noise. 5000
# iterations at eta = 1 leave steps of ~1e-3 to 1e-2 with relaxation times of at
# most a few hundred iterations: the iterate is stationary, as the tolerances assume.
BUDGET = dict(eta=1.0, iter=5000, tol_rel_obj=1e-12, progress=False)


@pytest.fixture(scope="module")
def gauss3():
    return Gauss3(N=N_OBS, y=Y, S=S)


@pytest.fixture(scope="module")
def fullrank(gauss3):
    with pytest.warns(ConvergenceWarning, match="did not converge in 5000"):
        return variational(gauss3, "fullrank", seed=1, output_samples=4000, **BUDGET)


@pytest.fixture(scope="module")
def meanfield(gauss3):
    with pytest.warns(ConvergenceWarning, match="did not converge in 5000"):
        return variational(gauss3, "meanfield", seed=2, output_samples=4000, **BUDGET)


def test_fullrank_recovers_mean_and_covariance(fullrank):
    e = fullrank.extras
    step, L = e["final_step"], e["cholesky"]
    # mean: H = Lambda, V = Lambda Sigma_q Lambda = Lambda at the optimum
    sd_mu = _stationary_sd(LAM, LAM, step["mu"])
    assert np.all(np.abs(e["mean"] - MEAN) < Z_TOL * sd_mu), (e["mean"] - MEAN) / sd_mu
    # L: the ELBO is -tr(Lambda L L^T)/2 + sum log L_jj: H[(i,j),(k,l)] =
    # Lambda_ik [j == l] + [i == j == k == l] / L_jj^2; the noise of
    # g_ij = (grad log p)_i z_j has covariance (B B^T)_ik [j == l] + B_il B_kj, B =
    # Lambda L (B B^T = Lambda at the optimum)
    L_opt = np.linalg.cholesky(SIGMA)
    B = LAM @ L_opt
    n = len(_LOWER)
    H, V = np.zeros((n, n)), np.zeros((n, n))
    for a, (i, j) in enumerate(_LOWER):
        for b, (k, l) in enumerate(_LOWER):
            H[a, b] = LAM[i, k] * (j == l) + (i == j == k == l) / L_opt[j, j] ** 2
            V[a, b] = (B @ B.T)[i, k] * (j == l) + B[i, l] * B[k, j]
    sd_L = _stationary_sd(H, V, np.array([step["L"][i, j] for i, j in _LOWER]))
    # the optimum is L_opt up to the sign of each column (L L^T is the same)
    Ls = L * np.sign(np.diag(L))
    err = np.array([Ls[i, j] - L_opt[i, j] for i, j in _LOWER])
    assert np.all(np.abs(err) < Z_TOL * sd_L), err / sd_L
    assert np.all(np.triu(L, 1) == 0)
    np.testing.assert_allclose(e["cov"], L @ L.T)


def test_meanfield_recovers_mean_and_marginal_precision(meanfield):
    e = meanfield.extras
    step = e["final_step"]
    # the known mean-field optimum: mean m, precision diag(Lambda) (not 1/diag(Sigma))
    sigma_opt = 1 / np.sqrt(np.diag(LAM))
    V_mu = LAM @ np.diag(sigma_opt ** 2) @ LAM
    sd_mu = _stationary_sd(LAM, V_mu, step["mu"])
    assert np.all(np.abs(e["mean"] - MEAN) < Z_TOL * sd_mu), (e["mean"] - MEAN) / sd_mu
    # omega = log sigma: -ELBO = sum Lambda_ii e^(2 omega_i) / 2 - sum omega_i, H = 2 I
    # at the optimum; g_i = 1 - sum_a B_ia z_a z_i with B = diag(s) Lambda diag(s), so
    # Cov(g_i, g_k) = [i == k] (B B^T)_ii + B_ik B_ki
    Bm = np.diag(sigma_opt) @ LAM @ np.diag(sigma_opt)
    V_om = np.diag(np.diag(Bm @ Bm.T)) + Bm * Bm.T
    sd_om = _stationary_sd(2 * np.eye(3), V_om, step["omega"])
    err = e["omega"] - np.log(sigma_opt)
    assert np.all(np.abs(err) < Z_TOL * sd_om), err / sd_om
    # the marginal sds are underestimated (by factors 1.5 to 1.3 here)
    assert np.all(sigma_opt < np.sqrt(np.diag(SIGMA)) / 1.3)
    np.testing.assert_allclose(e["scale"], np.exp(e["omega"]))


def test_draws_are_from_the_approximation(fullrank):
    # 4000 independent draws from q: each coordinate's sample mean is within 4.5
    # standard errors sqrt(Sigma_q,ii / 4000) of q's mean
    x = fullrank["x"][0]
    e = fullrank.extras
    se = np.sqrt(np.diag(e["cov"]) / x.shape[0])
    assert np.all(np.abs(x.mean(0) - e["mean"]) < Z_TOL * se)
    # log_q is the normalised density of N(mean, cov) at the draws
    from scipy.stats import multivariate_normal
    np.testing.assert_allclose(fullrank.log_q,
                               multivariate_normal(e["mean"], e["cov"]).logpdf(x),
                               rtol=1e-10)
    # log_p is the model's log density (Jacobian included)
    m = fullrank.model
    np.testing.assert_allclose(fullrank.log_p[:5], [m.log_density(xi) for xi in x[:5]])


class Corr2(sl.Model):
    """x ~ N(0, 10^2 I), y_n ~ N(x, [[1, 0.95], [0.95, 1]]), n = 1..20: a strongly
    correlated 2-d Gaussian posterior."""
    y = sl.data.matrix(20, 2)
    x = sl.param.vector(2)

    def log_prob(self, x):
        S2 = np.array([[1.0, 0.95], [0.95, 1.0]])
        return sl.normal_lpdf(x, 0, PRIOR_SD) + sl.multi_normal_lpdf(self.y, x, S2)


def test_pareto_k_in_diagnose(fullrank):
    # fullrank is (nearly) exact here: nearly constant ratios, k-hat below 0.5
    assert fullrank.pareto_k < 0.5
    text = fullrank.diagnose()
    assert "did not converge in 5000 iterations" in text
    assert "the approximation is close to the posterior" in text
    assert "ELBO at the 4000 output draws" in text
    # meanfield: whitening q (u = D^(1/2) x, D = diag(Lambda)) gives log w =
    # -u^T (R - I) u / 2 near the optimum, R the correlation matrix of Lambda: P(log w
    # > t) ~ exp(-t / (1 - lambda_min(R))), a Pareto tail with k = 1 - lambda_min(R) =
    # 0.95 here. k-hat uses the M = 3 sqrt(4000) = 190 largest ratios: sd ~ (1 + k) /
    # sqrt(M) = 0.14, so the threshold 0.7 is 1.8 sd below k
    y = np.random.default_rng(8).multivariate_normal([0, 0], [[1, 0.95], [0.95, 1]], 20)
    fit = variational(Corr2(y=y), "meanfield", seed=9, progress=False,
                      output_samples=4000)
    assert fit.extras["converged"]
    assert fit.pareto_k > 0.7
    text = fit.diagnose()
    assert "do not trust this approximation" in text and "method='fullrank'" in text


def test_defaults_converge(gauss3):
    # with Stan's defaults (eta adapted, tol_rel_obj = 0.01) both families converge
    # on this posterior, without warnings
    for method in ("meanfield", "fullrank"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            fit = variational(gauss3, method, seed=3, progress=False, output_samples=100)
        e = fit.extras
        assert e["converged"] and e["iterations"] < 10000
        assert f"ADVI ({method}) converged after {e['iterations']} iterations" in \
            fit.diagnose()


# ---- conjugate models: ADVI against the exact posterior -----------------------------------
class NormalKnownVariance(sl.Model):
    """y_n ~ N(mu, 2), mu ~ N(1, 3): posterior N(m, s^2), s^-2 = 1/9 + N/4,
    m = s^2 (1/9 + sum y / 4)."""
    N = sl.data.int(lower=1)
    y = sl.data.vector("N")
    mu = sl.param.real()

    def log_prob(self, mu):
        return sl.normal_lpdf(self.y, mu, 2.0) + sl.normal_lpdf(mu, 1.0, 3.0)


@pytest.mark.parametrize("method", ["meanfield", "fullrank"])
def test_normal_known_variance_is_exact(method):
    y = np.random.default_rng(4).normal(2.0, 2.0, 25)
    prec = 1 / 9 + len(y) / 4
    m_exact, s_exact = (1 / 9 + y.sum() / 4) / prec, prec ** -0.5
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        fit = variational(NormalKnownVariance(N=len(y), y=y), method, seed=5,
                          **{**BUDGET, "iter": 3000})
    e = fit.extras
    sc = e["final_step"]["omega"] if method == "meanfield" else e["final_step"]["L"][0]
    # 1-d: H = prec for mu (V = prec at the optimum); for log s: H = 2, noise
    # variance 2; for L = s: H = prec + 1/s^2 = 2 prec, noise variance 2 prec
    sd_mu = _stationary_sd(np.array([[prec]]), np.array([[prec]]), e["final_step"]["mu"])
    assert abs(e["mean"][0] - m_exact) < Z_TOL * sd_mu[0]
    if method == "meanfield":
        sd = _stationary_sd(np.array([[2.0]]), np.array([[2.0]]), sc)
        assert abs(e["omega"][0] - math.log(s_exact)) < Z_TOL * sd[0]
    else:
        sd = _stationary_sd(np.array([[2 * prec]]), np.array([[2 * prec]]), sc)
        assert abs(e["cholesky"][0, 0] - s_exact) < Z_TOL * sd[0]
    # the draws' mean: Monte Carlo se of 1000 draws of q, plus q's own mean error
    tol = Z_TOL * math.hypot(s_exact / math.sqrt(1000), sd_mu[0])
    assert abs(fit["mu"].mean() - m_exact) < tol


class PoissonGamma(sl.Model):
    """y_n ~ Poisson(lam), lam ~ Gamma(a, b): posterior Gamma(a + sum y, b + N)."""
    N = sl.data.int(lower=1)
    y = sl.data.array("N", dtype="int", lower=0)
    a = sl.data.real(lower=0)
    b = sl.data.real(lower=0)
    lam = sl.param.real(lower=0)

    def log_prob(self, lam):
        return sl.poisson_lpmf(self.y, lam) + sl.gamma_lpdf(lam, self.a, self.b)


def test_poisson_gamma_mean_is_the_exact_posterior_mean():
    """On x = log(lam) the posterior is p(x) ~ exp(alpha x - beta e^x) (Jacobian
    included), alpha = a + sum y, beta = b + N. For q = N(m, s^2) the ELBO is
    alpha m - beta exp(m + s^2/2) + log s + const, maximised at s^2 = 1/alpha,
    m = log(alpha/beta) - 1/(2 alpha); then E_q[lam] = exp(m + s^2/2) = alpha/beta,
    the exact posterior mean, although q is not the posterior (a log-gamma)."""
    y = np.random.default_rng(6).poisson(3.0, 30)
    a, b = 2.0, 0.5
    alpha, beta = a + y.sum(), b + len(y)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        fit = variational(PoissonGamma(N=len(y), y=y, a=a, b=b), "meanfield", seed=7,
                          **{**BUDGET, "iter": 3000})
    e = fit.extras
    s_opt = alpha ** -0.5
    m_opt = math.log(alpha / beta) - 0.5 / alpha
    # gradient noise by Gauss-Hermite quadrature at the optimum: g_m = alpha -
    # beta e^(m + s z), g_w = g_m s z + 1; H of the negative ELBO in (m, omega):
    # [[alpha, 1], [1, 2 + 1/alpha]]
    z, w = np.polynomial.hermite_e.hermegauss(80)
    w = w / w.sum()
    gm = alpha - beta * np.exp(m_opt + s_opt * z)
    gw = gm * s_opt * z + 1
    G = np.stack([gm, gw])
    V = (G * w) @ G.T
    H = np.array([[alpha, 1.0], [1.0, 2 + 1 / alpha]])
    sd = _stationary_sd(H, V, np.r_[e["final_step"]["mu"], e["final_step"]["omega"]])
    assert abs(e["mean"][0] - m_opt) < Z_TOL * sd[0]
    assert abs(e["omega"][0] - math.log(s_opt)) < Z_TOL * sd[1]
    # the draws' mean of lam vs alpha/beta: Monte Carlo se of 1000 lognormal draws,
    # plus the delta-method error of E_q[lam] = exp(m + e^(2 omega)/2) from m and
    # omega (derivatives E and 2 E s^2 = 2 E / alpha)
    lam = fit["lam"][0]
    E = alpha / beta
    sd_q = E * math.sqrt(math.expm1(s_opt ** 2))
    tol = Z_TOL * math.sqrt(sd_q ** 2 / lam.size + (E * sd[0]) ** 2
                            + (2 * E / alpha * sd[1]) ** 2)
    assert abs(lam.mean() - E) < tol


# ---- Stan's step-size adaptation rule ----------------------------------------------------
class _ScriptedELBO:
    """An estimator whose gradient is 0 and whose ELBO follows a script (a value, or
    None for a failed estimate): the adaptation's choice depends only on these."""

    def __init__(self, values):
        self.values = list(values)

    def gradient(self, theta):
        return np.zeros_like(theta)

    def elbo(self, theta):
        from stanlite.samplers.advi import _Failure
        v = self.values.pop(0)
        if v is None:
            raise _Failure("ELBO", 100, "scripted")
        return v


class _NoBar:
    def update(self, *a, **k):
        pass


@pytest.mark.parametrize("script, eta", [
    # init, then one ELBO per eta tried (100, 10, 1, 0.1, 0.01)
    ([-10, None, -8, -7, -9], 1.0),        # better, better, then worse: the previous
    ([-10, -9, -9.5], 100.0),              # the first beats init and the next is worse
    ([-10, -12, -11, -10.5, -10.2, -9], 0.01),   # only the last beats init
    ([-10, -20, -15, -30, -12, -11], None),      # none beats init: an error
    ([-10, -12, -13, -9, -9.5], 1.0),      # worse before init is beaten: keep trying
])
def test_adaptation_follows_stans_rule(script, eta):
    from stanlite.samplers.advi import _adapt_eta
    est = _ScriptedELBO(script)
    if eta is None:
        with pytest.raises(sl.ModelError, match="every step size tried"):
            _adapt_eta(est, np.zeros(2), 3, _NoBar())
        return
    chosen, trials, init = _adapt_eta(est, np.zeros(2), 3, _NoBar())
    assert chosen == eta and init == script[0]
    assert [t[0] for t in trials] == list(ETA_SEQUENCE[:len(script) - 1])
    assert est.values == []                # stopped exactly where the rule says


# ---- reproducibility, history, warnings, failures ------------------------------------------
def test_reproducible_by_seed(gauss3):
    a = variational(gauss3, "meanfield", seed=11, progress=False, output_samples=50)
    b = variational(gauss3, "meanfield", seed=11, progress=False, output_samples=50)
    c = variational(gauss3, "meanfield", seed=12, progress=False, output_samples=50)
    np.testing.assert_array_equal(a["x"], b["x"])
    np.testing.assert_array_equal(a.extras["elbo"], b.extras["elbo"])
    assert a.extras["eta"] == b.extras["eta"] and a.extras["iterations"] == \
        b.extras["iterations"]
    assert not np.array_equal(a["x"], c["x"])
    # a SeedSequence works too, and model.variational delegates here
    d = gauss3.variational("meanfield", seed=np.random.SeedSequence(11), progress=False,
                           output_samples=50)
    np.testing.assert_array_equal(a["x"], d["x"])


def test_extras_and_the_elbo_at_the_optimum(meanfield):
    e = meanfield.extras
    assert e["eta"] == 1.0 and e["eta_trials"] == [] and e["elbo_init"] is None
    assert e["iterations"] == 5000 and not e["converged"]
    assert len(e["elbo"]) == 50 == len(e["elbo_iter"])
    np.testing.assert_array_equal(e["elbo_iter"], 100 * np.arange(1, 51))
    # the ELBO at the mean-field optimum is log Z - KL(q* || p), both in closed form;
    # the last estimate (100 draws) has sd = sd(log p - log q) / 10, and q's own
    # distance from q* adds a second-order term (<< 0.05 nats at these steps)
    sig = 1 / np.sqrt(np.diag(LAM))
    kl = 0.5 * (np.sum(np.diag(LAM) * sig ** 2) - 3 + np.linalg.slogdet(SIGMA)[1]
                - 2 * np.sum(np.log(sig)))
    lw = meanfield.log_p - meanfield.log_q
    assert abs(e["elbo"][-1] - (_log_evidence() - kl)) < Z_TOL * lw.std() / 10 + 0.05
    assert e["mean_constrained"]["x"].shape == (3,)
    assert e["n_gradients"] >= 5000 and e["n_densities"] == 50 * 100 + 4000
    assert e["elapsed"]["optimization"] > 0


def _log_evidence():
    """log p(y) = log N(ybar | 0, S/N + 100 I) + the within-sample part."""
    from scipy.stats import multivariate_normal
    ybar = Y.mean(0)
    Sinv = np.linalg.inv(S)
    dev = Y - ybar
    within = (-0.5 * np.einsum("ni,ij,nj->", dev, Sinv, dev)
              - 0.5 * (N_OBS - 1) * np.linalg.slogdet(2 * np.pi * S)[1]
              - 0.5 * 3 * math.log(N_OBS))
    return within + multivariate_normal(np.zeros(3), S / N_OBS + PRIOR_SD ** 2 *
                                        np.eye(3)).logpdf(ybar)


def test_log_evidence_formula(gauss3):
    # the closed form above, checked by the Laplace identity (exact for a Gaussian):
    # log Z = log p(m) + d/2 log(2 pi) - log|Lambda| / 2
    lz = gauss3.log_density(MEAN) + 1.5 * math.log(2 * math.pi) \
        - 0.5 * np.linalg.slogdet(LAM)[1]
    assert _log_evidence() == pytest.approx(lz, rel=1e-10)


def test_not_converged_warns(gauss3):
    with pytest.warns(ConvergenceWarning, match=r"did not converge in 300 iterations.*"
                      r"increase iter"):
        fit = variational(gauss3, "meanfield", seed=1, iter=300, tol_rel_obj=1e-9,
                          progress=False, output_samples=10)
    assert not fit.extras["converged"] and "did not converge" in fit.diagnose()
    with pytest.warns(ConvergenceWarning, match="the ELBO was never evaluated"):
        variational(gauss3, "meanfield", seed=1, iter=50, progress=False,
                    output_samples=10)


def test_may_be_diverging_warns(gauss3):
    # eta = 100 without adaptation: steps of order 100 / sqrt(k) in every parameter,
    # the ELBO jumps by orders of magnitude between evaluations
    with pytest.warns(ConvergenceWarning, match="may be diverging"):
        fit = variational(gauss3, "meanfield", seed=1, eta=100.0, iter=3000,
                          progress=False, output_samples=10)
    e = fit.extras
    assert max(e["delta_elbo_mean"][-1], e["delta_elbo_median"][-1]) > 0.5
    assert "may be diverging" in fit.diagnose()


class Fragile(sl.Model):
    """mu ~ N(0, 10), y_n ~ N(mu, 4.47) (20 zeros: posterior N(0, 1), log evidence
    about -50); the log density raises a domain error for |mu| > limit."""
    limit = sl.data.real(lower=0)
    y = sl.data.vector(20)
    mu = sl.param.real()
    compile = False          # the check below reads a value: no retaped gradient

    def log_prob(self, mu):
        if abs(sl.value_of(mu)) > self.limit:
            raise sl.DomainError(f"mu = {sl.value_of(mu):.3g} is beyond the limit")
        return sl.normal_lpdf(mu, 0, 10) + sl.normal_lpdf(self.y, mu, math.sqrt(20))


def test_non_finite_draws_are_dropped_and_redrawn():
    # the limit 2.5 is 2.5 posterior sd: 1.2% of the draws of q fail (and are
    # redrawn while fitting); of 4000 output draws about 50 fail (P(none) ~ e^-50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fit = variational(Fragile(limit=2.5, y=np.zeros(20)), "meanfield", seed=2,
                          progress=False, init={"mu": 0.0}, output_samples=4000)
    assert fit.extras["converged"]
    bad = int(np.sum(~np.isfinite(fit.log_p)))
    assert bad > 0 and f"not finite at {bad} of 4000 draws" in fit.diagnose()
    np.testing.assert_array_equal(np.isnan(fit.log_p), np.abs(fit["mu"][0]) > 2.5)


def test_all_failing_draws_raise_a_clear_error():
    zeros = np.zeros(20)
    # the unit-scale start: only |z| < 0.3 (24%) evaluates: 100 failures come before
    # 100 successes
    with pytest.raises(sl.ModelError, match="cannot compute the ELBO at the initial "
                       r"approximation.*DomainError: mu = .* is beyond the limit"):
        variational(Fragile(limit=0.3, y=zeros), "meanfield", seed=1, progress=False,
                    init={"mu": 0.0})
    # without adaptation: a gradient estimate drops 10 draws (4% succeed)
    with pytest.raises(sl.ModelError, match=r"failed at 10 draws from the approximation "
                       r"in one gradient estimate at iteration \d+"):
        variational(Fragile(limit=0.05, y=zeros), "meanfield", seed=1, progress=False,
                    eta=0.1, init={"mu": 0.0})
    with pytest.raises(sl.ModelError, match="could not initialise ADVI"):
        variational(Fragile(limit=0.3, y=zeros), "meanfield", seed=1, progress=False,
                    init={"mu": 1.0})


def test_interrupt_returns_the_current_approximation():
    class Interrupted(Gauss3):
        calls = 0
        compile = False      # log_prob runs at every gradient (no retaped replay)

        def log_prob(self, x):
            type(self).calls += 1
            if type(self).calls == 400:
                raise KeyboardInterrupt
            return super().log_prob(x)
    with pytest.warns(ConvergenceWarning, match="interrupted"):
        fit = variational(Interrupted(N=N_OBS, y=Y, S=S), "meanfield", seed=1, eta=1.0,
                          progress=False, output_samples=20)
    assert fit.extras["interrupted"] and fit["x"].shape == (1, 20, 3)


def test_bad_arguments(gauss3):
    for kw, msg in [({"method": "full"}, "method must be one of 'meanfield', 'fullrank'"),
                    ({"iter": 0}, "iter must be an integer >= 1, got 0"),
                    ({"grad_samples": 1.5}, "grad_samples must be an integer"),
                    ({"tol_rel_obj": -1}, "tol_rel_obj must be a finite number > 0"),
                    ({"eta": float("nan")}, "eta must be a finite number > 0"),
                    ({"output_samples": -1}, "output_samples must be an integer >= 1"),
                    ({"iter": 5, "max_iter": 6}, "disagree")]:
        with pytest.raises(ValueError, match=msg):
            variational(gauss3, **{"method": "meanfield", **kw})


def test_fit_interface_and_arviz(fullrank):
    assert isinstance(fullrank, ApproximateFit) and fullrank.method == "fullrank"
    assert fullrank.names == ["x"] and fullrank["x"].shape == (1, 4000, 3)
    s = fullrank.summary()
    assert list(s.index) == ["x[1]", "x[2]", "x[3]"]
    idata = fullrank.to_arviz()
    assert set(idata.sample_stats.data_vars) == {"lp", "log_p", "log_q"}
    assert idata.posterior["x"].shape == (1, 4000, 3)
    np.testing.assert_array_equal(idata.observed_data["y"].values, Y)
    np.testing.assert_array_equal(idata.constant_data["S"].values, S)
    assert repr(fullrank).startswith("<ApproximateFit fullrank: 4000 draws, 1 quantities")
