"""The chain's state is a declared structure (stanlite/chain_state.py): a chain writes
only its fields, whatever path its iterations take (Python transitions, compiled
segments, nutpie's adaptation, the Riemannian kernel, the runner), and a saved state
round-trips, a key it does not declare (an older version's) included."""

import copy
import dataclasses
import pickle

import numpy as np
import pytest

import stanlite as sl
from stanlite.chain_state import ChainState
from stanlite.samplers import chain as _chain
from stanlite.samplers import nuts

FIELDS = {f.name for f in dataclasses.fields(ChainState)}


class _Normal(sl.Model):
    mu = sl.param.real()
    sigma = sl.param.real(lower=0)

    def log_prob(self, mu, sigma):
        return sl.normal_lpdf(mu, 0, 1) + sl.lognormal_lpdf(sigma, 0, 1)


@pytest.mark.parametrize("options", [
    {}, {"sampler": "hmc"}, {"metric": "dense_e"}, {"adaptation": "nutpie"},
    {"sampler": "rhmc"}, {"python": True}, {"save_warmup": True, "thin": 3}])
def test_a_chain_writes_only_declared_fields(options, monkeypatch):
    options = dict(options)
    if options.pop("python", False):
        monkeypatch.setattr(nuts, "use_jit", False)
    m = _Normal()
    st = _chain.initialize(m, 0, np.random.SeedSequence(3), num_warmup=60, num_draws=40,
                           **options)
    assert set(vars(st)) == FIELDS
    _chain.run(m, st)
    assert st.done and set(vars(st)) == FIELDS
    kept = 40 // options.get("thin", 1) + (40 % options.get("thin", 1) > 0)
    assert len(st.draws) == kept and all(len(v) == kept for v in st.stats.values())


def test_the_runner_writes_only_declared_fields():
    fit = _Normal().sample(chains=2, warmup=30, draws=20, seed=1, progress=False,
                           parallel=False)
    for st in fit.chain_states:
        assert set(vars(st)) == FIELDS and st.interrupted is False and st.elapsed > 0


def test_a_state_round_trips_with_an_undeclared_key():
    m = _Normal()
    st = _chain.initialize(m, 1, np.random.SeedSequence(3), num_warmup=20, num_draws=20)
    _chain.run(m, st, n_iterations=25)
    d = st.to_dict()
    d["gq_seed"] = None                 # a field older versions wrote
    again = ChainState.from_dict(pickle.loads(pickle.dumps(d)))
    assert again.to_dict().keys() == d.keys() and again.gq_seed is None
    _chain.run(m, st)
    _chain.run(m, again)
    assert np.array_equal(np.array(st.draws), np.array(again.draws))
    assert st.stats == again.stats


def test_fields_missing_from_an_old_state_mean_not_recorded():
    st = ChainState(chain_id=0, iteration=0, num_warmup=0, num_draws=0)
    assert (st.rejected_draws, st.n_rejected, st.grad_adapt, st.adaptation,
            st.interrupted) == (None, None, None, "stan", False)
    assert repr(copy.copy(st)) == "ChainState(chain_id=0, iteration=0 of 0 + 0, " \
        "sampler=None)"
