"""Riemannian HMC at its defaults (issue 24): SoftAbs's alpha chosen from the
Hessian's eigenvalue scale and kept in the chain's state, a failed implicit step
retried in substeps only where that is reversible, failures that a smaller step
does not cure not collapsing the step size, and Neal's funnel sampled with every
argument left at its default."""

import math

import numpy as np
import pytest

import stanlite as sl
from stanlite.models.neal_funnel import NealFunnel
from stanlite.samplers import rhmc
from stanlite.samplers.hamiltonian import Point
from stanlite.samplers.rhmc import (ALPHA_SCALE, MAX_CONDITION, SoftAbsMetric, auto_alpha,
                                    curvature_scale, make_kernel, softabs)


class Gauss(sl.Model):
    """N(0, diag(1/prec)): a constant Hessian diag(prec)."""
    prec = sl.data.vector(3)
    x = sl.param.vector(3)

    def log_prob(self, x):
        return -0.5 * sl.sum(self.prec * x * x)


def test_alpha_follows_the_hessian_scale():
    prec = np.array([0.5, 2.0, 8.0])
    # ALPHA_SCALE / median |eigenvalue|, and a problem in other units (every
    # curvature c times larger) gets alpha / c: the same metric up to units
    assert auto_alpha(np.diag(prec)) == pytest.approx(ALPHA_SCALE / 2.0)
    assert auto_alpha(np.diag(-7 * prec)) == pytest.approx(ALPHA_SCALE / 14.0)
    assert auto_alpha(np.zeros((3, 3))) == 1.0
    # the metric chooses it at its first geometry and tells its owner
    seen = []
    met = SoftAbsMetric(3, alpha=None)
    met.on_alpha = seen.append
    geo = met.geometry(Gauss(prec=prec), np.ones(3))
    assert met.alpha == seen[0] == geo.alpha == pytest.approx(ALPHA_SCALE / 2.0)


def test_alpha_bounds_the_metric_condition_number():
    # a stiff direction beside soft ones (pk_steady_state: |eigenvalues| ~1, ~20,
    # ~1300): the median would put SoftAbs's floor 1/alpha far below the stiff
    # curvature; the scale is at least ALPHA_SCALE / MAX_CONDITION of the largest,
    # so alpha * max |lam| - the metric's condition number - is MAX_CONDITION
    lam = np.array([1.0, -20.0, 1300.0])
    assert curvature_scale(lam) == pytest.approx(1300.0 * ALPHA_SCALE / MAX_CONDITION)
    alpha = ALPHA_SCALE / curvature_scale(lam)
    assert alpha * 1300.0 == pytest.approx(MAX_CONDITION)
    f = softabs(lam, alpha)
    assert f.max() / f.min() <= MAX_CONDITION
    # unbounded (the first point's choice, and alpha following the chain before
    # the first window's end): the median alone
    assert curvature_scale(lam, bounded=False) == pytest.approx(20.0)
    assert auto_alpha(np.diag(lam)) == pytest.approx(ALPHA_SCALE / 20.0)
    # where the spectrum is narrower the median decides, as before
    assert curvature_scale(np.array([0.5, 2.0, 8.0])) == pytest.approx(2.0)
    # scale-free: every curvature c times larger gives alpha / c
    assert ALPHA_SCALE / curvature_scale(7.0 * lam) == pytest.approx(alpha / 7.0)
    assert auto_alpha(np.diag(7.0 * lam)) == pytest.approx(ALPHA_SCALE / 140.0)


def test_the_bound_applies_at_window_ends_not_while_following():
    """A wide spectrum (max 65x the median): while alpha follows the chain it is
    ALPHA_SCALE / median; at a window's end (adapt_alpha) the bounded scale. Why:
    a transient point (the funnel's first transitions, v falling before the x's
    shrink) can have one huge curvature; bounded, alpha fell to 0.005 there, every
    direction was made that stiff, the chain stopped, and the followed alpha
    stayed (measured: trajectories of 1023 steps and a floor of 88.7)."""
    met = SoftAbsMetric(3, alpha=1.0)
    met.adapts_alpha = True
    q = np.zeros(3)
    for _ in range(4):
        geo = rhmc.Geometry(q, np.diag([1.0, -20.0, 1300.0]), met.alpha)
        met.observe(Point(q, None, 0.0, None, aux=geo))
    assert met.follow() == pytest.approx(ALPHA_SCALE / 20.0)
    met.follows = False
    assert met.adapt_alpha() == pytest.approx(MAX_CONDITION / 1300.0)


def test_chosen_alpha_is_kept_in_the_chain_state(tmp_path):
    prec = np.array([0.5, 2.0, 8.0])
    m = Gauss(prec=prec)
    opts = {}
    met, _ = make_kernel(3, opts)
    assert met.alpha is None and "alpha" not in opts
    fit = m.sample(chains=1, warmup=20, draws=5, seed=1, progress=False, parallel=False,
                   sampler="rhmc")
    st = fit.chain_states[0]
    assert st.sampler_options["alpha"] == pytest.approx(ALPHA_SCALE / 2.0)
    # a resumed run's metric is built with that number, not chosen again, and the
    # continuation through a file is exact
    met, _ = make_kernel(3, st.sampler_options)
    assert met.alpha == pytest.approx(ALPHA_SCALE / 2.0)
    longer = m.sample(resume_from=fit, draws=8, progress=False)
    loaded = sl.load_fit(fit.save(tmp_path / "rhmc.nc"), model=m)
    again = m.sample(resume_from=loaded, draws=8, progress=False)
    np.testing.assert_array_equal(again["x"], longer["x"])
    np.testing.assert_array_equal(longer["x"][:, :5], fit["x"])


def _failing_single_step():
    """A funnel point, momentum and step size where one implicit step fails."""
    m = NealFunnel(D=5)
    q = np.array([-0.9, -0.07, 0.32, 0.05, -0.27])
    lp, g = m.log_density_gradient(q)
    met = SoftAbsMetric(5, alpha=12.0, max_halvings=0)
    z = met.start(m, Point(q, None, lp, g), np.random.default_rng(0))
    z1 = met.step(m, z, 0.4)
    # a failed fixed point: the momentum equation has no solution at this step size
    assert z1.h == math.inf and math.isfinite(z1.lp)
    return m, z, 0.4


def test_failed_step_is_retried_in_substeps_reversibly():
    m, z, eps = _failing_single_step()
    met = SoftAbsMetric(5, alpha=12.0, max_halvings=3)
    z1 = met.step(m, z, eps)
    assert math.isfinite(z1.h)
    # the retried step is a composition of implicit steps: two of eps / 2 ...
    half = SoftAbsMetric(5, alpha=12.0, max_halvings=0)
    z2 = half.step(m, half.step(m, z, eps / 2), eps / 2)
    np.testing.assert_allclose(z1.q, z2.q, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(z1.p, z2.p, rtol=1e-6, atol=1e-7)
    # ... and the same rule backwards from its end returns to the start
    zb = met.step(m, z1, -eps)
    np.testing.assert_allclose(zb.q, z.q, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(zb.p, z.p, rtol=1e-6, atol=1e-7)
    assert zb.h == pytest.approx(z.h, abs=1e-6)


def test_irreversible_retry_is_a_divergence(monkeypatch):
    # the coarse step fails forwards but would converge backwards from the retried
    # end: the rule would not be an involution, so the step stays a failure
    m, z, _ = _failing_single_step()
    eps = 0.2                                   # where the step itself converges
    met = SoftAbsMetric(5, alpha=12.0, max_halvings=3)
    real = SoftAbsMetric._step

    def step(self, model, w, e):
        if e == eps and w is z:
            return self._fail(w)               # only the forward coarse step fails
        return real(self, model, w, e)
    monkeypatch.setattr(SoftAbsMetric, "_step", step)
    rhmc.reset_profile()
    z1 = met.step(m, z, eps)
    assert z1.h == math.inf
    assert rhmc.PROFILE["irreversible"] == 1 and met.failures == 1


def test_failures_a_smaller_step_does_not_cure_do_not_collapse_the_step_size(
        monkeypatch):
    # every implicit step that ends beyond x[0] > 1.2 fails, whatever its size (as
    # rounding noise in a model's third derivatives makes them fail): each such step
    # is one rejected step of its transition, so the step size stays near what the
    # Gaussian needs; counting the whole transition as a rejection (max_halvings=0,
    # the old rule) drives it down by orders of magnitude
    real = SoftAbsMetric._step

    def step(self, model, w, e):
        w1 = real(self, model, w, e)
        return self._fail(w) if w1.q[0] > 1.2 else w1
    monkeypatch.setattr(SoftAbsMetric, "_step", step)
    m = Gauss(prec=np.ones(3))
    eps = {}
    for halvings in (3, 0):
        fit = m.sample(chains=1, warmup=80, draws=1, seed=4, progress=False, init=0.5,
                       parallel=False, sampler="rhmc", max_treedepth=5, adapt_delta=0.8,
                       sampler_options={"max_halvings": halvings})
        eps[halvings] = float(fit.step_size[0])
    assert eps[3] > 0.2, eps
    assert eps[0] < 0.2 * eps[3], eps


@pytest.mark.slow
def test_funnel_at_defaults_has_no_divergences_and_exact_v():
    m = NealFunnel(D=10)
    fit = m.sample(chains=2, warmup=200, draws=300, seed=11, progress=False,
                   parallel=False, sampler="rhmc")
    assert int(np.sum(fit.sampler_stats["divergent__"])) == 0
    v = fit["v"]
    ess = float(np.ravel(__import__("arviz").ess(v, method="mean"))[0])
    se = v.std() / math.sqrt(ess)
    assert abs(v.mean()) < 3.5 * se
    # sd's MCSE by the delta method (as benchmarks/rhmc.py)
    assert abs(v.std() - 3.0) < 3.5 * 3.0 / math.sqrt(2 * ess) + 0.2
    assert v.min() < -4.0                  # it enters the neck


def test_alpha_adapts_to_the_latter_half_of_the_warmup():
    """adapt_alpha: ALPHA_SCALE / exp(median log scale) over the latter half of the
    scales noted so far, where a scale is a sample's median |eigenvalue|."""
    met = SoftAbsMetric(3, alpha=1.0)
    seen = []
    met.on_alpha = seen.append
    assert met.adapt_alpha() == 1.0 and not seen          # nothing noted: no change
    for k in range(10):                                   # scales e^0 .. e^9
        q = np.zeros(3)
        geo = rhmc.Geometry(q, np.diag([math.exp(k), -math.exp(k), 1e-3]), met.alpha)
        met.observe(Point(q, None, 0.0, None, aux=geo))
    met.observe(Point(np.zeros(3), None, 0.0, None))      # no geometry: not noted
    assert met.adapt_alpha() == pytest.approx(ALPHA_SCALE / math.exp(7.0))
    assert seen == [met.alpha]


def test_alpha_follows_the_chain_until_the_first_window_end():
    """follow(): after each warmup transition, adapt_alpha() while no window has
    ended - so a first point unlike the posterior does not set the first window's
    metric - and nothing once one has (or when alpha does not adapt)."""
    met = SoftAbsMetric(3, alpha=1.0)
    met.adapts_alpha = True
    q = np.zeros(3)
    for k in range(4):                                    # scales e^0 .. e^3
        geo = rhmc.Geometry(q, np.diag([math.exp(k), -math.exp(k), 1e-3]), met.alpha)
        met.observe(Point(q, None, 0.0, None, aux=geo))
        recent = np.arange(k + 1.0)[(k + 1) // 2:]      # the latter half of the logs
        assert met.follow() == pytest.approx(ALPHA_SCALE / math.exp(np.median(recent)))
    followed = met.alpha
    met.follows = False                                   # a window has ended
    geo = rhmc.Geometry(q, np.diag([1e4, 1e4, 1e4]), met.alpha)
    for _ in range(10):
        met.observe(Point(q, None, 0.0, None, aux=geo))
        assert met.follow() == followed
    fixed = SoftAbsMetric(3, alpha=2.0)                   # adapts_alpha False
    fixed.observe(Point(q, None, 0.0, None, aux=geo))
    assert fixed.follow() == 2.0


def test_a_followed_alpha_that_moves_twofold_restarts_the_step_size_averaging():
    from types import SimpleNamespace
    from stanlite.samplers.adaptation import DualAveraging
    from stanlite.samplers.hamiltonian import TransitionInfo
    from stanlite.samplers.kernels import SoftAbsNuts
    met = SoftAbsMetric(3, alpha=ALPHA_SCALE)            # chosen at scale 1
    met.adapts_alpha = True
    da = DualAveraging(0.99)
    da.restart(0.1)
    live = SimpleNamespace(da=da, metric=met)
    q = np.zeros(3)

    def transition(scale):
        met.observe(Point(q, None, 0.0, None,
                          aux=rhmc.Geometry(q, np.diag([scale, scale, scale]), met.alpha)))
        return SoftAbsNuts().adapt_stepsize(live, TransitionInfo(1.0, 1, 0, False, 0.0), 0.1)
    eps = transition(1.5)                 # alpha 30 -> 20: averaging goes on
    assert da.counter == 1 and met.alpha == pytest.approx(ALPHA_SCALE / 1.5)
    eps = transition(20.0)                # median of the latter half: scale 20
    assert met.alpha == pytest.approx(ALPHA_SCALE / 20.0)
    assert da.counter == 0 and da.mu == pytest.approx(math.log(10 * eps))
    assert met.da_alpha == met.alpha
    met.follows = False                   # after the first window: no following
    transition(1e4)
    assert da.counter == 1 and met.alpha == pytest.approx(ALPHA_SCALE / 20.0)
    # a window's end that moved alpha far from the followed one: the chain restarted
    # the averaging there (chain._warmup_end); the next transition does not again
    met.alpha = met.da_alpha / 4.0
    transition(1e4)
    assert da.counter == 2


def test_a_chain_resumed_past_its_first_window_does_not_follow():
    from types import SimpleNamespace
    from stanlite.samplers.kernels import SoftAbsNuts
    for it, follows in ((0, True), (99, True), (100, False), (400, False)):
        st = SimpleNamespace(sampler_options={"alpha": 2.0, "adapt_alpha": True},
                             window_ends=[99, 149], iteration=it, kernel_adapt=None)
        assert SoftAbsNuts().live(3, st)[0].follows is follows
    # a warmup too short for windows (under 20 iterations): alpha stays the first
    # point's, as the step size's averaging must settle before sampling
    st = SimpleNamespace(sampler_options={"alpha": 2.0}, window_ends=[], iteration=5,
                         kernel_adapt=None)
    assert SoftAbsNuts().live(3, st)[0].follows is False


class Quartic(sl.Model):
    """-log p = x^2 / 2 + x^4 / 4 per coordinate: curvature 1 + 3 x^2, steep far out."""
    x = sl.param.vector(2)

    def log_prob(self, x):
        return -sl.sum(0.5 * x * x + 0.25 * x ** 4)


def test_warmup_alpha_follows_the_chain_then_stays(monkeypatch):
    # from a first point far out (curvature ~3 x^2 = 48), alpha follows the chain's
    # draws (curvature ~1-3) in the first window, changes only at window ends after
    # it, and never in sampling
    seen = []
    real = SoftAbsMetric.follow

    def follow(self):
        before, following = self.alpha, self.follows
        out = real(self)
        seen.append((before, out, following))
        return out
    monkeypatch.setattr(SoftAbsMetric, "follow", follow)
    m = Quartic()
    fit = m.sample(chains=1, warmup=150, draws=5, seed=5, progress=False,
                   parallel=False, sampler="rhmc", init=np.array([4.0, 4.0]))
    st = fit.chain_states[0]
    first = st.window_ends[0]
    # asked after every warmup transition up to the first window's end, not after
    assert len(seen) == first + 1 and all(f for _, _, f in seen)
    # the first point's alpha (scale ~49) is left within the first window
    assert seen[0][0] < 0.5 * seen[first - 1][1]
    # the window's end re-chose it (bounded: Quartic's spectrum is narrow, so the
    # same median), and sampling kept that
    assert st.sampler_options["alpha"] == pytest.approx(seen[-1][1], rel=1e-12)


def test_alpha_adaptation_is_kept_in_the_chain_state():
    m = Gauss(prec=np.array([0.5, 2.0, 8.0]))
    fit = m.sample(chains=1, warmup=150, draws=5, seed=2, progress=False, parallel=False,
                   sampler="rhmc")
    st = fit.chain_states[0]
    # "auto": Stan's windows end where alpha adapts; the Hessian is constant, so every
    # sample's scale is its median eigenvalue 2
    assert st.window_ends and st.sampler_options["adapt_alpha"] is True
    assert st.sampler_options["alpha"] == pytest.approx(ALPHA_SCALE / 2.0)
    # the state's number with adapt_alpha True goes on adapting when resumed
    assert make_kernel(3, dict(st.sampler_options))[0].adapts_alpha
    # a number given by the user is kept: no windows (with the trajectory floor
    # given too: "auto" adapts at windows), no adaptation
    fixed = m.sample(chains=1, warmup=150, draws=5, seed=2, progress=False,
                     parallel=False, sampler="rhmc",
                     sampler_options={"alpha": 3.0, "min_int_time": 0.0})
    st = fixed.chain_states[0]
    assert st.window_ends == [] and st.sampler_options["alpha"] == 3.0
    assert st.sampler_options["adapt_alpha"] is False
    with pytest.raises(ValueError, match="adapt_alpha"):
        rhmc.check_options({"adapt_alpha": "yes"})


def test_last_window_keeps_alpha_and_the_step_size_averaging(monkeypatch):
    # warmup 200: Stan's windows end at 99 and 149. alpha adapts at 99 only; at the
    # last end (149) it is kept and the step size's averaging is not restarted, so
    # it averages the 100 iterations after 99, not the term buffer's 50; sampling's
    # step size is FINAL_STEP_FACTOR times that average (calls at window ends only:
    # before the first one alpha follows the chain, SoftAbsMetric.follow)
    calls = []
    real = SoftAbsMetric.adapt_alpha

    def adapt(self, bounded=True):
        if not self.follows:
            calls.append(self.alpha)
        return real(self, bounded)
    monkeypatch.setattr(SoftAbsMetric, "adapt_alpha", adapt)
    m = Gauss(prec=np.array([0.5, 2.0, 40.0]))
    fit = m.sample(chains=1, warmup=200, draws=5, seed=3, progress=False,
                   parallel=False, sampler="rhmc")
    st = fit.chain_states[0]
    assert st.window_ends == [99, 149] and len(calls) == 1
    # the window's end bounded it: Hessian 0.5, 2, 40 (max 20x the median), so alpha
    # is MAX_CONDITION / 40 where the median alone (following) gives ALPHA_SCALE / 2
    assert st.sampler_options["alpha"] == pytest.approx(rhmc.MAX_CONDITION / 40.0)
    assert st.da["counter"] == 100
    assert st.stepsize == pytest.approx(rhmc.FINAL_STEP_FACTOR * math.exp(st.da["x_bar"]),
                                        rel=1e-12)
    assert rhmc.FINAL_STEP_FACTOR < 1.0
    # one window (warmup 150): alpha adapts at its end, the only chance
    calls.clear()
    fit = m.sample(chains=1, warmup=150, draws=5, seed=3, progress=False,
                   parallel=False, sampler="rhmc")
    assert fit.chain_states[0].window_ends == [99] and len(calls) == 1
    assert fit.chain_states[0].sampler_options["alpha"] == \
        pytest.approx(rhmc.MAX_CONDITION / 40.0)


def test_a_cured_failure_lowers_the_step_size_by_its_substeps_factor():
    # dual averaging at adapt_delta 0.99 after 31 transitions of acceptance 1 (as on
    # pk_steady_state before its first failed step): a statistic of 0 cuts the step
    # size more than tenfold; a failure that 2 (4) substeps cured cuts it by 2 (4)
    from stanlite.samplers.adaptation import DualAveraging
    da = DualAveraging(0.99)
    da.restart(0.024)
    eps = 0.024
    for _ in range(31):
        eps = da.update(1.0)
    plain = DualAveraging(0.99)
    plain.__dict__.update(da.__dict__)
    assert plain.update(0.0) < eps / 10
    for cut in (2, 4):
        d = DualAveraging(0.99)
        d.__dict__.update(da.__dict__)
        a = rhmc.failure_accept_stat(d, eps, cut)
        assert 0.0 < a < 1.0
        assert d.update(a) == pytest.approx(eps / cut, rel=1e-12)
    # late in a window a 0 moves the step less than a factor 2: the plain rule
    # (the statistic 0), so dual averaging's equilibrium is unchanged
    for _ in range(2000):
        eps = da.update(0.99)
    assert rhmc.failure_accept_stat(da, eps, 2) == 0.0


def test_cured_failures_do_not_collapse_the_warmup_step_size(monkeypatch):
    # every implicit step longer than 0.3 that starts beyond x[0] > 1 fails, and
    # its halves converge (a fold that a smaller step cures): each such transition
    # lowers the next step size by at most the factor its substeps needed (2 or 4)
    real = SoftAbsMetric._step

    def step(self, model, w, e):
        if abs(e) > 0.3 and w.q[0] > 1.0:
            return self._fail(w)
        return real(self, model, w, e)
    monkeypatch.setattr(SoftAbsMetric, "_step", step)
    m = Gauss(prec=np.ones(3))
    fit = m.sample(chains=1, warmup=120, draws=1, seed=4, progress=False, init=0.5,
                   parallel=False, sampler="rhmc", save_warmup=True,
                   # (no windows: their step-size searches would mix in)
                   sampler_options={"alpha": 3.0, "min_int_time": 0.0})
    st = fit.chain_states[0]
    eps = np.asarray(st.warmup_stats["stepsize__"])
    acc = np.asarray(st.warmup_stats["accept_stat__"])
    failed = np.flatnonzero(acc[:-1] == 0.0)
    assert failed.size >= 3, failed           # the rule was exercised
    # (iterations 0-1 follow the step-size search's first guess: dual averaging's
    # first updates rise towards 10 eps whatever they are told)
    later = failed[failed >= 2]
    assert np.all(eps[later + 1] >= eps[later] / 4 * (1 - 1e-9)), \
        (eps[later], eps[later + 1])
    assert eps[2:].min() > 0.05, eps.min()


@pytest.mark.parametrize("pause", [1, 10, 60, 99, 100, 149, 160])
def test_a_chain_paused_in_warmup_continues_exactly(pause, tmp_path):
    """alpha following the chain, the windows' alpha and floor, and the step size's
    restarts all read what warmup gathered (SoftAbsMetric.adaptation_state, kept in
    ChainState.kernel_adapt): a chain paused at any iteration - and saved to a
    file and read back - gives the draws of one that was not (the parallel
    runner pauses chain 0 after its probe, so serial and parallel runs agree too).
    Quartic's curvature changes along the chain, so alpha moves every transition
    in the first window."""
    from stanlite.chain_state import ChainState
    from stanlite.samplers import chain as chain_mod
    m = Quartic()
    kw = dict(num_warmup=150, num_draws=20, sampler="rhmc", save_warmup=True,
              sampler_options={"min_int_time": "auto"}, init=np.array([4.0, 4.0]))
    ss = np.random.SeedSequence(11)
    whole = chain_mod.run(m, chain_mod.initialize(m, 0, ss, **kw))
    part = chain_mod.run(m, chain_mod.initialize(m, 0, ss, **kw), n_iterations=pause)
    assert part.iteration == pause
    # through plain data, as a fit's file keeps it
    part = ChainState.from_dict(part.to_dict())
    chain_mod.run(m, part)
    assert part.sampler_options == whole.sampler_options
    assert part.stepsize == whole.stepsize
    np.testing.assert_array_equal(np.array(part.warmup_draws), np.array(whole.warmup_draws))
    np.testing.assert_array_equal(np.array(part.draws), np.array(whole.draws))
