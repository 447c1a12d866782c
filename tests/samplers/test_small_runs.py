"""Small parallel runs stay in this process (samplers/runner.py ``_small_run``): the
first chain runs here for a probe of CPU time, the run's cost is estimated from it,
and the chains continue here when worker processes would save less than they cost
(``STANLITE_POOL_COST``), else in the pool (the first chain continues there from
where the probe left it). Checked: both branches are taken as the estimate says,
their draws are the serial run's bit for bit, a Ctrl-C (a KeyboardInterrupt in the
model) in the probe or after it keeps the draws and resumes to the uninterrupted
run, and the estimate's arithmetic. tests/conftest.py sets the cost to 0 for every
other test (processes always, as those tests expect)."""

import itertools

import numpy as np
import pytest

import stanlite as sl
from stanlite.samplers import runner

from testkit import count_calls


class _Normal(sl.Model):
    y = sl.data.vector(3)
    mu = sl.param.real()
    tau = sl.param.real(lower=0)

    def log_prob(self, mu, tau):
        return sl.normal_lpdf(mu, 0, 1) + sl.normal_lpdf(tau, 0, 1) + \
            sl.normal_lpdf(self.y, mu, tau + 0.5)


KW = dict(chains=3, warmup=60, draws=40, seed=11, progress=False, save_warmup=True)


def _model():
    return _Normal(y=np.array([0.3, -1.2, 0.8]))


def _same(a, b):
    np.testing.assert_array_equal(a.unconstrained_draws, b.unconstrained_draws)
    np.testing.assert_array_equal(a.warmup("mu"), b.warmup("mu"))
    np.testing.assert_array_equal(a["mu"], b["mu"])
    np.testing.assert_array_equal(a["stepsize__"], b["stepsize__"])


@pytest.fixture
def pools(monkeypatch):
    """The calls to the runner's pool (a list that grows by one per pool run)."""
    return count_calls(monkeypatch, runner, "_run_pool")


def _fake_clocks(monkeypatch, tick):
    """Clocks advancing ``tick`` seconds at every look (both of them): the probe
    ends after a known number of the chain's looks at it."""
    now = itertools.count()
    monkeypatch.setattr(runner, "_clocks", lambda: (lambda: next(now) * tick,
                                                    lambda: 0.0))


def test_a_small_run_stays_in_this_process(monkeypatch, pools):
    ref = _model().sample(parallel=False, **KW)
    monkeypatch.setenv(runner.POOL_COST_ENV, "1e9")
    fit = _model().sample(max_workers=2, **KW)
    assert pools == []
    _same(fit, ref)


def test_a_large_run_goes_to_the_pool_the_first_chain_continuing_there(monkeypatch,
                                                                       pools):
    ref = _model().sample(parallel=False, **KW)
    monkeypatch.setenv(runner.POOL_COST_ENV, "1e-9")
    probed = []
    real = runner._run_here

    def spy(model, states, c, *a, **k):
        out = real(model, states, c, *a, **k)
        probed.append(states[c].iteration)
        return out
    monkeypatch.setattr(runner, "_run_here", spy)
    monkeypatch.setattr(runner, "PROBE_SECONDS", 0.03)
    monkeypatch.setattr(runner, "PROBE_SURE", 1.0)      # (no early end)
    _fake_clocks(monkeypatch, 0.01)             # the probe: 3 looks
    fit = _model().sample(max_workers=2, **KW)
    assert pools == [1]
    assert 0 < probed[0] < KW["warmup"] + KW["draws"]     # chain 0 started here ...
    _same(fit, ref)                                       # ... and continued there


def test_a_chain_that_never_iterates_in_the_probe_means_processes(monkeypatch, pools):
    # its initialisation used the whole probe: no estimate, the pool
    monkeypatch.setenv(runner.POOL_COST_ENV, "1e9")
    monkeypatch.setattr(runner, "PROBE_SECONDS", -1.0)
    ref = _model().sample(parallel=False, **KW)
    _same(_model().sample(max_workers=2, **KW), ref)
    assert pools == [1]


def test_a_probe_sure_of_a_large_run_ends_early(monkeypatch, pools):
    # past PROBE_SURE of CPU time with an estimate CLEAR times past the limit (here
    # before any iteration: infinite), the probe ends and the pool takes over
    ref = _model().sample(parallel=False, **KW)
    monkeypatch.setenv(runner.POOL_COST_ENV, "1e-9")
    monkeypatch.setattr(runner, "PROBE_SECONDS", 1e9)
    monkeypatch.setattr(runner, "PROBE_WALL", 1e9)
    _fake_clocks(monkeypatch, 0.01)
    looks = []
    real = runner._run_here
    monkeypatch.setattr(runner, "_run_here", lambda model, states, c, *a, **k: (
        real(model, states, c, *a, **k), looks.append(states[c].iteration)))
    _same(_model().sample(max_workers=2, **KW), ref)
    assert looks == [0] and pools == [1]


def test_pool_cost_zero_skips_the_probe(monkeypatch, pools):
    monkeypatch.setenv(runner.POOL_COST_ENV, "0")
    monkeypatch.setattr(runner, "_run_here", lambda *a, **k: pytest.fail("probed"))
    _model().sample(max_workers=2, **KW)
    assert pools == [1]


@pytest.mark.parametrize("bad", ["-1", "fast", "nan"])
def test_a_bad_pool_cost_is_named(monkeypatch, bad):
    monkeypatch.setenv(runner.POOL_COST_ENV, bad)
    with pytest.raises(ValueError, match="STANLITE_POOL_COST"):
        _model().sample(max_workers=2, **KW)


def test_the_estimate():
    # workers save seconds * (1 - 1/workers); in this process when that is <= cost
    assert runner._in_process(0.19, 2, 0.1) and not runner._in_process(0.21, 2, 0.1)
    assert not runner._in_process(0.15, 4, 0.1)            # 4 workers save 0.11
    assert runner._in_process(1e6, 1, 0.1)                 # one worker saves nothing


class _Interrupted(sl.Model):
    """A KeyboardInterrupt (what the runner's Ctrl-C handler raises in a chain
    running in this process) at its ``limit``-th evaluation, once."""
    mu = sl.param.real()
    compile = False                  # every evaluation runs log_prob
    calls = [0]
    limit = [None]

    def log_prob(self, mu):
        _Interrupted.calls[0] += 1
        if self.limit[0] is not None and self.calls[0] > self.limit[0]:
            _Interrupted.limit[0] = None
            raise KeyboardInterrupt
        return sl.normal_lpdf(mu, 0.5, 1.0)


@pytest.mark.parametrize("where", ["probe", "after"])
def test_ctrl_c_keeps_the_draws_and_resumes_to_the_uninterrupted_run(monkeypatch,
                                                                     pools, where):
    kw = dict(chains=3, warmup=30, draws=30, seed=5, progress=False, save_warmup=True)
    m = _Interrupted()
    ref = m.sample(parallel=False, **kw)
    monkeypatch.setenv(runner.POOL_COST_ENV, "1e9")
    # "probe": chain 0 is interrupted in the probe; "after": chain 1, in this
    # process after the probe chose it
    _Interrupted.calls[0] = 0
    _Interrupted.limit[0] = 100 if where == "probe" else None
    if where == "after":
        real = runner._run_here

        def arm(model, states, c, *a, **k):
            if c == 1 and states[1] is None:    # 20 evaluations into chain 1
                _Interrupted.calls[0] = 0
                _Interrupted.limit[0] = 20
            return real(model, states, c, *a, **k)
        monkeypatch.setattr(runner, "_run_here", arm)
    with pytest.warns(RuntimeWarning, match="interrupted"):
        part = m.sample(max_workers=2, **kw)
    assert pools == [] and part.interrupted
    its = [s.iteration for s in part.chain_states]
    assert len(its) == 3 and 0 < sum(its) < 3 * 60
    if where == "probe":
        assert 0 < its[0] < 60 and its[1:] == [0, 0]    # nothing else started
    else:
        assert its[0] == 60 and 0 < its[1] < 60 and its[2] == 0
    # resumed with the policy too: the probe runs the first unfinished chain (chain 1
    # when chain 0 is done), and the run stays here
    done = m.sample(resume_from=part, progress=False, max_workers=2)
    assert pools == []
    _same(done, ref)
