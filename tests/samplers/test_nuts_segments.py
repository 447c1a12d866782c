"""NUTS iterations run in compiled segments (samplers/nuts_jit.py ``segment``, driven
by samplers/chain.py ``run``): many iterations of a chain in one call, with the
step size's dual averaging and the variance windows' Welford sums in the kernel.

The segments draw from the chain's own generator number for number as the Python
path does, so a chain's draws do not depend on whether or where segments run: the
tests compare bit for bit against the Python path (the same tree, called once per
iteration), across segment lengths, serial and in processes, through an interrupt
and a resume, a guard that changes inside a segment (the iteration is handed back
to the Python path) and the spot checks of the model's program (a segment stops
where one is due). One test checks the draws against the exact posterior."""

import importlib

import numpy as np
import pytest

import stanlite as sl
from stanlite.samplers import adaptation, chain, nuts, nuts_jit

pytestmark = pytest.mark.skipif(not nuts_jit.available(),
                                reason="numba not installed or STANLITE_JIT=0")

_MU = np.array([1.0, -2.0, 0.5])
_SD = np.array([0.5, 2.0, 1.0])


class _Gauss(sl.Model):
    x = sl.param.vector(3)

    def log_prob(self, x):
        return sl.normal_lpdf(x, _MU, _SD)


class _Unit(sl.Model):
    """A parameter whose posterior straddles 0, where ``log_prob`` branches on its
    sign (a guard of the retaped program): trajectories keep crossing into the other
    program."""
    z = sl.param.real()

    def log_prob(self, z):
        if z > 0:                       # a decision on a value: each side its program
            return sl.normal_lpdf(z, 0.0, 1.0)
        return sl.normal_lpdf(-z, 0.0, 1.0)


def _python_only(monkeypatch):
    monkeypatch.setattr(nuts_jit, "segment_ready", lambda *a: False)


def _count_segments(monkeypatch):
    """Wrap nuts_jit.segment: the statuses of the segments run, in order."""
    seen = []
    real = nuts_jit.segment

    def counted(*args, **kw):
        seg = real(*args, **kw)
        if seg is not None:
            seen.append(seg.status)
        return seg
    monkeypatch.setattr(nuts_jit, "segment", counted)
    return seen


def _fresh(model, warmup=150, draws=150, seed=4, **kw):
    return chain.initialize(model, 0, np.random.SeedSequence(seed), num_warmup=warmup,
                            num_draws=draws, **kw)


def _same_chain(a, b):
    np.testing.assert_array_equal(np.array(a.draws), np.array(b.draws))
    for k in chain.STAT_NAMES:
        assert a.stats[k] == b.stats[k], k
        assert [type(v) for v in a.stats[k]] == [type(v) for v in b.stats[k]], k
    assert a.stepsize == b.stepsize and a.rng_state == b.rng_state
    np.testing.assert_array_equal(a.inv_metric, b.inv_metric)
    assert a.iteration == b.iteration


# ---- the kernel's adaptation arithmetic is the Python classes' ---------------------------
def test_dual_averaging_and_welford_in_the_kernel_equal_the_classes():
    rs = np.random.default_rng(1)
    da = adaptation.DualAveraging(delta=0.8)
    da.restart(0.3)
    ad, _, _ = nuts_jit._adaptation_arrays(da, adaptation.Welford(2), 2, 0.3)
    for a in np.concatenate([rs.uniform(0, 1, 200), [np.nan, np.inf, 1.5, 0.0]]):
        want = da.update(float(a))
        assert nuts_jit._da_update(ad, float(a)) == want
        assert (ad[nuts_jit._D_S_BAR], ad[nuts_jit._D_X_BAR]) == (da.s_bar, da.x_bar)
    for dense in (False, True):
        w = adaptation.Welford(3, dense=dense)
        ad, mean, m2 = nuts_jit._adaptation_arrays(da, w, 3, 0.3)
        for x in rs.normal(size=(50, 3)) * [1.0, 10.0, 0.01]:
            w.add(x)
            nuts_jit._welford_add(ad, mean, m2, x)
        np.testing.assert_array_equal(mean, w.mean)
        np.testing.assert_array_equal(m2.reshape(w.m2.shape), w.m2)
        assert ad[nuts_jit._D_WN] == w.n


def test_gradient_adaptation_in_the_kernel_equals_the_class():
    """nutpie's diagonal adaptation (adaptation.GradientAdaptation.update) and the
    kernel's (_grad_adapt) on the same non-Gaussian draws and gradients - with
    unused ones (divergent, not moved), non-finite gradients, a coordinate that
    never moves, the switches of both periods and the final window - give the
    same metrics, windows and counts, bit for bit."""
    rs = np.random.default_rng(7)
    dim, n_warm = 4, 200
    ga = adaptation.GradientAdaptation(dim, n_warm)
    q0 = rs.standard_t(3, dim)
    ga.inv = ga.start(q0, np.tanh(q0) * [1.0, 50.0, 1e-3, 0.0] - 0.1)
    ga.update(0, q0 + 1.0, np.tanh(q0 + 1.0) - 0.1)
    ga.update(1, q0 - 1.0, np.tanh(q0 - 1.0) - 0.1)
    assert ga.n_updates == 1
    ad = np.zeros(nuts_jit._N_AD)
    gw, inv = nuts_jit._grad_arrays(ga, ad)
    base = np.vstack([np.sqrt(inv), 0.5 * np.sqrt(inv)])
    for i in range(2, n_warm):
        q = rs.standard_t(3, dim) * [1.0, 0.1, 30.0, 1.0]
        q[3] = 0.25                                 # never moves: its scale is kept
        g = -np.sinh(q) / np.cosh(q) ** 2 * [1.0, 100.0, 1e-3, 1.0]
        if i % 17 == 0:
            g[1] = np.nan
        good = i % 11 != 0
        want = ga.update(i, q, g, good=good)
        got = nuts_jit._grad_adapt(ad, gw, inv, base, i, q, g, good)
        assert got == (want is not None), i
        if want is not None:
            np.testing.assert_array_equal(inv, want)
            np.testing.assert_array_equal(base[0], np.sqrt(want))
            np.testing.assert_array_equal(base[1], 0.5 * np.sqrt(want))
        if i < ga.final_start:
            assert (ad[nuts_jit._G_FN], ad[nuts_jit._G_BN]) == (ga.fg["q"].n, ga.bg["q"].n)
            for row, (w, key) in enumerate([(ga.fg, "q"), (ga.fg, "g"), (ga.bg, "q"),
                                            (ga.bg, "g")]):
                np.testing.assert_array_equal(gw[2 * row], w[key].mean)
                np.testing.assert_array_equal(gw[2 * row + 1], w[key].m2)
    assert ad[nuts_jit._G_UPDATES] == ga.n_updates > 100
    assert inv[3] == ga.inv[3] and ga.fg["q"].n == 0      # (the final window: cleared)


def _same_data(a, b):
    """Plain data (dicts, lists, arrays, numbers) equal, arrays bit for bit."""
    assert type(a) is type(b) or isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            _same_data(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same_data(x, y)
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


class _Heavy(sl.Model):
    """Student-t coordinates of different scales: a posterior whose gradient is not
    linear, so that nutpie's adaptation keeps moving the metric."""
    x = sl.param.vector(3)

    def log_prob(self, x):
        return sl.student_t_lpdf(x, 5.0, _MU, _SD)


# ---- the same chain as the Python path ----------------------------------------------------
def test_nutpie_adaptation_in_segments_gives_the_python_paths_chain(monkeypatch):
    """With adaptation="nutpie" the warmup runs in segments once the metric has
    changed the first time, the metric changing inside them: the chain - its draws,
    statistics, metric, step size and adaptation state - is the Python path's."""
    m = _Heavy()
    seen = []
    real = nuts_jit.segment

    def counted(*args, **kw):
        seg = real(*args, **kw)
        if seg is not None and kw.get("grad") is not None:
            seen.append(seg.n)
        return seg
    monkeypatch.setattr(nuts_jit, "segment", counted)
    kw = dict(metric="diag_e", adaptation="nutpie", save_warmup=True, warmup=300)
    fast = chain.run(m, _fresh(m, **kw))
    assert sum(seen) > 250                       # most of the warmup in the kernel
    monkeypatch.setattr(nuts_jit, "segment", real)
    _python_only(monkeypatch)
    slow = chain.run(_Heavy(), _fresh(_Heavy(), **kw))
    _same_chain(fast, slow)
    np.testing.assert_array_equal(np.array(fast.warmup_draws), np.array(slow.warmup_draws))
    assert fast.warmup_stats == slow.warmup_stats and fast.da == slow.da
    _same_data(fast.grad_adapt, slow.grad_adapt)
    assert len(set(np.array(fast.warmup_stats["stepsize__"]).tolist())) > 100



@pytest.mark.parametrize("metric", ["diag_e", "dense_e", "unit_e"])
def test_segments_give_the_python_paths_chain_bit_for_bit(metric, monkeypatch):
    m = _Gauss()
    seen = _count_segments(monkeypatch)
    fast = chain.run(m, _fresh(m, metric=metric, save_warmup=True))
    assert len(seen) >= 3 and all(s != nuts_jit.SEGMENT_HANDOFF for s in seen)
    _python_only(monkeypatch)
    slow = chain.run(_Gauss(), _fresh(_Gauss(), metric=metric, save_warmup=True))
    _same_chain(fast, slow)
    np.testing.assert_array_equal(np.array(fast.warmup_draws), np.array(slow.warmup_draws))
    assert fast.warmup_stats == slow.warmup_stats
    assert fast.da == slow.da


@pytest.mark.parametrize("lengths", [[1], [3, 1, 7], [1000]])
def test_draws_do_not_depend_on_where_segments_end(lengths, monkeypatch):
    m = _Gauss()
    ref = chain.run(m, _fresh(m, thin=3))
    it = iter(lengths * 1000)

    def next_length(live, n, elapsed, seconds):
        live.seg_len = next(it)
    monkeypatch.setattr(chain, "_next_length", next_length)
    _same_chain(chain.run(m, _fresh(m, thin=3)), ref)


def test_same_seed_same_draws_serial_and_in_processes(monkeypatch):
    m = _Gauss()
    seen = _count_segments(monkeypatch)
    a = m.sample(chains=2, draws=100, warmup=100, seed=5, progress=False, parallel=False)
    assert seen
    b = m.sample(chains=2, draws=100, warmup=100, seed=5, progress=False, parallel=True)
    np.testing.assert_array_equal(a["x"], b["x"])
    np.testing.assert_array_equal(a["stepsize__"], b["stepsize__"])


def test_draws_match_the_exact_posterior():
    fit = _Gauss().sample(chains=4, draws=1000, warmup=500, seed=11, progress=False)
    x = fit["x"].reshape(-1, 3)
    s = fit.summary()
    mcse = s.loc[["x[1]", "x[2]", "x[3]"], "mcse_mean"].to_numpy()
    assert np.all(np.abs(x.mean(axis=0) - _MU) < 4 * mcse)
    # the variance's MCSE: sd^2 sqrt(2 / ESS), with the bulk ESS
    ess = s.loc[["x[1]", "x[2]", "x[3]"], "ess_bulk"].to_numpy()
    np.testing.assert_array_less(np.abs(x.var(axis=0) / _SD ** 2 - 1), 4 * np.sqrt(2 / ess))


# ---- handed back, checked, interrupted ---------------------------------------------------
def test_a_guard_that_changes_inside_a_segment_hands_the_iteration_back(monkeypatch):
    m = _Unit()
    seen = _count_segments(monkeypatch)
    fast = chain.run(m, _fresh(m))
    assert seen.count(nuts_jit.SEGMENT_HANDOFF) >= 5     # crossings into the other sign
    assert m.compiled_gradient().recordings == 2
    _python_only(monkeypatch)
    _same_chain(fast, chain.run(_Unit(), _fresh(_Unit())))
    assert abs(np.mean(fast.draws)) < 0.3         # (z: symmetric about 0)


def test_segments_back_off_where_most_iterations_are_handed_back(monkeypatch):
    # _Unit's trajectories cross the guard at most iterations: a segment tried at
    # every iteration was discarded (or rerun) at most of them, 2.5x slower than the
    # Python path alone; after a hand-back the next try waits 1, 3, 7, ... iterations
    m = _Unit()
    seen = _count_segments(monkeypatch)
    fast = chain.run(m, _fresh(m, warmup=500, draws=1500))
    assert 5 <= seen.count(nuts_jit.SEGMENT_HANDOFF) < 0.1 * 2000
    _python_only(monkeypatch)
    _same_chain(fast, chain.run(_Unit(), _fresh(_Unit(), warmup=500, draws=1500)))


class _Scale(sl.Model):
    """An unconstrained scale: ``sigma <= 0`` is outside the density's domain (the
    interpreter hands the point back; the model raises DomainError: a rejection)."""
    y = sl.data.vector(5)
    mu = sl.param.real()
    sigma = sl.param.real()

    def log_prob(self, mu, sigma):
        return sl.normal_lpdf(mu, 0, 3) + sl.normal_lpdf(self.y, mu, sigma)


def test_rejected_proposals_inside_a_segment_are_counted_as_by_the_python_path(
        monkeypatch):
    y = np.array([0.4, -1.1, 2.0, 0.3, 0.9])
    m = _Scale(y=y)
    seen = _count_segments(monkeypatch)
    fast = chain.run(m, _fresh(m, init={"mu": 0.2, "sigma": 1.3}))
    assert nuts_jit.SEGMENT_HANDOFF in seen and nuts_jit.SEGMENT_DONE in seen
    assert fast.n_rejected > 0
    _python_only(monkeypatch)
    m = _Scale(y=y)
    slow = chain.run(m, _fresh(m, init={"mu": 0.2, "sigma": 1.3}))
    _same_chain(fast, slow)
    assert (fast.n_rejected, fast.rejections, fast.rejected_draws) == \
        (slow.n_rejected, slow.rejections, slow.rejected_draws)


def test_a_spot_check_due_inside_a_segment_is_made_there(monkeypatch):
    # the doubling schedule alone (no allowance by time): checks after replays 2, 4,
    # 8, ...; a segment stops at the iteration whose evaluations reach one, and the
    # check is made at its sample - where the Python path makes it
    _compile = importlib.import_module("stanlite.autodiff.compile")
    monkeypatch.setattr(_compile._Retaped, "check_allowance", 1e9)
    checks = []
    real = _compile._Retaped._checked

    def checked(self, x, r):
        checks.append((self._replays, np.array(x, copy=True)))
        return real(self, x, r)
    monkeypatch.setattr(_compile._Retaped, "_checked", checked)
    seen = _count_segments(monkeypatch)
    m = _Gauss()
    fast = chain.run(m, _fresh(m, warmup=400, draws=400))
    fast_checks, checks[:] = list(checks), []
    assert seen.count(nuts_jit.SEGMENT_CHECK) >= 3
    assert fast_checks[-1][0] >= 1024               # checks inside long segments
    _python_only(monkeypatch)
    m = _Gauss()
    slow = chain.run(m, _fresh(m, warmup=400, draws=400))
    _same_chain(fast, slow)
    assert [n for n, _ in fast_checks] == [n for n, _ in checks]
    for (_, a), (_, b) in zip(fast_checks, checks):
        np.testing.assert_array_equal(a, b)


class _Stop(Exception):
    pass


@pytest.mark.parametrize("when", ["after_commit", "before_commit"])
def test_interrupted_between_segments_keeps_draws_and_resumes_exactly(when, monkeypatch):
    m = _Gauss()
    ref = chain.run(m, _fresh(m, save_warmup=True))
    st = _fresh(m, save_warmup=True)
    calls = [0]
    if when == "after_commit":
        def tick(state, n_div):           # the runner's stop event, as a callback
            calls[0] += 1
            if calls[0] == 6:
                raise KeyboardInterrupt
        tick.every = 0.0
        with pytest.raises(KeyboardInterrupt):
            chain.run(m, st, on_iteration=tick)
    else:
        real = nuts_jit.segment

        def interrupted(*args, **kw):     # a Ctrl-C as the compiled call returns
            calls[0] += 1
            seg = real(*args, **kw)
            if calls[0] == 6:
                raise KeyboardInterrupt
            return seg
        monkeypatch.setattr(nuts_jit, "segment", interrupted)
        with pytest.raises(KeyboardInterrupt):
            chain.run(m, st)
        monkeypatch.setattr(nuts_jit, "segment", real)
    assert 0 < st.iteration < 300
    assert len(st.warmup_draws) + len(st.draws) == st.iteration
    assert all(len(v) == len(st.warmup_draws) for v in st.warmup_stats.values())
    chain.run(m, st)                      # resumed: the uninterrupted run's chain
    _same_chain(st, ref)
    np.testing.assert_array_equal(np.array(st.warmup_draws), np.array(ref.warmup_draws))


@pytest.mark.parametrize("at", [37, 230])
def test_ctrl_c_inside_a_python_iterations_commit_leaves_a_whole_state(at, monkeypatch):
    # the runner's handler raises KeyboardInterrupt wherever the chain is (serial
    # runs): here as the Python path's commit is half done (its draw appended, the
    # state's other fields not yet updated); the state must be before the iteration
    y = np.array([0.4, -1.1, 2.0, 0.3, 0.9])
    m = _Scale(y=y)
    _python_only(monkeypatch)
    kw = dict(init={"mu": 0.2, "sigma": 1.3}, save_warmup=True, thin=2)
    ref = chain.run(m, _fresh(m, **kw))
    calls, real = [0], chain._live_fields

    def live_fields(*a):
        calls[0] += 1
        if calls[0] == at:
            raise KeyboardInterrupt
        return real(*a)
    monkeypatch.setattr(chain, "_live_fields", live_fields)
    st = _fresh(m, **kw)
    with pytest.raises(KeyboardInterrupt):
        chain.run(m, st)
    assert st.iteration == at - 1
    monkeypatch.setattr(chain, "_live_fields", real)
    chain.run(m, st)
    _same_chain(st, ref)
    np.testing.assert_array_equal(np.array(st.warmup_draws), np.array(ref.warmup_draws))
    assert (st.n_rejected, st.rejections, st.rejected_draws) == \
        (ref.n_rejected, ref.rejections, ref.rejected_draws)


def test_stop_event_in_a_pool_keeps_draws_and_resume_is_bit_identical(monkeypatch):
    from stanlite.samplers import runner
    monkeypatch.setattr(runner, "_STOP_POLL", 1e-4)     # (segments of ~0.1 ms)

    class _StopAt:
        def __init__(self, at):
            self.looks, self.at = 0, at

        def is_set(self):
            self.looks += 1
            return self.looks >= self.at
    m = _Gauss()
    ref = chain.run(m, _fresh(m))
    st = runner._run_one(m, _fresh(m), None, 0.1, stop=_StopAt(6))
    assert st.interrupted and 0 < st.iteration < 300
    chain.run(m, st)
    _same_chain(st, ref)
