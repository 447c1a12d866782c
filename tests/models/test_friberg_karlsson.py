"""The Friberg-Karlsson zoo model: its data generator, the coupled solver against the
full 8-state ODE, the gradient against central differences, the pointwise
log-likelihood, and a short NUTS run."""

import json
import math

import numpy as np
import pytest
from scipy import stats

import stanlite as sl
import stanlite.models as zoo
from stanlite.models import friberg_karlsson as fk

NAME = "friberg_karlsson"


def test_default_data_are_the_generator_output():
    """(To 1e-7: the ODE at 1e-10 and six decimals could differ in the last digit if
    the integrator changed.)"""
    shipped, made = zoo.default_data(NAME), json.loads(json.dumps(fk.simulate_data()))
    assert shipped.keys() == made.keys()
    for k, v in made.items():
        np.testing.assert_allclose(shipped[k], v, rtol=1e-7, err_msg=k)


def test_coupled_and_full_solvers_give_the_same_density_and_gradient():
    mc = zoo.get(NAME, rel_tol=1e-9, abs_tol=1e-9)
    mf = zoo.get(NAME, solver="full", rel_tol=1e-9, abs_tol=1e-9)
    rng = np.random.default_rng(1)
    x0 = mc.unconstrain(fk.z_of(fk.TRUTH))
    for x in (x0, x0 + 0.1 * rng.standard_normal(mc.dim)):
        a, b = mc._gradient(x, True), mf._gradient(x, True)
        assert a[0] == pytest.approx(b[0], rel=1e-9)
        np.testing.assert_allclose(a[1], b[1], rtol=1e-6, atol=1e-6)


def test_gradient_matches_central_differences():
    # (tight tolerances: the adaptive solver's noise, ~tol / h, must stay below the
    # differences' truncation error, ~h^2: at 1e-10 and h = 1e-5 it does not)
    m = zoo.get(NAME, rel_tol=1e-12, abs_tol=1e-12)
    rng = np.random.default_rng(2)
    x = m.unconstrain(fk.z_of(fk.TRUTH)) + 0.05 * rng.standard_normal(m.dim)
    lp, g = m._gradient(x, True)
    h = 2e-5
    for v in np.random.default_rng(3).standard_normal((2, m.dim)):
        fd = (m.log_density(x + h * v) - m.log_density(x - h * v)) / (2 * h)
        assert float(g @ v) == pytest.approx(fd, rel=1e-6, abs=1e-6)


def test_the_retaped_gradient_equals_the_tape():
    m = zoo.get(NAME)
    x = m.unconstrain(fk.z_of(fk.TRUTH))
    e = m._gradient(x, True)
    for _ in range(2):
        r = m.log_density_gradient(x)
    assert r[0] == e[0] and np.array_equal(r[1], e[1])


def test_generated_right_hand_side_gives_the_interpreters_gradient(monkeypatch):
    """The PD right-hand side (with the PK closed form inside it: exp, expm1, a matrix
    product, pow) runs as generated code (functor/ode_codegen.py) once it has run
    ode_codegen.AFTER evaluations: generated, not refused, and the retaped gradient
    bit for bit the interpreter's, at two points."""
    from stanlite.functor import (ode_codegen, ode_compiled, ode_native, ode_rhs,
                                  ode_steppers)
    monkeypatch.setattr(ode_native, "ENABLED", True)
    monkeypatch.setattr(ode_compiled, "COMPILE_AFTER", 1)
    # (compiled in this process, at once: not in another while the interpreter goes on)
    monkeypatch.setattr(ode_codegen, "BACKGROUND", False)
    x0 = zoo.get(NAME).unconstrain(fk.z_of(fk.TRUTH))
    xs = (x0, x0 + 0.2 * np.random.default_rng(4).standard_normal(x0.size))

    def gradients(after):
        monkeypatch.setattr(ode_rhs, "_cache", type(ode_rhs._cache)())
        monkeypatch.setattr(ode_codegen, "AFTER", after)
        m = zoo.get(NAME)
        for _ in range(3):
            out = [m.log_density_gradient(x) for x in xs]
        return out
    interp = gradients(None)
    refused = ode_codegen.STATS["refused"]
    gen = gradients(0)
    assert ode_codegen.STATS["refused"] == refused
    # the steppers' right-hand side is the generated function, not the interpreter's
    bundles = [getattr(e[1], "_ode_bundle", None) for e in ode_rhs._cache.values()]
    bundles = [b for b in bundles if b is not None]
    assert bundles and all(b[2] is not ode_steppers.interp for b in bundles)
    for (la, ga), (lb, gb) in zip(interp, gen):
        assert la == lb and np.array_equal(ga, gb)


def test_pointwise_log_likelihood_and_generated_log_lik():
    m = zoo.get(NAME)
    params = dict(fk.TRUTH)
    tp = m.transformed_parameters(fk.z_of(params)["z"])
    for k in fk.NAMES:
        assert float(sl.value_of(tp[k])) == pytest.approx(params[k], rel=1e-14)
    C, circ = sl.value_of(tp["C"]), sl.value_of(tp["circ"])
    ll = sl.value_of(m.log_likelihood(params["sigma"], params["sigma_neut"], C, circ))
    d = zoo.default_data(NAME)
    ref = np.r_[stats.lognorm.logpdf(d["conc"], params["sigma"], scale=C),
                stats.lognorm.logpdf(d["neut"], params["sigma_neut"], scale=circ)]
    np.testing.assert_allclose(ll, ref, rtol=1e-12)
    gq = m.generated_quantities(np.random.default_rng(0), params["sigma"],
                                params["sigma_neut"], C, circ)
    np.testing.assert_allclose(gq["log_lik"], ref, rtol=1e-12)
    assert gq["conc_rep"].shape == (12,) and gq["neut_rep"].shape == (14,)
    # the predictions at the truth are close to the (noisy) data
    assert np.all(np.abs(np.log(np.asarray(d["neut"]) / circ)) < 0.4)


def test_nuts_smoke():
    """A few NUTS iterations from jittered typical values (no wall-clock check)."""
    m = zoo.get(NAME)
    init = [{"z": np.random.default_rng(5).uniform(-0.3, 0.3, 9), "sigma": 0.2,
             "sigma_neut": 0.2}]
    fit = m.sample(chains=1, warmup=10, draws=5, seed=11, init=init, progress=False,
                   parallel=False, max_treedepth=4)
    for k in ("CL", "mtt", "circ0", "alpha", "gamma"):
        v = fit[k]
        assert v.size == 5
        assert np.all(np.isfinite(v)) and np.all(v > 0)
    assert np.all(np.isfinite(fit["log_lik"]))


def test_bad_options_and_data():
    with pytest.raises(sl.ModelError, match="solver"):
        zoo.get(NAME, solver="euler")
    d = zoo.default_data(NAME)
    d["neut"][3] = -1.0
    with pytest.raises(sl.DataError, match="neut"):
        zoo.model_class(NAME)(**d)


def test_pd_rates_vanish_at_baseline_and_drug_lowers_proliferation():
    th = np.array([35.0, 125.0, 5.0, 3e-4, 0.17])
    assert np.all(fk.fk_pd(0.0, np.zeros(5), np.zeros(3), th) == 0.0)
    d = fk.fk_pd(0.0, np.zeros(5), np.array([0.0, 35.0 * 1000.0, 0.0]), th)
    assert d[0] == pytest.approx(4.0 / 125.0 * 5.0 * (-0.3)) and np.all(d[1:] == 0.0)
    assert math.isfinite(float(d[0]))
