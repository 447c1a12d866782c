"""The compiled NUTS tree's Python side (samplers/nuts_jit.py ``transition``): when
the model's program runs in the interpreter, a transition starts with one call into
compiled code (``_open``: the tree's start and its trajectory) and the Python around
it is kept small. These tests check that this path makes the transitions the same
tree makes with the model's gradient called from Python (the same trees; the
numbers to rounding: the Python calls are checked against the eager tape at new
points and return its result) - through the refills of uniforms, the points the
interpreter hands back (a density outside its domain) and rejected proposals - and
that ``warm()`` loads the interpreter's kernels."""

import numpy as np
import pytest

import stanlite as sl
from stanlite.samplers import hamiltonian, nuts, nuts_jit

pytestmark = pytest.mark.skipif(not nuts_jit.available(),
                                reason="numba not installed or STANLITE_JIT=0")


class _Scale(sl.Model):
    """A normal with an unconstrained scale: ``sigma <= 0`` is outside the density's
    domain (the interpreter hands the point back; the model raises DomainError)."""
    y = sl.data.vector(5)
    mu = sl.param.real()
    sigma = sl.param.real()

    def log_prob(self, mu, sigma):
        return sl.normal_lpdf(mu, 0, 3) + sl.normal_lpdf(self.y, mu, sigma)


def _transitions(model, n, seed):
    metric = hamiltonian.make_metric("diag_e", model.dim, np.array([0.3, 1.0]))
    rng = np.random.default_rng(seed)
    q = np.array([0.2, 1.3])
    z = hamiltonian.Point(q, None, *model.log_density_gradient(q))
    out = []
    for t in range(n):
        eps = (0.02, 0.3, 1.5)[t % 3]       # long trees (refills), divergences
        z, info = nuts.transition(model, metric, z, eps, rng)
        out.append((z.q.copy(), z.lp, z.grad.copy(), info))
    return out


def test_interpreter_path_equals_python_gradient_path(monkeypatch):
    monkeypatch.setattr(nuts, "use_jit", True)
    y = np.array([0.4, -1.1, 2.0, 0.3, 0.9])
    fast = _Scale(y=y)
    fast.log_density_gradient(np.array([0.1, 1.0]))
    assert fast.compiled_gradient().kernel_program() is not None or \
        fast.compiled_gradient().compiled        # (the program is the interpreter's)
    slow = _Scale(y=y)
    slow.compiled_gradient = lambda jacobian=True: None   # gradients from Python
    seen = {"failed": 0, "divergent": 0, "long": 0}
    for seed in (3, 4):
        for a, b in zip(_transitions(fast, 90, seed), _transitions(slow, 90, seed)):
            np.testing.assert_allclose(a[0], b[0], rtol=1e-10, atol=1e-12)
            assert a[1] == pytest.approx(b[1], rel=1e-10, abs=1e-12)
            np.testing.assert_allclose(a[2], b[2], rtol=1e-9, atol=1e-10)
            ia, ib = a[3], b[3]
            for k in ("n_leapfrog", "treedepth", "divergent", "n_failed", "rejected"):
                assert getattr(ia, k) == getattr(ib, k), k
            for k in ("accept_stat", "energy", "energy_error", "max_energy_error"):
                assert getattr(ia, k) == pytest.approx(getattr(ib, k), rel=1e-9,
                                                       abs=1e-10), k
            assert type(ia.n_leapfrog) is int and type(ia.accept_stat) is float
            assert type(ia.divergent) is bool and type(a[1]) is float
            seen["failed"] += ia.n_failed
            seen["divergent"] += ia.divergent
            seen["long"] += ia.n_leapfrog > 40      # more uniforms than one batch
    # the comparison went through rejected proposals, divergences and refills
    assert seen["failed"] > 0 and seen["divergent"] > 0 and seen["long"] > 0, seen


def test_warm_loads_the_interpreter_kernels(monkeypatch):
    # forked chain workers inherit what the parent loaded: the interpreter's own
    # kernels (first evaluations, spot checks) as well as the tree's
    calls = []
    monkeypatch.setattr(nuts_jit._vm, "warm", lambda: calls.append(1))
    nuts_jit.warm()
    assert calls == [1]
