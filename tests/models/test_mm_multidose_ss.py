"""Michaelis-Menten elimination at steady state of a multiple-dose regimen
(stanlite.models.mm_multidose_ss): the closed form (Wright's omega) against the
integrated ODE and the algebraic solver's steady state, the log density against an
independent numpy/scipy reference built on the closed form, its gradient through the
algebraic and ODE super nodes against finite differences (and independent of the
solver's starting point), the shipped data, and NUTS end to end (slow)."""

import json
import math

import numpy as np
import pytest
from scipy import stats

import stanlite as sl
import stanlite.models as zoo
from stanlite.models import mm_multidose_ss as mm

TIGHT = dict(rel_tol=1e-10, abs_tol=1e-10)


@pytest.fixture(scope="module")
def data():
    return zoo.default_data("mm_multidose_ss")


@pytest.fixture(scope="module")
def model(data):
    return mm.MmMultidoseSs(**data, **TIGHT)


def exact_profile(d, V, Vmax, Km):
    """Concentrations at the data's times from the closed form, regimen by regimen."""
    out = np.empty(d["N"])
    reg = np.asarray(d["regimen"]) - 1
    for r in range(d["R"]):
        i = np.flatnonzero(reg == r)
        out[i] = mm.profile_exact(d["dose"][r], d["ii"][r], d["addl"][r],
                                  np.asarray(d["time"])[i], V, Vmax, Km)
    return out


def reference_log_density(d, x):
    """The model's log density on the unconstrained space from the closed form:
    V = e^u0, Vmax = max(dose/ii) + e^u1, Km = e^u2, sigma = e^u3 (log-Jacobian
    u0 + .. + u3)."""
    V, Km, sigma = math.exp(x[0]), math.exp(x[2]), math.exp(x[3])
    Vmax = max(np.asarray(d["dose"]) / np.asarray(d["ii"])) + math.exp(x[1])
    C = exact_profile(d, V, Vmax, Km)
    lognorm = stats.lognorm.logpdf
    lp = (lognorm(V, 0.5, scale=50.0) + lognorm(Vmax, 0.75, scale=30.0)
          + lognorm(Km, 1.0, scale=5.0) + stats.norm.logpdf(sigma, 0.0, 0.5))
    lp += lognorm(d["conc"], sigma, scale=C).sum()
    return lp + float(np.sum(x))


def points(model, n=3, seed=4):
    """Points around the truth (V 50, Vmax 40, Km 4, sigma 0.1), each within ~40%."""
    rng = np.random.default_rng(seed)
    x0 = model.unconstrain({"V": 50.0, "Vmax": 40.0, "Km": 4.0, "sigma": 0.1})
    return [x0 + 0.3 * rng.standard_normal(4) for _ in range(n)]


def central_diff(f, x, h=1e-4):
    g = np.empty_like(x)
    for i in range(len(x)):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (8 * (f(x + e) - f(x - e)) - (f(x + 2 * e) - f(x - 2 * e))) / (12 * h)
    return g


# --------------------------------------------------------------------------------------
# the closed form and the solvers
# --------------------------------------------------------------------------------------
def test_closed_form_solves_the_ode():
    """C(t) from Wright's omega satisfies dC/dt = -vm C / (Km + C) (central
    differences) and C(0) = C0, including where W(e^y) would overflow (tiny Km)."""
    for V, Vmax, Km, c0 in [(50.0, 40.0, 4.0, 14.0), (20.0, 5.0, 0.01, 30.0),
                            (80.0, 200.0, 50.0, 2.0)]:
        t = np.linspace(0.0, 10.0, 11)
        c = mm.concentration_exact(c0, t, V, Vmax, Km)
        assert c[0] == pytest.approx(c0, rel=1e-14)
        h = 1e-5
        dc = (mm.concentration_exact(c0, t + h, V, Vmax, Km)
              - mm.concentration_exact(c0, t - h, V, Vmax, Km)) / (2 * h)
        np.testing.assert_allclose(dc, -Vmax / V * c / (Km + c), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("theta", [(50.0, 40.0, 4.0), (30.0, 30.0, 10.0),
                                   (60.0, 26.0, 2.0)])
def test_steady_state_by_the_algebraic_solver_matches_the_closed_form(theta):
    V, Vmax, Km = theta
    x = sl.pk.ode_steady_state(mm.mm_elimination, 1, np.array(theta), 600.0, 24.0)
    assert x[0] / V == pytest.approx(mm.trough_exact(600.0, 24.0, V, Vmax, Km), rel=1e-8)
    with pytest.raises(ValueError, match="no steady state"):
        mm.trough_exact(600.0, 24.0, V, 25.0, Km)


def test_model_concentrations_match_the_closed_form(model, data):
    for x in points(model):
        c = model.constrain(x)
        C = model.transformed_values(x)["C"]
        np.testing.assert_allclose(C, exact_profile(data, c["V"], c["Vmax"], c["Km"]),
                                   rtol=1e-8)


def test_steady_state_derivative_in_every_parameter_and_ii():
    """d(trough)/d(V, Vmax, Km, dose, ii) through the algebraic super node, and the
    same through an event schedule (the concentration 24 h after a steady-state dose,
    ss = 1 with dose and ii traced), against finite differences of the closed form
    (Torsten's issue 15 was a wrong derivative in ii)."""
    def trough_ad(p):
        return sl.pk.ode_steady_state(mm.mm_elimination, 1, p[:3], p[3], p[4])[0] / p[0]

    def trough(p):
        return mm.trough_exact(p[3], p[4], p[0], p[1], p[2])

    def c24_ad(p):
        ev = sl.pk.events(time=[0.0, 24.0], evid=[1, 0], amt=[600.0, 0.0],
                          ii=[24.0, 0.0], ss=[1, 0]).replace(
            amt=sl.stack([p[3], 0.0]), ii=sl.stack([p[4], 0.0]))
        return sl.pk.ode(mm.mm_elimination, 1, ev, p[:3], **TIGHT)[1, 0] / p[0]

    def c24(p):
        return float(mm.concentration_exact(trough(p) + p[3] / p[0], 24.0, *p[:3]))

    p = np.array([50.0, 40.0, 4.0, 600.0, 24.0])
    for ad, exact in ((trough_ad, trough), (c24_ad, c24)):
        assert float(ad(p)) == pytest.approx(exact(p), rel=1e-8)
        g = sl.grad(ad)(p)
        fd = np.array([(exact(p + h * e) - exact(p - h * e)) / (2 * h)
                       for e, h in zip(np.eye(5), 1e-5 * p)])
        np.testing.assert_allclose(g, fd, rtol=1e-5)
        assert g[4] < 0 < g[3]      # a longer interval lowers the trough, a dose raises it


# --------------------------------------------------------------------------------------
# the model
# --------------------------------------------------------------------------------------
def test_parameters_and_the_vmax_bound(model, data):
    assert model.param_names() == ["V", "Vmax", "Km", "sigma"]
    rate = max(np.asarray(data["dose"]) / np.asarray(data["ii"]))       # 300 mg / 12 h
    assert rate == 25.0
    for u in (-30.0, 0.0, 5.0):
        assert model.constrain(np.array([0.0, u, 0.0, 0.0]))["Vmax"] > rate
    assert model.constrain(np.zeros(4))["Vmax"] == pytest.approx(rate + 1.0)


def test_log_density_matches_the_reference(model, data):
    for x in points(model):
        assert model.log_density(x) == pytest.approx(reference_log_density(data, x),
                                                     rel=1e-9)


def test_gradient_matches_differences_of_the_reference(model, data):
    for x in points(model, n=2):
        lp, g = model.log_density_gradient(x)
        assert lp == pytest.approx(reference_log_density(data, x), rel=1e-9)
        fd = central_diff(lambda z: reference_log_density(data, z), x)
        np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-6 * (1 + np.abs(fd).max()))


def test_the_solvers_starting_point_changes_nothing(data, monkeypatch):
    """The closed-form trough is only a starting point: from zeros (the library's
    default) the same root and the same derivatives come out."""
    m = mm.MmMultidoseSs(**data, **TIGHT)
    x = points(m, n=1)[0]
    lp, g = m.log_density_gradient(x)
    monkeypatch.setattr(mm.MmMultidoseSs, "_guess", lambda self, *a: None)
    lp0, g0 = m.log_density_gradient(x)
    assert lp0 == pytest.approx(lp, rel=1e-10)
    np.testing.assert_allclose(g0, g, rtol=1e-7)


def test_gradient_by_the_period_jacobians_and_the_solves_it_takes(data, monkeypatch):
    """Issue 22: each steady state's algebraic solver takes the period map and its
    Jacobians from one sensitivity solve per evaluation (pk.steady_state
    PERIOD_JACOBIANS) - no recording of its residual, two period solves, none for
    the reverse sweep - and gives the gradient of the route through AD (which
    recorded the residual again at every solve)."""
    import importlib

    from stanlite.functor import ode_compiled, ode_native
    pss = importlib.import_module("stanlite.pk.steady_state")

    def per_gradient(m, xs):
        m.log_density_gradient(xs[0])
        rec = ode_compiled.STATS["compiled"] + ode_compiled.STATS["fallback"]
        sol = ode_native.STATS["compiled"]
        gs = [m.log_density_gradient(x)[1] for x in xs[1:]]
        k = len(xs) - 1
        return gs, ((ode_compiled.STATS["compiled"] + ode_compiled.STATS["fallback"]
                     - rec) / k, (ode_native.STATS["compiled"] - sol) / k)
    m = mm.MmMultidoseSs(**data, **TIGHT)
    xs = points(m, n=3)
    g_now, (rec_now, sol_now) = per_gradient(m, xs)
    monkeypatch.setattr(pss, "PERIOD_JACOBIANS", False)
    g_before, (rec_before, sol_before) = per_gradient(mm.MmMultidoseSs(**data, **TIGHT), xs)
    for a, b in zip(g_now, g_before):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6 * np.abs(b).max())
    # 2 regimens: at most 2 period solves each (1 when the closed-form start is
    # already within rel_tol) + 3 profile segments; before, each steady state
    # recorded its residual and took 2 solves more at least (+1 for the sweep)
    assert rec_now == 0 and sol_now <= 7, (rec_now, sol_now)
    assert rec_before == 2 and sol_before >= sol_now + 4, (rec_before, sol_before)


def test_default_tolerances_are_accurate_enough(data):
    """The default ODE tolerances (1e-8) move the log density by far less than
    sampling can see."""
    m = zoo.get("mm_multidose_ss")
    for x in points(m, n=2):
        assert m.log_density(x) == pytest.approx(reference_log_density(data, x),
                                                 abs=1e-4)


def test_bad_data_is_refused(data):
    with pytest.raises(sl.DataError, match="positive concentrations"):
        zoo.get("mm_multidose_ss", conc=[0.0] + data["conc"][1:])
    with pytest.raises(sl.DataError, match="'ii'.*element \\[2\\] is 0.0"):
        zoo.get("mm_multidose_ss", ii=[12.0, 0.0])
    with pytest.raises(sl.DataError, match="regimen"):
        zoo.get("mm_multidose_ss", regimen=[3] + data["regimen"][1:])
    with pytest.raises(sl.DataError, match="time"):
        zoo.get("mm_multidose_ss", time=[-1.0] + data["time"][1:])


def test_unsorted_times_give_the_same_density(data, model):
    perm = np.random.default_rng(1).permutation(data["N"])
    m2 = mm.MmMultidoseSs(**dict(data, time=np.asarray(data["time"])[perm].tolist(),
                                 conc=np.asarray(data["conc"])[perm].tolist(),
                                 regimen=np.asarray(data["regimen"])[perm].tolist()),
                          **TIGHT)
    x = points(model, n=1)[0]
    assert m2.log_density(x) == pytest.approx(model.log_density(x), rel=1e-12)
    np.testing.assert_allclose(m2.transformed_values(x)["C"],
                               model.transformed_values(x)["C"][perm], rtol=1e-12)


def test_generated_quantities(model, data):
    x = points(model, n=1)[0]
    c = model.constrain(x)
    out = model.output(x, rng=2)
    np.testing.assert_allclose(out["C_trough"], [
        mm.trough_exact(dz, ii, c["V"], c["Vmax"], c["Km"])
        for dz, ii in zip(data["dose"], data["ii"])])
    # the troughs are the model's concentrations just before the next dose: the
    # second regimen's record at 23.5 h is nearly one (11.5 h after the 12 h dose)
    assert out["C_trough"][1] < out["C"][-1] < out["C_trough"][1] * 1.1
    ll = stats.lognorm.logpdf(data["conc"], c["sigma"], scale=out["C"])
    np.testing.assert_allclose(out["log_lik"], ll, rtol=1e-10)
    assert np.all(out["conc_rep"] > 0)


def test_shipped_data_is_simulate_data(data):
    assert json.loads(json.dumps(mm.simulate_data())) == data
    # the design: doubling the dose raised the trough more than five-fold
    t = [mm.trough_exact(dz, 12.0, 50.0, 40.0, 4.0) for dz in (150.0, 300.0)]
    assert t[1] / t[0] > 5


# --------------------------------------------------------------------------------------
# NUTS end to end (two steady states per gradient, ~0.5 s: slow)
# --------------------------------------------------------------------------------------
@pytest.mark.slow
def test_nuts_recovers_the_truth():
    """Two seeded chains, 150 warmup + 150 draws (dense metric: Vmax and Km are
    correlated), the algebraic super node inside every leapfrog step: no divergences,
    R-hat < 1.05, and each parameter's truth within 4 posterior standard deviations
    (+ 4 MCSE) of its posterior mean (the data were simulated from the truth, so it is
    a draw from the posterior's neighbourhood).

    Initial estimates as a pharmacometrician gives them (typical values jittered by
    up to +-20% per chain), not Stan's uniform(-2, 2): that box puts V in 0.14-7.4 L,
    8+ prior sds below the prior median of 50 L. There the concentrations exceed Km by
    orders of magnitude, the trough falls below 1e-100 and the density is so steep
    (|gradient| ~ 5e5 at lp ~ -4400) that the step-size search ends near 1e-6 and
    warmup crawls at maximal tree depths, half a second per gradient (measured: seed
    7, chain 2, from V = 0.63 L)."""
    m = zoo.get("mm_multidose_ss")
    jitter = np.exp(np.random.default_rng(7).uniform(-0.2, 0.2, (2, 3)))
    init = [{"V": 50.0 * a, "Vmax": 35.0 * b, "Km": 5.0 * c, "sigma": 0.2}
            for a, b, c in jitter]
    fit = m.sample(chains=2, warmup=150, draws=150, seed=7, metric="dense_e",
                   init=init, progress=False)
    assert fit.sampler_stats["divergent__"].sum() == 0
    s = fit.summary(["V", "Vmax", "Km", "sigma"])
    assert np.all(s["r_hat"] < 1.05), s
    for k, truth in mm.TRUTH.items():
        r = s.loc[k]
        assert abs(r["mean"] - truth) < 4 * r["sd"] + 4 * r["mcse_mean"], (k, r, truth)
