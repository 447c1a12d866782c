"""The runner's own process pool around short chains (samplers/runner.py): the fixed
costs that compiled NUTS segments left visible. Once every chain is back, the pool's
workers exit on their own (the run does not wait for their teardown) and are joined
before the next pool forks; the BLAS controller is made once per process."""

import multiprocessing as mp

import numpy as np
import pytest

import stanlite as sl
from stanlite.samplers import runner

from testkit import count_calls


class _Gauss(sl.Model):
    x = sl.param.vector(2)

    def log_prob(self, x):
        return sl.normal_lpdf(x, 0.0, 1.0)


@pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="no fork here")
def test_a_finished_pool_is_left_to_exit_and_joined_before_the_next(monkeypatch):
    monkeypatch.setattr(runner, "_LINGERING", [])
    monkeypatch.setenv(runner.START_METHOD_ENV, "fork")
    m = _Gauss()
    a = m.sample(chains=2, draws=20, warmup=20, seed=3, progress=False)
    assert len(runner._LINGERING) == 1
    first = runner._LINGERING[0]              # the pool's thread, which joins its workers
    b = m.sample(chains=2, draws=20, warmup=20, seed=3, progress=False)
    assert runner._LINGERING and runner._LINGERING[0] is not first
    assert not first.is_alive()               # joined before the second pool forked
    np.testing.assert_array_equal(a["x"], b["x"])
    runner._reap_pools()
    assert runner._LINGERING == [] and mp.active_children() == []


def test_the_blas_controller_is_made_once_per_process(monkeypatch):
    import threadpoolctl
    made = count_calls(monkeypatch, threadpoolctl, "ThreadpoolController")
    monkeypatch.setattr(runner, "_BLAS", [None, -1])
    for _ in range(3):
        with runner.blas_limit(1):
            pass
    assert len(made) == 1


def test_the_blas_controller_is_made_again_only_after_a_compiled_module(monkeypatch):
    # a run's first imports are Python modules: no new controller (finding the
    # libraries again cost 3-16 ms a run); an extension module may bring a BLAS
    import sys
    import threadpoolctl
    import types
    made = count_calls(monkeypatch, threadpoolctl, "ThreadpoolController")
    monkeypatch.setattr(runner, "_BLAS", [None, -1])
    runner._blas_controller()
    py = types.ModuleType("_stanlite_test_pure")
    py.__file__ = "/somewhere/_stanlite_test_pure.py"
    monkeypatch.setitem(sys.modules, py.__name__, py)
    runner._blas_controller()
    assert len(made) == 1
    ext = types.ModuleType("_stanlite_test_ext")
    ext.__file__ = "/somewhere/_stanlite_test_ext.cpython-311-x86_64-linux-gnu.so"
    monkeypatch.setitem(sys.modules, ext.__name__, ext)
    runner._blas_controller()
    assert len(made) == 2
