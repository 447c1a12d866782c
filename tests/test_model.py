"""sl.Model: declarations, data validation (DataError naming the field), the
log-density protocol against hand-computed values, bounds that depend on other
parameters (with the right Jacobian), transformed parameters and generated
quantities, JSON loading."""

import json

import numpy as np
import pytest
import scipy.stats as st

import stanlite as sl


class EightSchools(sl.Model):
    J = sl.data.int(lower=1)
    y = sl.data.vector("J")
    sigma = sl.data.vector("J", lower=0)

    mu = sl.param.real()
    tau = sl.param.real(lower=0)
    theta_tilde = sl.param.vector("J")

    def transformed_parameters(self, mu, tau, theta_tilde):
        return {"theta": mu + tau * theta_tilde}

    def log_prob(self, mu, tau, theta_tilde, theta):
        lp = sl.normal_lpdf(mu, 0, 5) + sl.normal_lpdf(tau, 0, 5)
        lp = lp + sl.std_normal_lpdf(theta_tilde)
        return lp + sl.normal_lpdf(self.y, theta, self.sigma)

    def generated_quantities(self, rng, theta):
        return {"y_rep": rng.normal(theta, self.sigma)}


DATA = dict(J=8, y=[28, 8, -3, 7, -1, 1, 18, 12], sigma=[15, 10, 16, 11, 9, 11, 10, 18])


def _ref_eight_schools(x, jacobian=True):
    mu, log_tau, tt = x[0], x[1], x[2:]
    tau = np.exp(log_tau)
    theta = mu + tau * tt
    lp = (st.norm.logpdf(mu, 0, 5) + st.norm.logpdf(tau, 0, 5) + st.norm.logpdf(tt).sum()
          + st.norm.logpdf(DATA["y"], theta, DATA["sigma"]).sum())
    return lp + (log_tau if jacobian else 0.0)


@pytest.fixture
def model():
    return EightSchools(**DATA)


def test_protocol_against_reference(model, rng):
    assert model.dim == 10
    for _ in range(5):
        x = rng.uniform(-2, 2, model.dim)
        for jac in (True, False):
            assert np.isclose(model.log_density(x, jacobian=jac), _ref_eight_schools(x, jac),
                              rtol=1e-12)
        lp, g = model.log_density_gradient(x)
        assert np.isclose(lp, _ref_eight_schools(x))
        h = 1e-6
        fd = np.array([(_ref_eight_schools(x + h * e) - _ref_eight_schools(x - h * e)) / (2 * h)
                       for e in np.eye(model.dim)])
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6)


def test_hessian(model, rng):
    x = rng.uniform(-1, 1, model.dim)
    lp, g, H = model.log_density_hessian(x)
    np.testing.assert_allclose(H, H.T, atol=1e-12)
    h = 1e-5
    fd = np.array([(model.log_density_gradient(x + h * e)[1]
                    - model.log_density_gradient(x - h * e)[1]) / (2 * h)
                   for e in np.eye(model.dim)])
    np.testing.assert_allclose(H, fd, rtol=1e-5, atol=1e-6)


def test_constrain_unconstrain_names(model, rng):
    x = rng.normal(size=model.dim)
    p = model.constrain(x)
    assert set(p) == {"mu", "tau", "theta_tilde"}
    assert p["tau"] > 0 and p["theta_tilde"].shape == (8,)
    np.testing.assert_allclose(model.unconstrain(p), x, rtol=1e-12)
    names = model.param_names()
    assert names[:3] == ["mu", "tau", "theta_tilde[1]"] and len(names) == 10
    full = model.param_names(include_tp=True, include_gq=True)
    assert full[10] == "theta[1]" and full[-1] == "y_rep[8]" and len(full) == 26
    out = model.output(x, rng=1)
    np.testing.assert_allclose(out["theta"], p["mu"] + p["tau"] * p["theta_tilde"])
    assert out["y_rep"].shape == (8,)
    assert isinstance(model.transformed_values(x)["theta"], np.ndarray)


def test_unconstrain_rejects_bad_values(model):
    good = {"mu": 0.0, "tau": 1.0, "theta_tilde": np.zeros(8)}
    with pytest.raises(sl.DataError, match="tau"):
        model.unconstrain({**good, "tau": -1.0})
    with pytest.raises(sl.DataError, match="theta_tilde.*shape"):
        model.unconstrain({**good, "theta_tilde": np.zeros(7)})
    with pytest.raises(sl.DataError, match="'mu' has no value"):
        model.unconstrain({"tau": 1.0, "theta_tilde": np.zeros(8)})


# ---- data validation: each failure names the field, what was expected, what came -----
@pytest.mark.parametrize("change, pattern", [
    ({"J": 8.5}, r"'J'.*int.*float.*whole number.*8\.5"),       # 8.0 is accepted
    ({"J": 0}, r"'J'.*>= 1.*0"),
    ({"J": "8"}, r"'J'.*string"),
    ({"y": [1, 2, 3]}, r"'y'.*vector\[8\].*shape \(3,\)"),
    ({"y": 3.0}, r"'y'.*vector\[8\]"),
    ({"y": [28, 8, -3, 7, np.nan, 1, 18, 12]}, r"'y'.*finite.*\[5\].*nan"),
    ({"y": [28, 8, -3, 7, np.inf, 1, 18, 12]}, r"'y'.*finite.*inf"),
    ({"sigma": [15, 10, 16, -11, 9, 11, 10, 18]}, r"'sigma'.*>= 0.*\[4\].*-11"),
    ({"y": [[1, 2], [3]]}, r"'y'"),
])
def test_data_errors(change, pattern):
    with pytest.raises(sl.DataError, match=pattern):
        EightSchools(**{**DATA, **change})


def test_missing_field_and_unknown_field():
    d = dict(DATA)
    del d["sigma"]
    with pytest.raises(sl.DataError, match=r"missing data field 'sigma'.*vector\[8\]"):
        EightSchools(**d)
    # keyword data must be declared (a typo is not dropped silently); from_json
    # ignores undeclared fields of JSON data, as CmdStan does
    with pytest.raises(sl.DataError, match=r"unknown data field 'unused'"):
        EightSchools(**DATA, unused=[1, 2, 3])
    m = EightSchools.from_json({**DATA, "unused": [1, 2, 3], "note": "ignored"})
    assert not hasattr(m, "unused")


def test_data_is_validated_and_frozen(model):
    assert model.J == 8 and isinstance(model.J, int)
    assert model.y.dtype == np.float64 and not model.y.flags.writeable
    assert model.data["J"] == 8


def test_int_arrays_and_matrices():
    class Counts(sl.Model):
        N = sl.data.int(lower=0)
        K = sl.data.int(lower=1)
        n = sl.data.array("N", dtype="int", lower=0)
        X = sl.data.matrix("N", "K")
        beta = sl.param.vector("K")

        def log_prob(self, beta):
            return sl.poisson_log_lpmf(self.n, self.X @ beta) if hasattr(
                sl, "poisson_log_lpmf") else sl.normal_lpdf(self.n, self.X @ beta, 1.0)

    X = np.ones((3, 2))
    m = Counts(N=3, K=2, n=[1, 0, 4], X=X)
    assert m.n.dtype == np.int64 and m.dim == 2
    with pytest.raises(sl.DataError, match=r"'n'.*int.*float"):
        Counts(N=3, K=2, n=[1.5, 0, 4], X=X)
    with pytest.raises(sl.DataError, match=r"'n'.*>= 0.*\[2\].*-1"):
        Counts(N=3, K=2, n=[1, -1, 4], X=X)
    with pytest.raises(sl.DataError, match=r"'X'.*matrix\[3, 2\].*\(2, 3\)"):
        Counts(N=3, K=2, n=[1, 0, 4], X=X.T)


def test_from_json(tmp_path, model):
    p = tmp_path / "d.json"
    p.write_text(json.dumps({**DATA, "extra": "ignored"}))
    m = EightSchools.from_json(p)
    x = np.linspace(-1, 1, 10)
    assert m.log_density(x) == model.log_density(x)
    assert EightSchools.from_json(str(p)).J == 8
    assert EightSchools.from_json(DATA).J == 8
    with pytest.raises(sl.DataError, match="does not exist"):
        EightSchools.from_json(tmp_path / "nope.json")

    class Inf(sl.Model):
        a = sl.data.real(allow_nonfinite=True)
        m = sl.param.real()

        def log_prob(self, m):
            return sl.normal_lpdf(m, 0, 1)
    assert Inf.from_json('{"a": "-Inf"}').a == -np.inf


# ---- bounds that are data names, parameters, or callables of parameters --------------
class Garch(sl.Model):
    lo = sl.data.real()
    alpha1 = sl.param.real(lower=0, upper=1)
    beta1 = sl.param.real(lower=0, upper=lambda alpha1: 1 - alpha1)
    gamma = sl.param.real(lower="lo")

    def log_prob(self, alpha1, beta1, gamma):
        return sl.normal_lpdf(gamma, 0, 1) + 0.0 * alpha1 + 0.0 * beta1


def test_callable_bound_jacobian(rng):
    m = Garch(lo=-1.0)
    for _ in range(4):
        x = rng.normal(size=3)
        a = 1 / (1 + np.exp(-x[0]))
        ub = 1 - a
        b = ub / (1 + np.exp(-x[1]))
        g = -1 + np.exp(x[2])
        # log|J|: d alpha/dx0, d beta/dx1 (= ub s(1-s)), d gamma/dx2 (triangular Jacobian)
        lj = (np.log(a * (1 - a)) + np.log(ub) + np.log(b / ub * (1 - b / ub)) + x[2])
        ref = st.norm.logpdf(g) + lj
        assert np.isclose(m.log_density(x), ref, rtol=1e-12)
        p = m.constrain(x)
        assert np.isclose(p["beta1"], b) and p["beta1"] < 1 - p["alpha1"]
        np.testing.assert_allclose(m.unconstrain(p), x, rtol=1e-10, atol=1e-12)
        sl.assert_grad(lambda z: m._log_density(z), x)


def test_flat_density_with_dependent_bound_integrates_to_the_triangle():
    # alpha1 ~ U(0,1), beta1 | alpha1 flat on (0, 1 - alpha1): the constrained density
    # is constant on the triangle, so the unconstrained one must integrate to its area
    class Tri(sl.Model):
        alpha1 = sl.param.real(lower=0, upper=1)
        beta1 = sl.param.real(lower=0, upper=lambda alpha1: 1 - alpha1)

        def log_prob(self, alpha1, beta1):
            return 0.0 * alpha1
    m = Tri()
    u = np.linspace(-20, 20, 121)       # the trapezoid rule converges fast here
    du = u[1] - u[0]
    X, Y = np.meshgrid(u, u)
    dens = np.exp([[m.log_density(np.array([a, b])) for a, b in zip(r1, r2)]
                   for r1, r2 in zip(X, Y)])
    assert np.isclose(dens.sum() * du * du, 0.5, rtol=1e-3)


def test_offset_multiplier_names_parameters(rng):
    class NC(sl.Model):
        mu = sl.param.real()
        tau = sl.param.real(lower=0)
        theta = sl.param.vector(3, offset="mu", multiplier="tau")

        def log_prob(self, mu, tau, theta):
            return (sl.normal_lpdf(mu, 0, 1) + sl.normal_lpdf(tau, 0, 1)
                    + sl.normal_lpdf(theta, mu, tau))
    m = NC()
    x = rng.normal(size=5)
    mu, tau = x[0], np.exp(x[1])
    theta = mu + tau * x[2:]
    ref = (st.norm.logpdf(mu) + st.norm.logpdf(tau) + st.norm.logpdf(theta, mu, tau).sum()
           + x[1] + 3 * np.log(tau))
    assert np.isclose(m.log_density(x), ref, rtol=1e-12)


# ---- model errors ----------------------------------------------------------------------
def test_model_errors():
    with pytest.raises(sl.ModelError, match="log_prob"):
        class NoModel(sl.Model):
            a = sl.param.real()

    class Asks(sl.Model):
        a = sl.param.real()

        def log_prob(self, a, b):
            return a

    with pytest.raises(sl.ModelError, match="'b'"):
        Asks().log_density(np.zeros(1))

    class Bad(sl.Model):
        a = sl.param.real()

        def log_prob(self, a):
            return None
    with pytest.raises(sl.ModelError, match="returned None"):
        Bad().log_density(np.zeros(1))
    with pytest.raises(sl.ModelError, match=r"shape \(1,\)"):
        Bad().log_density(np.zeros(3))


def test_domain_error_propagates_for_samplers():
    class Neg(sl.Model):
        a = sl.param.real()

        def log_prob(self, a):
            return sl.normal_lpdf(0.0, 0.0, a)
    with pytest.raises(sl.DomainError, match="sigma"):
        Neg().log_density_gradient(np.array([-1.0]))


def test_structured_parameters_dims(rng):
    class S(sl.Model):
        K = sl.data.int()
        s = sl.param.simplex("K")
        o = sl.param.ordered(3)
        L = sl.param.cholesky_factor_corr("K")
        C = sl.param.cov_matrix(2)
        u = sl.param.unit_vector(3)

        def log_prob(self, s, o, L, C, u):
            return sl.sum(s) + sl.sum(o) + sl.sum(L) + sl.sum(C) + sl.sum(u)
    m = S(K=4)
    assert m.dim == 3 + 3 + 6 + 3 + 3
    x = rng.normal(size=m.dim)
    p = m.constrain(x)
    assert np.isclose(p["s"].sum(), 1) and np.all(np.diff(p["o"]) > 0)
    np.testing.assert_allclose(np.diag(p["L"] @ p["L"].T), 1.0)
    # unit_vector is not a bijection (x -> x/|x|): compare it on the constrained side
    np.testing.assert_allclose(m.unconstrain(p)[:15], x[:15], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(m.constrain(m.unconstrain(p))["u"], p["u"], rtol=1e-12)
    assert m.param_names()[4] == "o[1]" and "L[2,1]" in m.param_names()
    sl.assert_grad(lambda z: m._log_density(z), x)


def test_blocks_taking_kwargs_get_everything(rng):
    class KW(sl.Model):
        a = sl.param.real()
        b = sl.param.real(lower=0)

        def transformed_parameters(self, **p):
            return {"c": p["a"] * p["b"]}

        def log_prob(self, **p):
            return sl.normal_lpdf(p["a"], 0, 1) + sl.normal_lpdf(p["c"], 0, 1)

        def generated_quantities(self, rng, **p):
            return {"d": p["c"] + 1.0}
    m = KW()
    x = rng.normal(size=2)
    a, b = x[0], np.exp(x[1])
    ref = st.norm.logpdf(a) + st.norm.logpdf(a * b) + x[1]
    assert np.isclose(m.log_density(x), ref, rtol=1e-12)
    out = m.output(x, rng=0)
    assert np.isclose(out["c"], a * b) and np.isclose(out["d"], a * b + 1)
