"""The per-iteration callback of a chain run by samplers/runner.py: it looks at the
stop event (a multiprocessing Event costs ~1 us a look) at most every
``_STOP_POLL`` seconds, still answers a stop after a committed iteration, and a
chain with nothing to report or watch gets no callback at all."""

import numpy as np

import stanlite as sl
from stanlite.samplers import chain as _chain
from stanlite.samplers import runner


class _Normal(sl.Model):
    mu = sl.param.real()

    def log_prob(self, mu):
        return sl.normal_lpdf(mu, 0, 1)


class _CountingStop:
    """A stop event that is set from its ``at``-th look on."""

    def __init__(self, at=None):
        self.looks = 0
        self.at = at

    def is_set(self):
        self.looks += 1
        return self.at is not None and self.looks >= self.at


def _state(model, iterations=60):
    return _chain.initialize(model, 0, np.random.SeedSequence(5), num_warmup=iterations // 2,
                             num_draws=iterations // 2)


def test_stop_event_is_looked_at_once_per_poll_interval(monkeypatch):
    monkeypatch.setattr(runner, "_STOP_POLL", 1e9)
    m = _Normal()
    stop = _CountingStop()
    st = runner._run_one(m, _state(m), None, 0.1, stop=stop)
    assert st.iteration == 60 and not st.interrupted
    # before the chain starts, after its first iteration, after its last
    assert stop.looks == 3


def test_a_set_stop_event_still_stops_the_chain(monkeypatch):
    monkeypatch.setattr(runner, "_STOP_POLL", 0.0)
    m = _Normal()
    stop = _CountingStop(at=5)          # set at the 4th look after the start
    st = runner._run_one(m, _state(m), None, 0.1, stop=stop)
    assert st.interrupted and st.iteration == 4
    assert len(st.warmup_stats["lp__"]) == 0 and st.stepsize > 0


def test_no_callback_without_progress_or_stop(monkeypatch):
    seen = []
    run = _chain.run
    monkeypatch.setattr(_chain, "run", lambda model, state, on_iteration=None, **kw:
                        seen.append(on_iteration) or run(model, state, on_iteration,
                                                         **kw))
    m = _Normal()
    m.sample(chains=1, warmup=20, draws=20, seed=1, progress=False, parallel=False)
    assert seen == [None]


def test_chain_state_ships_its_draws_as_arrays_and_arrives_whole():
    # a worker's result pickles its draws as one array per list (thousands of small
    # arrays cost ~2.5 us each to pickle and again to unpickle), and arrives as lists
    # of the same numbers, the rest of the state untouched
    import pickle
    m = _Normal()
    st = _state(m, 40)
    st.save_warmup = True
    st = runner._run_one(m, st, None, 0.1)
    assert len(st.draws) == 20 and len(st.warmup_draws) == 20
    shipped = runner._Shipped(st)
    sent = pickle.dumps(shipped)
    assert pickle.dumps(st.draws[0]) not in sent      # not array by array
    got = runner._received(pickle.loads(sent))
    assert type(got) is type(st) and got is not st
    for k in ("draws", "warmup_draws"):
        assert type(getattr(got, k)) is list
        np.testing.assert_array_equal(np.array(getattr(got, k)), np.array(getattr(st, k)))
    assert got.to_dict().keys() == st.to_dict().keys()
    for k, v in st.to_dict().items():
        if k not in ("draws", "warmup_draws", "stats", "warmup_stats", "q", "grad",
                     "inv_metric", "welford", "rng_state", "da"):
            assert getattr(got, k) == v, k
    assert got.stats == st.stats and got.rng_state == st.rng_state
    assert st.draws is not None                       # the worker's own state unchanged
    assert runner._received(pickle.loads(pickle.dumps(runner._Shipped(None)))) is None
