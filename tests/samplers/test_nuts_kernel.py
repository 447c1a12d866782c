"""One NUTS (issue 23, point 5): the per-chain kernel (samplers/nuts.py ``NutsKernel``)
owns the compiled tree's workspace, the metric carries none, and both trees take
their decisions from samplers/nuts_algebra.py."""

import itertools

import numpy as np
import pytest

from stanlite.samplers import hamiltonian, nuts, nuts_algebra, nuts_jit
from stanlite.samplers.hamiltonian import Point
from testkit import CorrGauss as _CorrGauss


_S = np.array([[4.0, 1.8, 0.3], [1.8, 1.0, 0.2], [0.3, 0.2, 0.25]])


@pytest.mark.parametrize("compiled", [False, pytest.param(True, marks=pytest.mark.skipif(
    not nuts_jit.available(), reason="numba not installed or STANLITE_JIT=0"))])
@pytest.mark.parametrize("kind", ["diag_e", "dense_e"])
def test_kernel_transitions_equal_the_function_and_leave_the_metric_alone(
        kind, compiled, monkeypatch):
    # the kernel's transitions are transition()'s, number for number; its workspace
    # is its own (the metric gains no attribute), and set() takes effect at once
    monkeypatch.setattr(nuts, "use_jit", compiled)
    m = _CorrGauss(_S)
    inv = np.array([3.0, 0.8, 0.3]) if kind == "diag_e" else 0.9 * _S
    metric = hamiltonian.make_metric(kind, 3, inv)
    own = set(vars(metric))
    kernel = nuts.NutsKernel(metric)
    assert kernel.compiled == compiled and (kernel.workspace is not None) == compiled
    other = hamiltonian.make_metric(kind, 3, inv)
    q = np.array([0.4, -0.3, 0.1])
    za = zb = Point(q, None, *m.log_density_gradient(q))
    ra, rb = np.random.default_rng(3), np.random.default_rng(3)
    for t in range(30):
        if t == 15:
            metric.set(inv * 1.7)
            other.set(inv * 1.7)
        with np.errstate(all="ignore"):
            za, ia = kernel.transition(m, za, 0.3 + 0.02 * t, ra)
        zb, ib = nuts.transition(m, other, zb, 0.3 + 0.02 * t, rb)
        np.testing.assert_array_equal(za.q, zb.q)
        assert (ia.n_leapfrog, ia.accept_stat, ia.energy) == \
            (ib.n_leapfrog, ib.accept_stat, ib.energy)
    assert set(vars(metric)) == own


def test_merge_no_uturn_is_the_three_plain_checks():
    # the criterion of a merge: the union, a extended by b's first state, b
    # extended by a's last, each on v . rho at both ends of the run
    for args in itertools.product([-1.0, 1.0], repeat=6):
        want = all(x > 0 for x in args)
        assert nuts_algebra.merge_no_uturn(*args) is want


def test_multinomial_and_progressive_draws():
    lse = nuts_algebra.log_sum_exp
    assert lse(0.0, 0.0) == pytest.approx(np.log(2.0))
    lw, keep_first = nuts_algebra.multinomial(np.log(3.0), np.log(1.0), 0.3)
    assert lw == pytest.approx(np.log(4.0)) and keep_first       # 0.3 >= 1/4
    assert not nuts_algebra.multinomial(np.log(3.0), np.log(1.0), 0.2)[1]
    assert nuts_algebra.progressive(0.0, 1.0) == (True, 1.0)     # no uniform needed
    sure, p = nuts_algebra.progressive(0.0, np.log(0.25))
    assert not sure and p == pytest.approx(0.25)
    # a huge new weight is sure without computing exp of the difference
    assert nuts_algebra.progressive(0.0, 5000.0) == (True, 1.0)


@pytest.mark.skipif(not nuts_jit.available(), reason="numba not installed or STANLITE_JIT=0")
def test_a_chain_runs_in_its_own_workspace_not_one_looked_up_by_metric(monkeypatch):
    # chain.py's transitions and compiled segments go through the chain's
    # ChainTransition (kernels.Nuts makes one per chain): the by-metric fallback
    # (nuts_jit.workspace_of) is never consulted, and the chain's draws are those of
    # a chain that used it (the workspace is scratch space only)
    import stanlite.models as zoo
    m = zoo.get("eight_schools_noncentered")
    kw = dict(chains=1, warmup=150, draws=50, seed=5, progress=False, parallel=False)
    before = m.sample(**kw).draws(0)

    def refuse(metric):
        raise AssertionError("a chain looked its workspace up by its metric")
    monkeypatch.setattr(nuts_jit, "workspace_of", refuse)
    made = []
    real = nuts.ChainTransition.own

    def own(self):
        made.append(id(self))
        return real(self)
    monkeypatch.setattr(nuts.ChainTransition, "own", own)
    after = m.sample(**kw).draws(0)
    assert made and len(set(made)) == 1            # one chain, one workspace owner
    for k in before:
        np.testing.assert_array_equal(before[k], after[k], err_msg=k)
