"""RHMC's trajectory floor chosen from the problem (issue 24, point 2):
``sampler_options["min_int_time"]`` "auto" (the default) measures at each warmup
window's end but the last how much the SoftAbs metric understates the draws' spread
(``rhmc.scale_understatement``, with the sample-size correction of
``rhmc.spike_estimate``) and sets the floor ``FLOOR_SCALE * sqrt(that)``, or none
when it is near 1 (a Gaussian); a number given by the user is kept."""

import math

import numpy as np
import pytest

from stanlite.errors import ArgumentError
from stanlite.models.neal_funnel import NealFunnel
from stanlite.models.synthetic import PrecisionGaussian
from stanlite.samplers import rhmc
from stanlite.samplers.hamiltonian import Point
from stanlite.samplers.rhmc import (FLOOR_BLOCK, FLOOR_SCALE, FLOOR_THRESHOLD,
                                    SoftAbsMetric, auto_min_int_time, make_kernel,
                                    scale_understatement, spike_estimate)


def _corr(d, seed=0):
    """A correlated covariance (correlation 0.5, scales e^U(-1, 1)) and a mean."""
    rs = np.random.default_rng(seed)
    sd = np.exp(rs.uniform(-1.0, 1.0, d))
    return rs.normal(size=d), (0.5 * np.eye(d) + 0.5) * np.outer(sd, sd)


# ---- the estimator --------------------------------------------------------------------
def test_understatement_is_the_top_generalised_eigenvalue():
    # cov = local except along one direction w, where it is 9 times larger
    rs = np.random.default_rng(1)
    B = rs.normal(size=(4, 4))
    local = B @ B.T + 4 * np.eye(4)
    w = rs.normal(size=4)
    cov = local + 8.0 * np.outer(local @ w, local @ w) / (w @ local @ w)
    assert scale_understatement(cov, local) == pytest.approx(9.0, rel=1e-10)
    assert scale_understatement(local, local) == pytest.approx(1.0, rel=1e-10)
    # not a covariance: NaN, and NaN gives no floor
    assert math.isnan(scale_understatement(cov, -local))
    assert math.isnan(scale_understatement(cov * np.nan, local))
    assert auto_min_int_time(math.nan, 100, 4) == 0.0


def test_spike_estimate_removes_the_sample_size_inflation():
    # within the noise's edge (1 + sqrt(d/n))^2: 1
    assert spike_estimate(2.0, 50, 10) == 1.0
    assert spike_estimate((1 + math.sqrt(0.2)) ** 2, 50, 10) == 1.0
    # a real gap is hardly inflated: the inverse of ell = lam + g lam / (lam - 1)
    for lam, n, d in ((20.0, 225, 10), (100.0, 225, 51), (5.0, 1000, 3)):
        g = d / n
        ell = lam + g * lam / (lam - 1)
        assert spike_estimate(ell, n, d) == pytest.approx(lam, rel=1e-10)


@pytest.mark.parametrize("d,n", [(3, 50), (10, 50), (10, 225), (51, 225)])
def test_a_gaussian_with_its_exact_metric_gets_no_floor(d, n):
    # independent draws of N(0, C), the local covariance C exactly: the sample's
    # top generalised eigenvalue is 1.3-2.9 from the sample size alone
    _, C = _corr(d)
    L = np.linalg.cholesky(C)
    lams = []
    for seed in range(20):
        x = np.random.default_rng(seed).normal(size=(n, d)) @ L.T
        lam = scale_understatement(np.cov(x.T), C)
        lams.append(lam)
        assert auto_min_int_time(lam, n, d) == 0.0, (seed, lam)
    assert np.median(lams) > 1.2          # the inflation the correction removes


def test_a_funnel_like_gap_gives_its_floor():
    # draws whose first coordinate has sd 3 where the local metric says
    # sqrt(0.5) (the funnel's v at d = 10, alpha 30): lambda 18, floor 2 sqrt(18)
    d, n = 10, 225
    local = np.eye(d)
    local[0, 0] = 0.5
    sd = np.ones(d)
    sd[0] = 3.0
    floors = []
    for seed in range(20):
        x = np.random.default_rng(seed).normal(size=(n, d)) * sd
        lam = scale_understatement(np.cov(x.T), local)
        floors.append(auto_min_int_time(lam, n, d))
    expected = FLOOR_SCALE * math.sqrt(18.0)
    # sd 3's sample variance from 225 draws: 9 (1 +- 0.094) at one sd
    assert np.all(np.abs(np.array(floors) / expected - 1) < 0.2), floors
    assert abs(np.median(floors) / expected - 1) < 0.06, floors
    # at the threshold: r = 2 is a floor, just below it none
    assert auto_min_int_time(4.01, 10 ** 9, 1) == pytest.approx(FLOOR_SCALE * math.sqrt(4.01))
    assert FLOOR_THRESHOLD == 2.0
    assert auto_min_int_time(3.9, 10 ** 9, 1) == 0.0


def _exact_funnel_points(d, n, seed):
    rs = np.random.default_rng(seed)
    v = 3.0 * rs.standard_normal(n)
    x = np.exp(v / 2)[:, None] * rs.standard_normal((n, d - 1))
    return np.column_stack([v, x])


def test_the_funnel_from_exact_draws():
    """The metric's own local covariances at exact funnel draws (d = 10, alpha 30):
    sqrt(lambda) about 4.6 (v's sd 3 against a local ~0.7; along x the mean local
    variance is the draws'), so a floor of about 9, v's half-period in the metric's
    time (8-10, measured along long trajectories: benchmarks/README.md)."""
    m = NealFunnel(D=10)
    assert m.param_names()[0] == "v"
    met = SoftAbsMetric(m.dim, alpha=30.0)
    met.adapts_floor = True
    seen = []
    met.on_floor = seen.append
    assert met.adapt_min_int_time() == 0.0 and not seen        # nothing noted
    qs = _exact_funnel_points(10, 800, 3)
    for q in qs[:6]:                        # fewer than dim + 2 draws: no change
        met.observe(Point(q, None, 0.0, None, aux=met.geometry(m, q)))
    assert met.adapt_min_int_time() == 0.0 and not seen
    for q in qs[6:]:
        met.observe(Point(q, None, 0.0, None, aux=met.geometry(m, q)))
    met.observe(Point(qs[0], None, 0.0, None))                 # no geometry: not noted
    t = met.adapt_min_int_time()
    n_used, lam, t_hist = met.floor_history[-1]
    # the latter half of the 800 draws, in whole blocks
    assert n_used == 400 and 400 % FLOOR_BLOCK == 0
    assert 3.8 < math.sqrt(lam) < 5.5, lam
    uncapped = FLOOR_SCALE * math.sqrt(spike_estimate(lam, 400, 10))
    assert 7.5 < uncapped < 11.0
    # the first window's end grows the floor from none to at most 8 (floor_cap)
    assert t == t_hist == seen[-1] == pytest.approx(min(uncapped, rhmc.floor_cap(0.0)))
    # the same from the sums by hand
    half = qs[400:]
    local = np.mean([(g.Q * g.finv) @ g.Q.T
                     for g in (met.geometry(m, q) for q in half)], axis=0)
    assert lam == pytest.approx(scale_understatement(np.cov(half.T), local), rel=1e-8)


# ---- the option -----------------------------------------------------------------------
def test_min_int_time_option_is_checked():
    o = rhmc.check_options({})
    assert o["min_int_time"] == "auto" and o["adapt_min_int_time"] is True
    o = rhmc.check_options({"min_int_time": 3})
    assert o["min_int_time"] == 3.0 and o["adapt_min_int_time"] is False
    for bad in ("fast", -1.0, math.inf, math.nan, [1.0]):
        with pytest.raises(ArgumentError, match="min_int_time"):
            rhmc.check_options({"min_int_time": bad})
    with pytest.raises(ArgumentError, match="adapt_min_int_time"):
        rhmc.check_options({"adapt_min_int_time": "yes"})
    # "auto" starts with no floor; a number is used as given and not adapted
    opts = {}
    met, _ = make_kernel(3, opts)
    assert met.min_int_time == 0.0 and met.adapts_floor
    assert opts["adapt_min_int_time"] is True
    met, _ = make_kernel(3, {"min_int_time": 5.0})
    assert met.min_int_time == 5.0 and not met.adapts_floor


def test_a_user_floor_wins_over_auto():
    # the banana's floor "auto" is well above 0 (a slow ridge); a number given stays
    from stanlite.models.synthetic import Banana
    m = Banana(b=2.0, s=0.3)
    fit = m.sample(chains=1, warmup=150, draws=5, seed=1, progress=False,
                   parallel=False, sampler="rhmc", sampler_options={"min_int_time": 1.5})
    st = fit.chain_states[0]
    assert st.window_ends == [99]           # alpha "auto" still adapts there
    assert st.sampler_options["min_int_time"] == 1.5
    assert st.sampler_options["adapt_min_int_time"] is False
    auto = m.sample(chains=1, warmup=150, draws=5, seed=1, progress=False,
                    parallel=False, sampler="rhmc")
    st = auto.chain_states[0]
    t = st.sampler_options["min_int_time"]
    assert isinstance(t, float) and t >= FLOOR_SCALE * FLOOR_THRESHOLD
    assert st.sampler_options["adapt_min_int_time"] is True
    # a resumed chain integrates with the chosen floor
    met, _ = make_kernel(2, dict(st.sampler_options))
    assert met.min_int_time == t and met.adapts_floor


def test_floor_adapts_at_every_window_end_but_the_last(monkeypatch):
    calls = []
    real = SoftAbsMetric.adapt_min_int_time

    def adapt(self):
        calls.append(self.min_int_time)
        return real(self)
    monkeypatch.setattr(SoftAbsMetric, "adapt_min_int_time", adapt)
    mu, C = _corr(3)
    m = PrecisionGaussian(D=3, mu=mu, P=np.linalg.inv(C))
    # a fixed alpha: the floor alone makes the windows
    fit = m.sample(chains=1, warmup=300, draws=5, seed=3, progress=False,
                   parallel=False, sampler="rhmc", sampler_options={"alpha": 30.0})
    st = fit.chain_states[0]
    from stanlite.samplers.adaptation import window_ends
    ends = window_ends(300)[0]
    assert st.window_ends == ends and len(ends) > 1
    assert len(calls) == len(ends) - 1
    assert st.sampler_options["alpha"] == 30.0
    # given both, nothing adapts at windows: there are none
    calls.clear()
    fit = m.sample(chains=1, warmup=300, draws=5, seed=3, progress=False,
                   parallel=False, sampler="rhmc",
                   sampler_options={"alpha": 30.0, "min_int_time": 0.0})
    assert fit.chain_states[0].window_ends == [] and not calls


def test_gaussian_at_defaults_gets_no_floor_and_keeps_its_moments():
    d = 10
    mu, C = _corr(d)
    m = PrecisionGaussian(D=d, mu=mu, P=np.linalg.inv(C))
    fit = m.sample(chains=1, warmup=300, draws=400, seed=5, progress=False,
                   parallel=False, sampler="rhmc")
    st = fit.chain_states[0]
    assert st.sampler_options["min_int_time"] == 0.0
    assert st.sampler_options["adapt_min_int_time"] is True
    assert int(np.sum(fit.sampler_stats["divergent__"])) == 0
    import arviz as az
    x = fit["x"]
    for j in range(d):
        xj = x[..., j]
        ess = float(np.ravel(az.ess(xj, method="mean"))[0])
        assert abs(xj.mean() - mu[j]) < 4.0 * math.sqrt(C[j, j] / ess), j
        dev2 = (xj - mu[j]) ** 2
        ess2 = float(np.ravel(az.ess(dev2, method="mean"))[0])
        assert abs(dev2.mean() - C[j, j]) < 4.0 * dev2.std() / math.sqrt(ess2), j


def test_funnel_at_defaults_chooses_a_floor(tmp_path):
    # d = 10, one chain of 300 warmup iterations: the floor the windows chose is
    # about v's half-period (8-10); with it the chain crosses v's range
    import stanlite as sl
    m = NealFunnel(D=10)
    fit = m.sample(chains=1, warmup=300, draws=100, seed=2, progress=False,
                   parallel=False, sampler="rhmc")
    st = fit.chain_states[0]
    t = st.sampler_options["min_int_time"]
    assert 5.0 < t < 20.0, t
    eps = float(fit.step_size[0])
    n = np.asarray(fit.sampler_stats["n_leapfrog__"])
    # every trajectory lasts at least the floor: 2^depth - 1 >= t / eps states
    assert np.all(n >= (1 << math.ceil(math.log2(math.ceil(t / eps)))) - 1)
    assert int(np.sum(fit.sampler_stats["divergent__"])) == 0
    # this short warmup's last adapting window had an excursion (v ~ 9.6) that put
    # the estimate far above the floor's twofold limit (floor_cap): diagnose() says
    # the floor ended warmup below its estimate, also for the fit read back
    assert st.kernel_adapt["floor_wanted"] > 2.0 * t
    assert f"Chain 0: RHMC's trajectory floor (min_int_time) ended warmup at {t:.3g}" \
        in fit.diagnose()
    path = fit.save(tmp_path / "fit.nc")
    assert "Chain 0: RHMC's trajectory floor" in sl.load_fit(path, model=m).diagnose()


def test_the_floor_grows_at_most_twofold_a_window():
    """floor_cap: one window's end moves the floor by at most FLOOR_GROWTH over the
    last (or over the smallest non-zero floor): a lone excursion of the warmup
    (the funnel's seed 2: lambda 8 -> 1335 between two windows) cannot multiply
    the trajectories' length; a real gap is reached over the windows."""
    from stanlite.samplers.rhmc import (FLOOR_GROWTH, FLOOR_SCALE, FLOOR_THRESHOLD,
                                        SoftAbsMetric, floor_cap)
    smallest = FLOOR_SCALE * FLOOR_THRESHOLD
    assert floor_cap(0.0) == FLOOR_GROWTH * smallest
    assert floor_cap(10.0) == FLOOR_GROWTH * 10.0
    met = SoftAbsMetric(3, alpha=1.0)
    met.adapts_floor = True
    rng = np.random.default_rng(0)
    for q in 100.0 * rng.standard_normal((100, 3)):   # spread 100 x the local scale
        met._floor_sums.add(q, np.eye(3), np.ones(3))
    uncapped = auto_min_int_time(scale_understatement(*met._floor_sums.latter_half()[:2]),
                                 50, 3)
    assert uncapped > 100.0                           # ~2 x 100
    seen = [met.adapt_min_int_time() for _ in range(4)]
    assert seen == pytest.approx([FLOOR_GROWTH * smallest * FLOOR_GROWTH ** k
                                  for k in range(4)])
    assert [h[2] for h in met.floor_history] == seen
    # the estimate the cap held the floor below is kept with the chain's state
    assert met.floor_wanted == pytest.approx(uncapped)
    again = SoftAbsMetric(3, alpha=1.0)
    again.restore_adaptation(met.adaptation_state())
    assert again.floor_wanted == met.floor_wanted


def test_a_floor_its_cap_held_below_the_estimate_leaves_a_note():
    met = SoftAbsMetric(3, alpha=1.0)
    assert met.floor_note() is None                   # nothing adapted
    met.min_int_time, met.floor_wanted = 8.0, 8.0
    assert met.floor_note() is None                   # reached
    met.min_int_time, met.floor_wanted = 0.0, 0.0
    assert met.floor_note() is None                   # a Gaussian: no floor wanted
    met.min_int_time, met.floor_wanted = 8.0, 23.4
    note = met.adaptation_state()["note"]
    assert note == met.floor_note()
    assert "ended warmup at 8, below its own estimate 23.4" in note
    assert "longer warmup" in note
