"""SoftAbs's alpha where no curvature changes sign (issue 24, the funnel's mouth).

Where every warmup sample's Hessian has the same inertia (the funnel: one negative
eigenvalue at every typical point; a Gaussian, a log-concave model: none), the lift
``1/alpha`` only keeps the metric invertible, and the alpha chosen at a window's end
may give the metric a condition number up to ``FIXED_SIGN_CONDITION`` instead of
``MAX_CONDITION``: with the bounded alpha (~10 at d = 51) SoftAbs gives the funnel's
x a local variance of at most alpha in its mouth against their spread e^v, and v
there moves as it would under a Euclidean metric (an energy-limited random walk).
"""

import numpy as np
import pytest

from stanlite.models.synthetic import PrecisionGaussian
from stanlite.samplers import rhmc
from stanlite.samplers.hamiltonian import Point
from stanlite.samplers.rhmc import (ALPHA_SCALE, FIXED_SIGN_CONDITION, FIXED_SIGN_SAMPLES,
                                    MAX_CONDITION, SoftAbsMetric, curvature_scale,
                                    fixed_inertia, inertia)


def funnel_hessian(v, x):
    """The potential's Hessian of Neal's funnel ``v ~ N(0, 3), x_i ~ N(0, e^v)`` at
    ``(v, x)`` (closed form; v first)."""
    n = x.size + 1
    A = np.zeros((n, n))
    e = np.exp(-v)
    A[0, 0] = 1.0 / 9.0 + 0.5 * e * float(x @ x)
    A[0, 1:] = A[1:, 0] = -e * x
    A[1:, 1:] = e * np.eye(x.size)
    return A


def funnel_draws(d, n, seed):
    rs = np.random.default_rng(seed)
    v = rs.normal(0.0, 3.0, n)
    return v, rs.normal(size=(n, d - 1)) * np.exp(v / 2)[:, None]


def observe_all(met, hessians):
    q = np.zeros(hessians[0].shape[0])
    for A in hessians:
        met.observe(Point(q, None, 0.0, None, aux=rhmc.Geometry(q, A, met.alpha)))


def test_inertia_counts_negative_eigenvalues_and_flags_zero_ones():
    assert inertia([3.0, -2.0, 1e-3, -5.0]) == 2
    assert inertia([3.0, 2.0]) == 0
    # scale-free: zero means zero relative to the largest |eigenvalue|
    assert inertia(1e-20 * np.array([3.0, -2.0])) == 1
    assert inertia([1e6, 1e-2, 1.0]) == 0
    assert inertia([1e6, 1e-4 * rhmc.INERTIA_TOL, 1.0]) == -1
    # the funnel: one negative eigenvalue at every typical point, d = 10 and 51
    for d in (10, 51):
        v, x = funnel_draws(d, 200, seed=d)
        assert {inertia(np.linalg.eigvalsh(funnel_hessian(a, b))) for a, b in zip(v, x)} \
            == {1}


def test_fixed_inertia_needs_enough_samples_and_no_exception():
    n = FIXED_SIGN_SAMPLES
    assert fixed_inertia([1] * n) and fixed_inertia([0] * (3 * n))
    assert not fixed_inertia([1] * (n - 1))
    assert not fixed_inertia([1] * (5 * n) + [0])     # one crossing among many
    assert not fixed_inertia([1] * n + [-1])          # a zero eigenvalue
    assert not fixed_inertia([1.0] * n + [np.nan])    # a state saved before inertia
    assert not fixed_inertia([])
    # pk_steady_state's soft curvature is negative at 2.3% of its draws: FIXED_SIGN
    # _SAMPLES draws miss every crossing with probability ~1%
    assert (1 - 0.023) ** n < 0.011


def test_a_window_end_lets_a_funnel_metric_follow_its_mouth():
    d = 51
    v, x = funnel_draws(d, 260, seed=1)
    hess = [funnel_hessian(a, b) for a, b in zip(v, x)]
    met = SoftAbsMetric(d, alpha=30.0)
    met.adapts_alpha = True
    observe_all(met, hess)
    met.follows = False
    lam = [np.linalg.eigvalsh(A) for A in hess]
    late = lam[len(lam) // 2:]
    bounded = ALPHA_SCALE / np.exp(np.median([np.log(curvature_scale(l)) for l in late]))
    largest = np.exp(np.median([np.log(np.abs(l).max()) for l in late]))
    alpha = met.adapt_alpha()
    assert alpha == pytest.approx(FIXED_SIGN_CONDITION / largest)
    assert alpha > 100 * bounded
    # the metric's condition number at the typical sample is the new bound
    f = rhmc.softabs(np.array([largest, 0.0]), alpha)
    assert f[0] / f[1] == pytest.approx(FIXED_SIGN_CONDITION, rel=1e-6)
    # what it buys: at a point in the mouth (v = 7.5) the local variance of the x's
    # orthogonal to their own direction is 1 / f(e^-v), within 6% of e^v (their
    # conditional variance), where the bounded alpha caps it at about alpha
    rs = np.random.default_rng(3)
    xm = rs.normal(size=d - 1) * np.exp(7.5 / 2)
    A = funnel_hessian(7.5, xm)
    u = np.zeros(d)
    u[1:] = rs.normal(size=d - 1)
    u[1:] -= (u[1:] @ xm) / (xm @ xm) * xm
    u /= np.linalg.norm(u)
    for a in (alpha, bounded):
        cov = np.linalg.inv(rhmc.Geometry(np.zeros(d), A, a).metric)
        assert float(u @ cov @ u) == pytest.approx(
            1.0 / rhmc.softabs(np.exp(-7.5), a), rel=1e-8)
    assert 1.0 / rhmc.softabs(np.exp(-7.5), alpha) > 0.94 * np.exp(7.5)
    assert 1.0 / rhmc.softabs(np.exp(-7.5), bounded) < 1.01 * bounded
    # unbounded (following the chain before the first window's end): unchanged
    met.follows = True
    unb = ALPHA_SCALE / np.exp(np.median([np.log(curvature_scale(l, False))
                                          for l in late]))
    assert met.adapt_alpha(bounded=False) == pytest.approx(unb)


@pytest.mark.parametrize("case", ["few", "one_crossing", "old_state"])
def test_the_bounded_rule_stays_where_signs_are_not_known_fixed(case):
    d = 10
    v, x = funnel_draws(d, 260, seed=2)
    hess = [funnel_hessian(a, b) for a, b in zip(v, x)]
    if case == "few":
        hess = hess[:FIXED_SIGN_SAMPLES - 1]
    elif case == "one_crossing":                 # a Hessian with no negative eigenvalue
        hess[5] = np.diag(np.linspace(0.5, 4.0, d))
    met = SoftAbsMetric(d, alpha=30.0)
    met.adapts_alpha = True
    observe_all(met, hess)
    if case == "old_state":
        # a chain state saved before the inertia was noted: two columns
        state = met.adaptation_state()
        state["scales"] = state["scales"][:, :2]
        met = SoftAbsMetric(d, alpha=30.0)
        met.adapts_alpha = True
        met.restore_adaptation(state)
    met.follows = False
    late = [np.linalg.eigvalsh(A) for A in hess][len(hess) // 2:]
    bounded = ALPHA_SCALE / np.exp(np.median([np.log(curvature_scale(l)) for l in late]))
    assert met.adapt_alpha() == pytest.approx(bounded)


def test_adaptation_state_keeps_the_inertia():
    d = 10
    v, x = funnel_draws(d, 210, seed=4)
    met = SoftAbsMetric(d, alpha=30.0)
    met.adapts_alpha = True
    observe_all(met, [funnel_hessian(a, b) for a, b in zip(v, x)])
    state = met.adaptation_state()
    assert state["scales"].shape == (210, 4) and set(state["scales"][:, 3]) == {1.0}
    again = SoftAbsMetric(d, alpha=30.0)
    again.adapts_alpha = True
    again.restore_adaptation(state)
    met.follows = again.follows = False
    assert again.adapt_alpha() == met.adapt_alpha()
    assert met.alpha > MAX_CONDITION / np.abs(np.linalg.eigvalsh(
        funnel_hessian(0.0, np.ones(d - 1)))).max()


def test_a_chain_with_fixed_signs_samples_exactly_under_the_larger_alpha():
    # warmup 500: Stan's windows end at 99, 149, 249 (and 449, the last); the one at
    # 249 has 250 samples of one inertia, so alpha becomes FIXED_SIGN_CONDITION / 40
    # there; the draws are those of N(0, diag(1/prec)) within their MCSE
    prec = np.array([0.5, 2.0, 40.0])
    model = PrecisionGaussian(D=3, mu=np.zeros(3), P=np.diag(prec))
    fit = model.sample(chains=2, warmup=500, draws=500, seed=7, progress=False,
                       parallel=False, sampler="rhmc")
    for st in fit.chain_states:
        assert st.sampler_options["alpha"] == pytest.approx(FIXED_SIGN_CONDITION / 40.0)
    assert int(np.sum(fit.sampler_stats["divergent__"])) == 0
    import arviz as az
    x = np.asarray(fit["x"])                       # (chains, draws, 3)
    for j in range(3):
        xj = x[..., j]
        sd = 1.0 / np.sqrt(prec[j])
        se_mean = float(np.ravel(az.mcse(xj, method="mean"))[0])
        assert abs(xj.mean()) < 4 * se_mean
        # the variance's MCSE from the squares' ESS
        sq = xj ** 2
        ess = float(np.ravel(az.ess(sq, method="mean"))[0])
        se_var = float(sq.std()) / np.sqrt(ess)
        assert abs(sq.mean() - sd ** 2) < 4 * se_var
