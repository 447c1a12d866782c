"""Chains of a small parallel run in threads of this process (samplers/runner.py
``_run_threads``, chosen by ``_small_run``'s probe through ``_where``).

Compiled NUTS segments release the GIL; everything else a chain does runs behind
one gate (samplers/nuts_jit.py ``gate``), so the model's shared state - its retaped
programs, guards, re-recordings and spot checks, its eager tape, the state of a
``log_prob`` written in Python - is used one chain at a time. Checked: the draws in
threads equal the serial run's bit for bit for a compiled model (eight schools),
one whose guards re-record and hand iterations back to Python, one whose
retaped gradient falls back to the eager tape and one never retaped; the segments
really overlap (two threads inside compiled code at once); the probe picks threads
for a compiled run and one after another for a model without compiled segments; a
KeyboardInterrupt raised in a chain keeps the draws and resumes to the
uninterrupted run; an error in a chain stops the others and is raised; the rule's
arithmetic. Real SIGINTs with threads: tests/samplers/test_runner_faults.py."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff.var import value_of
from stanlite.samplers import nuts_jit, runner

from testkit import count_calls, killed_on_exit, wait_ok

pytestmark = pytest.mark.skipif(not nuts_jit.available(),
                                reason="numba not installed or STANLITE_JIT=0")


class _Branch(sl.Model):
    """A guard on a value (each sign of ``z`` its own recorded program: iterations
    handed back to Python, re-recordings, spot checks of both programs)."""
    z = sl.param.real()
    w = sl.param.vector(2)

    def log_prob(self, z, w):
        lp = sl.normal_lpdf(w, z, 1.0)
        if z > 0:
            return lp + sl.normal_lpdf(z, 0.0, 1.0)
        return lp + sl.normal_lpdf(-z, 0.0, 1.0)


class _Escapes(sl.Model):
    """A value leaves the tape (``value_of``): the retaped gradient falls back to the
    eager tape, with one CompileWarning; no compiled segment runs."""
    mu = sl.param.vector(2)

    def log_prob(self, mu):
        shift = float(np.sum(value_of(mu))) * 0.0
        return sl.normal_lpdf(mu, shift + 0.5, 1.5)


class _Counted(sl.Model):
    """Never retaped (every evaluation runs ``log_prob``), with state written at each
    call: a class-level counter, as a user's model might keep."""
    mu = sl.param.real()
    compile = False
    calls = [0]

    def log_prob(self, mu):
        _Counted.calls[0] += 1
        return sl.normal_lpdf(mu, 0.3, 0.7)


def _eight_schools():
    return sl.models.get("eight_schools_noncentered")


MODELS = {"eight_schools": _eight_schools, "guards": _Branch, "fallback": _Escapes,
          "python": _Counted}
KW = dict(chains=4, warmup=300, draws=300, seed=42, progress=False, save_warmup=True)


def _same(a, b):
    np.testing.assert_array_equal(a.unconstrained_draws, b.unconstrained_draws)
    for k in ("stepsize__", "n_leapfrog__", "lp__", "energy__", "accept_stat__"):
        np.testing.assert_array_equal(a[k], b[k])
    for sa, sb in zip(a.chain_states, b.chain_states):
        np.testing.assert_array_equal(np.array(sa.warmup_draws), np.array(sb.warmup_draws))
        assert sa.rng_state == sb.rng_state


@pytest.fixture
def where(monkeypatch):
    """Force the runner's choice for small runs (a list: what the probe measured)."""
    monkeypatch.setenv(runner.POOL_COST_ENV, "1e9")
    seen = []

    def force(choice):
        real = runner._where

        def chosen(seconds, compiled, workers, cost):
            seen.append((seconds, compiled, real(seconds, compiled, workers, cost)))
            return choice
        monkeypatch.setattr(runner, "_where", chosen)
        return seen
    return force


@pytest.fixture
def threaded(monkeypatch):
    """The runs that went to threads (a list growing by one per run)."""
    return count_calls(monkeypatch, runner, "_run_threads")


@pytest.mark.parametrize("name", list(MODELS))
def test_threads_give_the_serial_draws_bit_for_bit(name, where, threaded):
    make = MODELS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sl.CompileWarning)
        ref = make().sample(parallel=False, **KW)
        where(runner.THREADS)
        fit = make().sample(max_workers=2, **KW)
    assert threaded == [1]
    _same(fit, ref)


def test_chains_in_threads_overlap_inside_compiled_segments(monkeypatch, where):
    # two threads inside nuts_jit._segment at the same moment: the gate is let go
    inside, most = [0], [0]
    lock = threading.Lock()
    real = nuts_jit._segment

    def counted(*a):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        try:
            time.sleep(0.002)       # (the GIL let go: the other chain gets a chance)
            return real(*a)
        finally:
            with lock:
                inside[0] -= 1
    monkeypatch.setattr(nuts_jit, "_segment", counted)
    where(runner.THREADS)
    _eight_schools().sample(max_workers=2, **KW)
    assert most[0] == 2


def test_the_probe_picks_threads_for_compiled_segments(monkeypatch, threaded):
    monkeypatch.setenv(runner.POOL_COST_ENV, "1e9")      # (processes never pay)
    seen = []
    real = runner._where
    monkeypatch.setattr(runner, "_where", lambda *a: seen.append(a) or real(*a))
    kw = {**KW, "warmup": 1000, "draws": 1000}
    ref = _eight_schools().sample(parallel=False, **kw)
    fit = _eight_schools().sample(max_workers=2, **kw)
    assert threaded == [1]
    # the share of the probe's CPU time in compiled segments (~0.4-0.85: the probe's
    # chain also initialises, searches step sizes and checks the program's first
    # replays against the eager tape, in Python)
    assert 0.1 < seen[-1][1] <= 1.0
    _same(fit, ref)


def test_a_model_without_compiled_segments_runs_one_chain_after_another(monkeypatch,
                                                                        threaded):
    monkeypatch.setenv(runner.POOL_COST_ENV, "1e9")
    seen = []
    real = runner._where
    monkeypatch.setattr(runner, "_where", lambda *a: seen.append(a) or real(*a))
    ref = _Counted().sample(parallel=False, **KW)
    fit = _Counted().sample(max_workers=2, **KW)
    assert threaded == [] and seen[-1][1] == 0.0
    _same(fit, ref)


def test_the_rule():
    # threads save the compiled share of what processes would, at THREAD_COST; they
    # win where processes would save less than their cost more than threads do
    assert runner._where(0.1, 0.9, 2, 0.15) == runner.THREADS
    assert runner._where(0.1, 0.0, 2, 0.15) == runner.SERIAL      # Python gradients
    assert runner._where(0.005, 0.9, 2, 0.15) == runner.SERIAL    # too small for threads
    assert runner._where(0.1, 0.9, 1, 0.15) == runner.SERIAL      # one core: nothing
    assert runner._where(5.0, 0.9, 2, 0.15) is None               # processes save more
    assert runner._where(5.0, 0.99, 2, 0.15) == runner.THREADS    # ... 0.025 s more only
    assert runner._where(5.0, 0.0, 2, 0.15) is None
    assert runner._where(float("inf"), 0.9, 2, 0.15) is None     # no estimate


class _RaisesAt(sl.Model):
    """Raises ``error`` once, at its ``limit``-th evaluation (KeyboardInterrupt: what
    Ctrl-C's handler raises)."""
    mu = sl.param.real()
    compile = False
    calls = [0]
    limit = [None]
    error = [KeyboardInterrupt]

    def log_prob(self, mu):
        _RaisesAt.calls[0] += 1
        if self.limit[0] is not None and self.calls[0] > self.limit[0]:
            _RaisesAt.limit[0] = None
            raise self.error[0]("chain failed")
        return sl.normal_lpdf(mu, -0.2, 1.3)


def _arm_in_threads(monkeypatch, cls, evaluations):
    """``cls`` raises at its ``evaluations``-th evaluation counted from the start of
    the threads (after the probe)."""
    real = runner._run_threads

    def arm(*a, **k):
        cls.calls[0] = 0
        cls.limit[0] = evaluations
        return real(*a, **k)
    monkeypatch.setattr(runner, "_run_threads", arm)


def test_a_keyboard_interrupt_in_a_thread_keeps_the_draws_and_resumes(monkeypatch,
                                                                      where):
    kw = dict(chains=3, warmup=300, draws=300, seed=8, progress=False, save_warmup=True)
    m = _RaisesAt()
    _RaisesAt.limit[0] = None     # (KeyboardInterrupt)
    ref = m.sample(parallel=False, **kw)
    where(runner.THREADS)
    _arm_in_threads(monkeypatch, _RaisesAt, 200)
    with pytest.warns(RuntimeWarning, match="interrupted"):
        part = m.sample(max_workers=2, **kw)
    assert part.interrupted and _RaisesAt.limit[0] is None       # it was raised
    its = [s.iteration for s in part.chain_states]
    assert len(its) == 3 and 0 < sum(its) < 3 * 600, its
    assert its[2] == 0                  # never started (the gate: one after another)
    monkeypatch.undo()                  # the resume: as the runner chooses
    done = m.sample(resume_from=part, progress=False, max_workers=2)
    _same(done, ref)


class _Boom(Exception):
    pass


def test_a_failing_chain_stops_the_others_and_its_error_is_raised(where, monkeypatch):
    finished = []
    real = runner._run_one

    def spy(model, state, *a, **k):
        out = real(model, state, *a, **k)
        finished.append(state.iteration)
        return out
    monkeypatch.setattr(runner, "_run_one", spy)
    where(runner.THREADS)
    _arm_in_threads(monkeypatch, _RaisesAt, 300)
    monkeypatch.setattr(_RaisesAt, "error", [_Boom])
    kw = dict(chains=4, warmup=400, draws=400, seed=3, progress=False)
    try:
        with pytest.raises(_Boom, match="chain failed"):
            _RaisesAt().sample(max_workers=2, **kw)
    finally:
        _RaisesAt.limit[0] = None
    # the chains not started when it failed never ran (told to stop)
    assert len(finished) <= 2 and all(i < 800 for i in finished[1:]), finished
    assert not any(t.name.startswith("stanlite-chain") for t in threading.enumerate())


# ---- a real SIGINT while chains run in threads -------------------------------------------
SCRIPT = '''
import json, sys, time, warnings
import stanlite as sl
from stanlite.samplers import runner
runner._where = lambda *a: runner.THREADS          # (long chains: forced)
real, back = runner._run_threads, []

def run_threads(*a, **k):
    print("THREADS", flush=True)
    real(*a, **k)
    back.append(time.time())
runner._run_threads = run_threads
m = sl.models.get("eight_schools_noncentered")
m.sample(chains=2, warmup=20, draws=20, progress=False)    # (kernels loaded)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    fit = m.sample(chains=4, warmup=200, draws=2_000_000, seed=4, progress=False,
                   max_workers=2)
json.dump(dict(t_back=back[-1], interrupted=fit.interrupted,
               iterations=[s.iteration for s in fit.chain_states],
               warnings=[str(w.message) for w in caught]), open(sys.argv[1], "w"))
'''


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_stops_chains_in_threads_and_keeps_their_draws(tmp_path):
    script, out = tmp_path / "threads.py", tmp_path / "report.json"
    script.write_text(SCRIPT)
    env = {**os.environ, runner.POOL_COST_ENV: "1e9"}
    p = subprocess.Popen([sys.executable, str(script), str(out)], env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    with killed_on_exit(p):
        for _ in range(2):              # the warm-up run's threads, then the run's
            assert p.stdout.readline().strip() == "THREADS", p.communicate()[1][-2000:]
        time.sleep(1.0)
        t_signal = time.time()
        p.send_signal(signal.SIGINT)
        _, err = wait_ok(p)
    r = json.loads(out.read_text())
    assert r["interrupted"]
    its = r["iterations"]
    # chains 0 and 1 ran side by side and stopped; 2 and 3 never started
    assert all(0 < its[c] < 2_000_200 for c in (0, 1)) and its[2:] == [0, 0], its
    assert any("chain(s) 2, 3 (0-based, as fit.draws(chain=i)) had not started" in w
               for w in r["warnings"])
    # the chains were back within a second (each had ~2e6 iterations to go: ~1 min)
    assert r["t_back"] - t_signal < 1.0, r["t_back"] - t_signal
