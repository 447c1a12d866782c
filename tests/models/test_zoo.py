"""The model zoo: registry, default data, and every model's log density against an
independent numpy/scipy reference (including the log-Jacobian of the transforms).

The references below are written from the models' math (the posteriordb Stan
programs), not with stanlite: scipy.stats densities and Stan's constraint transforms
with their log-Jacobians spelled out:

    lower = 0:          y = exp(u),                         log|J| = u
    (a, b):             y = a + (b - a) logistic(u),        log|J| = log(b - a) + log s(u) + log s(-u)
    ordered:            y_1 = u_1, y_k = y_{k-1} + exp(u_k), log|J| = sum_{k>=2} u_k
"""

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit, log_expit

import stanlite as sl
from stanlite.autodiff.functional import hessian
import stanlite.models as zoo

# --------------------------------------------------------------------------------------
# the references: (data, unconstrained x) -> log density with the Jacobian
# --------------------------------------------------------------------------------------


class _Unpack:
    """Reads x in declaration order, accumulating the log-Jacobian."""

    def __init__(self, x):
        self.x, self.i, self.logj = np.asarray(x, float), 0, 0.0

    def take(self, n=None):
        k = 1 if n is None else n
        u = self.x[self.i:self.i + k]
        self.i += k
        return u[0] if n is None else u.copy()

    def real(self):
        return self.take()

    def vector(self, n):
        return self.take(n)

    def positive(self, n=None):
        u = self.take(n)
        self.logj += np.sum(u)
        return np.exp(u)

    def interval(self, a, b):
        u = self.take()
        self.logj += np.log(b - a) + log_expit(u) + log_expit(-u)
        return a + (b - a) * expit(u)

    def ordered(self, n):
        u = self.take(n)
        self.logj += np.sum(u[1:])
        return np.cumsum(np.concatenate([u[:1], np.exp(u[1:])]))

    def done(self):
        assert self.i == len(self.x)
        return self.logj


norm, cauchy = stats.norm.logpdf, stats.cauchy.logpdf


def ref_eight_schools_centered(d, x):
    p = _Unpack(x)
    theta, mu, tau = p.vector(d["J"]), p.real(), p.positive()
    lp = cauchy(tau, 0, 5) + norm(theta, mu, tau).sum() + norm(d["y"], theta, d["sigma"]).sum()
    return lp + norm(mu, 0, 5) + p.done()


def ref_eight_schools_noncentered(d, x):
    p = _Unpack(x)
    tt, mu, tau = p.vector(d["J"]), p.real(), p.positive()
    theta = tt * tau + mu
    lp = norm(tt, 0, 1).sum() + norm(d["y"], theta, d["sigma"]).sum()
    return lp + norm(mu, 0, 5) + cauchy(tau, 0, 5) + p.done()


def ref_linear_regression(d, x):
    p = _Unpack(x)
    beta, sigma = p.vector(2), p.positive()
    mu = beta[0] + beta[1] * np.asarray(d["mom_iq"], float)
    return cauchy(sigma, 0, 2.5) + norm(d["kid_score"], mu, sigma).sum() + p.done()


def ref_logistic_regression(d, x):
    p = _Unpack(x)
    alpha, beta = p.real(), p.vector(d["K"])
    eta = alpha + np.asarray(d["X"], float) @ beta
    lik = stats.bernoulli.logpmf(d["y"], expit(eta)).sum()
    return norm(alpha, 0, 2.5) + norm(beta, 0, 2.5).sum() + lik + p.done()


def ref_radon(d, x):
    p = _Unpack(x)
    alpha, beta, mu_a = p.vector(d["J"]), p.real(), p.real()
    s_a, s_y = p.positive(), p.positive()
    lp = norm(s_y, 0, 1) + norm(s_a, 0, 1) + norm(mu_a, 0, 10) + norm(beta, 0, 10)
    lp += norm(alpha, mu_a, s_a).sum()
    idx = np.asarray(d["county_idx"]) - 1
    mu = alpha[idx] + beta * np.asarray(d["floor_measure"], float)
    return lp + norm(d["log_radon"], mu, s_y).sum() + p.done()


def ref_neal_funnel(d, x):
    p = _Unpack(x)
    v, xs = p.real(), p.vector(d["D"] - 1)
    return norm(v, 0, 3) + norm(xs, 0, np.exp(v / 2)).sum() + p.done()


def ref_normal_mixture(d, x):
    p = _Unpack(x)
    mu, sigma, theta = p.ordered(2), p.positive(2), p.interval(0.0, 1.0)
    lp = norm(sigma, 0, 2).sum() + norm(mu, 0, 2).sum() + stats.beta.logpdf(theta, 5, 5)
    y = np.asarray(d["y"], float)
    mix = np.logaddexp(np.log(theta) + norm(y, mu[0], sigma[0]),
                       np.log1p(-theta) + norm(y, mu[1], sigma[1]))
    return lp + mix.sum() + p.done()


def ref_ark(d, x):
    p = _Unpack(x)
    K, T = d["K"], d["T"]
    alpha, beta, sigma = p.real(), p.vector(K), p.positive()
    y = np.asarray(d["y"], float)
    lp = norm(alpha, 0, 10) + norm(beta, 0, 10).sum() + cauchy(sigma, 0, 2.5)
    mu = np.array([alpha + sum(beta[k] * y[t - k - 1] for k in range(K))
                   for t in range(K, T)])                  # Stan's loop, 0-based
    lp += norm(y[K:], mu, sigma).sum()
    return lp + p.done()


def ref_garch(d, x):
    p = _Unpack(x)
    mu, a0 = p.real(), p.positive()
    a1 = p.interval(0.0, 1.0)
    b1 = p.interval(0.0, 1.0 - a1)
    y = np.asarray(d["y"], float)
    sigma = np.empty(d["T"])
    sigma[0] = d["sigma1"]
    for t in range(1, d["T"]):
        sigma[t] = np.sqrt(a0 + a1 * (y[t - 1] - mu) ** 2 + b1 * sigma[t - 1] ** 2)
    return norm(y, mu, sigma).sum() + p.done()      # flat priors


def ref_gp_pois_regr(d, x):
    p = _Unpack(x)
    N = d["N"]
    rho, alpha, f_tilde = p.positive(), p.positive(), p.vector(N)
    xs = np.asarray(d["x"], float)
    K = alpha ** 2 * np.exp(-(xs[:, None] - xs[None, :]) ** 2 / (2 * rho ** 2))
    f = np.linalg.cholesky(K + 1e-10 * np.eye(N)) @ f_tilde
    lp = stats.gamma.logpdf(rho, 25, scale=1 / 4) + norm(alpha, 0, 2)
    lp += norm(f_tilde, 0, 1).sum() + stats.poisson.logpmf(d["k"], np.exp(f)).sum()
    return lp + p.done()


def ref_pk_steady_state(d, x):
    p = _Unpack(x)
    k1, k2, sigma = p.positive(), p.positive(), p.positive()
    a = k1 * np.asarray(d["phi1"], float)
    b = k2 * np.asarray(d["phi2"], float)
    e1, e2 = np.exp(-a * d["tau"]), np.exp(-b * d["tau"])
    gut = d["dose"] * e1 / (1 - e1)                    # the closed-form trough
    central = (gut + d["dose"]) * a / (a - b) * (e2 - e1) / (1 - e2)
    lp = stats.lognorm.logpdf([k1, k2], 1.0).sum() + norm(sigma, 0, 0.5)
    lp += stats.lognorm.logpdf(d["C_obs"], sigma, scale=central / d["V"]).sum()
    return lp + p.done()


# name -> (reference, {parameter: constrained size}, scale of the test points)
ZOO = {
    "eight_schools_centered": (ref_eight_schools_centered,
                               {"theta": 8, "mu": 1, "tau": 1}, 1.0),
    "eight_schools_noncentered": (ref_eight_schools_noncentered,
                                  {"theta_trans": 8, "mu": 1, "tau": 1}, 1.0),
    "linear_regression": (ref_linear_regression, {"beta": 2, "sigma": 1}, 1.0),
    "logistic_regression": (ref_logistic_regression, {"alpha": 1, "beta": 3}, 1.0),
    "radon": (ref_radon, {"alpha": 30, "beta": 1, "mu_alpha": 1, "sigma_alpha": 1,
                          "sigma_y": 1}, 1.0),
    "neal_funnel": (ref_neal_funnel, {"v": 1, "x": 9}, 1.0),
    "normal_mixture": (ref_normal_mixture, {"mu": 2, "sigma": 2, "theta": 1}, 1.0),
    "ark": (ref_ark, {"alpha": 1, "beta": 5, "sigma": 1}, 0.5),
    "garch": (ref_garch, {"mu": 1, "alpha0": 1, "alpha1": 1, "beta1": 1}, 1.0),
    "gp_pois_regr": (ref_gp_pois_regr, {"rho": 1, "alpha": 1, "f_tilde": 11}, 0.5),
    "pk_steady_state": (ref_pk_steady_state, {"k1": 1, "k2": 1, "sigma": 1}, 0.5),
}
# zoo models whose log density needs an ODE solve at a tolerance (or a reference of
# their own): tested against a reference solution in their own files
# (tests/models/test_<name>.py)
TESTED_ELSEWHERE = ["one_comp_mm_elim_abs", "theophylline", "mm_multidose_ss",
                    "friberg_karlsson"]

NAMES = sorted(ZOO)
N_POINTS = 3


def reference(name):
    """The reference log density of zoo model ``name`` on its default data, as a
    function of the unconstrained point."""
    ref, d = ZOO[name][0], zoo.default_data(name)
    return lambda x: ref(d, x)


def points(name, dim):
    rng = np.random.default_rng(sum(map(ord, name)))
    return [ZOO[name][2] * rng.standard_normal(dim) for _ in range(N_POINTS)]


def central_diff(f, x, h=1e-5):
    """Fourth-order central differences of f at x."""
    g = np.empty_like(x)
    for i in range(len(x)):
        hi = h * max(1.0, abs(x[i]))
        e = np.zeros_like(x)
        e[i] = hi
        g[i] = (8 * (f(x + e) - f(x - e)) - (f(x + 2 * e) - f(x - 2 * e))) / (12 * hi)
    return g


@pytest.fixture(scope="module")
def models():
    return {name: zoo.get(name) for name in NAMES}


# --------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------
def test_names_lists_the_zoo_sorted():
    assert zoo.names() == sorted(NAMES + TESTED_ELSEWHERE)


def test_unknown_name_is_a_key_error_listing_the_names():
    with pytest.raises(KeyError) as e:
        zoo.get("eight_school")
    msg = str(e.value)
    assert "'eight_school'" in msg
    assert all(n in msg for n in NAMES)
    with pytest.raises(KeyError):
        zoo.model_class("nope")


def test_get_applies_data_overrides():
    m = zoo.get("neal_funnel", D=3)
    assert m.dim == 3 and m.param_names() == ["v", "x[1]", "x[2]"]
    m = zoo.get("eight_schools_noncentered", y=[0.0] * 8)
    assert np.all(m.y == 0)


def test_default_data_is_shipped_with_the_package():
    import importlib.resources
    data = importlib.resources.files("stanlite.models").joinpath("data")
    for name in NAMES:
        assert data.joinpath(f"{name}.json").is_file(), name


def test_every_model_has_a_docstring_with_its_source():
    for name in NAMES:
        doc = zoo.model_class(name).__doc__
        assert doc and "Source" in doc, name


# --------------------------------------------------------------------------------------
# per model
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NAMES)
def test_default_data_loads_and_validates(name, models):
    m = models[name]
    assert isinstance(m, zoo.model_class(name))
    sizes = ZOO[name][1]
    assert m.param_shapes().keys() == sizes.keys()
    assert {k: int(np.prod(s)) for k, s in m.param_shapes().items()} == sizes
    # a field of the wrong type is refused with the field's name
    field = next(iter(zoo.default_data(name)))
    with pytest.raises(sl.DataError, match=field):
        zoo.get(name, **{field: "not a number"})


@pytest.mark.parametrize("name", NAMES)
def test_log_density_matches_the_reference(name, models):
    m, ref = models[name], reference(name)
    for x in points(name, m.dim):
        lp, want = m.log_density(x), ref(x)
        assert np.isfinite(want)
        assert lp == pytest.approx(want, rel=1e-8, abs=1e-10), x


@pytest.mark.parametrize("name", NAMES)
def test_gradient_matches_differences_of_the_reference(name, models):
    m, ref = models[name], reference(name)
    for x in points(name, m.dim):
        lp, g = m.log_density_gradient(x)
        assert lp == pytest.approx(ref(x), rel=1e-8, abs=1e-10)
        fd = central_diff(ref, x)
        scale = 1.0 + np.max(np.abs(fd))
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * scale)


@pytest.mark.parametrize("name", NAMES)
def test_constrain_round_trip_and_names(name, models):
    m = models[name]
    sizes = ZOO[name][1]
    for x in points(name, m.dim):
        c = m.constrain(x)
        assert list(c) == list(sizes)
        np.testing.assert_allclose(m.unconstrain(c), x, rtol=1e-9, atol=1e-9)
    names = m.param_names()
    assert len(names) == sum(sizes.values()) == len(set(names))
    assert len(m.unconstrained_param_names()) == m.dim


@pytest.mark.parametrize("name", NAMES)
def test_outputs_are_finite_and_match_their_declared_shapes(name, models):
    m = models[name]
    x = points(name, m.dim)[0]
    out = m.output(x, rng=1)
    tp, gq = m.output_shapes()
    for k, shape in {**tp, **gq}.items():
        assert np.shape(out[k]) == shape, k
        assert np.all(np.isfinite(out[k])), k
    assert len(m.param_names(include_tp=True, include_gq=True)) == sum(
        int(np.prod(np.shape(v))) for v in out.values())
    assert m.output(x, rng=1).keys() == out.keys()


@pytest.mark.parametrize("name", NAMES)
def test_hessian_matches_differences_of_the_gradient(name, models):
    """Nested AD (what Riemannian HMC uses) works through every model."""
    m = models[name]
    x = points(name, m.dim)[0]
    lp, g, H = m.log_density_hessian(x)
    h = 1e-6
    fd = np.array([(m.log_density_gradient(x + h * e)[1]
                    - m.log_density_gradient(x - h * e)[1]) / (2 * h)
                   for e in np.eye(m.dim)])
    np.testing.assert_allclose(H, fd, rtol=1e-5, atol=1e-5 * (1 + np.max(np.abs(fd))))
    np.testing.assert_allclose(H, H.T, rtol=1e-9, atol=1e-9 * (1 + np.max(np.abs(H))))


@pytest.mark.parametrize("name", NAMES)
def test_retaped_hessian_equals_the_eager_one(name, models):
    """Model.log_density_hessian replays a recording of the forward-over-reverse
    Hessian (or, where a density reads nested values, computes it eagerly, quietly):
    the same matrix as the eager computation, at points after the recording one."""
    m = models[name]
    pts = points(name, m.dim)
    eager = hessian(lambda z: m._log_density(z, True))
    for x in pts[:3]:
        H = m.log_density_hessian(x)[2]
        E = np.asarray(eager(x)).reshape(m.dim, m.dim)
        np.testing.assert_allclose(H, E, rtol=1e-12, atol=1e-12 * (1 + np.max(np.abs(E))))


# the zoo models taken from posteriordb: name -> posterior folder in ../shared
POSTERIORDB = {
    "eight_schools_centered": "eight_schools-eight_schools_centered",
    "eight_schools_noncentered": "eight_schools-eight_schools_noncentered",
    "linear_regression": "kidiq-kidscore_momiq",
    "normal_mixture": "low_dim_gauss_mix-low_dim_gauss_mix",
    "ark": "arK-arK",
    "gp_pois_regr": "gp_pois_regr-gp_pois_regr",
}


@pytest.mark.parametrize("name", sorted(POSTERIORDB))
def test_posteriordb_models_report_the_reference_quantities(name, models, shared_dir):
    """Sampler validation compares against posteriordb's summary.json: the shipped data
    must be posteriordb's, and every reference quantity must be a parameter or
    transformed parameter of the zoo model (same names, same element count)."""
    import json
    folder = shared_dir / "posteriordb" / POSTERIORDB[name]
    if not folder.is_dir():
        pytest.skip(f"{folder} is not present")
    assert zoo.default_data(name) == json.loads((folder / "data.json").read_text())
    ref = json.loads((folder / "summary.json").read_text())["params"]
    have = models[name].param_names(include_tp=True)
    assert set(ref) <= set(have), sorted(set(ref) - set(have))


def test_noncentered_eight_schools_reports_theta():
    m = zoo.get("eight_schools_noncentered")
    x = points("eight_schools_noncentered", m.dim)[0]
    c = m.constrain(x)
    theta = m.transformed_values(x)["theta"]
    np.testing.assert_allclose(theta, c["mu"] + c["tau"] * c["theta_trans"])
    assert "theta[8]" in m.param_names(include_tp=True)


def test_log_lik_sums_to_the_likelihood():
    """Where the prior is flat (garch), the summed log_lik is the log density
    without the Jacobian."""
    m = zoo.get("garch")
    x = points("garch", m.dim)[1]
    ll = m.generated_values(x, rng=0)["log_lik"]
    assert np.sum(ll) == pytest.approx(m.log_density(x, jacobian=False), rel=1e-10)


def test_garch_beta1_bound_depends_on_alpha1():
    m = zoo.get("garch")
    for x in points("garch", m.dim):
        for u in (-30.0, 0.0, 30.0):
            x = x.copy()
            x[3] = u
            c = m.constrain(x)
            assert 0 <= c["beta1"] <= 1 - c["alpha1"]
    with pytest.raises(sl.DataError):
        m.unconstrain({"mu": 0.0, "alpha0": 1.0, "alpha1": 0.6, "beta1": 0.5})


def test_normal_mixture_means_are_ordered():
    m = zoo.get("normal_mixture")
    for x in points("normal_mixture", m.dim):
        mu = m.constrain(x)["mu"]
        assert mu[0] < mu[1]
