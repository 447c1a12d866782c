"""The disk cache of lowered programs (stanlite/autodiff/program_cache.py, issue 20
point 6): a model built again (another process, the same class and data) starts from
the program a first one lowered, without recording; the program is still checked
against the eager tape at its first replay, and one that disagrees is dropped and
the model recorded again; other data, another class source, a cache turned off or
unwritable: no cache, nothing raised."""

import gc
import importlib
import os
import pickle
import warnings

import numpy as np
import pytest

import stanlite as sl
from stanlite.autodiff import program_cache as PC
from stanlite.autodiff.vm import kernel

from testkit import Loop

C = importlib.import_module("stanlite.autodiff.compile")     # (not sl.compile)
MR = importlib.import_module("stanlite.model_retape")       # ModelGradient
pytestmark = pytest.mark.skipif(not kernel.available(), reason="needs numba")


Y = [0.1, 0.5, -1.0, 2.0, 0.3]
X = (np.array([0.3, -0.2]), np.array([-1.0, 0.7]), np.array([1.5, 0.1]))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    d = tmp_path / "programs"
    monkeypatch.setenv(PC.ENV, str(d))
    return d


@pytest.fixture
def count(monkeypatch):
    """Recordings and eager evaluations of models' gradients, counted."""
    n = {"record": 0, "eager": 0}
    record, eager = MR.ModelGradient._record, MR.ModelGradient._eager

    def counted_record(self, x):
        n["record"] += 1
        return record(self, x)

    def counted_eager(self, x):
        n["eager"] += 1
        return eager(self, x)
    monkeypatch.setattr(MR.ModelGradient, "_record", counted_record)
    monkeypatch.setattr(MR.ModelGradient, "_eager", counted_eager)
    return n


def _entries(d):
    return sorted(p.name for p in d.glob("*.npz")) if d.is_dir() else []


def test_a_model_built_again_starts_from_the_cached_program(cache, count):
    m = Loop(N=5, y=Y).precompile()
    assert count["record"] == 1 and len(_entries(cache)) == 1
    m2 = Loop(N=5, y=Y)
    m2.precompile()
    r2 = m2.compiled_gradient()
    assert count["record"] == 1                          # not recorded again
    assert count["eager"] == 2                           # one check per model
    assert r2.compiled and r2.recordings == 1 and r2._check_at is None
    for x in X:
        assert C._close(m2.log_density_gradient(x), m2._gradient(x, True))
        # the same instructions: the same numbers as the model that lowered them
        a, b = m2.log_density_gradient(x), m.log_density_gradient(x)
        assert a[0] == b[0] and np.array_equal(a[1], b[1])


def test_a_cached_program_is_checked_at_its_first_replay(cache, count):
    Loop(N=5, y=Y).precompile()
    m = Loop(N=5, y=Y)
    before = count["eager"]
    r = m.log_density_gradient(X[0])                     # the first call: checked
    assert count["eager"] == before + 1 and C._close(r, m._gradient(X[0], True))
    assert count["record"] == 1
    assert m.compiled_gradient().kernel_program() is not None


def test_a_stale_cached_program_is_dropped_and_the_model_recorded(cache, count):
    Loop(N=5, y=Y).precompile()
    (path,) = cache.glob("*.npz")
    with np.load(path) as z:
        arrays = dict(z)
    consts = arrays["p0_V"]
    consts[consts != 0] *= 1.5                           # other constants: other numbers
    np.savez(path, **arrays)
    m = Loop(N=5, y=Y)
    # no warning: the cache was wrong, not the model
    assert C._close(m.log_density_gradient(X[0]), m._gradient(X[0], True))
    r = m.compiled_gradient()
    assert count["record"] == 2 and r.fallback is None and r.recordings == 1
    assert C._close(m.log_density_gradient(X[1]), m._gradient(X[1], True))
    with np.load(path) as z:                             # rewritten after its check
        assert not np.array_equal(z["p0_V"], consts)


def test_other_data_or_other_program_another_entry(cache, count):
    Loop(N=5, y=Y).precompile()
    Loop(N=5, y=[0.1, 0.5, -1.0, 2.0, 0.4]).precompile()
    assert count["record"] == 2 and len(_entries(cache)) == 2
    m = Loop(N=5, y=Y)
    m.log_density(X[0])                                  # the density: its own entry
    m.log_density(X[1])
    assert len(_entries(cache)) == 3
    keys = {PC.model_key(m, (k, j)) for k in ("gradient", "density")
            for j in (True, False)}
    assert len(keys) == 4


def test_no_cache_when_turned_off(monkeypatch, tmp_path, count):
    for off in ("", "0", "off"):
        monkeypatch.setenv(PC.ENV, off)
        assert PC.directory() is None
        Loop(N=5, y=Y).precompile()
    assert count["record"] == 3


def test_an_unwritable_cache_is_no_cache(monkeypatch, tmp_path, count):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(PC.ENV, str(blocker / "programs"))    # cannot be made
    m = Loop(N=5, y=Y).precompile()
    Loop(N=5, y=Y).precompile()
    assert count["record"] == 2
    assert C._close(m.log_density_gradient(X[0]), m._gradient(X[0], True))


def test_a_corrupt_entry_is_ignored(cache, count):
    Loop(N=5, y=Y).precompile()
    (path,) = cache.glob("*.npz")
    path.write_bytes(b"not a zip file")
    m = Loop(N=5, y=Y).precompile()
    assert count["record"] == 2
    assert C._close(m.log_density_gradient(X[0]), m._gradient(X[0], True))


def test_a_class_without_source_is_not_cached(cache):
    ns = {"sl": sl}
    exec("class Anon(sl.Model):\n    mu = sl.param.real()\n"
         "    def log_prob(self, mu):\n        return sl.normal_lpdf(mu, 0, 1)\n", ns)
    m = ns["Anon"]()
    assert PC.model_key(m, ("gradient", True)) is None
    m.precompile()
    assert _entries(cache) == []


def test_the_least_recently_used_entries_are_pruned(cache, monkeypatch):
    monkeypatch.setattr(PC, "MAX_ENTRIES", 2)
    made = []
    for i in range(3):
        Loop(N=5, y=[0.1, 0.5, -1.0, 2.0, float(i)]).precompile()
        (new,) = set(cache.glob("*.npz")) - set(made)
        made.append(new)
        if i < 2:
            os.utime(new, (1e9 + i, 1e9 + i))            # distinct ages, oldest first
    assert set(cache.glob("*.npz")) == set(made[1:])


# what the key cannot see: a helper of another module, a global changed at run time
_SCALE = {"sigma": 1.0}


class Branchy(sl.Model):
    mu = sl.param.vector(2)

    def log_prob(self, mu):
        lp = sl.normal_lpdf(mu, 0, 1)
        if mu[0] > 0:                                    # a guard: two programs
            return lp + sl.normal_lpdf(mu[1], 0, 2)
        return lp + sl.normal_lpdf(mu[1], 0, _SCALE["sigma"])


def test_every_cached_guard_path_is_checked_at_its_first_replay(cache, monkeypatch):
    m = Branchy()
    for x in ([1.0, 1.0], [-1.0, 1.0], [2.0, 0.3]):      # both paths, then the check
        m.log_density_gradient(np.array(x))
    (path,) = cache.glob("*.npz")
    assert len(PC.load(path.stem)["programs"]) == 2
    monkeypatch.setitem(_SCALE, "sigma", 5.0)                  # only the other path changed
    m2 = Branchy()
    # the first replays take the unchanged path (checked, equal); the changed path's
    # cached program must be checked at its own first replay, not used as it is
    m2.log_density_gradient(np.array([1.0, 1.0]))
    m3 = pickle.loads(pickle.dumps(m2))                  # a spawned worker: the same
    for m in (m3, m2):
        for x in ([1.5, 1.0], [-2.0, 0.5], [-1.5, 0.5], [-0.5, 0.2]):
            x = np.array(x)
            assert C._close(m.log_density_gradient(x), m._gradient(x, True)), x
        r = m.compiled_gradient()
        assert r.fallback is None and r.compiled        # dropped and recorded, no warning


def test_a_truncated_entry_is_ignored_and_its_file_closed(cache, count):
    Loop(N=5, y=Y).precompile()
    (path,) = cache.glob("*.npz")
    path.write_bytes(path.read_bytes()[:200])            # a zip cut short
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert PC.load(path.stem) is None
        gc.collect()
    assert not [w for w in seen if issubclass(w.category, ResourceWarning)]
    Loop(N=5, y=Y).precompile()
    assert count["record"] == 2


class Dosed(sl.Model):
    """A model holding an event schedule (an object, not plain data) built from its
    data, as the zoo's PK models do."""
    N = sl.data.int(lower=1)
    t_obs = sl.data.vector("N")
    y = sl.data.vector("N")
    log_k = sl.param.real()

    def __init__(self, **data):
        super().__init__(**data)
        n = len(self.t_obs)
        self.events = sl.pk.events(time=np.r_[0.0, self.t_obs], evid=[1] + [0] * n,
                                   amt=[100.0] + [0.0] * n)

    def log_prob(self, log_k):
        conc = 100.0 * sl.exp(-sl.exp(log_k) * self.t_obs)
        return sl.normal_lpdf(log_k, -1, 1) + sl.normal_lpdf(self.y, conc, 5.0)


def test_a_model_holding_an_event_schedule_is_cached_by_its_records(cache, count):
    data = {"N": 3, "t_obs": [1.0, 2.0, 4.0], "y": [40.0, 15.0, 3.0]}
    m = Dosed(**data)
    key = PC.model_key(m, ("gradient", True))
    assert key is not None and key == PC.model_key(Dosed(**data), ("gradient", True))
    other = Dosed(**data)
    other.events = sl.pk.events(time=[0.0, 1.0, 2.0, 4.0], evid=[1, 0, 0, 0],
                                amt=[50.0, 0.0, 0.0, 0.0])         # another dose
    assert PC.model_key(other, ("gradient", True)) not in (None, key)
    m.precompile()
    m2 = Dosed(**data).precompile()                      # from the cache, not recorded
    assert count["record"] == 1 and len(_entries(cache)) == 1
    x = np.array([-0.7])
    a, b = m2.log_density_gradient(x), m.log_density_gradient(x)
    assert a[0] == b[0] and np.array_equal(a[1], b[1])
