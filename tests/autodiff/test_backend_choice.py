"""Which replay runs a big vectorised program (autodiff/compile.py ``_faster``): the
compiled interpreter and the Python replay are both made and timed at the recording
point, the faster is kept - and either gives the tape's value and gradient. The
timings are faked here (never a wall-clock assertion in a test)."""

import itertools
import sys

import numpy as np
import pytest

import stanlite as sl
import stanlite.autodiff.compile  # noqa: F401  (the module; sl.compile is the function)
from stanlite.autodiff.vm import kernel

C = sys.modules["stanlite.autodiff.compile"]

pytestmark = pytest.mark.skipif(not kernel.available(),
                                reason="the choice exists only with the interpreter")

rng0 = np.random.default_rng(5)
J = 3000
SIGMA = rng0.uniform(5, 20, J)
Y = rng0.normal(5, 10, J)


def hierarchical(x):
    # all arithmetic on J = 3000 elements: the interpreter's strided loops against
    # numpy's SIMD ones
    mu, log_tau, tt = x[0], x[1], x[2:]
    r = (Y - (mu + sl.exp(log_tau) * tt)) / SIGMA
    return -0.5 * log_tau * log_tau - 0.5 * sl.sum(tt * tt) - 0.5 * sl.sum(r * r)


def _fake_clock(monkeypatch, vm_seconds, py_seconds):
    """A clock under which each timed call of the interpreter takes ``vm_seconds`` and
    each of the Python replay ``py_seconds`` (_faster times them in turn: t0, t1 of
    the interpreter, then of the replay)."""
    ticks = itertools.accumulate(itertools.cycle([0.0, vm_seconds, 0.0, py_seconds]))
    monkeypatch.setattr(C, "_clock", lambda: next(ticks))


def _check(vg, points):
    for x in points:
        assert C._close(vg(x), sl.value_and_grad(hierarchical)(x))


def _points(k=3):
    rng = np.random.default_rng(6)
    return [rng.standard_normal(J + 2) * 0.5 for _ in range(k)]


def test_a_big_vectorised_program_is_timed_both_ways(monkeypatch):
    pts = _points()
    _fake_clock(monkeypatch, vm_seconds=2e-3, py_seconds=1e-3)
    vg = sl.compile(hierarchical, pts[0])
    assert not vg.compiled and "measured faster" in vg.vm_skipped, vg.vm_skipped
    _check(vg, pts)


def test_the_interpreter_is_kept_where_it_is_faster(monkeypatch):
    pts = _points()
    _fake_clock(monkeypatch, vm_seconds=1e-3, py_seconds=2e-3)
    vg = sl.compile(hierarchical, pts[0])
    assert vg.compiled and vg.vm_skipped is None
    _check(vg, pts)


def test_which_programs_are_timed(monkeypatch):
    def loop(x):                       # scalar code: many one-element rows, never timed
        s = 0.0
        for i in range(40):
            s = s + sl.sin(x[i % 3]) * x[(i + 1) % 3]
        return s

    def program(f, x):
        vg = sl.compile(f, x)
        assert vg.compiled, vg.vm_skipped
        return vg._programs[x.shape][0]

    assert not C._big_vectorised(program(lambda x: sl.sum(sl.exp(x) * x), np.ones(100)))
    assert not C._big_vectorised(program(loop, np.ones(3)))
    _fake_clock(monkeypatch, vm_seconds=1e-3, py_seconds=2e-3)
    assert C._big_vectorised(program(hierarchical, _points(1)[0]))
