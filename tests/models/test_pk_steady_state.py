"""The AD review's steady-state experiment (stanlite.models.pk_steady_state): the
steady state found by the algebraic super node against the closed forms and against
dosing the patients until nothing changes; its 2n x (2n + 2) sensitivities against
finite differences and the differentiated closed form, in reverse and forward mode
and to second order; the profiles; the shipped data; and NUTS on the Bayesian model
against a posterior computed by quadrature (numpy, the closed-form trough)."""

import json
import math

import numpy as np
import pytest

import stanlite as sl
import stanlite.models as zoo
from stanlite.models import pk_steady_state as pk

from testkit import central_jacobian


@pytest.mark.parametrize("n", [1, 2, 7, 14])
def test_troughs_at_the_population_values_match_the_review_formulas(n):
    x = pk.steady_state(pk.population_theta(n, random=False))
    e1, e2 = math.exp(-pk.K1 * pk.TAU), math.exp(-pk.K2 * pk.TAU)
    gut = pk.DOSE * e1 / (1 - e1)                       # D e^{-k1 tau} / (1 - e^{-k1 tau})
    central = (gut + pk.DOSE) * pk.K1 / (pk.K1 - pk.K2) * (e2 - e1) / (1 - e2)
    np.testing.assert_allclose(x[:n], gut, rtol=1e-12)
    np.testing.assert_allclose(x[n:], central, rtol=1e-12)
    assert gut == pytest.approx(1541.494083, abs=1e-6)


@pytest.mark.parametrize("n", [1, 5, 14])
@pytest.mark.parametrize("jac_x", [True, False])
def test_steady_state_matches_the_closed_form_with_random_patients(n, jac_x):
    theta = pk.population_theta(n)
    np.testing.assert_allclose(pk.steady_state(theta, jac_x=jac_x),
                               pk.steady_state_exact(theta), rtol=1e-11)


def test_steady_state_is_where_repeated_dosing_settles():
    """An independent check of the fixed point: start empty, dose 300 times, evolving
    each interval with the closed-form F_tau; the trough stops moving at the solver's
    answer."""
    theta = pk.population_theta(6)
    n, k1, k2, dose, tau = pk.unpack(theta)
    g, c = np.zeros(n), np.zeros(n)
    for _ in range(300):
        g, c = pk.evolve(g + dose, c, k1, k2, tau)
    np.testing.assert_allclose(np.concatenate([g, c]), pk.steady_state(theta), rtol=1e-12)


def test_multipliers_are_the_same_patients_at_every_size_and_checked():
    p1, p2 = pk.multipliers(14)
    q1, q2 = pk.multipliers(3)
    np.testing.assert_array_equal(p1[:3], q1)
    np.testing.assert_array_equal(p2[:3], q2)
    assert np.all((p1 >= 0.7) & (p1 <= 1.3)) and np.all((p2 >= 0.7) & (p2 <= 1.3))
    for bad in (0, 15, 2.0):
        with pytest.raises(ValueError, match="n_patients"):
            pk.multipliers(bad)


def test_transfer_keeps_its_digits_when_the_rates_meet():
    """k1 (e^{-k2 t} - e^{-k1 t}) / (k1 - k2) = k1 e^{-k2 t} t (1 - x / 2 + x^2 / 6 - ...)
    with x = (k1 - k2) t: exact to roundoff for close rates, where the naive formula
    loses digits (half of them at k1 - k2 = 1e-8)."""
    k, t = 0.3, 1.7
    for d in (1e-6, 1e-9, 1e-12):
        k1, k2 = k + d, k
        x = d * t
        exact = k1 * math.exp(-k2 * t) * t * (1 - x / 2 + x * x / 6)
        assert float(pk.transfer(k1, k2, t)) == pytest.approx(exact, rel=1e-14)
    assert float(pk.transfer(0.5, 0.2, 1.0)) == pytest.approx(
        0.5 * (math.exp(-0.2) - math.exp(-0.5)) / 0.3, rel=1e-14)


# --------------------------------------------------------------------------------------
# sensitivities: 2n states x (2n + 2) parameters
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 4, 14])
def test_sensitivities_match_finite_differences_and_the_closed_form(n):
    theta = pk.population_theta(n)
    exact = sl.jacobian(pk.steady_state_exact)(theta)          # AD of the closed form
    fd = central_jacobian(lambda t: pk.steady_state(t), theta, relative=True)
    rev = sl.jacobian_reverse(pk.steady_state)(theta)
    fwd = sl.jacobian_forward(pk.steady_state)(theta)
    ad_j = sl.jacobian_reverse(lambda t: pk.steady_state(t, jac_x=False))(theta)
    assert rev.shape == (2 * n, 2 * n + 2)
    scale = np.max(np.abs(exact))
    np.testing.assert_allclose(fd, exact, atol=1e-6 * scale)
    for J in (rev, fwd, ad_j):
        np.testing.assert_allclose(J, exact, rtol=1e-9, atol=1e-10 * scale)
    # one patient's amounts depend on its own rates only (and on D, tau)
    assert np.all(rev[0, 1:n] == 0) and np.all(rev[0, n:2 * n] == 0)


def test_sensitivities_by_hand_for_one_patient():
    """d gut / d k1 = -D tau e^{k1 tau} / (e^{k1 tau} - 1)^2; d gut / d D = 1 / (e^{k1 tau}
    - 1); the gut trough does not depend on k2."""
    k1, k2, dose, tau = 0.5, 0.2, 1000.0, 1.0
    J = sl.jacobian(pk.steady_state)(np.array([k1, k2, dose, tau]))
    em = math.expm1(k1 * tau)
    assert J[0, 0] == pytest.approx(-dose * tau * math.exp(k1 * tau) / em ** 2, rel=1e-10)
    assert J[0, 1] == 0.0
    assert J[0, 2] == pytest.approx(1 / em, rel=1e-10)
    assert J[0, 3] == pytest.approx(-dose * k1 * math.exp(k1 * tau) / em ** 2, rel=1e-10)


def test_second_derivatives_through_the_solver():
    """Nested AD through the super node (what Riemannian HMC needs) equals the Hessian
    of the closed form."""
    theta = pk.population_theta(2)
    w = np.linspace(1.0, 2.0, 4)

    def loss(f):
        return lambda t: sl.sum(w * sl.log(f(t)))
    H = sl.hessian(loss(pk.steady_state))(theta)
    H_exact = sl.hessian(loss(pk.steady_state_exact))(theta)
    np.testing.assert_allclose(H, H_exact, rtol=1e-8, atol=1e-12 * np.max(np.abs(H_exact)))


# --------------------------------------------------------------------------------------
# profiles and data
# --------------------------------------------------------------------------------------
def test_profile_is_periodic_and_starts_from_the_trough_plus_a_dose():
    theta = pk.population_theta(3)
    n, k1, k2, dose, tau = pk.unpack(theta)
    ts = np.array([0.0, 0.3, 0.7, 1.0, 1.3, 2.7])
    g, c = pk.steady_state_profile(theta, ts)
    x = pk.steady_state(theta)
    np.testing.assert_allclose(g[:, 0], x[:n] + dose, rtol=1e-12)   # just after a dose
    np.testing.assert_allclose(c[:, 0], x[n:], rtol=1e-12)
    np.testing.assert_allclose(g[:, 1], g[:, 4], rtol=1e-12)        # period tau
    np.testing.assert_allclose(c[:, 2], c[:, 5], rtol=1e-12)
    # just before the next dose: the trough again
    gb, cb = pk.steady_state_profile(theta, [tau * (1 - 1e-12)])
    np.testing.assert_allclose(np.concatenate([gb[:, 0], cb[:, 0]]), x, rtol=1e-9)
    with pytest.raises(ValueError, match="times"):
        pk.steady_state_profile(theta, [-1.0])


def test_default_data_is_simulate_data():
    # the same fields, the integers exactly; the floats to rounding: the troughs go
    # through exp and a linear solve, whose last bits vary with the numpy/BLAS build
    # (numpy 2.4 gives C_obs[0] = ...388 where the file, written earlier, has ...392)
    saved = zoo.default_data("pk_steady_state")
    made = json.loads(json.dumps(pk.simulate_data()))
    assert saved.keys() == made.keys()
    for k in saved:
        a, b = np.asarray(saved[k]), np.asarray(made[k])
        assert a.dtype == b.dtype and a.shape == b.shape, k
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=0, err_msg=k)
        else:
            np.testing.assert_array_equal(a, b, err_msg=k)
    d = pk.simulate_data(3, sigma=0.0)
    theta = pk.population_theta(3)
    np.testing.assert_allclose(d["C_obs"], pk.steady_state_exact(theta)[3:] / d["V"],
                               rtol=1e-14)


def test_model_troughs_come_from_the_solver_and_bad_data_is_refused():
    m = zoo.get("pk_steady_state")
    tp = m.transformed_values(m.unconstrain({"k1": pk.K1, "k2": pk.K2, "sigma": 0.1}))
    theta = pk.population_theta(14)
    np.testing.assert_allclose(tp["C_trough"], pk.steady_state_exact(theta)[14:] / 50.0,
                               rtol=1e-12)
    with pytest.raises(sl.DataError, match="phi1"):
        zoo.get("pk_steady_state", phi1=[1.0, 2.0])
    with pytest.raises(sl.DataError, match="C_obs"):
        zoo.get("pk_steady_state", C_obs=[-1.0] * 14)


def test_retaped_gradient_equals_the_eager_one():
    """The model's gradient is replayed from a recording holding the solver node."""
    class Eager(pk.PkSteadyState):
        compile = False

    m = zoo.get("pk_steady_state")
    eager = Eager.from_json(zoo.default_data("pk_steady_state"))
    rng = np.random.default_rng(5)
    for _ in range(3):
        x = 0.5 * rng.standard_normal(m.dim)
        lp, g = m.log_density_gradient(x)
        lp_e, g_e = eager.log_density_gradient(x)
        assert lp == pytest.approx(lp_e, rel=1e-14)
        np.testing.assert_allclose(g, g_e, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------------------
# NUTS against quadrature
# --------------------------------------------------------------------------------------
def quadrature_posterior(d):
    """Posterior means and sds of (log k1, k2, sigma) by the trapezoidal rule on a
    (log k1, log k2, log sigma) grid, from the closed-form trough (numpy only). The
    likelihood depends on sigma only through S(k1, k2) = sum of squared log residuals,
    so the 3-d integral is a 2-d grid of S times a 1-d grid in sigma."""
    phi1, phi2 = np.asarray(d["phi1"]), np.asarray(d["phi2"])
    logy = np.log(d["C_obs"])
    N, tau, dose = len(logy), d["tau"], d["dose"]
    # the trapezoidal rule converges geometrically for smooth integrands that vanish
    # at both ends: 0.1 in log k1 (posterior sd ~1), ~0.3 sd in log k2 and log sigma
    u1 = np.linspace(-6.0, 6.0, 121)             # log k1: the prior N(0, 1) dominates
    u2 = np.linspace(np.log(0.12), np.log(0.32), 121)
    u3 = np.linspace(np.log(0.02), np.log(0.6), 121)
    a = np.exp(u1)[:, None, None] * phi1
    b = np.exp(u2)[None, :, None] * phi2
    e1, e2 = np.exp(-a * tau), np.exp(-b * tau)
    central = dose / (1 - e1) * a / (a - b) * (e2 - e1) / (1 - e2)
    S = np.sum((logy - np.log(central / d["V"])) ** 2, axis=-1)       # (k1, k2)
    s = np.exp(u3)
    # log density in (u1, u2, u3): priors lognormal(0,1) on k1, k2 -> N(0,1) in u;
    # sigma ~ N(0, 0.5) times the Jacobian sigma; likelihood -N log s - S / (2 s^2)
    lp = (-0.5 * u1[:, None, None] ** 2 - 0.5 * u2[None, :, None] ** 2
          - 0.5 * (s / 0.5) ** 2 + u3 - N * u3 - S[..., None] / (2 * s * s))
    w = np.exp(lp - lp.max())
    w /= w.sum()
    for ax in range(3):                          # the grid holds the whole posterior
        edge = w.sum(axis=tuple(i for i in range(3) if i != ax))
        assert edge[0] < 1e-7 and edge[-1] < 1e-7, ax
    out = {}
    for name, v in (("log_k1", u1[:, None, None]), ("k2", np.exp(u2)[None, :, None]),
                    ("sigma", s[None, None, :])):
        m = float(np.sum(w * v))
        out[name] = (m, math.sqrt(float(np.sum(w * (v - m) ** 2))))
    return out


def nuts_against_quadrature(chains, warmup, draws, seed):
    import arviz as az
    m = zoo.get("pk_steady_state")
    fit = m.sample(chains=chains, warmup=warmup, draws=draws, seed=seed, progress=False)
    ref = quadrature_posterior(zoo.default_data("pk_steady_state"))
    draws_of = {"log_k1": np.log(fit["k1"]), "k2": fit["k2"], "sigma": fit["sigma"]}
    for name, (mean, sd) in ref.items():
        x = draws_of[name]
        mcse = float(np.ravel(az.mcse(x, method="mean"))[0])
        assert abs(x.mean() - mean) < 4 * mcse, (name, x.mean(), mean, mcse)
        assert mcse < 0.25 * sd                  # enough draws for the test to mean something
    assert int(np.sum(fit["divergent__"])) == 0
    return ref


def test_truth_is_inside_the_quadrature_posterior():
    ref = quadrature_posterior(zoo.default_data("pk_steady_state"))
    for name, truth in (("log_k1", math.log(pk.K1)), ("k2", pk.K2), ("sigma", pk.SIGMA)):
        mean, sd = ref[name]
        assert abs(mean - truth) < 3 * sd, (name, mean, sd, truth)
    # troughs pin down elimination (k2 to ~3%), not absorption (k1: about its prior)
    assert ref["k2"][1] < 0.05 * ref["k2"][0]
    assert ref["log_k1"][1] > 0.8


def test_nuts_through_the_super_node_matches_quadrature():
    nuts_against_quadrature(chains=1, warmup=150, draws=200, seed=11)


@pytest.mark.slow
def test_nuts_through_the_super_node_matches_quadrature_long():
    nuts_against_quadrature(chains=4, warmup=1000, draws=1000, seed=12)
