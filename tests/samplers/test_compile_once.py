"""A model's gradient is recorded and lowered once, in the process that calls
``sample`` (issue 20: each chain process recorded its own 25k-node tape, 0.4 s a chain
for a Stan-style loop): ``Model.precompile`` does it ahead of time, the runner calls it
before the workers start, forked workers inherit the program, spawned ones and
executors receive it with the pickled model (interpreter programs are arrays);
a failed guard still records again where it fails, and the draws are those of a run
where every worker recorded for itself."""

import concurrent.futures as cf
import importlib
import multiprocessing as mp
import pickle

import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff.vm import kernel
from stanlite.samplers import runner

from testkit import Loop

C = importlib.import_module("stanlite.autodiff.compile")     # (not sl.compile)
MR = importlib.import_module("stanlite.model_retape")       # ModelGradient
needs_vm = pytest.mark.skipif(not kernel.available(), reason="needs numba")
needs_fork = pytest.mark.skipif("fork" not in mp.get_all_start_methods(),
                                reason="needs fork")

KW = dict(draws=30, warmup=30, seed=7, progress=False)


class Branchy(sl.Model):
    """A branch on a parameter's value: a guard (one program per side)."""
    mu = sl.param.real()

    def log_prob(self, mu):
        if mu > 0:
            return sl.normal_lpdf(mu, 0.5, 1.0)
        return sl.normal_lpdf(mu, -0.5, 2.0)


def _loop():
    return Loop(N=6, y=[0.1, 0.5, -1.0, 2.0, 0.3, 1.2])


def _same(a, b):
    return a[0] == b[0] and np.array_equal(a[1], b[1])


@pytest.fixture
def forbid_recording(monkeypatch):
    """Recording a model's gradient raises (a worker must replay what it received)."""
    def refuse(self, x):
        raise AssertionError("recorded again")
    monkeypatch.setattr(MR.ModelGradient, "_record", refuse)


@pytest.fixture
def shared_count(monkeypatch):
    """Recordings of a model's gradient counted across forked processes."""
    count = mp.get_context("fork").Value("i", 0)
    record = MR.ModelGradient._record

    def counted(self, x):
        with count.get_lock():
            count.value += 1
        return record(self, x)
    monkeypatch.setattr(MR.ModelGradient, "_record", counted)
    return count


def _draws(fit):
    return np.concatenate([fit[k].ravel() for k in ("mu", "lp__", "stepsize__")])


# --------------------------------------------------------------------------------------
# Model.precompile
# --------------------------------------------------------------------------------------
@needs_vm
def test_precompile_records_lowers_and_checks_once():
    m = _loop()
    assert m.precompile() is m
    r = m.compiled_gradient()
    assert r.recordings == 1 and r.compiled and r.fallback is None
    # the first replay at a new point was checked: a compiled sampler may run it
    assert r._check_at is None and r.kernel_program() is not None
    m.precompile()                                      # a second call: nothing new
    assert r.recordings == 1
    x = np.array([0.3, -0.2])
    assert C._close(m.log_density_gradient(x), m._gradient(x, True))


def test_precompile_without_retaping_does_nothing():
    m = _loop()
    m.compile = False
    assert m.precompile() is m and "_retaped" not in m.__dict__


def test_precompile_skips_points_outside_the_support():
    class Narrow(sl.Model):
        mu = sl.param.real()

        def log_prob(self, mu):
            if not sl.value_of(mu) < 1.5:         # a plain comparison of values: an
                raise sl.DomainError("mu >= 1.5")  # escape, so the eager tape runs
            return sl.normal_lpdf(mu, 0, 1)

    m = Narrow()
    with pytest.warns(sl.CompileWarning, match="left the tape"):
        m.precompile()
    assert m.compiled_gradient().fallback is not None


# --------------------------------------------------------------------------------------
# the runner: once in the parent
# --------------------------------------------------------------------------------------
@needs_vm
@needs_fork
def test_forked_chains_do_not_record_again(monkeypatch, shared_count):
    monkeypatch.setenv(runner.START_METHOD_ENV, "fork")
    m = _loop()
    m.sample(chains=2, **KW)
    assert shared_count.value == 1                      # in this process, before the fork
    r = m.compiled_gradient()
    assert r.recordings == 1 and r._check_at is None


@needs_vm
def test_a_pickled_model_replays_without_recording(monkeypatch):
    m = _loop().precompile()
    x = np.array([0.3, -0.2])
    m.log_density(x)                                    # the density's program too
    monkeypatch.setattr(MR.ModelGradient, "_record", _refuse)
    m2 = pickle.loads(pickle.dumps(m))
    r, r2 = m.compiled_gradient(), m2.compiled_gradient()
    assert r2.compiled and (r2.recordings, r2._replays, r2._next_check) == \
        (r.recordings, r._replays, r._next_check)
    assert r2._check_at is None                         # checked in the first process
    for x in (np.array([0.3, -0.2]), np.array([-1.0, 0.7]), np.array([2.0, -1.5])):
        # the same program: the same numbers to the last bit
        assert _same(m2.log_density_gradient(x), m.log_density_gradient(x))
        assert m2.log_density(x) == m.log_density(x)
    # its own buffers: two models never share a program's scratch values
    p, p2 = r._programs[None][0], r2._programs[None][0]
    assert p2.V is not p.V and p2.fn is not p.fn


def _refuse(self, x):
    raise AssertionError("recorded again")


@needs_vm
def test_a_chain_of_a_pickled_model_does_not_record(monkeypatch):
    # what a spawned worker or a Dask task runs, in this process
    m = _loop().precompile()
    monkeypatch.setattr(MR.ModelGradient, "_record", _refuse)
    st = runner._received(runner._run_remote(
        pickle.loads(pickle.dumps(m)), None,
        dict(chain_id=0, seed_seq=np.random.SeedSequence(3), num_warmup=20, num_draws=20,
             thin=1, metric="diag_e", inv_metric=None, stepsize=1.0, adapt_delta=0.8,
             max_treedepth=10, sampler="nuts", init=None, save_warmup=False,
             sampler_options=None, adaptation="stan"), 1.0))
    assert len(st.draws) == 20


@needs_vm
def test_a_failed_guard_records_again_in_the_copy(monkeypatch):
    m = Branchy()
    m.log_density_gradient(np.array([0.4]))             # recorded: mu > 0
    m.log_density_gradient(np.array([0.9]))             # its first replay, checked
    m2 = pickle.loads(pickle.dumps(m))
    x = np.array([-0.7])                                # the other side: the guard fails
    assert C._close(m2.log_density_gradient(x), m2._gradient(x, True))
    assert m2.compiled_gradient().recordings == 2 and m2.compiled_gradient().programs == 2
    assert m.compiled_gradient().recordings == 1        # the original is its own


@needs_vm
@needs_fork
def test_a_failed_guard_in_a_forked_worker_records_there(monkeypatch, shared_count):
    monkeypatch.setenv(runner.START_METHOD_ENV, "fork")
    m = Branchy()
    ref = m.sample(chains=2, parallel=False, **KW)      # both sides, recorded here
    assert m.compiled_gradient().programs == 2
    before = shared_count.value
    m2 = Branchy()
    fit = m2.sample(chains=2, **KW)
    # one side recorded before the fork; the other in each worker that reached it
    assert shared_count.value - before in (2, 3)
    assert np.array_equal(_draws(fit), _draws(ref))


# --------------------------------------------------------------------------------------
# the draws: bit for bit whoever recorded
# --------------------------------------------------------------------------------------
@needs_vm
def test_draws_do_not_depend_on_where_the_gradient_was_recorded(monkeypatch):
    monkeypatch.setenv(runner.START_METHOD_ENV, "fork" if "fork" in
                       mp.get_all_start_methods() else "spawn")
    serial = _loop().sample(chains=2, parallel=False, **KW)
    processes = _loop().sample(chains=2, **KW)
    with cf.ThreadPoolExecutor(2) as ex:
        threads = _loop().sample(chains=2, executor=ex, **KW)
    # as before: each worker recorded its own (no recording ahead of the chains)
    monkeypatch.setattr(runner, "_compile_once", lambda model: None)
    own = _loop().sample(chains=2, **KW)
    ref = _draws(serial)
    for fit in (processes, threads, own):
        assert np.array_equal(_draws(fit), ref)


@needs_vm
def test_draws_of_a_spawned_executor_equal_the_serial_ones():
    serial = _loop().sample(chains=2, parallel=False, **KW)
    with cf.ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as ex:
        spawned = _loop().sample(chains=2, executor=ex, **KW)
    assert np.array_equal(_draws(spawned), _draws(serial))


@needs_vm
def test_the_replay_time_leaves_out_a_first_call_s_loading(monkeypatch):
    # a process's first replay may load the interpreter from numba's cache; the spot
    # checks' budget (a share of one replay's time, kept in the disk cache too) must
    # not take that for the replay's cost: a clock that the first call moves by 1 s
    now = [0.0]
    monkeypatch.setattr(C, "_clock", lambda: now[0])
    lower = C._Retaped._lower

    def slow_first(self, rec):
        prog = lower(self, rec)
        fn, calls = prog.fn, []

        def timed(x):
            now[0] += 1.0 if not calls else 1e-5
            calls.append(x)
            return fn(x)
        prog.fn = timed
        return prog
    monkeypatch.setattr(C._Retaped, "_lower", slow_first)
    m = _loop()
    m.log_density_gradient(np.array([0.3, -0.2]))
    assert m.compiled_gradient()._replay_seconds == pytest.approx(1e-5)


class Signs(sl.Model):
    """A bound per element with mixed signs: one recording per sign pattern."""
    p = sl.param.vector(4, lower=0, upper=1)
    t = sl.param.vector(4, lower=lambda p: -p, upper=lambda p: 1 + p)

    def log_prob(self, p, t):
        return sl.normal_lpdf(t, 0.0, 1.0) + sl.beta_lpdf(p, 2, 2)


def test_precompile_records_at_most_twice():
    # random points meet a new sign pattern each: precompile leaves the rest to the
    # chains instead of spending max_recordings (then the eager tape) on them
    m = Signs()
    m.precompile()
    r = m.compiled_gradient()
    assert r.recordings <= 2 and r.fallback is None
    x = np.linspace(-1.0, 1.0, m.dim)
    assert C._close(m.log_density_gradient(x), m._gradient(x, True))
